// What the agent tells the frontend: its state (with a wait for "active"), its counters and the
// stack its server is.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>

#include "sectorflow/kvstore/client.hpp"
#include "sectorflow/kvstore/stack_id.hpp"

namespace sectorflow::kvstore::detail {

class ClientStatus {
 public:
  void set_state(ClientState state);
  ClientState state() const;
  /// Waits until the state is active (true) or closed or the timeout passed (false).
  bool wait_active(std::chrono::milliseconds timeout) const;

  void count(const std::function<void(ClientStats&)>& change);
  ClientStats stats() const;

  void set_stack(StackIdentity stack);
  StackIdentity stack() const;

  void set_server(std::string server);
  std::string server() const;

 private:
  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  ClientState state_ = ClientState::kConnecting;
  ClientStats stats_;
  StackIdentity stack_;
  std::string server_;
};

}  // namespace sectorflow::kvstore::detail
