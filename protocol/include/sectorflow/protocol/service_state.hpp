// The one state machine of every sectorflow service (kvstore/SPEC.md, "Service states"): the states
// a daemon, a producer thread, an aggregator thread or a NodeGroup may be in, and the transitions
// allowed between them. A state is published as the `state` of the service's ServiceStatus and
// logged on every transition; sectorflow.service.ServiceState drives it in Python.
//
//   starting ---> idle | streaming | writing-to-disk | counting | writing | finished | error
//       |                 (while serving: any of these may follow any other)
//       +--> error                                                 (any but stopped)
//                                                                         |
//                                                              stopping --+--> stopped
//
// While a service serves, its states follow the scans, which come, overlap and end in any order
// (a NodeGroup counts scan n while scan n + 1 streams in; a whole scan may pass between two looks
// at it), so any serving state may follow any other. What the machine rules out is what would be
// a bug: working before starting is over, anything after stopping but stopped, coming back after.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>

namespace sectorflow::protocol {

enum class ServiceState {
  kStarting = 0,   ///< binding, connecting, syncing its replica
  kIdle,           ///< ready; no scan in progress
  kStreaming,      ///< moving a scan's sectors (sending, relaying, receiving)
  kWritingToDisk,  ///< writing a scan's sectors to raw files instead of streaming them
  kCounting,       ///< a NodeGroup counting the frames of a scan whose data are in
  kWriting,        ///< writing a scan's counted file
  kFinished,       ///< the last scan (the status's `scan`) is over; ready for the next
  kError,          ///< the last scan failed (the status says why); ready for the next
  kStopping,       ///< leaving: finishing what is queued, deregistering
  kStopped,        ///< gone (the last status a service publishes)
};
inline constexpr std::size_t kServiceStates = 10;

/// "starting", "idle", "streaming", "writing-to-disk", ...: the names on the wire.
std::string_view to_string(ServiceState state);
/// The state of that name, or nullopt.
std::optional<ServiceState> parse_service_state(std::string_view name);
/// Whether a service may go from `from` to `to` (staying in a state is not a transition).
bool transition_allowed(ServiceState from, ServiceState to);

}  // namespace sectorflow::protocol
