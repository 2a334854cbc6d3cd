#include "sectorflow/producer/sector_source.hpp"

#include <string>
#include <utility>

#include "sectorflow/producer/errors.hpp"

namespace sectorflow::producer {

std::vector<std::uint32_t> thread_share(std::uint64_t n_frames, std::uint32_t threads, std::uint32_t thread_id) {
  if (threads == 0 || thread_id >= threads) {
    throw ProducerError("producer thread " + std::to_string(thread_id) + " of " + std::to_string(threads) +
                        ": expected a thread id from 0 to threads - 1 and at least one thread");
  }
  std::vector<std::uint32_t> frames;
  frames.reserve(static_cast<std::size_t>(n_frames / threads + 1));
  for (std::uint64_t frame = thread_id; frame < n_frames; frame += threads) {
    frames.push_back(static_cast<std::uint32_t>(frame));
  }
  return frames;
}

GeneratedSource::GeneratedSource(std::uint64_t n_frames, std::uint32_t threads, std::uint32_t thread_id,
                                 Generate generate, Lost lost)
    : n_frames_(n_frames), threads_(threads), thread_id_(thread_id), generate_(std::move(generate)),
      lost_(std::move(lost)) {
  if (!generate_) throw ProducerError("GeneratedSource: no generate function; pass one that fills a sector");
  thread_share(0, threads_, thread_id_);  // validates the share
}

std::vector<std::uint32_t> GeneratedSource::frames() {
  std::vector<std::uint32_t> frames = thread_share(n_frames_, threads_, thread_id_);
  if (lost_) {
    std::vector<std::uint32_t> kept;
    kept.reserve(frames.size());
    for (const std::uint32_t frame : frames) {
      if (!lost_(frame)) kept.push_back(frame);
    }
    frames = std::move(kept);
  }
  return frames;
}

void GeneratedSource::read(std::uint32_t frame, void* out, std::size_t bytes) { generate_(frame, out, bytes); }

}  // namespace sectorflow::producer
