// A counting thread of a NodeGroup: pulls the sectors its receivers route to it (by a hash of the
// frame number, worker_of in envelope.hpp, so every sector of a frame comes here), assembles them
// in its share of the pool (holding the received messages, never copying their pixels:
// frame_assembler.hpp), and counts each frame as soon as it is complete (once the scan's
// thresholds are decided; until then complete frames wait in their slots as the threshold sample).
//
// When the receivers have all said a scan is over (end markers), the frames of the scan still in
// the pool are counted with their missing sectors as zeros and recorded as incomplete, and the
// thread hands its part of the scan to the NodeGroup.
//
// It has one inproc PULL per receiver. Pool full: backpressure. A sector that needs a new slot
// while the pool is full is held back, and its receiver is not read until a slot frees (frames
// complete as the other receivers deliver); through the receivers and ZeroMQ's high-water marks
// the aggregator thread ahead waits too. Frames arrive out of order within a receiver (a receiver
// server's producer threads interleave), so holding back is decided per message, not by a guess
// of where each receiver is. While a sector is held back, a slot is freed by force, in order:
//   1. frames waiting as the threshold sample: the thresholds are decided with the sample so far,
//      and those frames counted (no loss);
//   2. the oldest frame whose missing sectors are all known lost (each producer thread sends its
//      frames in order, so a thread that delivered a later frame will not send this one; a receiver
//      whose end marker came sends nothing more of the scan): counted early as incomplete;
//   3. only if every receiver holds a sector back (the pool is smaller than the frame-order spread)
//      or nothing came for kStallBeforeEviction: the oldest frame, or the newest when the receivers
//      wait for a frame older than all in the pool (a receiver ran ahead of the others). A receiver
//      silent through a whole stall (its producer died) is not waited for again until it delivers.
// 2 and 3 count as evicted_frames. While the thresholds wait, a frame counted early (2, 3) or left
// incomplete at the scan's end joins the sample with the sectors it holds and waits with it: a scan
// of which no frame is ever whole (a receiver sent nothing, a replay of what one receiver spilled)
// is counted from its sectors, not refused for want of a whole frame. A sector that arrives for a frame already counted is dropped and
// counted as late. Size the pool (nodegroup.pool_frames) for the frame-order spread of the upstream.
//
// The last free slot is kept for a frame older than the newest in the pool: when a receiver runs
// ahead past a frame whose sector it lost, the others still get a slot for that frame. It goes to a
// newer frame only when nothing else can move (the same condition as 3). Held messages are placed
// oldest frame first.
//
// With NodeGroupSettings::count off, frames are assembled and released exactly as above but not
// counted: nothing is sampled, nothing waits for thresholds, each frame is recorded with no events.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <zmq.hpp>

#include "sectorflow/consumer/counting/electron_counter.hpp"
#include "sectorflow/consumer/nodegroup/frame_assembler.hpp"
#include "sectorflow/consumer/nodegroup/live_feed.hpp"
#include "sectorflow/consumer/nodegroup/nodegroup_counters.hpp"
#include "sectorflow/consumer/nodegroup/nodegroup_settings.hpp"
#include "sectorflow/consumer/nodegroup/scan_result.hpp"
#include "sectorflow/consumer/nodegroup/threshold_sampler.hpp"

namespace sectorflow::consumer::nodegroup {

namespace detail {
struct Envelope;
}

struct WorkerHooks {
  /// The scan's sampler, shared by the NodeGroup's counting threads.
  std::function<std::shared_ptr<ThresholdSampler>(std::uint32_t scan)> sampler;
  /// Called once per scan with this thread's part (on this thread).
  std::function<void(std::uint32_t scan, ScanResult&& part)> finished;
  /// Called with the frames counted so far (frames only: positions, events, offsets, images,
  /// incomplete frames; no account) when this thread's part holds NodeGroupSettings::drain_events
  /// events; null: never. The account and the frames not handed out go with `finished`.
  std::function<void(std::uint32_t scan, ScanResult&& frames)> counted;
  /// Where each counted frame's kernel values and events go for the live view; null: nowhere.
  LiveFeed* live = nullptr;
  /// The kernels each counted frame is imaged with; null: no virtual images.
  const VirtualImager* imager = nullptr;
};

class CountingWorker {
 public:
  /// How long nothing may come while a sector is held back before a frame is forced out anyway.
  static constexpr std::chrono::milliseconds kStallBeforeEviction{2000};

  /// Binds one inproc PULL per receiver, `endpoint_prefix` + receiver index, and allocates its pool share.
  /// `stall_before_eviction` replaces kStallBeforeEviction (unit tests choose "at once" or "never").
  CountingWorker(zmq::context_t& context, const std::string& endpoint_prefix, const NodeGroupSettings& settings,
                 NodeGroupCounters& counters, WorkerHooks hooks,
                 std::chrono::milliseconds stall_before_eviction = kStallBeforeEviction);
  CountingWorker(const CountingWorker&) = delete;
  CountingWorker& operator=(const CountingWorker&) = delete;

