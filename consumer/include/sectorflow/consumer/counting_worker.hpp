// A counting thread of a NodeGroup: pulls the sectors its receivers route to it (frame number
// mod counting threads, so every sector of a frame comes here), assembles them in its share of
// the pool, and counts each frame as soon as it is complete (once the scan's thresholds are
// decided; until then complete frames wait in their slots as the threshold sample).
//
// When the receivers have all said a scan is over (end markers), the frames of the scan still in
// the pool are counted with their missing sectors as zeros and recorded as incomplete, and the
// thread hands its part of the scan to the NodeGroup.
//
// It has one inproc PULL per receiver. Pool full: backpressure. The thread reads only from the
// receivers that are behind: whose sector is missing in a frame of the pool newer than the last
// frame that receiver delivered (frames come about in order per aggregator thread; the others wait,
// and through their receivers and ZeroMQ's high-water marks, so does the aggregator thread ahead).
// Only when such a message needs a new slot anyway (a sector lost upstream, or frames sent far out
// of order) is a slot freed at once: if complete frames are waiting for thresholds, the thresholds
// are decided with the sample so far; otherwise the oldest frame (lowest scan, frame) is counted
// early as incomplete (evicted_frames): the oldest frame lacking the sector that came (the
// receiver has moved past it, so its sector was lost), or else the oldest frame. A sector that arrives for a frame already counted is
// dropped and counted as late. Size the pool (nodegroup.pool_frames) for the frame-order spread
// within one aggregator thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
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

  void handle(zmq::message_t& first, zmq::message_t* payload);
  void on_data(const detail::Envelope& envelope, const void* payload);
  ScanWork& work(std::uint32_t scan);
  bool usable(ScanWork& w);
  void on_complete(ScanWork& w, std::size_t slot);
  void count_slot(ScanWork& w, std::size_t slot, std::vector<std::uint32_t> missing);
  void flush_waiting(ScanWork& w);
  /// Frees a slot; `sector` is the sector that needs one (or none when the pool holds only samples).
  void make_room(std::optional<std::uint32_t> sector);
  void try_finish(std::uint32_t scan);
  void release(std::size_t slot);
  void poll_decisions();

  std::vector<zmq::socket_t> pulls_;  // pulls_[r]: from receiver r
  std::vector<std::pair<std::uint32_t, std::uint32_t>> last_;  // per receiver: (scan, frame) last delivered
  const NodeGroupSettings& settings_;
  NodeGroupCounters& counters_;
  WorkerHooks hooks_;
  FrameAssembler assembler_;
  std::map<std::uint32_t, ScanWork> scans_;
  std::vector<std::uint32_t> events_;  // scratch of one frame's events
};

}  // namespace sectorflow::consumer
