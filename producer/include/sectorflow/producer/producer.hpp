// One producer thread (protocol/SPEC.md, "A scan", steps 1 to 3): per scan it fixes the routing list,
// decides once between streaming and fallback, records the decision in its kvstore status, then
// sends its data messages on a PUSH socket to aggregator thread r, or writes its sectors to raw
// version-5 files in the fallback directory.
//
// Positions and frame numbers: a scan's frame at flat probe position p (scan-major) carries the
// frame number f = request.first_frame + p, the detector's frame counter. Inside, everything is
// indexed by position: thread t of a receiver's T threads owns the positions p with p % T == t,
// sources deliver positions, and a scan announces (and refuses anything beyond) the positions its
// source lists at scan start. Everything outside carries f: the data header's frame_number, the
// raw file records, routing (routing[f % n]) with the info message's counts and the scan record's.
// send() takes f, as a receiver program has the detector's counter in hand.
//
// Dialects (options.wire; protocol/SPEC.md, "Two dialects"): kSectorflow sends the info message
// and then data messages under SFSP's header; kNative sends no info message and each data message
// under the 4D Camera receivers' native header, whose num_frames_this_thread is the number of
// positions the thread announced. Sectors spilled later (send timeout, dead NodeGroup) were still
// announced there: the relay thread then closes the scan after [aggregator] native_scan_idle_s
// instead of at its last message, and the scan records account for the spilled sectors.
//
// Sending never drops: the PUSH socket blocks at send_hwm. The blocking send waits in slices of
// kStopCheckMs to notice stop() and dead NodeGroups; the same message is retried. Backpressure is
// bounded: a send (info or data) blocked for longer than send_timeout_ms means the aggregator is
// not taking the scan, and the thread spills that sector and every remaining one of the scan to a
// raw file in fallback_dir (one warning line; nothing is both sent and spilled). Payloads travel
// zero-copy: ZeroMQ takes the caller's buffer and calls its release function once the message has
// left (or was discarded at close); without a release function the payload is copied.
//
// Dead NodeGroups: while streaming, the thread watches scans/<n>/aggregator/t<R> in its kvstore
// replica (RelayScanRecord, written by relay thread R as soon as it declares a NodeGroup dead for
// the scan) and spills the sectors routed to a dead NodeGroup instead of sending them, while it
// streams the others.
//
// Status: status/producer/r<R>t<T> (ServiceStatus) goes idle -> streaming | writing-to-disk ->
// finished (or error), with scan, messages, bytes and the extra fields mode ("streaming" or
// "fallback"), nodegroups (routing size), fallback_dir (fallback only), spilled and error.
//
// Scan record: scans/<n>/producer/r<R>t<T> (ProducerScanRecord, set_once with ttl
// scan_record_ttl_s), written at begin_scan before the info message (routing and counts, which a
// restarted aggregator recovers the scan from), when spilling starts, with the sectors sent and
// spilled so far at most every status_interval_ms while the scan's sectors move (with the status:
// one key each per thread, overwritten, never added), at end_scan, and when the thread fails or
// reports an error.
//
// Threads: a Producer is used by one thread at a time, except stop(), which any thread may call.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sectorflow/producer/options.hpp"
#include "sectorflow/producer/sector_source.hpp"
#include "sectorflow/producer/sibling_gate.hpp"
#include "sectorflow/protocol/data_message.hpp"
#include "sectorflow/protocol/scan_records.hpp"
#include "sectorflow/protocol/service_state.hpp"

namespace sectorflow::kvstore {
class Client;
}

