#include "relay.hpp"

#include <algorithm>
#include <cerrno>
#include <thread>
#include <utility>

#include "sectorflow/protocol/errors.hpp"
#include "sectorflow/protocol/limits.hpp"

namespace sectorflow::aggregator::detail {
namespace {

const std::map<std::string, std::uint64_t> kNoCounts;

using protocol::Refusal;

// How long the loop sleeps in poll when nothing arrives before it looks at stop and the kvstore.
constexpr std::chrono::milliseconds kIdlePoll{50};
// Scans closed here that are remembered, so their stragglers neither reopen nor rebuild them.
constexpr std::size_t kClosedRemembered = 1024;
// The longest a native scan's first message waits for the replica to show its request record.
constexpr std::chrono::milliseconds kRequestWait{1000};

std::string scan_text(std::uint32_t scan) { return "scan " + std::to_string(scan); }

constexpr const char* kUnreachableWhy = "unreachable (not registered, gone from the kvstore, or disconnected)";

}  // namespace

Relay::Relay(zmq::context_t& context, zmq::socket_t pull, const Directory& directory, RecordStore& records,
             NativeRoutes& routes, RelaySettings settings, RelayCounters& counters,
             std::function<void(ScanSummary)> report)
    : context_(context),
      pull_(std::move(pull)),
      directory_(directory),
      records_(records),
      routes_(routes),
      settings_(std::move(settings)),
      native_expect_{settings_.expect, settings_.producer_threads},
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
      if (settings_.native) expire_native_scans();
      close_aborted_scans();
      if (!receive_one()) {
        refresh_stale_records();
        zmq::poll(&item, 1, kIdlePoll);
      }
    } catch (const zmq::error_t& error) {
      if (error.num() == ETERM) break;
      counters_.malformed(Refusal::kError, std::string("socket: ") + error.what());
    } catch (const std::exception& error) {
      // Nothing a peer sends may end the thread: what no check foresaw is counted and logged once.
      counters_.malformed(Refusal::kError, error.what());
    }
  }
  // A scan still open is closed unfinished: its record says what this thread forwarded and lost.
  refresh_stale_records();
  scans_.for_each([this](ScanState& scan) { report(scan, true, "open when the aggregator stopped"); });
  // What is queued for live NodeGroups still goes out, for a bounded time: a clean stop drops nothing.
  for (auto& [uid, downstream] : downstreams_) downstream->close(settings_.discovery_wait);
}