  /// The thread body: runs until `stop` is set.
  void run(const std::atomic<bool>& stop);
  std::size_t pool_slots() const { return assembler_.capacity(); }

 private:
  struct ScanWork {
    std::shared_ptr<ThresholdSampler> sampler;
    std::optional<counting::ElectronCounter> counter;
    std::vector<std::size_t> waiting;  // frames held as the threshold sample
    std::vector<bool> counted;         // by position: counted (or given up), later sectors are late
    std::set<std::uint32_t> ended;     // receivers whose end marker came
    bool ending = false;               // every end marker came; waits for the thresholds
    ScanResult part;
  };

  struct Held {  // a data message whose frame needs a slot the full pool lacks
    zmq::message_t first;
    zmq::message_t payload;
  };

  /// Takes a message from each receiver not held back that has one; false if none had. A `wait`
  /// of zero does not poll (within a burst, a receive that finds a message makes no system call).
  bool read_ready(std::chrono::milliseconds wait);
  /// Takes one message from `receiver` if one is queued; false if none was.
  bool receive(std::uint32_t receiver);
  bool needs_slot(const detail::Envelope& envelope);
  /// Whether a new frame may take a free slot now (see the class comment on the last one).
  bool may_take_slot(const detail::Envelope& envelope) const;
  /// Handles the held messages that may go on, oldest frame first; with `use_reserve`, the oldest
  /// may take the last free slot whatever its frame.
  void place_held(bool use_reserve = false);
  std::pair<std::uint32_t, std::uint32_t> held_frame(std::uint32_t receiver) const;
  bool force_progress();
  void handle(zmq::message_t& first, zmq::message_t* payload);
  /// Takes the sector's payload into its frame (the message moves; its pixels stay where they are).
  void on_data(const detail::Envelope& envelope, zmq::message_t& payload);
  ScanWork& work(std::uint32_t scan);
  bool usable(ScanWork& w);
  void on_complete(ScanWork& w, std::size_t slot);
  void count_slot(ScanWork& w, std::size_t slot, std::vector<std::uint32_t> missing);
  void flush_waiting(ScanWork& w);
  /// Counts the frames waiting as a threshold sample (deciding the thresholds); false if none wait.
  bool decide_samples();
  /// Whether every sector the frame in `slot` lacks is lost: its receiver ended the scan, or the
  /// producer thread that sends it has sent a later frame.
  bool known_incomplete(std::size_t slot) const;
  std::optional<std::size_t> oldest_known_incomplete() const;
  /// The frame to count early when the pool is too small: see the class comment.
  std::size_t victim(std::optional<std::pair<std::uint32_t, std::uint32_t>> wanted) const;
  void evict(std::size_t slot);
  /// Offers the sectors an incomplete frame holds to the undecided sample; true if it now waits with it.
  bool sample_incomplete(ScanWork& w, std::size_t slot);
  std::optional<std::pair<std::uint32_t, std::uint32_t>> oldest_held() const;
  void try_finish(std::uint32_t scan);
  /// Hands the part's counted frames to hooks_.counted once they hold settings_.drain_events events.
  void drain(ScanWork& w);
  void release(std::size_t slot);
  /// Brings the NodeGroup's pool_bytes (and its high-water mark) in line with what this thread holds.
  void publish_pool_bytes();
  void poll_decisions();

  std::vector<zmq::socket_t> pulls_;  // pulls_[r]: from receiver r
  std::vector<std::optional<Held>> held_;  // per receiver
  // Per receiver, per producer thread (frame % threads): the last (scan, frame) it delivered here.
  std::vector<std::vector<std::optional<std::pair<std::uint32_t, std::uint32_t>>>> stream_last_;
  std::optional<std::chrono::steady_clock::time_point> stalled_since_;
  std::vector<bool> silent_;  // per receiver: nothing came from it through a whole stall, nor since
  std::chrono::milliseconds stall_before_eviction_;
  std::vector<zmq::pollitem_t> items_;     // poll scratch: the receivers read
  std::vector<std::uint32_t> item_receivers_;
  const NodeGroupSettings& settings_;
  NodeGroupCounters& counters_;
  WorkerHooks hooks_;
  FrameAssembler assembler_;
  std::map<std::uint32_t, ScanWork> scans_;
  std::vector<std::uint32_t> events_;  // scratch of one frame's events
  std::vector<float> values_;          // scratch of one frame's kernel values (VirtualImager::image)
  std::size_t published_bytes_ = 0;    // this thread's share of counters_.pool_bytes
};

}  // namespace sectorflow::consumer::nodegroup
