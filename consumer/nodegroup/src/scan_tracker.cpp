#include "sectorflow/consumer/nodegroup/scan_tracker.hpp"

#include <algorithm>
#include <utility>

namespace sectorflow::consumer::nodegroup {
namespace {

// Finished scans remembered to recognise late messages.
constexpr std::size_t kFinishedRemembered = 1024;

double wall_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

ScanTracker::ScanTracker(std::uint32_t receivers, std::chrono::milliseconds timeout, std::size_t max_open_scans)
    : receivers_(receivers), timeout_(timeout), max_open_scans_(std::max<std::size_t>(max_open_scans, 1)) {}

bool ScanTracker::Scan::over(std::uint32_t r) const {
  if (forced[r]) return true;
  if (runs[r].empty()) return false;
  return std::all_of(runs[r].begin(), runs[r].end(), [](const RunCount& run) {
    return run.expected >= 0 && run.received >= static_cast<std::uint64_t>(run.expected);
  });
}

bool ScanTracker::Scan::all_over() const {
  for (std::uint32_t r = 0; r < runs.size(); ++r) {
    if (!over(r)) return false;
  }
  return true;
}

ScanTracker::RunCount* ScanTracker::Scan::run_of(std::uint32_t r, std::uint32_t run) {
  for (RunCount& known : runs[r]) {
    if (known.run == run) return &known;
  }
  if (runs[r].size() >= kMaxRuns) return nullptr;
  runs[r].push_back(RunCount{run, -1, 0});
  return &runs[r].back();
}

ScanTracker::Scan* ScanTracker::scan_locked(std::uint32_t scan, std::uint32_t receiver, std::uint32_t scan_x,
                                            std::uint32_t scan_y) {
  const Clock::time_point now = Clock::now();
  auto it = scans_.find(scan);
  if (it == scans_.end()) {
    if (scans_.size() >= 2 * max_open_scans_) return nullptr;
    const auto live = std::count_if(scans_.begin(), scans_.end(),
                                    [](const auto& entry) { return !entry.second.evicted && !entry.second.all_over(); });
    if (static_cast<std::size_t>(live) >= max_open_scans_) evict_oldest_live_locked();
    it = scans_.try_emplace(scan).first;
    Scan& s = it->second;
    s.opened = ++opened_;
    s.scan_x = scan_x;
    s.scan_y = scan_y;
    s.runs.assign(receivers_, {});
    s.received.assign(receivers_, 0);
    s.forced.assign(receivers_, false);
    s.ended.assign(receivers_, false);
    s.close_at.assign(receivers_, -1);
    const auto pending = close_pending_.find(scan);
    if (pending != close_pending_.end()) {
      s.close_at = std::move(pending->second);
      close_pending_.erase(pending);
    }
    s.heard.assign(receivers_, now);  // a port that never hears of the scan times out from its start
    s.first_message_s = wall_s();
  }
  Scan& s = it->second;
  if (s.scan_x != scan_x || s.scan_y != scan_y) return &s;  // the caller refuses the message
  s.heard[receiver] = now;
  s.last_message_s = wall_s();
  return &s;
}

void ScanTracker::evict_oldest_live_locked() {
  Scan* oldest = nullptr;
  for (auto& [number, s] : scans_) {
    if (!s.evicted && !s.all_over() && (oldest == nullptr || s.opened < oldest->opened)) oldest = &s;
  }
  if (oldest == nullptr) return;
  oldest->evicted = true;  // every receiver ends its part at its next expire()
  ++evicted_;
}

bool ScanTracker::finished_locked(std::uint32_t scan) const { return finished_.count(scan) != 0; }

bool ScanTracker::end_locked(Scan& s, std::uint32_t receiver) {
  // An abort's count ends the part at once; the runs' counts only once every port is over, since
  // another run may still come on this one (the real run after a stray's).
  const bool closing = s.closing(receiver);
  if (closing) s.forced[receiver] = true;
  if (!closing && !s.all_over()) return false;
  s.ended[receiver] = true;
  return true;
}

ScanTracker::Arrival ScanTracker::on_data(std::uint32_t scan, std::uint32_t receiver, std::uint64_t bytes,
                                          std::uint32_t scan_x, std::uint32_t scan_y, std::uint32_t run) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (finished_locked(scan)) {
    ++finished_[scan].late;
    return Arrival::kLate;
  }
  Scan* s = scan_locked(scan, receiver, scan_x, scan_y);
  if (s == nullptr) return Arrival::kFull;
  if (s->scan_x != scan_x || s->scan_y != scan_y) return Arrival::kMismatch;
  if (s->ended[receiver] || s->forced[receiver]) {
    ++s->late;
    return Arrival::kLate;
  }
  RunCount* counted = s->run_of(receiver, run);
  if (counted == nullptr) return Arrival::kRuns;
  if (counted->expected >= 0 && counted->received >= static_cast<std::uint64_t>(counted->expected)) {
    ++s->late;  // this run's part is over: its count was reached
    return Arrival::kLate;
  }
  ++counted->received;
  ++s->received[receiver];
  s->bytes += bytes;
  return end_locked(*s, receiver) ? Arrival::kLast : Arrival::kAccepted;
}

ScanTracker::Arrival ScanTracker::on_info(std::uint32_t scan, std::uint32_t receiver, std::uint64_t expected,
                                          std::vector<std::string> routing, std::uint32_t scan_x,
                                          std::uint32_t scan_y, std::uint32_t run) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (finished_locked(scan)) {
    const std::vector<std::vector<RunCount>>& announced = finished_.at(scan).runs;
    if (receiver >= announced.size()) return Arrival::kLate;
    for (const RunCount& known : announced[receiver]) {
      if (known.run != run || known.expected < 0) continue;
      return static_cast<std::uint64_t>(known.expected) == expected ? Arrival::kRepeated : Arrival::kConflict;
    }
    return Arrival::kLate;
  }
  Scan* s = scan_locked(scan, receiver, scan_x, scan_y);
  if (s == nullptr) return Arrival::kFull;
  if (s->scan_x != scan_x || s->scan_y != scan_y) return Arrival::kMismatch;
  for (const RunCount& known : s->runs[receiver]) {
    if (known.run == run && known.expected >= 0) {
      return static_cast<std::uint64_t>(known.expected) == expected ? Arrival::kRepeated : Arrival::kConflict;
    }
  }
  if (s->ended[receiver] || s->forced[receiver]) return Arrival::kLate;
  RunCount* counted = s->run_of(receiver, run);
  if (counted == nullptr) return Arrival::kRuns;
  counted->expected = static_cast<std::int64_t>(expected);
  s->routing = std::move(routing);
  return end_locked(*s, receiver) ? Arrival::kLast : Arrival::kAccepted;
}