bool Relay::receive_one() {
  if (!pull_.recv(parts_[0], zmq::recv_flags::dontwait)) return false;
  if (!parts_[0].more()) {
    if (settings_.native) {
      counters_.malformed(Refusal::kParts, "a message of 1 frame on a native receiver's port; expected 2 (the "
                                           "native header, payload): a native stream has no info message");
    } else {
      on_info(parts_[0]);
    }
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
  if (settings_.native) {
    on_native_data(parts_);
  } else {
    on_data(parts_);
  }
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
  if (scan == nullptr && closed_.count(header.scan_number) != 0) {
    // A straggler of a scan closed here (a dead NodeGroup's messages are not awaited): lost.
    counters_.lost();
    const auto lingering = lingering_.find(header.scan_number);
    if (lingering != lingering_.end() && lingering->second.fits(header)) {
      lingering->second.lost(lingering->second.target_of(header.frame_number));
    }
    return;
  }
  if (scan == nullptr) scan = recover(header);
  if (scan == nullptr) {
    counters_.malformed(Refusal::kNoInfo, header.where() +
                                              ": data of a scan no open info message announced and no producer "
                                              "scan record describes (its producer thread must send the scan's "
                                              "info first)");
    return;
  }
  if (!scan->fits(header)) {
    counters_.malformed(Refusal::kScan, header.where() + ": scan shape " + std::to_string(header.scan_x) + " x " +
                                            std::to_string(header.scan_y) + " differs from the one its info gave");
    return;
  }
  forward(*scan, header, parts);
}

void Relay::on_native_data(zmq::message_t* parts) {
  protocol::NativeHeader native;
  try {
    native = protocol::decode_native_data(parts[0].data(), parts[0].size(), parts[1].size(), native_expect_);
  } catch (const protocol::ProtocolError& error) {
    counters_.malformed(error.kind(), error.what());
    return;
  }
  const protocol::DataHeader header = protocol::to_data_header(native);
  const auto now = std::chrono::steady_clock::now();
  ScanState* scan = scans_.find(header.scan_number);
  if (scan == nullptr || !scan->heard(header.thread_id)) {
    // Before a thread's count is taken, and before anything is opened: a header its producer
    // thread's record contradicts (a stray beside or after the real run) changes nothing.
    if (const std::string error = against_record(header, native.frames_this_thread); !error.empty()) {
      counters_.malformed(Refusal::kScan, error);
      return;
    }
  }
  if (scan == nullptr) {
    const auto closed = native_closed_.find(header.scan_number);
    // A straggler of the run that closed here, where scans are requested; where a receiver's own
    // software starts them, the closed run may be a stray's and this the real run: it opens a run
    // of its own, which the NodeGroups count apart (SPEC.md, "Runs of a scan").
    if (closed != native_closed_.end() && now - closed->second.at < settings_.native_idle &&
        settings_.native_requested && header.thread_id < closed->second.announced.size() &&
        closed->second.announced[header.thread_id] == native.frames_this_thread) {
      counters_.lost();  // a straggler of the run that closed here
      return;
    }
    if (settings_.native_requested && !requested(header.scan_number)) {
      counters_.malformed(Refusal::kNoInfo,
                          header.where() + ": native data of a scan no request announced (no scans/<n>/request: "
                                           "'sectorflow acquire' did not ask for it): a stray, dropped; it opens "
                                           "no run ([aggregator] native_scans_requested = false lets a receiver's "
                                           "own software start scans)");
      return;
    }
    if (closed != native_closed_.end()) native_closed_.erase(closed);
    scan = &open_native_run(header);
  }
  if (!scan->fits(header)) {
    counters_.malformed(Refusal::kScan, header.where() + ": scan shape " + std::to_string(header.scan_x) + " x " +
                                            std::to_string(header.scan_y) + " differs from the one its first header gave");
    return;
  }
  if (std::string error = scan->native_arrival(header.thread_id, native.frames_this_thread); !error.empty()) {
    // A header its thread's producer record contradicts is the stray: refused. One the record agrees
    // with, a record since rewritten, is the thread's replay of what it spilled: a new run. Where
    // scans are requested and no record describes the thread, nothing vouches for it: refused.
    const std::string stray = against_record(header, native.frames_this_thread);
    const bool replay = stray.empty() && described(header);
    if (!stray.empty() || (settings_.native_requested && !replay)) {
      counters_.malformed(Refusal::kScan, stray.empty() ? error : stray);
      return;
    }
    // A replay, or a receiver's own software starting scans: the run that came first (the spilled
    // one; or a stray, a receiver restarted with an old scan) closes as a run of its own, and this
    // header begins another. The NodeGroups count each run apart, so neither lowers what the other
    // counts (SPEC.md, "Runs of a scan").
    report(*scan, true, "closed unfinished: " + error +
                            (replay ? ": its producer thread began a new run of the scan (a replay)"
                                    : ": a new run of the scan began"));
    remember_closed(scans_.close(header.scan_number));
    native_closed_.erase(header.scan_number);  // not a straggler: the new run's own messages follow
    scan = &open_native_run(header);
    if (error = scan->native_arrival(header.thread_id, native.frames_this_thread); !error.empty()) {
      counters_.malformed(Refusal::kScan, error);  // cannot happen: the run is new
      return;
    }
  }
  forward(*scan, header, parts);
}

ScanState& Relay::open_native_run(const protocol::DataHeader& header) {
  std::vector<std::string> routing = routes_.open(header.scan_number, header.scan_x, header.scan_y, settings_.receiver);
  ScanState& scan = open_scan(ScanState::native(header.scan_number, header.scan_x, header.scan_y, std::move(routing),
                                                settings_.producer_threads,
                                                std::chrono::steady_clock::now() + settings_.discovery_wait));
  counters_.native_scan(header.scan_number);
  resolve(scan, false);
  if (!scan.routable()) {
    report(scan, false, "no NodeGroup was registered when the native scan began: its sectors are dropped "
                        "and counted lost");
  }
  return scan;
}

void Relay::forward(ScanState& scan, const protocol::DataHeader& header, zmq::message_t* parts) {
  if (!scan.routable()) {
    scan.lost_unrouted();
    counters_.lost();
    finish_if_complete(scan);
    return;
  }
  Target& target = scan.target_of(header.frame_number);
  if (!target.dead && !(target.downstream && target.downstream->open()) &&
      std::chrono::steady_clock::now() < scan.discovery_deadline()) {
    resolve(scan, true);
    send_expected(scan);
  }
  // The NodeGroups count each run apart: the header goes on (version 3) with this thread's run of
  // the scan; a native one under SFSP's header. The payload moves on untouched.
  protocol::DataHeader sent = header;
  sent.run = scan.run();
  const std::string encoded = protocol::encode_header(sent);
  parts[0].rebuild(encoded.data(), encoded.size());
  const std::size_t bytes = parts[0].size() + parts[1].size();
  SendResult result = SendResult::kUnreachable;
  if (!target.dead && target.downstream) result = target.downstream->send(parts, 2, *stop_, settings_.send_timeout);
  if (result == SendResult::kSent) {
    scan.forwarded(target, bytes);
    counters_.forwarded(bytes);
  } else {
    scan.lost(target);
    counters_.lost();
    if (!target.dead && !stop_->load(std::memory_order_relaxed)) {
      declare_dead(scan, target,
                   result == SendResult::kBlocked
                       ? "a send stayed blocked for send_timeout_ms (" + std::to_string(settings_.send_timeout.count()) +
                             " ms): connected but not reading"
                       : std::string(kUnreachableWhy));
    }
  }
  finish_if_complete(scan);
}

bool Relay::requested(std::uint32_t scan) {
  if (records_.request_record(scan)) return true;
  auto now = std::chrono::steady_clock::now();
  if (now < next_request_wait_) return false;
  const auto deadline = now + std::min(settings_.discovery_wait, kRequestWait);
  while (now < deadline && !stop_->load(std::memory_order_relaxed)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    if (records_.request_record(scan)) return true;
    now = std::chrono::steady_clock::now();
  }
  next_request_wait_ = now + std::min(settings_.discovery_wait, kRequestWait);
  return false;
}

std::string Relay::against_record(const protocol::DataHeader& header, std::uint32_t frames) {
  return settled([&]() -> std::string {
    for (const protocol::ProducerScanRecord& record :
         records_.producer_records(header.scan_number, settings_.receiver, std::chrono::milliseconds(0))) {
      if (record.thread != header.thread_id) continue;
      std::uint64_t announced = 0;
      for (const auto& [uid, count] : record.counts_for(settings_.member).value_or(kNoCounts)) announced += count;
      if (announced == frames) return {};
      return header.where() + ": num_frames_this_thread " + std::to_string(frames) + " differs from the " +
             std::to_string(announced) + " its producer thread's scan record announced: a stray, dropped";
    }
    return {};
  });
}

std::string Relay::against_record(const protocol::InfoMessage& info) {
  return settled([&]() -> std::string {
    for (const protocol::ProducerScanRecord& record :
         records_.producer_records(info.scan_number, settings_.receiver, std::chrono::milliseconds(0))) {
      if (record.thread != info.thread_id) continue;
      if (record.routing == info.routing && record.counts_for(settings_.member) == info.counts) return {};
      return scan_text(info.scan_number) + ": info of receiver " + std::to_string(info.receiver) +
             ", producer thread " + std::to_string(info.thread_id) +
             ": routing and counts differ from those its producer thread's scan record announced: a stray, dropped";
    }
    return {};
  });
}

bool Relay::described(const protocol::DataHeader& header) const {
  const std::vector<protocol::ProducerScanRecord> records =
      records_.producer_records(header.scan_number, settings_.receiver, std::chrono::milliseconds(0));
  return std::any_of(records.begin(), records.end(),
                     [&](const protocol::ProducerScanRecord& record) { return record.thread == header.thread_id; });
}

std::string Relay::settled(const std::function<std::string()>& contradiction) {
  std::string error = contradiction();
  auto now = std::chrono::steady_clock::now();
  if (error.empty() || now < next_record_wait_) return error;
  const auto deadline = now + std::min(settings_.discovery_wait, kRequestWait);
  while (now < deadline && !stop_->load(std::memory_order_relaxed)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    error = contradiction();
    if (error.empty()) return error;
    now = std::chrono::steady_clock::now();
  }
  next_record_wait_ = now + std::min(settings_.discovery_wait, kRequestWait);
  return error;
}

ScanState* Relay::recover(const protocol::DataHeader& header) {
  // The first lookup may come before the replica's first sync (the relay just restarted); later
  // ones never wait, so data of unknown scans cannot stall the thread.
  const std::chrono::milliseconds sync_wait = records_synced_once_ ? std::chrono::milliseconds(0) : settings_.discovery_wait;
  records_synced_once_ = true;
  const std::vector<protocol::ProducerScanRecord> records =
      records_.producer_records(header.scan_number, settings_.receiver, sync_wait);
  std::optional<ScanState> fresh;
  for (const protocol::ProducerScanRecord& record : records) {
    if (record.thread >= settings_.producer_threads) continue;  // not a thread of this configuration
    // What the thread announced to this member of the tier; a record of another tier's shape
    // describes no stream of this member.
    std::optional<std::map<std::string, std::uint64_t>> counts = record.counts_for(settings_.member);
    if (!counts) continue;
    const protocol::InfoMessage info{header.scan_number, record.receiver, record.thread, header.scan_x,
                                     header.scan_y,      record.routing,  std::move(*counts)};
    if (!fresh) fresh.emplace(info, settings_.producer_threads, std::chrono::steady_clock::now() + settings_.discovery_wait);
    if (const std::string error = fresh->add_info(info, true); !error.empty()) {
      counters_.malformed(Refusal::kInfo, "scan record: " + error);
    }
  }
  if (!fresh || fresh->infos() == 0) return nullptr;
  fresh->mark_recovered();
  // NodeGroups the previous process declared dead stay dead: their producers spill them.
  if (const std::optional<protocol::RelayScanRecord> before = records_.relay_record(header.scan_number, settings_.slot)) {
    // An unfinished run goes on under its run: the NodeGroups hold its earlier messages.
    if (!before->complete) fresh->continue_run(before->run);
    for (const std::string& uid : before->dead) {
      if (Target* target = fresh->target(uid)) fresh->declare_dead(*target, "declared dead before the relay restarted");
    }
  }
  ScanState& scan = open_scan(std::move(*fresh));
  counters_.recovered_scan(scan.scan_number());
  resolve(scan, false);
  report(scan, false, "rebuilt from " + std::to_string(scan.infos()) + " producer scan record(s) (the relay " +
                          "restarted mid-scan); what the previous process held in flight is missing");
  send_expected(scan);
  return &scan;
}

ScanState& Relay::open_scan(ScanState fresh) {
  const std::uint32_t number = fresh.scan_number();
  if (closed_.erase(number) != 0) {
    closed_order_.erase(std::find(closed_order_.begin(), closed_order_.end(), number));
  }
  if (lingering_.erase(number) != 0) {
    lingering_order_.erase(std::find(lingering_order_.begin(), lingering_order_.end(), number));
  }
  if (std::optional<ScanState> evicted = scans_.open(std::move(fresh))) {
    counters_.evicted_scan();
    report(*evicted, true, "closed unfinished to make room for scan " + std::to_string(number));
    remember_closed(std::move(*evicted));
  }
  counters_.open_scans(scans_.size());
  return *scans_.find(number);
}

void Relay::declare_dead(ScanState& scan, Target& target, const std::string& why) {
  if (!scan.declare_dead(target, why)) return;
  counters_.dead();
  report(scan, false, "declared " + target.uid + " dead: " + why +
                          "; its messages of this scan are dropped and counted lost, its producers spill them");
}

void Relay::remember_closed(ScanState scan) {
  const std::uint32_t number = scan.scan_number();
  if (scan.is_native()) {
    // Its stragglers are lost for native_idle; after that the number opens a new run.
    const auto now = std::chrono::steady_clock::now();
    for (auto it = native_closed_.begin(); it != native_closed_.end();) {
      it = now - it->second.at >= settings_.native_idle ? native_closed_.erase(it) : std::next(it);
    }
    if (native_closed_.size() < kClosedRemembered) {
      std::vector<std::uint32_t> announced(settings_.producer_threads);
      for (std::uint32_t thread = 0; thread < announced.size(); ++thread) announced[thread] = scan.announced(thread);
      native_closed_[number] = ClosedNative{now, std::move(announced)};
    }
    return;
  }
  if (closed_.insert(number).second) {
    closed_order_.push_back(number);
    if (closed_order_.size() > kClosedRemembered) {
      closed_.erase(closed_order_.front());
      lingering_.erase(closed_order_.front());
      closed_order_.pop_front();
    }
  }
  const bool any_dead = std::any_of(scan.targets().begin(), scan.targets().end(),
                                    [](const Target& target) { return target.dead; });
  if (!any_dead || !lingering_.emplace(number, std::move(scan)).second) return;
  lingering_order_.push_back(number);
  while (lingering_order_.size() > settings_.max_open_scans) {
    lingering_.erase(lingering_order_.front());
    lingering_order_.pop_front();
  }
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
  const bool repeat = scan != nullptr && scan->heard(info.thread_id) && scan->add_info(info).empty();
  if (repeat) {
    counters_.info(info.scan_number);
    return;
  }
  // Anything else opens, joins or replaces a run: only as its producer thread's record says (an
  // info beside or after the scan that it contradicts is a stray, and must not close the real run).
  if (const std::string error = against_record(info); !error.empty()) {
    counters_.malformed(Refusal::kScan, error);
    return;
  }
  if (scan != nullptr && scan->heard(info.thread_id)) {
    // A producer thread sends one info per run of a scan: a second one (not the echo of the record
    // a restarted relay rebuilt the scan from) begins a new run, a replay of what it spilled. The
    // old run will not complete here: its missing messages are in raw files.
    report(*scan, true, "closed unfinished: producer thread " + std::to_string(info.thread_id) +
                            " began a new run of the scan (a replay)");
    scans_.close(info.scan_number);
    scan = nullptr;
  }
  if (scan == nullptr) {
    ScanState fresh(info, settings_.producer_threads, std::chrono::steady_clock::now() + settings_.discovery_wait);
    if (const std::string error = fresh.add_info(info); !error.empty()) {
      counters_.malformed(Refusal::kInfo, error);
      return;
    }
    scan = &open_scan(std::move(fresh));
    resolve(*scan, false);
  } else if (const std::string error = scan->add_info(info); !error.empty()) {
    counters_.malformed(Refusal::kInfo, error);
    return;
  }
  counters_.info(info.scan_number);
  send_expected(*scan);
  finish_if_complete(*scan);
}

void Relay::expire_native_scans() {
  const auto now = std::chrono::steady_clock::now();
  if (now < next_expiry_check_) return;
  next_expiry_check_ = now + std::min(settings_.native_idle, kIdlePoll);
  std::vector<std::uint32_t> idle;
  std::vector<std::uint32_t> quiet;
  scans_.for_each([&](ScanState& scan) {
    const auto quiet_for = now - scan.last_activity();
    if (quiet_for >= settings_.native_idle) idle.push_back(scan.scan_number());
    if (scan.is_native() && quiet_for >= kIdlePoll) quiet.push_back(scan.scan_number());
  });
  for (const std::uint32_t number : quiet) {
    ScanState& scan = *scans_.find(number);
    silent_native_threads(scan);
    if (scan.complete()) {
      idle.erase(std::remove(idle.begin(), idle.end(), number), idle.end());
      finish_if_complete(scan);
    }
  }
  for (const std::uint32_t number : idle) {
    ScanState& scan = *scans_.find(number);
    report(scan, true, "closed unfinished: no message of the scan for native_scan_idle_s (" +
                           std::to_string(settings_.native_idle.count()) + " ms); " +
                           std::to_string(scan.announced()) + " announced by the threads heard from");
    remember_closed(scans_.close(number));
  }
  if (!idle.empty()) counters_.open_scans(scans_.size());
}

void Relay::silent_native_threads(ScanState& scan) {
  if (settings_.members <= 1 || scan.infos_complete()) return;
  for (const protocol::ProducerScanRecord& record :
       records_.producer_records(scan.scan_number(), settings_.receiver, std::chrono::milliseconds(0))) {
    if (scan.heard(record.thread)) continue;
    const std::optional<std::map<std::string, std::uint64_t>> counts = record.counts_for(settings_.member);
    if (!counts) continue;  // a record of another tier's shape says nothing of this member
    std::uint64_t announced = 0;
    for (const auto& [uid, count] : *counts) announced += count;
    if (announced == 0) scan.native_silent(record.thread);
  }
}

void Relay::close_aborted_scans() {
  const auto now = std::chrono::steady_clock::now();
  if (now < next_abort_check_ || scans_.empty()) return;
  next_abort_check_ = now + kIdlePoll;
  std::vector<std::uint32_t> aborted;
  scans_.for_each([&](ScanState& scan) {
    // A native receiver's threads do not watch the abort; a rebuilt scan's counts are partial.
    if (scan.is_native() || scan.recovered()) return;
    const std::optional<std::uint64_t> sent = records_.aborted_sent(scan.scan_number(), settings_.receiver,
                                                                    settings_.producer_threads, settings_.member);
    if (sent && scan.handled() >= *sent) aborted.push_back(scan.scan_number());
  });
  for (const std::uint32_t number : aborted) {
    ScanState& scan = *scans_.find(number);
    report(scan, true, "aborted (sectorflow abort): closed with the " + std::to_string(scan.handled()) +
                           " messages its producer threads sent");
    remember_closed(scans_.close(number));
  }
  if (!aborted.empty()) counters_.open_scans(scans_.size());
}

void Relay::send_closing_counts(ScanState& scan) {
  scan.closing_counts();
  for (Target& target : scan.targets()) {
    if (target.dead || !target.downstream) continue;
    const std::string bytes = protocol::encode_info(scan.expected_info(target, settings_.receiver));
    zmq::message_t message(bytes.data(), bytes.size());
    // After the data on the same connection: the NodeGroup has all of it when the count arrives.
    target.info_sent = target.downstream->send(&message, 1, *stop_, settings_.send_timeout) == SendResult::kSent;
  }
}

void Relay::send_expected(ScanState& scan) {
  if (scan.is_native() || !scan.infos_complete()) return;
  for (Target& target : scan.targets()) {
    if (target.info_sent || target.dead || !target.downstream) continue;
    const std::string bytes = protocol::encode_info(scan.expected_info(target, settings_.receiver));
    zmq::message_t message(bytes.data(), bytes.size());
    const SendResult result = target.downstream->send(&message, 1, *stop_, settings_.send_timeout);
    target.info_sent = result == SendResult::kSent;
    // An unreachable one is left to its data (it may still be discovered); a blocked one is dead.
    if (result == SendResult::kBlocked && !stop_->load(std::memory_order_relaxed)) {
      declare_dead(scan, target, "sending its expected count stayed blocked for send_timeout_ms (" +
                                     std::to_string(settings_.send_timeout.count()) + " ms): connected but not reading");
    }
  }
}

void Relay::finish_if_complete(ScanState& scan) {
  if (!scan.complete()) return;
  report(scan, true, "");
  remember_closed(scans_.close(scan.scan_number()));
  counters_.open_scans(scans_.size());
}

void Relay::report(ScanState& scan, bool closed, const std::string& note) {
  if (closed && scan.is_native()) {
    send_closing_counts(scan);
    routes_.close(scan.scan_number());
  }
  ScanSummary summary = scan.summary(settings_.receiver, closed);
  summary.note = note;
  report_(std::move(summary));
  write_record(scan, closed);
}

void Relay::write_record(ScanState& scan, bool closed) {
  try {
    records_.write(scan.scan_number(), scan.record(settings_.slot, closed));
    scan.record_written();
  } catch (const std::exception& error) {
    counters_.malformed(Refusal::kError, scan_text(scan.scan_number()) + ": its relay record was not written: " +
                                             error.what());
  }
}

void Relay::refresh_stale_records() {
  scans_.for_each([this](ScanState& scan) {
    if (scan.recovered() && scan.record_stale()) write_record(scan, false);
  });
  for (auto& [number, scan] : lingering_) {
    if (!scan.record_stale()) continue;
    // Stragglers of a dead NodeGroup changed a closed scan's loss: its summary is reissued so the
    // status's lost_last_scan, like the record, says what the scan lost in the end.
    ScanSummary summary = scan.summary(settings_.receiver, true);
    summary.note = "messages for a dead NodeGroup that came after the scan closed, counted lost";
    report_(std::move(summary));
    write_record(scan, true);
  }
}

std::shared_ptr<Downstream> Relay::downstream_for(const std::string& uid) {
  const auto found = downstreams_.find(uid);
  if (found != downstreams_.end() && found->second->open()) return found->second;
  const std::optional<std::string> endpoint = directory_.endpoint(uid, settings_.slot);
  if (!endpoint) return nullptr;
  DownstreamSettings made;
  made.hwm = settings_.hwm;
  made.sndbuf_bytes = settings_.sndbuf_bytes;
  made.grace = settings_.discovery_wait;
  made.drain = settings_.send_timeout;
  made.curve = settings_.downstream_curve;
  auto downstream = std::make_shared<Downstream>(context_, uid, *endpoint, made);
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
    const std::optional<std::string> endpoint = directory_.endpoint(it->first, settings_.slot);
    if (endpoint && *endpoint != it->second->endpoint()) {
      it->second->close();  // another process has the uid's name now: the scans holding it count its messages lost
      it = downstreams_.erase(it);
    } else if (!endpoint) {
      // Gone from the kvstore, which is not proof of death: a kvstore restart empties every
      // replica until each party has written its keys again. The scans holding the socket keep
      // it, and their sends decide (a dead peer disconnects, a hung one blocks for
      // send_timeout_ms); new scans cannot route to it. It closes with the last scan holding it.
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
