#include "relay.hpp"

#include <algorithm>
#include <cerrno>
#include <utility>

#include "sectorflow/protocol/errors.hpp"
#include "sectorflow/protocol/limits.hpp"

namespace sectorflow::aggregator::detail {
namespace {

using protocol::Refusal;

// How long the loop sleeps in poll when nothing arrives before it looks at stop and the kvstore.
constexpr std::chrono::milliseconds kIdlePoll{50};

std::string scan_text(std::uint32_t scan) { return "scan " + std::to_string(scan); }

}  // namespace

Relay::Relay(zmq::context_t& context, zmq::socket_t pull, const Directory& directory, RelaySettings settings,
             RelayCounters& counters, std::function<void(ScanSummary)> report)
    : context_(context),
      pull_(std::move(pull)),
      directory_(directory),
      settings_(std::move(settings)),
      counters_(counters),
      report_(std::move(report)),
      scans_(settings_.max_open_scans) {}

void Relay::run(const std::atomic<bool>& stop) {
  stop_ = &stop;
  generation_ = directory_.generation();
  zmq::pollitem_t item{pull_.handle(), 0, ZMQ_POLLIN, 0};
  while (!stop.load(std::memory_order_relaxed)) {
    try {
      if (directory_.generation() != generation_) refresh();
      if (!receive_one()) zmq::poll(&item, 1, kIdlePoll);
    } catch (const zmq::error_t& error) {
      if (error.num() == ETERM) break;
      counters_.malformed(Refusal::kError, std::string("socket: ") + error.what());
    } catch (const std::exception& error) {
      // Nothing a peer sends may end the thread: what no check foresaw is counted and logged once.
      counters_.malformed(Refusal::kError, error.what());
    }
  }
  // What is queued for live NodeGroups still goes out, for a bounded time: a clean stop drops nothing.
  for (auto& [uid, downstream] : downstreams_) downstream->close(settings_.discovery_wait);
}

bool Relay::receive_one() {
  if (!pull_.recv(parts_[0], zmq::recv_flags::dontwait)) return false;
  if (!parts_[0].more()) {
    on_info(parts_[0]);
    return true;
  }
  // The rest of a multipart message is already here: ZeroMQ delivers it whole.
  (void)pull_.recv(parts_[1]);
  if (parts_[1].more()) {
    std::size_t count = 2;
    zmq::message_t extra;
    do {
      (void)pull_.recv(extra);
      ++count;
    } while (extra.more());
    counters_.malformed(Refusal::kParts, "a message of " + std::to_string(count) +
                                             " frames; expected 1 (info) or 2 (data: header, payload)");
    return true;
  }
  on_data(parts_);
  return true;
}

void Relay::on_data(zmq::message_t* parts) {
  protocol::DataHeader header;
  try {
    header = protocol::decode_data(parts[0].data(), parts[0].size(), parts[1].size(), settings_.expect);
  } catch (const protocol::ProtocolError& error) {
    counters_.malformed(error.kind(), error.what());
    return;
  }
  ScanState* scan = scans_.find(header.scan_number);
  if (scan == nullptr) {
    counters_.malformed(Refusal::kNoInfo, header.where() +
                                              ": data of a scan no open info message announced (its producer "
                                              "thread must send the scan's info first)");
    return;
  }
  if (!scan->fits(header)) {
    counters_.malformed(Refusal::kScan, header.where() + ": scan shape " + std::to_string(header.scan_x) + " x " +
                                            std::to_string(header.scan_y) + " differs from the one its info gave");
    return;
  }
  Target& target = scan->target_of(header.frame_number);
  if (!(target.downstream && target.downstream->open()) &&
      std::chrono::steady_clock::now() < scan->discovery_deadline()) {
    resolve(*scan, true);
    send_expected(*scan);
  }
  const std::size_t bytes = parts[0].size() + parts[1].size();
  if (target.downstream && target.downstream->send(parts, 2, *stop_)) {
    scan->forwarded(target, bytes);
    counters_.forwarded(bytes);
  } else {
    scan->lost(target);
    counters_.lost();
  }
  finish_if_complete(*scan);
}

void Relay::on_info(const zmq::message_t& message) {
  protocol::InfoMessage info;
  try {
    info = protocol::decode_info(message.data(), message.size());
    protocol::check_scan_shape(info.scan_x, info.scan_y, settings_.expect.limits, scan_text(info.scan_number));
  } catch (const protocol::ProtocolError& error) {
    counters_.malformed(error.kind(), error.what());
    return;
  }
  const std::string where = scan_text(info.scan_number) + ": info of receiver " + std::to_string(info.receiver) +
                            ", producer thread " + std::to_string(info.thread_id);
  if (info.receiver != settings_.receiver) {
    counters_.malformed(Refusal::kInfo, where + " reached aggregator thread " + std::to_string(settings_.receiver) +
                                            " (receiver r must connect to base_port + r)");
    return;
  }
  if (info.routing.empty()) {
    counters_.malformed(Refusal::kInfo, where + ": empty routing list (a scan without NodeGroups is written to "
                                                "disk and sends nothing)");
    return;
  }
  ScanState* scan = scans_.find(info.scan_number);
  if (scan == nullptr) {
    ScanState fresh(info, settings_.producer_threads, std::chrono::steady_clock::now() + settings_.discovery_wait);
    if (const std::string error = fresh.add_info(info); !error.empty()) {
      counters_.malformed(Refusal::kInfo, error);
      return;
    }
    if (std::optional<ScanState> evicted = scans_.open(std::move(fresh))) {
      counters_.evicted_scan();
      report(*evicted);
    }
    counters_.open_scans(scans_.size());
    scan = scans_.find(info.scan_number);
    resolve(*scan, false);
  } else if (const std::string error = scan->add_info(info); !error.empty()) {
    counters_.malformed(Refusal::kInfo, error);
    return;
  }
  counters_.info(info.scan_number);
  send_expected(*scan);
  finish_if_complete(*scan);
}

void Relay::send_expected(ScanState& scan) {
  if (!scan.infos_complete()) return;
  for (Target& target : scan.targets()) {
    if (target.info_sent || !target.downstream) continue;
    const std::string bytes = protocol::encode_info(scan.expected_info(target, settings_.receiver));
    zmq::message_t message(bytes.data(), bytes.size());
    target.info_sent = target.downstream->send(&message, 1, *stop_);
  }
}

void Relay::finish_if_complete(ScanState& scan) {
  if (!scan.complete()) return;
  report(scan);
  scans_.close(scan.scan_number());
  counters_.open_scans(scans_.size());
}

void Relay::report(const ScanState& scan) { report_(scan.summary(settings_.receiver)); }

std::shared_ptr<Downstream> Relay::downstream_for(const std::string& uid) {
  const auto found = downstreams_.find(uid);
  if (found != downstreams_.end() && found->second->open()) return found->second;
  const std::optional<std::string> endpoint = directory_.endpoint(uid, settings_.receiver);
  if (!endpoint) return nullptr;
  auto downstream = std::make_shared<Downstream>(context_, uid, *endpoint, settings_.hwm, settings_.discovery_wait);
  downstreams_[uid] = downstream;
  return downstream;
}

void Relay::resolve(ScanState& scan, bool wait) {
  while (true) {
    bool missing = false;
    for (Target& target : scan.targets()) {
      if (target.downstream && target.downstream->open()) continue;
      target.downstream = downstream_for(target.uid);
      missing = missing || !target.downstream;
    }
    const auto now = std::chrono::steady_clock::now();
    if (!missing || !wait || stop_->load(std::memory_order_relaxed) || now >= scan.discovery_deadline()) return;
    // A producer's replica may be a moment ahead of ours: give the registration time to arrive.
    const std::uint64_t seen = directory_.generation();
    directory_.wait_change(seen, std::min(scan.discovery_deadline(), now + std::chrono::milliseconds(100)));
    if (directory_.generation() != generation_) refresh();
  }
}

void Relay::refresh() {
  generation_ = directory_.generation();
  directory_.audit();
  for (auto it = downstreams_.begin(); it != downstreams_.end();) {
    const std::optional<std::string> endpoint = directory_.endpoint(it->first, settings_.receiver);
    if (!endpoint || *endpoint != it->second->endpoint()) {
      it->second->close();  // the scans holding it see a closed socket and count its messages lost
      it = downstreams_.erase(it);
    } else {
      ++it;
    }
  }
  scans_.for_each([this](ScanState& scan) {
    resolve(scan, false);
    send_expected(scan);
  });
}

}  // namespace sectorflow::aggregator::detail
