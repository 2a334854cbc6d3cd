#include "sectorflow/producer/replay_source.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>

#include "sectorflow/producer/errors.hpp"
#include "sectorflow/protocol/errors.hpp"

namespace sectorflow::producer {
namespace {

struct FileCloser {
  void operator()(std::FILE* file) const { std::fclose(file); }
};

std::string scan_text(std::uint32_t scan, std::uint32_t sector) {
  return "replay of scan " + std::to_string(scan) + ", sector " + std::to_string(sector);
}

}  // namespace

ReplaySource::ReplaySource(const std::string& directory, std::uint32_t scan_number, std::uint32_t sector,
                           std::uint32_t scan_x, std::uint32_t scan_y, std::uint32_t threads,
                           std::uint32_t thread_id, const protocol::Geometry& geometry)
    : geometry_(geometry), threads_(threads), thread_id_(thread_id) {
  thread_share(0, threads, thread_id);  // validates the share
  // A .partial file's whole records are sectors its thread counted spilled: they are replayed too.
  for (const std::string& path : protocol::find_replay_files(directory, scan_number)) {
    bool partial = false;
    const auto name = protocol::parse_replay_file_name(path, partial);
    if (name && name->sector == sector) files_.push_back(path);
  }
  // No file of this receiver is a replay of nothing, not an error: a receiver that spilled nothing
  // of a scan (every sector of it sent) has none, and the other receivers' sectors still count. Its
  // threads announce zero frames; the account places the scan's sectors "not in the raw files".
  const std::uint64_t n_frames = std::uint64_t{scan_x} * scan_y;
  std::vector<bool> seen(n_frames, false);
  std::optional<std::uint32_t> first_frame;  // of the first record read
  std::string first_path;
  const std::uint64_t record_bytes = protocol::kRawHeaderBytes + geometry.sector_bytes();
  // Headers only: seek from record to record instead of reading every payload twice.
  for (const std::string& path : files_) {
    std::unique_ptr<std::FILE, FileCloser> file(std::fopen(path.c_str(), "rb"));
    if (!file) throw protocol::RawFileError(path + ": cannot open: " + std::strerror(errno));
    bool partial = false;
    const protocol::RawFileName name = *protocol::parse_replay_file_name(path, partial);
    // Only a .partial file may end in a piece of a record (its writer was cut short): not a sector.
    std::uint64_t whole = std::numeric_limits<std::uint64_t>::max();
    if (partial) {
      std::error_code size_error;
      const std::uint64_t bytes = std::filesystem::file_size(path, size_error);
      if (size_error) throw protocol::RawFileError(path + ": cannot read its size: " + size_error.message());
      whole = bytes / record_bytes;
    }
    bool own = false;
    unsigned char raw[protocol::kRawHeaderBytes];
    for (std::uint64_t record = 0; record < whole; ++record) {
      if (std::fseek(file.get(), static_cast<long>(record * record_bytes), SEEK_SET) != 0) break;
      const std::size_t got = std::fread(raw, 1, sizeof raw, file.get());
      if (got == 0) break;
      if (got != sizeof raw) {
        throw protocol::RawFileError(path + ": record " + std::to_string(record) + " at byte " +
                                     std::to_string(record * record_bytes) + " is truncated");
      }
      const protocol::DataHeader header = protocol::decode_raw_header(raw, name);
      if (header.scan_x != scan_x || header.scan_y != scan_y) {
        throw ProducerError(scan_text(scan_number, sector) + ": " + path + " holds a " + std::to_string(header.scan_x) +
                            " x " + std::to_string(header.scan_y) + " scan, the request says " +
                            std::to_string(scan_x) + " x " + std::to_string(scan_y));
      }
      // Built only on the way to an error: this runs once per record.
      const auto at = [&] { return scan_text(scan_number, sector) + ": " + path + " record " + std::to_string(record); };
      if (header.position_x >= scan_x || header.position_y >= scan_y) {
        throw ProducerError(at() + " has position (" + std::to_string(header.position_x) + ", " +
                            std::to_string(header.position_y) + "), outside the scan");
      }
      const std::uint64_t position = header.position();
      // The files may carry the detector's counter: only frame - position must hold still.
      const std::uint32_t offset = header.frame_number - static_cast<std::uint32_t>(position);
      if (header.frame_number < position || (first_frame && offset != *first_frame)) {
        throw ProducerError(
            at() + " has frame " + std::to_string(header.frame_number) + " at position " + std::to_string(position) +
            (first_frame ? ", but the records of " + first_path + " have frame - position = " +
                               std::to_string(*first_frame)
                         : ", below its position") +
            "; replay needs frame = first frame + position, one first frame per scan");
      }
      first_frame = offset;
      if (first_path.empty()) first_path = path;
      if (seen[position]) {
        throw ProducerError(scan_text(scan_number, sector) + ": position " + std::to_string(position) +
                            " occurs twice (again in " + path + " record " + std::to_string(record) + ")");
      }
      seen[position] = true;
      if (position % threads == thread_id) {
        frames_.push_back(static_cast<std::uint32_t>(position));
        own = true;
      }
    }
    if (own) own_files_.push_back(path);
  }
  first_frame_ = first_frame.value_or(0);
}

void ReplaySource::read(std::uint32_t frame, void* out, std::size_t bytes) {
  protocol::DataHeader header;
  for (;;) {
    if (!reader_) {
      if (next_file_ >= own_files_.size()) {
        throw ProducerError("replay: frame " + std::to_string(frame) + " asked for after the end of the files");
      }
      reader_ = std::make_unique<protocol::RawFileReader>(own_files_[next_file_++], geometry_);
    }
    // Records of other threads are read into `out` and overwritten: it is the one buffer at hand.
    while (reader_->next(header, out, bytes)) {
      const std::uint64_t position = header.position();
      if (position % threads_ != thread_id_) continue;
      if (position != frame || header.frame_number - first_frame_ != position) {
        throw ProducerError("replay: " + reader_->path() + " holds frame " + std::to_string(header.frame_number) +
                            " at position " + std::to_string(position) + " where position " + std::to_string(frame) +
                            " (frame " + std::to_string(std::uint64_t{first_frame_} + frame) +
                            ") was expected (the file changed?)");
      }
      return;
    }
    reader_.reset();
  }
}

}  // namespace sectorflow::producer
