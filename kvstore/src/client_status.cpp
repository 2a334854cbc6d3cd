#include "client_status.hpp"

#include <utility>

namespace sectorflow::kvstore::detail {

void ClientStatus::set_state(ClientState state) {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    state_ = state;
  }
  changed_.notify_all();
}

ClientState ClientStatus::state() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return state_;
}

bool ClientStatus::wait_active(std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait_for(lock, timeout,
                    [this] { return state_ == ClientState::kActive || state_ == ClientState::kClosed; });
  return state_ == ClientState::kActive;
}

void ClientStatus::count(const std::function<void(ClientStats&)>& change) {
  const std::lock_guard<std::mutex> lock(mutex_);
  change(stats_);
}

ClientStats ClientStatus::stats() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void ClientStatus::set_stack(StackIdentity stack) {
  const std::lock_guard<std::mutex> lock(mutex_);
  stack_ = std::move(stack);
}

StackIdentity ClientStatus::stack() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return stack_;
}

void ClientStatus::set_server(std::string server) {
  const std::lock_guard<std::mutex> lock(mutex_);
  server_ = std::move(server);
}

std::string ClientStatus::server() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return server_;
}

}  // namespace sectorflow::kvstore::detail
