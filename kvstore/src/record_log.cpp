#include "sectorflow/kvstore/record_log.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <utility>

#include "sectorflow/kvstore/errors.hpp"
#include "sectorflow/kvstore/stack_id.hpp"

namespace sectorflow::kvstore {
namespace {

constexpr const char* kSnapshotName = "kvstore.snapshot";
constexpr const char* kLogName = "kvstore.log";
constexpr const char* kLockName = "kvstore.lock";

std::string errno_text(int error) { return std::strerror(error); }

}  // namespace

LogFsync parse_log_fsync(const std::string& name) {
  if (name == "never") return LogFsync::kNever;
  if (name == "interval") return LogFsync::kInterval;
  if (name == "always") return LogFsync::kAlways;
  throw KvstoreError("kvstore log: fsync policy '" + name +
                     "' unknown; expected never, interval or always ([kvstore] log_fsync)");
}

const char* to_string(LogFsync policy) {
  switch (policy) {
    case LogFsync::kNever:
      return "never";
    case LogFsync::kInterval:
      return "interval";
    case LogFsync::kAlways:
      return "always";
  }
  return "?";
}

// One file open for writing, closed when destroyed.
class RecordLog::File {
 public:
  File(std::string path, int flags) : path_(std::move(path)) {
    fd_ = ::open(path_.c_str(), flags | O_WRONLY | O_CLOEXEC, 0644);
    if (fd_ < 0) fail("cannot open");
  }
  ~File() {
    if (fd_ >= 0) ::close(fd_);
  }
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  void write(std::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t written = ::write(fd_, bytes.data(), bytes.size());
      if (written < 0) {
        if (errno == EINTR) continue;
        fail("cannot write");
      }
      bytes.remove_prefix(static_cast<std::size_t>(written));
    }
  }
  void sync() {
    if (::fdatasync(fd_) != 0) fail("cannot sync");
  }
  void close() {
    const int fd = std::exchange(fd_, -1);
    if (::close(fd) != 0) fail("cannot close");
  }
  const std::string& path() const { return path_; }

 private:
  [[noreturn]] void fail(const char* what) const {
    throw KvstoreError("kvstore log: " + std::string(what) + " " + path_ + ": " + errno_text(errno));
  }
  std::string path_;
  int fd_ = -1;
};

RecordLog::RecordLog(RecordLogOptions options) : options_(std::move(options)) {
  const auto refuse = [this](const std::string& why) {
    return KvstoreError("kvstore log: cannot use the directory '" + options_.dir + "': " + why +
                        " ([kvstore] log_dir)");
  };
  if (options_.dir.empty()) throw refuse("no directory named");
  if (options_.max_bytes == 0) throw KvstoreError("kvstore log: log_max_bytes is 0 ([kvstore] log_max_bytes)");
  std::error_code error;
  std::filesystem::create_directories(options_.dir, error);
  if (error) throw refuse(error.message());
  if (!std::filesystem::is_directory(options_.dir, error)) throw refuse("not a directory");
  const std::string lock_path = options_.dir + "/" + kLockName;
  lock_fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd_ < 0) throw refuse(errno_text(errno));
  if (::access(options_.dir.c_str(), W_OK) != 0) {
    const int why = errno;
    ::close(lock_fd_);
    throw refuse(errno_text(why));
  }
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    const int why = errno;
    ::close(lock_fd_);
    throw refuse(why == EWOULDBLOCK ? "another kvstore server uses it (its kvstore.lock is held)" : errno_text(why));
  }
  for (const char* name : {kSnapshotName, kLogName, kStackIdFile}) {
    std::filesystem::remove(options_.dir + "/" + name + ".tmp", error);  // a write a crash cut short
  }
}

RecordLog::~RecordLog() {
  log_.reset();
  if (lock_fd_ >= 0) ::close(lock_fd_);  // releases the lock
}

LogLoad RecordLog::load(const std::function<void(LogRecord&&)>& apply) {
  LogLoad load;
  for (const char* name : {kSnapshotName, kLogName}) {
    const std::string path = options_.dir + "/" + name;
    std::error_code error;
    if (!std::filesystem::exists(path, error)) continue;
    std::ifstream in(path, std::ios::binary);
    std::ostringstream bytes;
    bytes << in.rdbuf();
    if (!in && !in.eof()) throw KvstoreError("kvstore log: cannot read " + path + ": " + errno_text(errno));
    const std::string content = std::move(bytes).str();
    const bool snapshot = name == std::string(kSnapshotName);
    bool first = true;
    std::string bad;
    const LogRead read = read_log_records(content, [&](LogRecord&& record) {
      if (!bad.empty()) return;
      if (snapshot && first) {
        first = false;
        if (record.kind != LogRecord::Kind::kSnapshot) {
          bad = "its first record is not the snapshot's sequence";
          return;
        }
        load.sequence = std::max(load.sequence, record.sequence);  // the log's records up to it are in it
        return;
      }
      first = false;
      // A snapshot's entries carry the sequences they were published with, all at or below its own.
      // The log's records at or below what was loaded are in the snapshot already (a crash between
      // its rename and the log's), or out of order.
      if (record.kind == LogRecord::Kind::kSnapshot || (!snapshot && record.sequence <= load.sequence)) return;
      load.sequence = std::max(load.sequence, record.sequence);
      ++load.records;
      apply(std::move(record));
    });
    std::size_t cut_bytes = read.cut_bytes;
    std::string reason = read.cut_reason;
    if (!bad.empty()) {
      cut_bytes = content.size();
      reason = bad;
    }
    if (cut_bytes == 0) continue;
    ++load.tails_cut;
    load.bytes_cut += cut_bytes;
    const std::string kept = path + ".cut";
    std::filesystem::rename(path, kept, error);
    load.cuts.push_back(path + ": " + std::to_string(cut_bytes) + " bytes cut after " +
                        std::to_string(read.records) + " whole records (" + reason + "); the file is kept as " +
                        (error ? std::string("(not kept: ") + error.message() + ")" : kept));
  }
  return load;
}

