// One aggregator thread r (SPEC.md steps 4 and 5): pulls from the producer threads of receiver r,
// learns each scan's routing from their info messages, forwards the expected counts, and moves
// every data message unchanged to the NodeGroup routing[frame % n] of its scan.
//
// Every message is checked as a NodeGroup would check it (protocol::decode_data, the scan's shape)
// before it is routed, so a bad message never crosses the WAN; a refused one is counted by kind.
// Open scans are bounded (scan_table.hpp). No message blocks the thread for long: a NodeGroup
// missing from the kvstore is waited for only by its scan's data, and only until the scan's
// discovery deadline; a send that stays blocked for send_timeout (the NodeGroup is connected but
// does not read), or a NodeGroup that cannot be reached, makes the NodeGroup dead for that scan:
// its messages of the scan are dropped and counted lost without waiting, and the scan no longer
// waits for them. A dead NodeGroup therefore stalls the thread at most once per scan.
//
// The thread writes its record of a scan (scans/<n>/aggregator/t<r>) when the scan closes and, at
// once, each time it declares a NodeGroup dead: the producers of receiver r watch that key to stop
// sending that NodeGroup's sectors and write them to raw files instead. Data of a scan it has no
// state for (it restarted mid-scan) rebuilds the scan from the producer threads' scan records, as
// if their infos had come; with no record it is refused (no_info). Such a rebuilt scan cannot know
// what the process before forwarded, so it does not complete by its counts: its record is
// rewritten whenever the thread falls idle, and it closes when evicted or when the relay stops.
// A scan closes without waiting for a dead NodeGroup's messages; those still coming (sent before
// the producers saw the record) are counted lost in its record, rewritten when the thread is idle.
//
// An aborted scan (sectorflow abort, scans/<n>/abort) closes here as soon as every producer thread
// of receiver r wrote its last record and the messages they say they sent have all been forwarded
// or counted lost: its record (closed, not complete) then tells each NodeGroup how many it was
// forwarded, which is what the NodeGroups wait for instead of their scan timeout. A scan rebuilt
// after a restart cannot know what the process before forwarded: it does not close this way.
//
// A native receiver's thread (SPEC.md, "Two dialects") reads the 4D Camera's own header instead:
// no info messages; the scan opens with its first message, with the routing list NativeRoutes
// fixes for every thread, and each thread's first header gives its message count. The sector goes
// on under SFSP's header (the same frame number, position and thread), so NodeGroups speak one
// dialect. The scan closes when every thread has sent what it announced, or after native_idle
// without a message of it; each NodeGroup then gets, as its expected count, what was forwarded to
// it, after the data on the same connection. A closed native scan's number is remembered for
// native_idle (its stragglers are lost); after that it opens a new run, as a replay does. With
// native_requested (sectorflow acquire starts every scan), data of a scan with no request record is
// a stray and opens nothing: it is refused (no_info), so it can neither fix a routing list, write a
// request record that makes acquire refuse the number, nor give the NodeGroups a count that the
// real run's would then contradict.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <zmq.hpp>

#include "directory.hpp"
#include "downstream.hpp"
#include "native_routes.hpp"
#include "record_store.hpp"
#include "scan_state.hpp"
#include "scan_table.hpp"
#include "sectorflow/aggregator/counters.hpp"
#include "sectorflow/protocol/data_message.hpp"
#include "sectorflow/protocol/native_header.hpp"

