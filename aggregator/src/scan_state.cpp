#include "scan_state.hpp"

namespace sectorflow::aggregator::detail {

ScanState::ScanState(const protocol::InfoMessage& info, std::uint32_t producer_threads,
                     std::chrono::steady_clock::time_point discovery_deadline)
    : scan_number_(info.scan_number),
      scan_x_(info.scan_x),
      scan_y_(info.scan_y),
      routing_(info.routing),
      heard_(producer_threads, false),
      first_(std::chrono::steady_clock::now()),
      last_(first_),
      discovery_deadline_(discovery_deadline) {
  targets_.reserve(routing_.size());
  for (const std::string& uid : routing_) targets_.push_back(Target{uid, nullptr, 0, 0, 0, false});
}

std::string ScanState::add_info(const protocol::InfoMessage& info) {
  const std::string where = "scan " + std::to_string(info.scan_number) + ", producer thread " +
                            std::to_string(info.thread_id);
  if (info.thread_id >= heard_.size()) {
    return where + ": thread id must be below " + std::to_string(heard_.size()) +
           " (producer threads of this receiver in the configuration)";
  }
  if (heard_[info.thread_id]) return where + ": a second info message for the same scan";
  if (info.scan_x != scan_x_ || info.scan_y != scan_y_) {
    return where + ": scan shape " + std::to_string(info.scan_x) + " x " + std::to_string(info.scan_y) +
           " differs from the " + std::to_string(scan_x_) + " x " + std::to_string(scan_y_) +
           " the scan's first info gave";
  }
  if (info.routing != routing_) {
    return where + ": routing list of " + std::to_string(info.routing.size()) +
           " NodeGroups differs from the one the scan's first info gave (" + std::to_string(routing_.size()) + ")";
  }
  heard_[info.thread_id] = true;
  ++infos_;
  for (Target& target : targets_) {
    const auto found = info.counts.find(target.uid);
    if (found == info.counts.end()) continue;
    target.expected += found->second;
    expected_ += found->second;
  }
  return {};
}

protocol::InfoMessage ScanState::expected_info(const Target& target, std::uint32_t receiver) const {
  protocol::InfoMessage info;
  info.scan_number = scan_number_;
  info.receiver = receiver;
  info.thread_id = 0;
  info.scan_x = scan_x_;
  info.scan_y = scan_y_;
  info.routing = routing_;
  info.counts = {{target.uid, target.expected}};
  return info;
}

ScanSummary ScanState::summary(std::uint32_t thread) const {
  ScanSummary s;
  s.thread = thread;
  s.scan = scan_number_;
  s.complete = complete();
  s.expected = expected_;
  s.forwarded = forwarded_;
  s.bytes = bytes_;
  s.lost = lost_;
  s.seconds = std::chrono::duration<double>(last_ - first_).count();
  for (const Target& target : targets_) {
    s.counts[target.uid] = target.forwarded;
    if (target.lost > 0) s.lost_by_uid[target.uid] = target.lost;
  }
  return s;
}

}  // namespace sectorflow::aggregator::detail
