// Raw fallback files (SPEC.md, "Raw fallback files"): the 4D Camera's version-5 format, which stempy
// reads. When no NodeGroup is registered, producers write a scan here instead of streaming it,
// and replay it later from here.
//
// One file per sector and producer thread, named data_scan{scan:010d}_module{sector}_{thread}.data,
// holding records back to back, each a 16-byte little-endian header and then the sector's pixels
// (C order, exactly Geometry::sector_bytes() bytes):
//
//   offset  0  uint32  scan_number
//   offset  4  uint32  frame_number   (the detector's frame counter: first_frame + flat position)
//   offset  8  uint16  scan_size x    (probe positions per row)
//   offset 10  uint16  scan_size y    (rows of probe positions)
//   offset 12  uint16  scan_pos x
//   offset 14  uint16  scan_pos y
//
// stempy places module m at frame rows m * sector_rows (full-width sectors, as on the 4D Camera)
// and the record at probe position scan_pos.y * scan_size.x + scan_pos.x, whatever its frame
// number (a counter that does not start at 0 is fine). The sector and thread of a record are those
// of its file; the header does not carry them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sectorflow/protocol/data_message.hpp"
#include "sectorflow/protocol/geometry.hpp"

namespace sectorflow::protocol {

inline constexpr std::size_t kRawHeaderBytes = 16;
/// Largest scan side and position: the header stores them as uint16.
inline constexpr std::uint32_t kRawMaxScanSide = 65535;
/// Appended to the final name while a raw file is written, and when it could not be completed.
inline constexpr const char* kRawWritingSuffix = ".writing";
inline constexpr const char* kRawPartialSuffix = ".partial";

/// What a raw file's name says: data_scan{scan_number:010d}_module{sector}_{thread_id}.data.
struct RawFileName {
  std::uint32_t scan_number = 0;
  std::uint32_t sector = 0;
  std::uint32_t thread_id = 0;

  bool operator==(const RawFileName& other) const;
};

/// The file name (no directory) of a scan's sector written by one producer thread.
std::string raw_file_name(const RawFileName& name);

/// Parses a file name (a directory part is ignored); nullopt unless it follows the pattern.
std::optional<RawFileName> parse_raw_file_name(const std::string& path);

/// The raw files of `scan_number` in `directory` (not recursive), as paths sorted by sector and
/// then thread. Throws RawFileError if the directory cannot be listed.
std::vector<std::string> find_raw_files(const std::string& directory, std::uint32_t scan_number);

/// What a replay reads of a scan: its whole raw files (find_raw_files) and the incomplete ones a
/// writer left as <name>.partial or <name>.<k>.partial, whose whole records are sectors the
/// producer counted spilled (SPEC.md, "Raw fallback files"). Sorted by sector, thread, then name.
/// Throws RawFileError if the directory cannot be listed.
std::vector<std::string> find_replay_files(const std::string& directory, std::uint32_t scan_number);

/// Parses a raw file's name, or a .partial one's (the name it would have had when whole); sets
/// `partial` accordingly. nullopt unless it follows one of the patterns.
std::optional<RawFileName> parse_replay_file_name(const std::string& path, bool& partial);

/// Encodes the 16-byte record header of `header` (its sector and thread_id are not stored).
/// Throws RawFileError if the scan shape or position does not fit the format's uint16 fields.
void encode_raw_header(const DataHeader& header, unsigned char* out);

/// Decodes a 16-byte record header; `name` supplies the sector and thread id. No validation.
DataHeader decode_raw_header(const unsigned char* in, const RawFileName& name);

/// Appends records to a new raw file that carries its final name only once it is whole: it is
/// written under a temporary name (final name + kRawWritingSuffix) and renamed to the final name by
/// a successful close(). A file that could not be completed (a write or close failed, or it was
/// abandoned: the writer was stopped, its thread failed, or it was destroyed while open) is renamed
/// to final name + kRawPartialSuffix instead. Neither name matches the raw-file pattern, so
/// find_raw_files and stempy's file patterns never take an incomplete file for a whole one; replay
/// (find_replay_files) takes a .partial file's whole records, which its writer counted spilled.
/// The final name is never overwritten, nor an earlier .partial.
class RawFileWriter {
 public:
  /// Creates `directory` if needed and the file data_scan..._module{sector}_{thread_id}.data in it
  /// (under its temporary name). Throws RawFileError naming the path and errno text if it cannot,
  /// including when the final file already exists (raw files are never overwritten) or the
  /// temporary one does (another writer of the same file runs, or one died: move it away).
  RawFileWriter(const std::string& directory, std::uint32_t scan_number, std::uint32_t sector,
                std::uint32_t thread_id, const Geometry& geometry);
  /// abandon() if still open: a file nobody closed is not whole.
  ~RawFileWriter();
  RawFileWriter(RawFileWriter&& other) noexcept;
  RawFileWriter& operator=(RawFileWriter&& other) noexcept;
  RawFileWriter(const RawFileWriter&) = delete;
  RawFileWriter& operator=(const RawFileWriter&) = delete;

