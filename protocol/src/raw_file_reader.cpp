#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "sectorflow/protocol/errors.hpp"
#include "sectorflow/protocol/raw_file.hpp"

namespace sectorflow::protocol {
namespace {

std::string errno_text(int error) { return std::string(std::strerror(error)) + " (errno " + std::to_string(error) + ")"; }

}  // namespace

RawFileReader::RawFileReader(const std::string& path, const Geometry& geometry) : path_(path), geometry_(geometry) {
  geometry_.validate();
  const std::optional<RawFileName> name = parse_replay_file_name(path, partial_);
  if (!name) {
    throw RawFileError(path + ": not a raw file name; expected data_scan{scan:010d}_module{sector}_{thread}.data"
                              " (or that + .partial)");
  }
  name_ = *name;
  file_.reset(std::fopen(path.c_str(), "rb"));
  if (!file_) throw RawFileError(path + ": cannot open: " + errno_text(errno));
  std::error_code error;
  file_bytes_ = std::filesystem::file_size(path, error);
  if (error) file_bytes_ = 0;
}

std::string RawFileReader::size_hint() const {
  const std::uint64_t record_bytes = kRawHeaderBytes + geometry_.sector_bytes();
  if (file_bytes_ % record_bytes == 0) return "";
  return "; the file's " + std::to_string(file_bytes_) + " bytes are not a whole number of " +
         std::to_string(record_bytes) + "-byte records (16-byte header + " + std::to_string(geometry_.sector_rows) +
         " x " + std::to_string(geometry_.sector_cols) + " pixels of " + std::to_string(geometry_.itemsize) +
         " bytes): written for another geometry, or cut short";
}

bool RawFileReader::next(DataHeader& header, void* payload, std::size_t payload_bytes) {
  // Built only on the way to an error: next() runs once per sector during a replay.
  auto record = [&] { return path_ + ": record " + std::to_string(records_) + " at byte " + std::to_string(offset_); };
  if (!file_) throw RawFileError(record() + ": the file is closed");
  if (payload_bytes != geometry_.sector_bytes()) {
    throw RawFileError(record() + ": payload buffer of " + std::to_string(payload_bytes) + " bytes, expected " +
                       std::to_string(geometry_.sector_bytes()));
  }
  const std::size_t record_bytes = kRawHeaderBytes + payload_bytes;
  // A .partial file's last piece of a record was cut short by its writer: no sector, not an error.
  if (partial_ && offset_ + record_bytes > file_bytes_) return false;
  auto truncated = [&](std::size_t got) {
    return RawFileError(record() + ": truncated record, " + std::to_string(got) + " of " +
                        std::to_string(record_bytes) + " bytes (16-byte header + " + std::to_string(payload_bytes) +
                        "-byte sector); the file ends at byte " + std::to_string(offset_ + got));
  };
  auto invalid = [&](const std::string& what) { return RawFileError(what + size_hint()); };
  auto read_failed = [&]() { return RawFileError(record() + ": read failed: " + errno_text(errno)); };

  unsigned char raw_header[kRawHeaderBytes];
  const std::size_t got_header = std::fread(raw_header, 1, kRawHeaderBytes, file_.get());
  if (got_header < kRawHeaderBytes) {
    if (std::ferror(file_.get())) throw read_failed();
    if (got_header == 0) return false;
    throw truncated(got_header);
  }
  const std::size_t got_payload = std::fread(payload, 1, payload_bytes, file_.get());
  if (got_payload < payload_bytes) {
    if (std::ferror(file_.get())) throw read_failed();
    throw truncated(kRawHeaderBytes + got_payload);
  }

  header = decode_raw_header(raw_header, name_);
  auto located = [&] { return record() + " (" + header.where() + ")"; };
  if (header.scan_number != name_.scan_number) {
    throw invalid(located() + ": scan number " + std::to_string(header.scan_number) + ", but the file name says " +
                       std::to_string(name_.scan_number));
  }
  if (header.scan_x == 0 || header.scan_y == 0) {
    throw invalid(located() + ": scan shape must be positive, got " + std::to_string(header.scan_x) + " x " +
                       std::to_string(header.scan_y));
  }
  if (records_ > 0 && (header.scan_x != scan_x_ || header.scan_y != scan_y_)) {
    throw invalid(located() + ": scan shape " + std::to_string(header.scan_x) + " x " +
                       std::to_string(header.scan_y) + " differs from the first record's " + std::to_string(scan_x_) +
                       " x " + std::to_string(scan_y_));
  }
  if (header.position_x >= header.scan_x || header.position_y >= header.scan_y) {
    throw invalid(located() + ": probe position (" + std::to_string(header.position_x) + ", " +
                       std::to_string(header.position_y) + ") lies outside the scan of " +
                       std::to_string(header.scan_x) + " x " + std::to_string(header.scan_y));
  }
  scan_x_ = header.scan_x;
  scan_y_ = header.scan_y;
  offset_ += record_bytes;
  ++records_;
  return true;
}

}  // namespace sectorflow::protocol