std::vector<std::uint32_t> ScanTracker::expire(std::uint32_t receiver, Clock::time_point now) {
  std::vector<std::uint32_t> expired;
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [number, s] : scans_) {
    if (s.ended[receiver]) continue;
    // A port over by its runs' counts waits for the others (closed()), unless the scan is evicted.
    if (s.evicted || (!s.over(receiver) && now - s.heard[receiver] >= timeout_)) {
      s.forced[receiver] = true;
      s.ended[receiver] = true;
      s.timed_out = true;
      expired.push_back(number);
    }
  }
  return expired;
}

void ScanTracker::close_at(std::uint32_t scan, std::uint32_t receiver, std::uint64_t forwarded) {
  if (receiver >= receivers_) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (finished_locked(scan)) return;
  const auto it = scans_.find(scan);
  if (it != scans_.end()) {
    it->second.close_at[receiver] = static_cast<std::int64_t>(forwarded);
    return;
  }
  auto [pending, added] = close_pending_.try_emplace(scan, std::vector<std::int64_t>(receivers_, -1));
  pending->second[receiver] = static_cast<std::int64_t>(forwarded);
  // Bounded like the scans: the lowest number (the oldest abort, in practice) leaves first.
  if (added && close_pending_.size() > 2 * max_open_scans_) close_pending_.erase(close_pending_.begin());
}

std::vector<std::uint32_t> ScanTracker::closed(std::uint32_t receiver) {
  std::vector<std::uint32_t> out;
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [number, s] : scans_) {
    if (s.ended[receiver]) continue;
    if (s.closing(receiver)) s.forced[receiver] = true;
    if (s.forced[receiver] || s.all_over()) {
      s.ended[receiver] = true;
      out.push_back(number);
    }
  }
  return out;
}

ScanTracker::Arrivals ScanTracker::take(std::uint32_t scan) {
  std::lock_guard<std::mutex> lock(mutex_);
  Arrivals out;
  const auto it = scans_.find(scan);
  std::vector<std::vector<RunCount>> announced;
  if (it != scans_.end()) {
    Scan& s = it->second;
    announced = s.runs;
    out.expected.assign(receivers_, -1);
    for (std::uint32_t r = 0; r < receivers_; ++r) {
      std::int64_t sum = s.runs[r].empty() ? -1 : 0;
      for (const RunCount& run : s.runs[r]) {
        if (run.expected < 0 || sum < 0) {
          sum = -1;
        } else {
          sum += run.expected;
        }
      }
      out.expected[r] = sum;
    }
    out.routing = std::move(s.routing);
    out.received = std::move(s.received);
    out.runs = std::move(s.runs);
    out.bytes = s.bytes;
    out.late = s.late;
    out.timed_out = s.timed_out;
    out.evicted = s.evicted;
    out.first_message_s = s.first_message_s;
    out.last_message_s = s.last_message_s;
    scans_.erase(it);
  }
  if (finished_.emplace(scan, Finished{0, std::move(announced)}).second) {
    finished_order_.push_back(scan);
    if (finished_order_.size() > kFinishedRemembered) {
      finished_.erase(finished_order_.front());
      finished_order_.pop_front();
    }
  }
  return out;
}

std::uint64_t ScanTracker::late(std::uint32_t scan) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = finished_.find(scan);
  return it == finished_.end() ? 0 : it->second.late;
}

std::uint64_t ScanTracker::evicted() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return evicted_;
}

std::vector<ScanTracker::Progress> ScanTracker::progress() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<Progress> out;
  for (const auto& [number, s] : scans_) {
    Progress p;
    p.scan = number;
    p.arrived = s.all_over();
    std::int64_t expected = 0;
    for (std::uint32_t r = 0; r < receivers_; ++r) {
      p.received += s.received[r];
      if (s.runs[r].empty()) expected = -1;
      for (const RunCount& run : s.runs[r]) {
        if (run.expected < 0) {
          expected = -1;
        } else if (expected >= 0) {
          expected += run.expected;
        }
      }
    }
    p.expected = expected;
    out.push_back(p);
  }
  return out;
}

}  // namespace sectorflow::consumer::nodegroup
