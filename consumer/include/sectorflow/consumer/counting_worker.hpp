// A counting thread of a NodeGroup: pulls the sectors its receivers route to it (frame number
// mod counting threads, so every sector of a frame comes here), assembles them in its share of
// the pool, and counts each frame as soon as it is complete (once the scan's thresholds are
// decided; until then complete frames wait in their slots as the threshold sample).
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
// of where each receiver is. A slot is freed by force only when no progress is possible: every
// receiver holds a sector back, or those that do not have been silent for kStallBeforeEviction
// (a dead or lossy upstream; such a receiver is then not waited for again until it delivers).
// Forcing first decides the thresholds with the sample so far if complete frames wait for them;
// otherwise it counts a frame early, as incomplete (evicted_frames): the oldest in the pool
// (lowest scan, frame) when every receiver has gone past it, or the newest when the receivers wait
// for a frame older than all in the pool (one receiver ran ahead past a frame whose sector it lost). A sector that arrives for a frame already counted is dropped and counted as
// late. Size the pool (nodegroup.pool_frames) for the frame-order spread of the upstream.
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

#include "sectorflow/consumer/electron_counter.hpp"
#include "sectorflow/consumer/frame_assembler.hpp"
#include "sectorflow/consumer/nodegroup_counters.hpp"
#include "sectorflow/consumer/nodegroup_settings.hpp"
#include "sectorflow/consumer/scan_result.hpp"
#include "sectorflow/consumer/threshold_sampler.hpp"

namespace sectorflow::consumer {

namespace detail {
struct Envelope;
}

struct WorkerHooks {
  /// The scan's sampler, shared by the NodeGroup's counting threads.
  std::function<std::shared_ptr<ThresholdSampler>(std::uint32_t scan)> sampler;
  /// Called once per scan with this thread's part (on this thread).
  std::function<void(std::uint32_t scan, ScanResult&& part)> finished;
};

class CountingWorker {
 public:
  /// How long the receivers not holding a sector back may stay silent before a frame is forced out.
  static constexpr std::chrono::milliseconds kStallBeforeEviction{1000};

  /// Binds one inproc PULL per receiver, `endpoint_prefix` + receiver index, and allocates its pool share.
  CountingWorker(zmq::context_t& context, const std::string& endpoint_prefix, const NodeGroupSettings& settings,
                 NodeGroupCounters& counters, WorkerHooks hooks);
  CountingWorker(const CountingWorker&) = delete;
  CountingWorker& operator=(const CountingWorker&) = delete;

  /// The thread body: runs until `stop` is set.
  void run(const std::atomic<bool>& stop);
  std::size_t pool_bytes() const { return assembler_.allocated_bytes(); }
  std::size_t pool_slots() const { return assembler_.capacity(); }

 private:
  struct ScanWork {
    std::shared_ptr<ThresholdSampler> sampler;
    std::optional<ElectronCounter> counter;
    std::vector<std::size_t> waiting;  // complete frames held as the threshold sample
    std::vector<bool> counted;         // by position: counted (or given up), later sectors are late
    std::set<std::uint32_t> ended;     // receivers whose end marker came
    bool ending = false;               // every end marker came; waits for the thresholds
    ScanResult part;
  };

  struct Held {  // a data message whose frame needs a slot the full pool lacks
    zmq::message_t first;
    zmq::message_t payload;
  };

  bool read_ready(std::chrono::milliseconds wait);
  void receive(std::uint32_t receiver);
  bool needs_slot(const detail::Envelope& envelope);
  void place_held();
  bool force_progress();
  void handle(zmq::message_t& first, zmq::message_t* payload);
  void on_data(const detail::Envelope& envelope, const void* payload);
  ScanWork& work(std::uint32_t scan);
  bool usable(ScanWork& w);
  void on_complete(ScanWork& w, std::size_t slot);
  void count_slot(ScanWork& w, std::size_t slot, std::vector<std::uint32_t> missing);
  void flush_waiting(ScanWork& w);
  /// Frees a slot for the frame `wanted` (the oldest held back): decides a waiting sample, else
  /// counts a frame early.
  void make_room(std::optional<std::pair<std::uint32_t, std::uint32_t>> wanted);
  std::optional<std::pair<std::uint32_t, std::uint32_t>> oldest_held() const;
  void try_finish(std::uint32_t scan);
  void release(std::size_t slot);
  void poll_decisions();

  std::vector<zmq::socket_t> pulls_;  // pulls_[r]: from receiver r
  std::vector<std::optional<Held>> held_;  // per receiver
  std::vector<bool> silent_;               // per receiver: silent through a stall, not waited for
  std::optional<std::chrono::steady_clock::time_point> stalled_since_;
  std::vector<zmq::pollitem_t> items_;     // poll scratch: the receivers read
  std::vector<std::uint32_t> item_receivers_;
  const NodeGroupSettings& settings_;
  NodeGroupCounters& counters_;
  WorkerHooks hooks_;
  FrameAssembler assembler_;
  std::map<std::uint32_t, ScanWork> scans_;
  std::vector<std::uint32_t> events_;  // scratch of one frame's events
};

}  // namespace sectorflow::consumer
