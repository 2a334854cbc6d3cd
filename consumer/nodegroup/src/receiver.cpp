#include "sectorflow/consumer/nodegroup/receiver.hpp"

#include <chrono>
#include <iterator>

#include <zmq_addon.hpp>

#include "envelope.hpp"
#include "send_until.hpp"
#include "sectorflow/consumer/nodegroup/nodegroup_error.hpp"
#include "sectorflow/protocol/data_message.hpp"
#include "sectorflow/protocol/errors.hpp"
#include "sectorflow/protocol/info_message.hpp"
#include "sectorflow/protocol/limits.hpp"

namespace sectorflow::consumer::nodegroup {

using detail::Envelope;
using protocol::Refusal;

namespace {

// Messages taken per poll before the timeout check.
constexpr int kBatch = 256;

zmq::message_t envelope_message(const Envelope& envelope) { return zmq::message_t(&envelope, sizeof(envelope)); }

std::string scan_text(std::uint32_t scan) { return "scan " + std::to_string(scan); }

}  // namespace

Receiver::Receiver(zmq::context_t& context, const NodeGroupSettings& settings, std::uint32_t index,
                   const std::vector<std::string>& worker_endpoints, ScanTracker& tracker,
                   NodeGroupCounters& counters)
    : settings_(settings),
      index_(index),
      // Port `index` carries the sector of receiver index % receivers (the tier's member index / receivers).
      expect_{settings.geometry, settings.limits, index % settings.receivers},
      tracker_(tracker),
      counters_(counters),
      pull_(context, zmq::socket_type::pull) {
  pull_.set(zmq::sockopt::linger, 0);
  pull_.set(zmq::sockopt::rcvhwm, settings.recv_hwm);
  // The receive window of the WAN hop (capped by net.core.rmem_max); 0 leaves tcp_rmem's autotuning.
  if (settings.rcvbuf_bytes > 0) pull_.set(zmq::sockopt::rcvbuf, settings.rcvbuf_bytes);
  // A peer sending a frame larger than a sector or an info message is cut off by ZeroMQ before
  // the frame is buffered.
  pull_.set(zmq::sockopt::maxmsgsize, protocol::max_frame_bytes(settings.geometry));
  const std::string address = "tcp://" + settings.host + ":*";
  try {
    security::CurveClient curve = settings.curve;
    // Port `index` speaks to one member of the aggregation tier, which proves that member's key.
    if (!settings.aggregator_keys.empty()) curve.server_key = settings.aggregator_keys.at(index / settings.receivers);
    security::apply(pull_, curve);
    pull_.bind(address);
  } catch (const std::exception& e) {  // zmq::error_t, or a CURVE key that is not Z85
    throw NodeGroupError("NodeGroup " + settings.uid + ": cannot bind data socket " + std::to_string(index) +
                         " on " + address + ": " + e.what() +
                         "; [nodegroup] host must be an address of this node");
  }
  const std::string endpoint = pull_.get(zmq::sockopt::last_endpoint);
  port_ = static_cast<std::uint16_t>(std::stoul(endpoint.substr(endpoint.rfind(':') + 1)));
  for (const std::string& worker : worker_endpoints) {
    zmq::socket_t push(context, zmq::socket_type::push);
    push.set(zmq::sockopt::linger, 0);
    push.set(zmq::sockopt::sndhwm, detail::kHandOffHwm);
    push.connect(worker + std::to_string(index));
    pushes_.push_back(std::move(push));
  }
}

void Receiver::run(const std::atomic<bool>& stop) {
  std::vector<zmq::message_t> parts;
  while (!stop.load(std::memory_order_relaxed)) {
    try {
      zmq::pollitem_t item{pull_.handle(), 0, ZMQ_POLLIN, 0};
      zmq::poll(&item, 1, detail::kPollInterval);
      for (int i = 0; i < kBatch && !stop.load(std::memory_order_relaxed); ++i) {
        parts.clear();
        if (!zmq::recv_multipart(pull_, std::back_inserter(parts), zmq::recv_flags::dontwait)) break;
        handle(parts, stop);
      }
      for (const std::uint32_t scan : tracker_.closed(index_)) send_end(scan, false, stop);
      for (const std::uint32_t scan : tracker_.expire(index_, ScanTracker::Clock::now())) {
        send_end(scan, true, stop);
      }
    } catch (const std::exception& error) {
      // Nothing a peer sends may end the thread: what no check foresaw is counted and logged once.
      counters_.malformed.count(Refusal::kError, "receiver " + std::to_string(index_) + ": " + error.what());
    }
  }
}

void Receiver::handle(std::vector<zmq::message_t>& parts, const std::atomic<bool>& stop) {
  if (parts.size() == 1) {
    on_info(parts[0], stop);
    return;
  }
  if (parts.size() != 2) {
    counters_.malformed.count(Refusal::kParts, "a message of " + std::to_string(parts.size()) +
                                                   " frames; expected 1 (info) or 2 (data: header, payload)");
    return;
  }
  protocol::DataHeader header;
  try {
    header = protocol::decode_data(parts[0].data(), parts[0].size(), parts[1].size(), expect_);
  } catch (const protocol::ProtocolError& error) {
    counters_.malformed.count(error.kind(), error.what());
    return;
  }
  const std::size_t bytes = parts[1].size();
  const ScanTracker::Arrival arrival =
      tracker_.on_data(header.scan_number, index_, bytes, header.scan_x, header.scan_y, header.run);
  if (!accepted(arrival, header.scan_number)) return;
  Envelope envelope;
  envelope.kind = Envelope::kData;
  envelope.receiver = index_;
  envelope.scan = header.scan_number;
  envelope.frame = header.frame_number;
  envelope.sector = header.sector;
  envelope.scan_x = header.scan_x;
  envelope.scan_y = header.scan_y;
  envelope.position = header.position();
  zmq::socket_t& push = pushes_[detail::worker_of(header.frame_number, pushes_.size())];
  zmq::message_t first = envelope_message(envelope);
  if (!detail::send_until(push, first, true, stop) || !detail::send_until(push, parts[1], false, stop)) return;
  counters_.messages.fetch_add(1, std::memory_order_relaxed);
  counters_.bytes.fetch_add(bytes, std::memory_order_relaxed);
  if (arrival == ScanTracker::Arrival::kLast) send_end(header.scan_number, false, stop);
}

void Receiver::on_info(const zmq::message_t& message, const std::atomic<bool>& stop) {
  protocol::InfoMessage info;
  try {
    info = protocol::decode_info(message.data(), message.size());
    protocol::check_scan_shape(info.scan_x, info.scan_y, settings_.limits, scan_text(info.scan_number));
  } catch (const protocol::ProtocolError& error) {
    counters_.malformed.count(error.kind(), error.what());
    return;
  }
  if (info.receiver != index_ % settings_.receivers) {
    counters_.malformed.count(Refusal::kInfo, scan_text(info.scan_number) + ": info of aggregator thread " +
                                                  std::to_string(info.receiver) + " reached port " +
                                                  std::to_string(index_));
    return;
  }
  counters_.info_messages.fetch_add(1, std::memory_order_relaxed);
  const auto count = info.counts.find(settings_.uid);
  const std::uint64_t expected = count == info.counts.end() ? 0 : count->second;
  const ScanTracker::Arrival arrival =
      tracker_.on_info(info.scan_number, index_, expected, std::move(info.routing), info.scan_x, info.scan_y, info.run);
  if (arrival == ScanTracker::Arrival::kLast) send_end(info.scan_number, false, stop);
  (void)accepted(arrival, info.scan_number);
}

bool Receiver::accepted(ScanTracker::Arrival arrival, std::uint32_t scan) {
  switch (arrival) {
    case ScanTracker::Arrival::kAccepted:
    case ScanTracker::Arrival::kLast:
      return true;
    case ScanTracker::Arrival::kLate:
      counters_.late_messages.fetch_add(1, std::memory_order_relaxed);
      return false;
    case ScanTracker::Arrival::kMismatch:
      counters_.malformed.count(Refusal::kScan, scan_text(scan) + ": a message of another scan shape than the "
                                                                   "scan's first one");
      return false;
    case ScanTracker::Arrival::kRepeated:
      counters_.repeated_infos.fetch_add(1, std::memory_order_relaxed);
      return false;
    case ScanTracker::Arrival::kConflict:
      counters_.malformed.count(Refusal::kInfo, scan_text(scan) + ": an info message announcing another count "
                                                                   "than this port's first one (the first stands)");
      return false;
    case ScanTracker::Arrival::kRuns:
      counters_.malformed.count(Refusal::kScan, scan_text(scan) + ": a message of a run beyond the " +
                                                    std::to_string(ScanTracker::kMaxRuns) +
                                                    " this port counts per scan");
      return false;
    case ScanTracker::Arrival::kFull:
      counters_.malformed.count(Refusal::kOpenScans, scan_text(scan) + ": a new scan while every open-scan slot "
                                                                       "holds a scan being finished ([limits] "
                                                                       "max_open_scans)");
      return false;
  }
  return false;
}

void Receiver::send_end(std::uint32_t scan, bool timed_out, const std::atomic<bool>& stop) {
  Envelope envelope;
  envelope.kind = Envelope::kEnd;
  envelope.receiver = index_;
  envelope.scan = scan;
  envelope.timed_out = timed_out ? 1 : 0;
  for (zmq::socket_t& push : pushes_) {
    zmq::message_t message = envelope_message(envelope);
    if (!detail::send_until(push, message, false, stop)) return;
  }
}

}  // namespace sectorflow::consumer::nodegroup
