#include <fcntl.h>
#include <stdio.h>  // renameat2, RENAME_NOREPLACE
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>

#include "sectorflow/protocol/errors.hpp"
#include "sectorflow/protocol/raw_file.hpp"

namespace sectorflow::protocol {
namespace {

// Records smaller than this are gathered before a write(2); a 4D Camera record (162 KiB) fills
// it about six times over, a test geometry's thousands of times.
constexpr std::size_t kBufferBytes = std::size_t{1} << 20;

std::string errno_text(int error) { return std::string(std::strerror(error)) + " (errno " + std::to_string(error) + ")"; }

// Renames `from` to `to` unless `to` exists; 0 or the errno (EEXIST when it exists). A rename that
// replaced would let a late or broken writer take the name of a whole file.
int rename_no_replace(const std::string& from, const std::string& to) {
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) return 0;
  if (errno != EINVAL && errno != ENOSYS) return errno;
  // A filesystem without RENAME_NOREPLACE: a hard link is refused as well when the name exists.
  if (::link(from.c_str(), to.c_str()) != 0) return errno;
  ::unlink(from.c_str());
  return 0;
}

}  // namespace

RawFileWriter::RawFileWriter(const std::string& directory, std::uint32_t scan_number, std::uint32_t sector,
                             std::uint32_t thread_id, const Geometry& geometry)
    : geometry_(geometry), name_{scan_number, sector, thread_id} {
  geometry_.validate();
  path_ = (std::filesystem::path(directory) / raw_file_name(name_)).string();
  if (sector >= geometry_.n_sectors()) {
    throw RawFileError(path_ + ": sector " + std::to_string(sector) + " out of range; the geometry has " +
                       std::to_string(geometry_.n_sectors()) + " sectors");
  }
  std::error_code error;
  std::filesystem::create_directories(directory, error);
  if (error) throw RawFileError(directory + ": cannot create the raw-file directory: " + error.message());
  if (::access(path_.c_str(), F_OK) == 0) {
    throw RawFileError(path_ + ": cannot create: " + errno_text(EEXIST) +
                       "; raw files are never overwritten: move it away or use another scan number");
  }
  writing_ = path_ + kRawWritingSuffix;
  // 0666 less the umask, as every file sectorflow writes for people: a facility's umask
  // of 002 makes it group-writable, 022 readable by everyone.
  fd_ = ::open(writing_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd_ < 0) {
    const int e = errno;
    std::string hint = e == EEXIST ? "; another writer of this file runs, or one died: move it away" : "";
    throw RawFileError(writing_ + ": cannot create: " + errno_text(e) + hint);
  }
  current_ = writing_;
  buffer_.resize(kBufferBytes);
}

RawFileWriter::~RawFileWriter() { abandon(); }

RawFileWriter::RawFileWriter(RawFileWriter&& other) noexcept
    : path_(std::move(other.path_)),
      writing_(std::move(other.writing_)),
      current_(std::move(other.current_)),
      geometry_(other.geometry_),
      name_(other.name_),
      fd_(std::exchange(other.fd_, -1)),
      failed_(other.failed_),
      buffer_(std::move(other.buffer_)),
      buffered_(std::exchange(other.buffered_, 0)),
      flushed_(other.flushed_),
      records_(other.records_),
      bytes_(other.bytes_),
      scan_x_(other.scan_x_),
      scan_y_(other.scan_y_) {}

RawFileWriter& RawFileWriter::operator=(RawFileWriter&& other) noexcept {
  if (this != &other) {
    RawFileWriter old(std::move(*this));  // abandons our current file when it goes out of scope
    path_ = std::move(other.path_);
    writing_ = std::move(other.writing_);
    current_ = std::move(other.current_);
    geometry_ = other.geometry_;
    name_ = other.name_;
    fd_ = std::exchange(other.fd_, -1);
    failed_ = other.failed_;
    buffer_ = std::move(other.buffer_);
    buffered_ = std::exchange(other.buffered_, 0);
    flushed_ = other.flushed_;
    records_ = other.records_;
    bytes_ = other.bytes_;
    scan_x_ = other.scan_x_;
    scan_y_ = other.scan_y_;
  }
  return *this;
}