namespace sectorflow::producer {

inline constexpr int kStopCheckMs = 100;

/// The scan a producer thread is asked to run.
struct ScanRequest {
  std::uint32_t scan_number = 0;
  std::uint32_t scan_x = 0;
  std::uint32_t scan_y = 0;
  /// The detector's frame counter at position 0: position p carries frame number first_frame + p,
  /// which must fit a uint32 for every position of the scan.
  std::uint32_t first_frame = 0;
  /// The routing list (sorted UIDs; empty = fallback), as fixed by `sectorflow acquire`. nullopt:
  /// read the NodeGroups from the producer's kvstore replica at scan start.
  std::optional<std::vector<std::string>> routing;
  /// The members of the aggregation tier that carry the scan (ascending, each below the number of
  /// aggregator endpoints): frame f goes to member tier[f % size]. Empty: every member.
  std::vector<std::uint32_t> tier;
};

/// Throws ProducerError ("<where>: first frame F + N positions - 1 exceeds the largest frame
/// number, 2^32 - 1") unless every frame number first_frame + p of a scan of `positions` positions
/// fits the uint32 of the wire and the raw files. begin_scan checks it; a daemon checks a request
/// with it before its threads start, so that the refusal is recorded like any refused request.
void check_first_frame(const std::string& where, std::uint32_t first_frame, std::uint64_t positions);

enum class Mode { kStreaming, kFallback };

/// "streaming" or "fallback".
const char* to_string(Mode mode);

/// What begin_scan decided; fixed for the whole scan.
struct ScanDecision {
  std::uint32_t scan_number = 0;
  Mode mode = Mode::kFallback;
  std::vector<std::string> routing;               ///< empty in fallback
  std::map<std::string, std::uint64_t> counts;    ///< the info messages' counts by f, over the tier (streaming)
  /// With a tier of k > 1 members, each member's info counts at [m * routing.size() + g]; else empty.
  std::vector<std::uint64_t> tier_counts;
  std::vector<std::uint32_t> tier;                ///< the members that carry the scan (streaming)
  std::uint64_t announced = 0;                    ///< messages (or records) this thread will send
  std::string file;                               ///< the raw file (fallback)
  std::uint64_t owned = 0;                        ///< positions p of the scan with p % threads == thread
  std::uint64_t lost_upstream = 0;                ///< owned but not announced (never reached the producer)
};

/// What a scan did.
struct ScanResult {
  ScanDecision decision;
  std::uint64_t messages = 0;  ///< data messages sent plus records written (sent + spilled)
  std::uint64_t bytes = 0;     ///< payload bytes sent or written
  std::uint64_t sent = 0;      ///< data messages handed to the aggregator's socket
  std::uint64_t spilled = 0;   ///< records in the raw file (fallback, or spilled while streaming)
  std::string spill_file;      ///< that file; "" if none
  double seconds = 0.0;        ///< from begin_scan to end_scan
};

/// Called with the data pointer and hint once ZeroMQ no longer needs the payload (zmq_free_fn).
using ReleaseFn = void (*)(void* data, void* hint);

class Producer {
 public:
  /// Connects the PUSH socket (when an endpoint is given) and publishes the idle status. `kvstore`
  /// may be null (no status; every scan then needs its routing); it must outlive the Producer.
  /// Throws ProducerError for bad options (thread_id >= threads, geometry, send_hwm < 1).
  Producer(ProducerOptions options, kvstore::Client* kvstore);
  ~Producer();
  Producer(const Producer&) = delete;
  Producer& operator=(const Producer&) = delete;

  const ProducerOptions& options() const { return options_; }

  /// Starts a scan: fixes the routing, decides streaming or fallback, publishes the status, then
  /// sends the info message (sectorflow wire; it may block at the high-water mark) or creates the
  /// raw file. `positions` are the flat probe positions this thread will send, each once (a
  /// source's frames()). Throws ProducerError for an empty scan shape, frame numbers past 2^32 - 1
  /// (first_frame too large), a scan already running, a position outside the scan or not this
  /// thread's, a duplicate position, a routing list that is not sorted, no routing and no kvstore,
  /// a stream with no aggregator endpoint; protocol::RawFileError if the raw file cannot be created.
  ScanDecision begin_scan(const ScanRequest& request, const std::vector<std::uint32_t>& positions);

  /// Sends (or writes, or spills) the announced sector of frame number `frame_number` (the
  /// detector's counter: request.first_frame + its position). With `release`, ZeroMQ sends `payload` in place and
  /// calls release(payload, hint) when done with it (in fallback: after the write, before send
  /// returns); without, the payload is copied. On an exception the caller keeps the buffer.
  /// Blocks at the high-water mark. Throws ProducerError for a payload that is not one sector, a
  /// sector other than this receiver's, a frame outside the scan's frame numbers, not announced or
  /// already sent, no scan running;
  /// ProducerStopped after stop().
  void send(std::uint32_t frame_number, std::uint32_t sector, const void* payload, std::size_t bytes,
            ReleaseFn release = nullptr, void* hint = nullptr);