void RecordLog::write_file(const std::string& name, const std::function<void(File&)>& fill) {
  const std::string path = options_.dir + "/" + name;
  try {
    File file(path + ".tmp", O_CREAT | O_TRUNC);
    fill(file);
    file.sync();
    file.close();
  } catch (const KvstoreError&) {
    // A full disk must not stay full of a half-written snapshot: the next attempt needs that room.
    std::error_code ignored;
    std::filesystem::remove(path + ".tmp", ignored);
    throw;
  }
  if (::rename((path + ".tmp").c_str(), path.c_str()) != 0) {
    throw KvstoreError("kvstore log: cannot rename " + path + ".tmp to " + path + ": " + errno_text(errno));
  }
  sync_directory();
}

void RecordLog::sync_directory() {
  const int fd = ::open(options_.dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw KvstoreError("kvstore log: cannot open the directory " + options_.dir + ": " + errno_text(errno));
  const int synced = ::fsync(fd);
  const int why = errno;
  ::close(fd);
  if (synced != 0) throw KvstoreError("kvstore log: cannot sync the directory " + options_.dir + ": " + errno_text(why));
}

std::string RecordLog::keep_stack_id(const std::string& fresh) {
  const std::string name(kStackIdFile);
  const std::string path = options_.dir + "/" + name;
  std::error_code error;
  if (!std::filesystem::exists(path, error)) {
    write_file(name, [&fresh](File& file) { file.write(fresh + "\n"); });
    return fresh;
  }
  std::ifstream in(path);
  std::string id;
  std::getline(in, id);
  if (!is_stack_id(id)) {
    throw KvstoreError("kvstore log: " + path + " holds no stack id (" + std::to_string(kStackIdChars) +
                       " hex digits) on its first line; remove the file to make this a new stack ([kvstore] log_dir)");
  }
  return id;
}

void RecordLog::replace_stack_id(const std::string& id) {
  write_file(std::string(kStackIdFile), [&id](File& file) { file.write(id + "\n"); });
}

void RecordLog::compact(std::int64_t sequence, const std::function<void(const Sink&)>& entries) {
  log_.reset();  // no appends until the new log is there
  std::uint64_t bytes = kLogMagic.size();
  write_file(kSnapshotName, [&](File& file) {
    file.write(kLogMagic);
    LogRecord head;
    head.kind = LogRecord::Kind::kSnapshot;
    head.sequence = std::max<std::int64_t>(sequence, 1);
    const std::string framed = encode_log_record(head);
    file.write(framed);
    bytes += framed.size();
    entries([&](const LogRecord& record) {
      const std::string one = encode_log_record(record);
      file.write(one);
      bytes += one.size();
    });
  });
  snapshot_bytes_ = bytes;
  write_file(kLogName, [](File& file) { file.write(kLogMagic); });
  log_ = std::make_unique<File>(options_.dir + "/" + kLogName, O_APPEND);
  log_bytes_ = kLogMagic.size();
  dirty_ = false;
}

void RecordLog::append(const LogRecord& record) {
  if (!log_) throw KvstoreError("kvstore log: no log open for appends in " + options_.dir);
  const std::string framed = encode_log_record(record);
  try {
    log_->write(framed);
    if (options_.fsync == LogFsync::kAlways) log_->sync();
  } catch (const KvstoreError&) {
    log_.reset();
    throw;
  }
  log_bytes_ += framed.size();
  dirty_ = options_.fsync == LogFsync::kInterval;
}

void RecordLog::sync(Clock::time_point now, bool force) {
  if (!log_ || !dirty_ || (!force && now < last_sync_ + options_.fsync_interval)) return;
  try {
    log_->sync();
  } catch (const KvstoreError&) {
    log_.reset();
    throw;
  }
  dirty_ = false;
  last_sync_ = now;
}

std::optional<RecordLog::Clock::time_point> RecordLog::next_sync() const {
  if (!log_ || !dirty_) return std::nullopt;
  return last_sync_ + options_.fsync_interval;
}

bool RecordLog::compaction_due() const { return log_bytes_ > options_.max_bytes; }
bool RecordLog::open() const { return log_ != nullptr; }
std::uint64_t RecordLog::log_bytes() const { return log_bytes_; }
std::uint64_t RecordLog::snapshot_bytes() const { return snapshot_bytes_; }
const RecordLogOptions& RecordLog::options() const { return options_; }

}  // namespace sectorflow::kvstore
