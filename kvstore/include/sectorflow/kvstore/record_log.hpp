// A kvstore server's durable records: a snapshot file and a log file in one directory of its own
// (kvstore/SPEC.md, "Durable records"; the records and their framing: log_records.hpp).
//
//   <dir>/kvstore.snapshot   the live map when it was last compacted: a kSnapshot record (the
//                            server's sequence then), then one kSet record per key
//   <dir>/kvstore.log        every update published since, in order
//   <dir>/kvstore.lock       held (flock) while a server uses the directory: one writer only
//   <dir>/stack_id           the stack's id (stack_id.hpp), written once: a restart with this
//                            directory is the same stack
//
// Compaction writes the map to kvstore.snapshot.tmp, syncs it, renames it over kvstore.snapshot,
// syncs the directory, then does the same with an empty kvstore.log.tmp: a crash at any point leaves
// a snapshot and a log whose records above the snapshot's sequence are what came after it.
// Loading applies the snapshot, then the log's records above the snapshot's sequence; a file's
// torn or corrupt tail is cut at its last whole record (the file is kept as <name>.cut for a look,
// replacing an older one, and the next compaction leaves it out).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sectorflow/kvstore/log_records.hpp"

namespace sectorflow::kvstore {

/// When appended records are forced to the disk (fdatasync). A record is written (write(2)) before
/// its update is published in every policy, so a killed server loses nothing; the policy decides
/// what a crash of the machine may take.
enum class LogFsync { kNever, kInterval, kAlways };

/// The policy named by `name` ("never", "interval", "always"); throws KvstoreError for another.
LogFsync parse_log_fsync(const std::string& name);
const char* to_string(LogFsync policy);

struct RecordLogOptions {
  std::string dir;  ///< [kvstore] log_dir: created when absent
  LogFsync fsync = LogFsync::kInterval;                     ///< [kvstore] log_fsync
  std::chrono::milliseconds fsync_interval{1000};           ///< [kvstore] log_fsync_interval_ms
  std::uint64_t max_bytes = std::uint64_t{64} << 20;        ///< [kvstore] log_max_bytes: compaction beyond
};

/// What loading found.
struct LogLoad {
  std::int64_t sequence = 0;       ///< the highest sequence of a record applied (0: none)
  std::uint64_t records = 0;       ///< records applied (snapshot and log)
  std::uint64_t tails_cut = 0;     ///< files whose tail was cut (0, 1 or 2)
  std::uint64_t bytes_cut = 0;     ///< bytes cut from them
  std::vector<std::string> cuts;   ///< one line per cut: the file, where, why
};

class RecordLog {
 public:
  using Clock = std::chrono::steady_clock;
  using Sink = std::function<void(const LogRecord&)>;

  /// Makes the directory if needed and takes its lock. Throws KvstoreError naming the directory
  /// and the reason when it cannot (not a directory, not writable, another server holds it).
  explicit RecordLog(RecordLogOptions options);
  ~RecordLog();
  RecordLog(const RecordLog&) = delete;
  RecordLog& operator=(const RecordLog&) = delete;

  /// Reads the snapshot, then the log, calling `apply` with each record to apply in order (the
  /// snapshot's kSnapshot record aside). Throws KvstoreError if a file exists but cannot be read.
  LogLoad load(const std::function<void(LogRecord&&)>& apply);
  /// The stack id kept in the directory; `fresh` is written there (synced) and returned when none
  /// is. Throws KvstoreError naming the file if it cannot be written, or holds no stack id.
  std::string keep_stack_id(const std::string& fresh);
  /// Writes `id` as the directory's stack id, replacing what it held: the passive of a pair takes
  /// the active's (kvstore/SPEC.md, "The pair"). Throws KvstoreError on a failure.
  void replace_stack_id(const std::string& id);
  /// Replaces the snapshot by `sequence` and the records `entries` gives the sink, and starts an
  /// empty log (see the top of this file). Throws KvstoreError (naming the file and errno) on a
  /// failure; the files on disk then still hold what they held, and no log is open for appends.
  void compact(std::int64_t sequence, const std::function<void(const Sink&)>& entries);
  /// Writes one record at the end of the log (and syncs it with kAlways). Throws KvstoreError on
  /// a failure (a partial record may remain: a reader cuts it); no log is open for appends then.
  void append(const LogRecord& record);
  /// With kInterval: syncs what was appended since the last sync if the interval has passed since
  /// then (`force`: now). Throws KvstoreError on a failure.
  void sync(Clock::time_point now, bool force = false);
  /// When sync() next has something to do, if ever.
  std::optional<Clock::time_point> next_sync() const;
  /// Whether the log passed max_bytes: the server compacts at its next turn.
  bool compaction_due() const;
  /// Whether a log is open for appends (false before the first compaction and after a failure).
  bool open() const;
  std::uint64_t log_bytes() const;
  std::uint64_t snapshot_bytes() const;
  const RecordLogOptions& options() const;

 private:
  class File;
  void write_file(const std::string& name, const std::function<void(File&)>& fill);
  void sync_directory();

  RecordLogOptions options_;
  int lock_fd_ = -1;
  std::unique_ptr<File> log_;
  std::uint64_t log_bytes_ = 0;
  std::uint64_t snapshot_bytes_ = 0;
  bool dirty_ = false;
  Clock::time_point last_sync_ = Clock::now();
};

}  // namespace sectorflow::kvstore