namespace sectorflow::aggregator::detail {

struct RelaySettings {
  std::uint32_t receiver = 0;
  /// This aggregator's index in the tier ([aggregator] tier), and the tier's size.
  std::uint32_t member = 0;
  std::uint32_t members = 1;
  /// The relay thread's index in the tier, member * receivers + receiver: its port offset, its
  /// relay record (scans/<n>/aggregator/t<slot>) and the NodeGroups' port it sends to.
  std::uint32_t slot = 0;
  std::uint32_t producer_threads = 1;
  int hwm = 1;
  int sndbuf_bytes = 0;  ///< ZMQ_SNDBUF of each downstream socket; 0: the kernel's autotuning
  std::chrono::milliseconds discovery_wait{0};
  std::chrono::milliseconds send_timeout{0};  ///< a send blocked longer declares its NodeGroup dead for the scan
  std::size_t max_open_scans = 1;
  protocol::DataExpectations expect;  ///< geometry, scan limits, and sector = receiver
  bool native = false;                ///< the receiver speaks the native header ([[receivers]] wire)
  std::chrono::milliseconds native_idle{0};  ///< [aggregator] native_scan_idle_s
  bool native_requested = true;              ///< [aggregator] native_scans_requested
  security::CurveServer downstream_curve;    ///< [security]: CURVE of the sockets to NodeGroups
};

class Relay {
 public:
  /// Takes the PULL socket already bound by the aggregator. `report` receives every scan summary;
  /// `records` reads the producers' scan records and writes this thread's.
  Relay(zmq::context_t& context, zmq::socket_t pull, const Directory& directory, RecordStore& records,
        NativeRoutes& routes, RelaySettings settings, RelayCounters& counters,
        std::function<void(ScanSummary)> report);

  /// The loop; returns when `stop` is set, after reporting the scans still open as closed
  /// unfinished. What one message makes fail is counted (Refusal::kError) and the loop goes on.
  void run(const std::atomic<bool>& stop);

 private:
  /// Reads and handles one message; false if none was waiting.
  bool receive_one();
  void on_info(const zmq::message_t& message);
  void on_data(zmq::message_t* parts);
  /// A native receiver's data message: decoded, its scan opened or found, forwarded under SFSP's header.
  void on_native_data(zmq::message_t* parts);
  /// Opens a native run of the scan of `header` (its routing fixed or taken from NativeRoutes).
  ScanState& open_native_run(const protocol::DataHeader& header);
  /// Routes one checked data message of `scan` to its NodeGroup, or counts it lost.
  void forward(ScanState& scan, const protocol::DataHeader& header, zmq::message_t* parts);
  /// Whether native scan `scan` was requested (scans/<n>/request is in the replica). The record is
  /// written before the producers take the request, so it precedes their data; a replica a moment
  /// behind is waited for, bounded, and never again for a while after a wait that found nothing.
  bool requested(std::uint32_t scan);
  /// Why a native header, the first of its thread in the scan's run, is not the run its producer
  /// thread's scan record describes (another num_frames_this_thread: a stray), or "" (it is, or
  /// no record describes the thread: a receiver's own software writes none). The thread writes its
  /// record before its first header, so a replica a moment behind (a replay's new record) is
  /// waited for as for an info.
  std::string against_record(const protocol::DataHeader& header, std::uint32_t frames);
  /// Whether a producer thread's scan record describes `header`'s thread (sectorflow's producer
  /// daemon writes one before its first header; a receiver's own software writes none).
  bool described(const protocol::DataHeader& header) const;
  /// Waits, bounded and not again for a while after a wait that ended contradicted, for
  /// `contradiction` to find the replica agreeing; returns its last answer.
  std::string settled(const std::function<std::string()>& contradiction);
  /// Why an SFSP info that would open a run, join one, or begin a new one is not the run its producer
  /// thread's scan record describes (another routing or counts: a stray), or "" (it is, or no record
  /// describes the thread yet). The thread writes its record just before its info, so a replica a
  /// moment behind (a replay's new record) is waited for, bounded, and not again for a while after a
  /// wait that ended contradicted.
  std::string against_record(const protocol::InfoMessage& info);
  /// Closes the aborted scans whose producer threads sent their last message and all came.
  void close_aborted_scans();
  /// Closes the native scans with no message for native_idle; first completes those whose threads
  /// not heard from send this member nothing (silent_native_threads).
  void expire_native_scans();
  /// With a tier: marks the native threads of `scan` not heard from whose producer records announce
  /// nothing through this member (a thread sends a member none of its frames when its T and the
  /// scan's members share a factor). Read when the scan falls quiet, not when it opens: the records
  /// of the threads that have not sent here may not be in the replica yet then.
  void silent_native_threads(ScanState& scan);
  /// Sends a native scan's NodeGroups their expected counts: what was forwarded to each.
  void send_closing_counts(ScanState& scan);
  /// Brings the downstream sockets in line with the kvstore after a change.
  void refresh();
  /// Gives each target of `scan` a live downstream if its uid is registered; with `wait`, waits
  /// until the scan's discovery deadline for the missing ones.
  void resolve(ScanState& scan, bool wait);
  std::shared_ptr<Downstream> downstream_for(const std::string& uid);
  /// Sends the expected counts to the targets that have not had them, once all infos are in.
  void send_expected(ScanState& scan);
  void finish_if_complete(ScanState& scan);
  /// Opens a scan in the table, reporting the one it evicts; returns the open scan.
  ScanState& open_scan(ScanState fresh);
  /// Rebuilds the scan of `header` from the producer threads' scan records, or returns null.
  ScanState* recover(const protocol::DataHeader& header);
  /// Makes `target` dead for `scan`, counts it, reports it and writes the relay record at once.
  void declare_dead(ScanState& scan, Target& target, const std::string& why);
  /// Hands a summary to `report_` and writes the relay record (complete only when `closed`).
  void report(ScanState& scan, bool closed, const std::string& note);
  /// Writes the relay record of `scan`; a failure is counted (Refusal::kError), never thrown.
  void write_record(ScanState& scan, bool closed);
  /// Rewrites the records that moved since they were written (the thread is idle): rebuilt scans,
  /// and closed scans whose dead NodeGroups' stragglers were counted lost since (their summaries
  /// are reissued with the final loss).
  void refresh_stale_records();
  /// Remembers a scan closed here, so that its stragglers are counted lost and never rebuild it;
  /// a scan with a dead NodeGroup is kept whole for a while, so they are counted in its record.
  void remember_closed(ScanState scan);

