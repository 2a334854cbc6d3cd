// Replay: the raw version-5 files of a scan (written by the fallback, or by the detector's own
// receivers) streamed again into the pipeline, so that a scan written to disk can be reduced later.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sectorflow/producer/sector_source.hpp"
#include "sectorflow/protocol/geometry.hpp"
#include "sectorflow/protocol/raw_file.hpp"

namespace sectorflow::producer {

/// Thread t of T replays the records of sector `sector` of scan `scan_number` in `directory`
/// whose probe position p (scan_pos.y * scan_x + scan_pos.x) has p % T == t, whatever thread wrote
/// them, from its whole files and the whole records of its .partial ones (find_replay_files). A record's frame number may carry the detector's counter offset: every record of the
/// sector must have the same first_frame() = frame number - position, which the replayed scan's
/// ScanRequest takes, so that the frames go out under the numbers the files carry. At construction
/// it reads the 16-byte record headers only (one seek per record) to learn its positions; read()
/// then opens only the files that hold some of them.
class ReplaySource : public SectorSource {
 public:
  /// A sector with no raw file of the scan in `directory` replays no frame (it spilled nothing).
  /// Throws ProducerError if a file's scan shape is not scan_x x scan_y, a position lies outside it or occurs twice, or a record's
  /// frame number - position differs from the first record's (one line naming the file and the
  /// record); RawFileError for unreadable or truncated files (naming the file and the record).
  ReplaySource(const std::string& directory, std::uint32_t scan_number, std::uint32_t sector, std::uint32_t scan_x,
               std::uint32_t scan_y, std::uint32_t threads, std::uint32_t thread_id, const protocol::Geometry& geometry);

  /// This thread's positions, in file order.
  std::vector<std::uint32_t> frames() override { return frames_; }
  /// Throws ProducerError if the next record of the files is not at position `frame`.
  void read(std::uint32_t frame, void* out, std::size_t bytes) override;

  /// The files the scan's sector was found in, sorted.
  const std::vector<std::string>& files() const { return files_; }
  /// Frame number - position, the same for every record of the sector (0 if it has none).
  std::uint32_t first_frame() const { return first_frame_; }

 private:
  std::vector<std::string> files_;
  std::vector<std::string> own_files_;  ///< files holding at least one of this thread's frames
  std::vector<std::uint32_t> frames_;
  protocol::Geometry geometry_;
  std::uint32_t threads_;
  std::uint32_t thread_id_;
  std::uint32_t first_frame_ = 0;
  std::size_t next_file_ = 0;
  std::unique_ptr<protocol::RawFileReader> reader_;
};

}  // namespace sectorflow::producer
