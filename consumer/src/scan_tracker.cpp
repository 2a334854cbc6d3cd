#include "sectorflow/consumer/scan_tracker.hpp"

#include <utility>

namespace sectorflow::consumer {
namespace {

// Finished scans remembered to recognise late messages.
constexpr std::size_t kFinishedRemembered = 1024;

double wall_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

ScanTracker::ScanTracker(std::uint32_t receivers, std::chrono::milliseconds timeout)
    : receivers_(receivers), timeout_(timeout) {}

ScanTracker::Scan& ScanTracker::scan_locked(std::uint32_t scan, std::uint32_t receiver) {
  const Clock::time_point now = Clock::now();
  auto [it, inserted] = scans_.try_emplace(scan);
  Scan& s = it->second;
  if (inserted) {
    s.expected.assign(receivers_, -1);
    s.received.assign(receivers_, 0);
    s.over.assign(receivers_, false);
    s.heard.assign(receivers_, now);  // a port that never hears of the scan times out from its start
    s.first_message_s = wall_s();
  }
  s.heard[receiver] = now;
  s.last_message_s = wall_s();
  return s;
}

bool ScanTracker::finished_locked(std::uint32_t scan) const { return finished_.count(scan) != 0; }

ScanTracker::Data ScanTracker::on_data(std::uint32_t scan, std::uint32_t receiver, std::uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (finished_locked(scan)) {
    ++finished_[scan];
    return Data::kLate;
  }
  Scan& s = scan_locked(scan, receiver);
  if (s.over[receiver]) {
    ++s.late;
    return Data::kLate;
  }
  ++s.received[receiver];
  s.bytes += bytes;
  if (s.expected[receiver] >= 0 && s.received[receiver] >= static_cast<std::uint64_t>(s.expected[receiver])) {
    s.over[receiver] = true;
    return Data::kAcceptedLast;
  }
  return Data::kAccepted;
}

bool ScanTracker::on_info(std::uint32_t scan, std::uint32_t receiver, std::uint64_t expected,
                          std::vector<std::string> routing) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (finished_locked(scan)) return false;
  Scan& s = scan_locked(scan, receiver);
  s.expected[receiver] = static_cast<std::int64_t>(expected);
  s.routing = std::move(routing);
  if (!s.over[receiver] && s.received[receiver] >= expected) {
    s.over[receiver] = true;
    return true;
  }
  return false;
}

std::vector<std::uint32_t> ScanTracker::expire(std::uint32_t receiver, Clock::time_point now) {
  std::vector<std::uint32_t> expired;
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [number, s] : scans_) {
    if (!s.over[receiver] && now - s.heard[receiver] >= timeout_) {
      s.over[receiver] = true;
      s.timed_out = true;
      expired.push_back(number);
    }
  }
  return expired;
}

ScanTracker::Arrivals ScanTracker::take(std::uint32_t scan) {
  std::lock_guard<std::mutex> lock(mutex_);
  Arrivals out;
  const auto it = scans_.find(scan);
  if (it != scans_.end()) {
    Scan& s = it->second;
    out = {std::move(s.routing), std::move(s.expected), std::move(s.received), s.bytes,
           s.late,           s.timed_out,          s.first_message_s,     s.last_message_s};
    scans_.erase(it);
  }
  if (finished_.emplace(scan, 0).second) {
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
  return it == finished_.end() ? 0 : it->second;
}

std::vector<ScanTracker::Progress> ScanTracker::progress() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<Progress> out;
  for (const auto& [number, s] : scans_) {
    Progress p;
    p.scan = number;
    p.arrived = true;
    std::int64_t expected = 0;
    for (std::uint32_t r = 0; r < receivers_; ++r) {
      p.received += s.received[r];
      if (s.expected[r] < 0) {
        expected = -1;
      } else if (expected >= 0) {
        expected += s.expected[r];
      }
      p.arrived = p.arrived && s.over[r];
    }
    p.expected = expected;
    out.push_back(p);
  }
  return out;
}

}  // namespace sectorflow::consumer
