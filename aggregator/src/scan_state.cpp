#include "scan_state.hpp"

#include <limits>
#include <random>

namespace sectorflow::aggregator::detail {

namespace {

std::uint32_t draw_run() {
  thread_local std::mt19937 engine{std::random_device{}()};
  std::uniform_int_distribution<std::uint32_t> draw(1, std::numeric_limits<std::uint32_t>::max());
  return draw(engine);
}

}  // namespace

ScanState::ScanState(const protocol::InfoMessage& info, std::uint32_t producer_threads,
                     std::chrono::steady_clock::time_point discovery_deadline)
    : scan_number_(info.scan_number),
      run_(draw_run()),
      scan_x_(info.scan_x),
      scan_y_(info.scan_y),
      routing_(info.routing),
      heard_(producer_threads, false),
      from_record_(producer_threads),
      first_(std::chrono::steady_clock::now()),
      last_(first_),
      discovery_deadline_(discovery_deadline) {
  targets_.reserve(routing_.size());
  for (const std::string& uid : routing_) targets_.push_back(Target{uid, nullptr, 0, 0, 0, false, false, {}});
}

std::string ScanState::add_info(const protocol::InfoMessage& info, bool from_record) {
  const std::string where = "scan " + std::to_string(info.scan_number) + ", producer thread " +
                            std::to_string(info.thread_id);
  if (info.thread_id >= heard_.size()) {
    return where + ": thread id must be below " + std::to_string(heard_.size()) +
           " (producer threads of this receiver in the configuration)";
  }
  if (heard_[info.thread_id]) {
    const std::optional<protocol::InfoMessage>& recorded = from_record_[info.thread_id];
    // The info that the thread's record announced, arriving after the relay rebuilt the scan from
    // that record: already counted.
    if (!from_record && recorded && recorded->routing == info.routing && recorded->counts == info.counts) return {};
    return where + ": a second info message for the same scan";
  }
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
  if (from_record) from_record_[info.thread_id] = info;
  ++infos_;
  for (Target& target : targets_) {
    const auto found = info.counts.find(target.uid);
    if (found == info.counts.end()) continue;
    target.expected += found->second;
    expected_ += found->second;
  }
  return {};
}

ScanState ScanState::native(std::uint32_t scan_number, std::uint32_t scan_x, std::uint32_t scan_y,
                            std::vector<std::string> routing, std::uint32_t threads,
                            std::chrono::steady_clock::time_point discovery_deadline) {
  const protocol::InfoMessage shape{scan_number, 0, 0, scan_x, scan_y, std::move(routing), {}};
  ScanState scan(shape, threads, discovery_deadline);
  scan.native_ = true;
  scan.announced_.assign(threads, 0);
  scan.arrived_.assign(threads, 0);
  return scan;
}

std::string ScanState::native_arrival(std::uint32_t thread, std::uint32_t frames) {
  // The decoder checked thread < threads and frames >= 1.
  if (announced_[thread] == 0) {
    announced_[thread] = frames;
    // A thread taken as silent (native_silent) that sends after all was heard once already.
    if (!heard_[thread]) ++infos_;
    heard_[thread] = true;
    expected_ += frames;
  } else if (announced_[thread] != frames) {
    return "scan " + std::to_string(scan_number_) + ", thread " + std::to_string(thread) +
           ": num_frames_this_thread " + std::to_string(frames) + " differs from the " +
           std::to_string(announced_[thread]) + " its first header gave";
  }
  ++arrived_[thread];
  return {};
}

void ScanState::native_silent(std::uint32_t thread) {
  if (thread >= heard_.size() || heard_[thread]) return;
  heard_[thread] = true;
  ++infos_;
}

void ScanState::closing_counts() {
  for (Target& target : targets_) target.expected = target.forwarded;
}

std::uint64_t ScanState::announced() const {
  std::uint64_t sum = 0;
  for (const std::uint32_t frames : announced_) sum += frames;
  return sum;
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
  info.run = run_;
  return info;
}

bool ScanState::complete() const {
  if (!infos_complete()) return false;
  if (native_) {
    // Every message a thread announced arrived (a message to a dead NodeGroup arrives, and is lost).
    for (std::size_t t = 0; t < announced_.size(); ++t) {
      if (arrived_[t] < announced_[t]) return false;
    }
    return true;
  }
  for (const Target& target : targets_) {
    if (!target.dead && target.forwarded + target.lost < target.expected) return false;
  }
  return true;
}

bool ScanState::declare_dead(Target& target, std::string why) {
  if (target.dead) return false;
  target.dead = true;
  target.dead_why = std::move(why);
  return true;
}

Target* ScanState::target(const std::string& uid) {
  for (Target& target : targets_) {
    if (target.uid == uid) return &target;
  }
  return nullptr;
}

ScanSummary ScanState::summary(std::uint32_t thread, bool closed) const {
  ScanSummary s;
  s.thread = thread;
  s.scan = scan_number_;
  s.closed = closed;
  s.complete = closed && complete();
  s.recovered = recovered_;
  s.expected = expected_;
  s.forwarded = forwarded_;
  s.bytes = bytes_;
  s.lost = lost_;
  s.seconds = std::chrono::duration<double>(last_ - first_).count();
  for (const Target& target : targets_) {
    s.counts[target.uid] = target.forwarded;
    if (target.lost > 0) s.lost_by_uid[target.uid] = target.lost;
    if (target.dead) s.dead[target.uid] = target.dead_why;
  }
  return s;
}

protocol::RelayScanRecord ScanState::record(std::uint32_t thread, bool closed) const {
  protocol::RelayScanRecord r;
  r.thread = thread;
  r.complete = closed && complete();
  r.run = run_;
  for (const Target& target : targets_) {
    r.forwarded[target.uid] = target.forwarded;
    r.lost[target.uid] = target.lost;
    if (target.dead) r.dead.push_back(target.uid);  // routing order: sorted
  }
  r.updated_s = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  return r;
}

}  // namespace sectorflow::aggregator::detail