  /// Ends the scan: closes the raw file, publishes "finished" with the totals. Throws
  /// ProducerError (and publishes "error") if fewer messages were sent than announced.
  ScanResult end_scan();

  /// A whole scan from a source: begin_scan(request, source.frames()), then stream(). Publishes
  /// "error" with the message and rethrows if anything fails.
  ScanResult run_scan(const ScanRequest& request, SectorSource& source, SiblingGate* gate = nullptr);

  /// After begin_scan(request, positions): every position read from `source` into a pooled buffer
  /// and sent zero-copy as frame first_frame + position (the buffer returns to the pool when ZeroMQ
  /// releases it), then end_scan(). With `gate` (shared by the receiver's threads of this scan),
  /// each position first waits until it is within the gate's lead of the slowest sibling; the
  /// thread is finished in the gate however stream() ends. Throws ProducerStopped if stop() came
  /// while it waited.
  ScanResult stream(SectorSource& source, const std::vector<std::uint32_t>& positions, SiblingGate* gate = nullptr);

  /// Publishes state "error" for `scan_number` with `error` (e.g. its source could not be opened,
  /// or the request was refused) in the status and the scan record, so that whoever waits for the
  /// scan learns why this thread will not run it. With the scan shape, the record says how many
  /// sectors the thread owned (all unaccounted).
  void report_error(std::uint32_t scan_number, const std::string& error, std::uint32_t scan_x = 0,
                    std::uint32_t scan_y = 0);

  /// The scan record last written (or that would have been, without a kvstore).
  protocol::ProducerScanRecord record() const;

  /// Interrupts a blocked or running scan from any thread: send and run_scan throw
  /// ProducerStopped. Messages already handed to ZeroMQ are still delivered within linger_ms.
  void stop();
  bool stopped() const { return stop_.load(); }
  /// Aborts scan `scan_number` (sectorflow abort) from any thread, whether it runs now or starts
  /// later: send and stream throw ProducerStopped naming the abort, and the thread's record says
  /// "error" with what it sent and spilled before. Other scans are not touched.
  void abort_scan(std::uint32_t scan_number);

  /// Totals of the scan in progress (or of the last one).
  std::uint64_t messages() const { return messages_; }
  std::uint64_t bytes() const { return bytes_; }

 private:
  struct Impl;
  void publish(protocol::ServiceState state, const std::string& error = {});
  /// Writes the scan record in `state` with the counts so far (and publishes nothing else).
  void write_record(protocol::ServiceState state, const std::string& error = {});
  void fail(const std::string& error);
  /// Streaming through tier member `member` stops for the rest of the scan (the other members'
  /// streams go on): warns, opens the spill file, records it.
  void start_spilling(const std::string& why, std::size_t member);
  /// Opens the spill file if it is not open yet.
  void open_spill_file();
  /// Writes one accepted sector to the raw file and releases the payload; fails the thread if it cannot.
  void spill(const protocol::DataHeader& header, const void* payload, std::size_t bytes, ReleaseFn release,
             void* hint);
  /// Re-reads the tier's relay records of this receiver if the replica changed; true if the
  /// NodeGroup of frame number `frame_number` (routing[f % n], as the aggregator routes) is dead at
  /// the frame's member (f % members).
  bool routed_to_dead(std::uint32_t frame_number);
  /// Takes the NodeGroups that member `member`'s relay record declares dead (logged once each).
  void note_dead(std::size_t member);
  /// Sends the scan's info message to member `member` (its part of the counts); spills that
  /// member's part of the scan after a send timeout.
  void send_info(std::size_t member);
  /// The tier member frame `frame_number` goes through: tier[f % size].
  std::size_t member_of(std::uint32_t frame_number) const;
  void warn(const std::string& line) const;
  /// stop() came, or an abort_scan() of the scan in progress.
  bool halted() const { return stop_.load() || aborted_scan_.load() == std::int64_t{scan_}; }
  /// Why halted() is true, for the error and the record.
  std::string halt_reason() const;

  ProducerOptions options_;
  kvstore::Client* kvstore_;
  std::atomic<bool> stop_{false};
  std::atomic<std::int64_t> aborted_scan_{-1};  // the last scan abort_scan() named
  std::uint64_t messages_ = 0;
  std::uint64_t bytes_ = 0;
  std::uint32_t scan_ = 0;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sectorflow::producer