  /// Appends one record. Throws RawFileError if the header's scan number or sector is not this
  /// file's, its scan shape differs from the first record's or does not fit uint16, its position
  /// lies outside the scan, the payload is not exactly one sector, the file is closed, or the
  /// write fails (path, byte offset and errno text in the message). Only a failed write spoils the
  /// file (failed()); a refused record leaves it as it was.
  void write(const DataHeader& header, const void* payload, std::size_t payload_bytes);

  /// Hands every record written so far to the operating system.
  void flush();

  /// Flushes, closes and gives the file its final name; further writes throw. Idempotent. If a
  /// write failed earlier, or the flush, close or rename fails, the file is renamed to its
  /// .partial name instead and RawFileError is thrown naming it.
  void close();

  /// Ends an incomplete file: flushes what it can, closes it and renames it to its .partial name
  /// (removes it if it holds no whole record). Never throws; returns current_path(). Idempotent;
  /// does nothing to a file already closed.
  std::string abandon() noexcept;

  bool is_open() const { return fd_ >= 0; }
  /// The final name, which the file carries only once whole.
  const std::string& path() const { return path_; }
  /// Where the file is now: the temporary name while open, the final name after a successful
  /// close(), the .partial name after abandon() or a failed close() ("" if removed, or if the
  /// rename failed the temporary name).
  const std::string& current_path() const { return current_; }
  /// A write failed, or the file was abandoned or could not be closed: it is not whole.
  bool failed() const { return failed_; }
  std::uint64_t records() const { return records_; }
  /// Whole records in the file: records() once closed, fewer when a write failed or records were
  /// still buffered when it was abandoned.
  std::uint64_t records_in_file() const;
  /// Bytes of the records written so far (the file's size once flushed).
  std::uint64_t bytes_written() const { return bytes_; }

 private:
  void write_all(const void* data, std::size_t size);
  /// Renames the closed temporary file to its .partial name (or removes it if empty).
  void finish_partial() noexcept;

  std::string path_;
  std::string writing_;  ///< the temporary name
  std::string current_;
  Geometry geometry_;
  RawFileName name_;
  int fd_ = -1;
  bool failed_ = false;
  std::vector<unsigned char> buffer_;
  std::size_t buffered_ = 0;
  std::uint64_t flushed_ = 0;  ///< bytes already in the file
  std::uint64_t records_ = 0;
  std::uint64_t bytes_ = 0;
  std::uint32_t scan_x_ = 0;  ///< of the first record; 0 before it
  std::uint32_t scan_y_ = 0;
};

/// Reads the records of one raw file in order, validating each.
class RawFileReader {
 public:
  /// Opens `path`, whose name must follow the raw-file pattern (it gives sector and thread), or
  /// its .partial pattern: a .partial file ends at its last whole record (a write cut short by a
  /// full disk leaves a piece of one, which is no sector). Throws RawFileError naming the path
  /// otherwise, or if it cannot be opened.
  RawFileReader(const std::string& path, const Geometry& geometry);

  /// Reads the next record: its header into `header` and its pixels into `payload`, which must be
  /// exactly geometry.sector_bytes() bytes. Returns false at the end of the file. Throws
  /// RawFileError naming the file, the record and its byte offset for a truncated record, a scan
  /// number other than the file name's, a scan shape that differs from the first record's, a
  /// position outside the scan, or a read error.
  bool next(DataHeader& header, void* payload, std::size_t payload_bytes);

  const std::string& path() const { return path_; }
  const Geometry& geometry() const { return geometry_; }
  const RawFileName& name() const { return name_; }
  /// Byte offset of the next record.
  std::uint64_t offset() const { return offset_; }
  /// Records read so far.
  std::uint64_t records() const { return records_; }
  /// The file is a .partial one: read up to its last whole record.
  bool partial() const { return partial_; }
  void close() { file_.reset(); }

 private:
  /// Why records may not line up, for error messages: "" when the file size is a whole number of records.
  std::string size_hint() const;

  struct Closer {
    void operator()(std::FILE* file) const { std::fclose(file); }
  };

  std::string path_;
  Geometry geometry_;
  RawFileName name_;
  std::unique_ptr<std::FILE, Closer> file_;
  std::uint64_t file_bytes_ = 0;
  std::uint64_t offset_ = 0;
  std::uint64_t records_ = 0;
  std::uint32_t scan_x_ = 0;
  std::uint32_t scan_y_ = 0;
  bool partial_ = false;
};

}  // namespace sectorflow::protocol