  zmq::context_t& context_;
  zmq::socket_t pull_;
  const Directory& directory_;
  RecordStore& records_;
  NativeRoutes& routes_;
  RelaySettings settings_;
  protocol::NativeExpectations native_expect_;
  RelayCounters& counters_;
  std::function<void(ScanSummary)> report_;
  const std::atomic<bool>* stop_ = nullptr;
  std::uint64_t generation_ = 0;
  zmq::message_t parts_[2];
  std::map<std::string, std::shared_ptr<Downstream>> downstreams_;  ///< by uid
  ScanTable scans_;
  std::set<std::uint32_t> closed_;       ///< scans closed here, bounded (closed_order_)
  std::deque<std::uint32_t> closed_order_;
  /// Closed scans with a dead NodeGroup, whose producers may still send some of its messages
  /// before they see the record: at most max_open_scans, the oldest dropped.
  std::map<std::uint32_t, ScanState> lingering_;
  std::deque<std::uint32_t> lingering_order_;
  bool records_synced_once_ = false;     ///< waited once for the scans/ replica: never again per message
  /// A native run closed here: when, and what each thread's headers announced. A header announcing
  /// the same is its straggler; another count (its producer record agreeing) is a replay's new run.
  struct ClosedNative {
    std::chrono::steady_clock::time_point at;
    std::vector<std::uint32_t> announced;
  };
  std::map<std::uint32_t, ClosedNative> native_closed_;  ///< native scan -> its last closed run
  std::chrono::steady_clock::time_point next_expiry_check_{};
  std::chrono::steady_clock::time_point next_abort_check_{};
  /// Before this, a native scan with no request record is refused without waiting for the record
  /// (a flood of stray scan numbers cannot make the thread wait for each).
  std::chrono::steady_clock::time_point next_request_wait_{};
  std::chrono::steady_clock::time_point next_record_wait_{};  ///< settled()'s wait, like requested()'s
};

}  // namespace sectorflow::aggregator::detail
