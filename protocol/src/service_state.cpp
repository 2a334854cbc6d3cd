#include "sectorflow/protocol/service_state.hpp"

namespace sectorflow::protocol {
namespace {

constexpr std::array<std::string_view, kServiceStates> kNames = {
    "starting", "idle", "streaming", "writing-to-disk", "counting", "writing", "finished", "error", "stopping", "stopped"};

// The states a service is in while it serves: any may follow any, as scans come, overlap and end.
bool serving(ServiceState state) {
  return state != ServiceState::kStarting && state != ServiceState::kStopping && state != ServiceState::kStopped;
}

}  // namespace

std::string_view to_string(ServiceState state) { return kNames[static_cast<std::size_t>(state)]; }

std::optional<ServiceState> parse_service_state(std::string_view name) {
  for (std::size_t i = 0; i < kNames.size(); ++i) {
    if (kNames[i] == name) return static_cast<ServiceState>(i);
  }
  return std::nullopt;
}

bool transition_allowed(ServiceState from, ServiceState to) {
  if (from == to || from == ServiceState::kStopped) return false;
  if (to == ServiceState::kStopping) return from != ServiceState::kStopping;
  if (to == ServiceState::kStopped) return from == ServiceState::kStopping;
  if (from == ServiceState::kStarting) return to == ServiceState::kIdle || to == ServiceState::kError;
  return serving(from) && serving(to);
}

}  // namespace sectorflow::protocol
