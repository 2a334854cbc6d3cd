#include "relay.hpp"

#include <algorithm>
#include <utility>

#include "sectorflow/protocol/data_message.hpp"
#include "sectorflow/protocol/errors.hpp"

namespace sectorflow::aggregator::detail {
namespace {

// How long the loop sleeps in poll when nothing arrives before it looks at stop and the kvstore.
constexpr std::chrono::milliseconds kIdlePoll{50};

}  // namespace

Relay::Relay(zmq::context_t& context, zmq::socket_t pull, const Directory& directory, RelaySettings settings,
             RelayCounters& counters, std::function<void(ScanSummary)> report)
    : context_(context),
      pull_(std::move(pull)),
      directory_(directory),
      settings_(settings),
      counters_(counters),
      report_(std::move(report)) {}

void Relay::run(const std::atomic<bool>& stop) {
  stop_ = &stop;
  generation_ = directory_.generation();
  zmq::message_t parts[2];
  zmq::message_t extra;
  zmq::pollitem_t item{pull_.handle(), 0, ZMQ_POLLIN, 0};
  while (!stop.load(std::memory_order_relaxed)) {
    if (directory_.generation() != generation_) refresh();
    if (!pull_.recv(parts[0], zmq::recv_flags::dontwait)) {
      zmq::poll(&item, 1, kIdlePoll);
      continue;
    }
    if (!parts[0].more()) {
      on_info(parts[0]);
      continue;
    }
    // The rest of a multipart message is already here: ZeroMQ delivers it whole.
    (void)pull_.recv(parts[1]);
    if (parts[1].more()) {
      std::size_t count = 2;
      do {
        (void)pull_.recv(extra);
        ++count;
      } while (extra.more());
      counters_.malformed(MalformedKind::kParts, "a message of " + std::to_string(count) +
                                                     " frames; expected 1 (info) or 2 (data: header, payload)");
      continue;
    }
    on_data(parts);
  }
  // What is queued for live NodeGroups still goes out, for a bounded time: a clean stop drops nothing.
  for (auto& [uid, downstream] : downstreams_) downstream->close(settings_.discovery_wait);
}

void Relay::on_data(zmq::message_t* parts) {
  protocol::FrameRef ref;
  try {
    ref = protocol::peek_frame(parts[0].data(), parts[0].size());
  } catch (const protocol::ProtocolError& error) {
    counters_.malformed(MalformedKind::kHeader, error.what());
    return;
  }
  const auto it = scans_.find(ref.scan_number);
  if (it == scans_.end()) {
    counters_.malformed(MalformedKind::kNoInfo,
                        "scan " + std::to_string(ref.scan_number) + ", frame " + std::to_string(ref.frame_number) +
                            ": data of a scan no open info message announced (its producer thread must send the "
                            "scan's info first)");
    return;
  }
  ScanState& scan = it->second;
  Target& target = scan.target_of(ref.frame_number);
  const std::size_t bytes = parts[0].size() + parts[1].size();
  if (target.downstream && target.downstream->send(parts, 2, *stop_)) {
    scan.forwarded(target, bytes);
    counters_.forwarded(bytes);
  } else {
    scan.lost(target);
    counters_.lost();
  }
  if (scan.complete()) finish_if_complete(it);
}

void Relay::on_info(const zmq::message_t& message) {
  protocol::InfoMessage info;
  try {
    info = protocol::decode_info(message.data(), message.size());
  } catch (const protocol::ProtocolError& error) {
    counters_.malformed(MalformedKind::kInfo, error.what());
    return;
  }
  const std::string where = "scan " + std::to_string(info.scan_number) + ": info of receiver " +
                            std::to_string(info.receiver) + ", producer thread " + std::to_string(info.thread_id);
  if (info.receiver != settings_.receiver) {
    counters_.malformed(MalformedKind::kInfo, where + " reached aggregator thread " +
                                                  std::to_string(settings_.receiver) +
                                                  " (receiver r must connect to base_port + r)");
    return;
  }
  if (info.routing.empty()) {
    counters_.malformed(MalformedKind::kInfo, where + ": empty routing list (a scan without NodeGroups is "
                                                      "written to disk and sends nothing)");
    return;
  }
  auto it = scans_.find(info.scan_number);
  const bool is_new = it == scans_.end();
  if (is_new) it = scans_.emplace(info.scan_number, ScanState(info, settings_.producer_threads)).first;
  const std::string error = it->second.add_info(info);
  if (!error.empty()) {
    counters_.malformed(MalformedKind::kInfo, error);
    if (is_new) scans_.erase(it);
    return;
  }
  counters_.info(info.scan_number);
  if (is_new) {
    while (scans_.size() > settings_.max_open_scans) close_scan(scans_.begin());
    counters_.open_scans(scans_.size());
    resolve(it->second, true);
  }
  send_expected(it->second);
  finish_if_complete(it);
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

void Relay::finish_if_complete(std::map<std::uint32_t, ScanState>::iterator it) {
  if (it->second.complete()) close_scan(it);
}

void Relay::close_scan(std::map<std::uint32_t, ScanState>::iterator it) {
  report_(it->second.summary(settings_.receiver));
  scans_.erase(it);
  counters_.open_scans(scans_.size());
}

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
  const auto deadline = std::chrono::steady_clock::now() + settings_.discovery_wait;
  while (true) {
    bool missing = false;
    for (Target& target : scan.targets()) {
      if (target.downstream && target.downstream->open()) continue;
      target.downstream = downstream_for(target.uid);
      missing = missing || !target.downstream;
    }
    if (!missing || !wait || stop_->load(std::memory_order_relaxed) || std::chrono::steady_clock::now() >= deadline) {
      return;
    }
    // A producer's replica may be a moment ahead of ours: give the registration time to arrive.
    const std::uint64_t seen = directory_.generation();
    directory_.wait_change(seen, std::min(deadline, std::chrono::steady_clock::now() + std::chrono::milliseconds(100)));
    if (directory_.generation() != generation_) refresh();
  }
}

void Relay::refresh() {
  generation_ = directory_.generation();
  for (auto it = downstreams_.begin(); it != downstreams_.end();) {
    const std::optional<std::string> endpoint = directory_.endpoint(it->first, settings_.receiver);
    if (!endpoint || *endpoint != it->second->endpoint()) {
      it->second->close();  // the scans holding it see a closed socket and count its messages lost
      it = downstreams_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto& [number, scan] : scans_) {
    resolve(scan, false);
    send_expected(scan);
  }
}

}  // namespace sectorflow::aggregator::detail
