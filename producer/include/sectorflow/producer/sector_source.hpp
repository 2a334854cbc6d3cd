// Where a producer thread's sectors come from during one scan. The library knows no detector: a
// receiver program, the daemon or a test plugs in a source (the simulator through GeneratedSource,
// raw files through ReplaySource, the receiver's own buffers through Producer::send).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace sectorflow::producer {

/// One thread's sectors of one scan, by flat probe position p (the Producer sends p as frame number
/// first_frame + p).
class SectorSource {
 public:
  virtual ~SectorSource() = default;
  /// The positions this source will deliver, in delivery order; called once, at scan start,
  /// because the info message (or each native header) announces every message before the first
  /// one is sent.
  virtual std::vector<std::uint32_t> frames() = 0;
  /// Writes the pixels at position `frame` (the next of frames(), in order) into `out` (exactly `bytes`).
  virtual void read(std::uint32_t frame, void* out, std::size_t bytes) = 0;
};

/// Positions 0..n_frames-1 that thread `thread_id` of `threads` sends: p % threads == thread_id.
/// Throws ProducerError if threads is 0 or thread_id >= threads.
std::vector<std::uint32_t> thread_share(std::uint64_t n_frames, std::uint32_t threads, std::uint32_t thread_id);

/// Sectors made on demand by a function (a simulator, a synthetic pattern): the thread's share of
/// the scan minus the sectors `lost` says were lost upstream (those are neither sent nor counted).
class GeneratedSource : public SectorSource {
 public:
  /// Both take the position.
  using Generate = std::function<void(std::uint32_t frame, void* out, std::size_t bytes)>;
  using Lost = std::function<bool(std::uint32_t frame)>;

  /// Throws ProducerError for an empty generate function or a bad thread share.
  GeneratedSource(std::uint64_t n_frames, std::uint32_t threads, std::uint32_t thread_id, Generate generate,
                  Lost lost = {});

  std::vector<std::uint32_t> frames() override;
  void read(std::uint32_t frame, void* out, std::size_t bytes) override;

 private:
  std::uint64_t n_frames_;
  std::uint32_t threads_;
  std::uint32_t thread_id_;
  Generate generate_;
  Lost lost_;
};

}  // namespace sectorflow::producer