void RawFileWriter::write(const DataHeader& header, const void* payload, std::size_t payload_bytes) {
  // Built only on the way to an error: write() runs once per sector in the producer's fallback.
  auto record = [&] { return path_ + ": record " + std::to_string(records_) + " (" + header.where() + ")"; };
  if (fd_ < 0) throw RawFileError(record() + ": the file is closed");
  if (header.scan_number != name_.scan_number || header.sector != name_.sector) {
    throw RawFileError(record() + ": this file holds scan " + std::to_string(name_.scan_number) + ", sector " +
                       std::to_string(name_.sector));
  }
  if (header.scan_x == 0 || header.scan_y == 0) {
    throw RawFileError(record() + ": scan shape must be positive, got " + std::to_string(header.scan_x) + " x " +
                       std::to_string(header.scan_y));
  }
  if (records_ > 0 && (header.scan_x != scan_x_ || header.scan_y != scan_y_)) {
    throw RawFileError(record() + ": scan shape " + std::to_string(header.scan_x) + " x " +
                       std::to_string(header.scan_y) + " differs from the file's " + std::to_string(scan_x_) + " x " +
                       std::to_string(scan_y_));
  }
  if (header.position_x >= header.scan_x || header.position_y >= header.scan_y) {
    throw RawFileError(record() + ": probe position (" + std::to_string(header.position_x) + ", " +
                       std::to_string(header.position_y) + ") lies outside the scan of " +
                       std::to_string(header.scan_x) + " x " + std::to_string(header.scan_y));
  }
  if (payload_bytes != geometry_.sector_bytes()) {
    throw RawFileError(record() + ": payload of " + std::to_string(payload_bytes) + " bytes, expected " +
                       std::to_string(geometry_.sector_bytes()));
  }
  unsigned char raw_header[kRawHeaderBytes];
  encode_raw_header(header, raw_header);

  const std::size_t record_bytes = kRawHeaderBytes + payload_bytes;
  if (buffered_ + record_bytes > buffer_.size()) flush();
  if (record_bytes > buffer_.size()) {
    // Larger than the buffer: header and payload go out together, straight from the caller.
    iovec parts[2] = {{raw_header, kRawHeaderBytes}, {const_cast<void*>(payload), payload_bytes}};
    std::size_t done = 0;
    while (done < record_bytes) {
      const ssize_t n = ::writev(fd_, parts, 2);
      if (n < 0) {
        if (errno == EINTR) continue;
        failed_ = true;
        throw RawFileError(path_ + ": write failed at byte " + std::to_string(flushed_) + ": " + errno_text(errno));
      }
      done += static_cast<std::size_t>(n);
      flushed_ += static_cast<std::uint64_t>(n);
      // Advance past what was written; a partial writev is rare but legal.
      std::size_t skip = static_cast<std::size_t>(n);
      for (iovec& part : parts) {
        const std::size_t step = std::min(skip, part.iov_len);
        part.iov_base = static_cast<char*>(part.iov_base) + step;
        part.iov_len -= step;
        skip -= step;
      }
    }
  } else {
    std::memcpy(buffer_.data() + buffered_, raw_header, kRawHeaderBytes);
    std::memcpy(buffer_.data() + buffered_ + kRawHeaderBytes, payload, payload_bytes);
    buffered_ += record_bytes;
  }
  scan_x_ = header.scan_x;
  scan_y_ = header.scan_y;
  ++records_;
  bytes_ += record_bytes;
}

void RawFileWriter::write_all(const void* data, std::size_t size) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd_, bytes, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      failed_ = true;
      throw RawFileError(path_ + ": write failed at byte " + std::to_string(flushed_) + ": " + errno_text(errno));
    }
    bytes += n;
    size -= static_cast<std::size_t>(n);
    flushed_ += static_cast<std::uint64_t>(n);
  }
}

void RawFileWriter::flush() {
  if (fd_ < 0 || buffered_ == 0) return;
  const std::size_t pending = std::exchange(buffered_, 0);
  write_all(buffer_.data(), pending);
}

void RawFileWriter::close() {
  if (fd_ < 0) return;
  std::string why;
  if (failed_) {
    why = "an earlier write failed";
  } else {
    try {
      flush();
    } catch (const RawFileError& error) {
      why = error.what();
    }
  }
  if (::close(std::exchange(fd_, -1)) != 0 && why.empty()) why = "close failed: " + errno_text(errno);
  if (why.empty()) {
    const int e = rename_no_replace(writing_, path_);
    if (e == 0) {
      current_ = path_;
      return;
    }
    why = "cannot rename " + writing_ + " to its final name: " + errno_text(e);
  }
  failed_ = true;
  finish_partial();
  throw RawFileError(path_ + ": not completed (" + why + "); " +
                     (current_.empty() ? std::string("it held no whole record and was removed")
                                       : "what was written is in " + current_));
}

std::string RawFileWriter::abandon() noexcept {
  if (fd_ < 0) return current_;
  failed_ = true;
  try {
    flush();  // the records still buffered are whole: keep them if the disk takes them
  } catch (const RawFileError&) {
    // What is in the file is what records_in_file() counts.
  }
  ::close(std::exchange(fd_, -1));
  finish_partial();
  return current_;
}

std::uint64_t RawFileWriter::records_in_file() const {
  const std::uint64_t record_bytes = kRawHeaderBytes + geometry_.sector_bytes();
  return std::min(records_, flushed_ / record_bytes);
}

void RawFileWriter::finish_partial() noexcept {
  if (records_in_file() == 0) {
    ::unlink(writing_.c_str());
    current_.clear();
    return;
  }
  // An earlier incomplete attempt keeps its name: number this one.
  for (int attempt = 0; attempt < 100; ++attempt) {
    const std::string partial =
        attempt == 0 ? path_ + kRawPartialSuffix : path_ + "." + std::to_string(attempt) + kRawPartialSuffix;
    const int e = rename_no_replace(writing_, partial);
    if (e == 0) {
      current_ = partial;
      return;
    }
    if (e != EEXIST) break;
  }
  current_ = writing_;  // still not a raw-file name: never taken for a whole file
}

}  // namespace sectorflow::protocol
