// The kvstore's durable records (kvstore/log_records.hpp, record_log.hpp): the golden log written
// by an independent encoder (tests/data/kvstore_log_v1.log, made with Python's struct and a
// bit-by-bit CRC32C), the reader on hostile bytes (every truncation, every flipped byte, lengths
// that lie, checksums that match records that do not decode), and the files of a directory (the
// stack id kept there included).
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "sectorflow/kvstore/errors.hpp"
#include "sectorflow/kvstore/log_records.hpp"
#include "sectorflow/kvstore/record_log.hpp"
#include "sectorflow/kvstore/stack_id.hpp"

namespace kv = sectorflow::kvstore;
namespace fs = std::filesystem;

namespace {

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path.string());
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_file(const fs::path& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
}

kv::LogRecord set_record(std::int64_t sequence, const std::string& key, const std::string& body,
                         std::int64_t deadline_ms = 0) {
  kv::LogRecord record;
  record.kind = kv::LogRecord::Kind::kSet;
  record.sequence = sequence;
  record.key = key;
  record.uuid = std::string(16, 'u');
  record.properties = deadline_ms != 0 ? "ttl=5\n" : "";
  record.body = body;
  record.deadline_ms = deadline_ms;
  record.writer = "producer/r0";
  record.account = "127.0.0.1";
  return record;
}

kv::LogRecord delete_record(std::int64_t sequence, const std::string& key) {
  kv::LogRecord record;
  record.kind = kv::LogRecord::Kind::kDelete;
  record.sequence = sequence;
  record.key = key;
  return record;
}

std::vector<kv::LogRecord> sample_records() {
  return {set_record(1, "status/producer/r0t0", "\x81\xa1x\x01", 1'900'000'000'000), set_record(2, "a", "\xc0"),
          delete_record(3, "a"), set_record(4, "scans/0000000001/file", std::string(300, 'b'))};
}

// The file of `records` and where each record ends in it.
std::string file_of(const std::vector<kv::LogRecord>& records, std::vector<std::size_t>* ends = nullptr) {
  std::string content(kv::kLogMagic);
  for (const kv::LogRecord& record : records) {
    content += kv::encode_log_record(record);
    if (ends != nullptr) ends->push_back(content.size());
  }
  return content;
}

std::vector<kv::LogRecord> read_all(const std::string& content, kv::LogRead* read = nullptr) {
  std::vector<kv::LogRecord> records;
  const kv::LogRead result = kv::read_log_records(content, [&](kv::LogRecord&& r) { records.push_back(std::move(r)); });
  if (read != nullptr) *read = result;
  return records;
}

// A record with a correct frame and checksum around an arbitrary payload.
std::string framed(const std::string& payload) {
  std::string out;
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((payload.size() >> shift) & 0xff));
  const std::uint32_t crc = kv::crc32c(payload);
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((crc >> shift) & 0xff));
  return out + payload;
}

class TempDir {
 public:
  TempDir() : path_(fs::temp_directory_path() / ("sectorflow-kvlog-" + std::to_string(::getpid()) + "-" +
                                                 std::to_string(counter_++))) {
    fs::remove_all(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  const fs::path& path() const { return path_; }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};

}  // namespace

TEST(LogRecords, Crc32cIsCastagnolis) { EXPECT_EQ(kv::crc32c("123456789"), 0xE3069283u); }

TEST(LogRecords, GoldenLogDecodesToItsRecords) {
  const std::string content = read_file(std::string(SECTORFLOW_TEST_DATA) + "/kvstore_log_v1.log");
  kv::LogRead read;
  const std::vector<kv::LogRecord> records = read_all(content, &read);
  ASSERT_EQ(records.size(), 3u) << read.cut_reason;
  EXPECT_EQ(read.cut_bytes, 0u);
  EXPECT_EQ(read.whole_bytes, content.size());
  EXPECT_EQ(records[0].key, "scans/0000000003/file");
  EXPECT_EQ(records[0].sequence, 7);
  EXPECT_EQ(records[0].deadline_ms, 1'900'000'000'000);
  EXPECT_EQ(records[0].properties, "ttl=86400\n");
  EXPECT_EQ(records[0].writer, "nodegroup/job-1");
  EXPECT_EQ(records[0].account, "the stack's records");
  EXPECT_EQ(records[1].kind, kv::LogRecord::Kind::kSet);
  EXPECT_EQ(records[1].deadline_ms, 0);
  EXPECT_EQ(records[2].kind, kv::LogRecord::Kind::kDelete);
  EXPECT_EQ(records[2].key, "acquire/request");
  // Our encoder writes the same bytes.
  EXPECT_EQ(file_of(records), content);
}

TEST(LogRecords, RecordsRoundTrip) {
  const std::vector<kv::LogRecord> records = sample_records();
  kv::LogRead read;
  EXPECT_EQ(read_all(file_of(records), &read), records);
  EXPECT_EQ(read.records, records.size());
  EXPECT_TRUE(read.cut_reason.empty());
}

TEST(LogRecords, EveryTruncationKeepsTheWholeRecordsBeforeIt) {
  std::vector<std::size_t> ends;
  const std::vector<kv::LogRecord> records = sample_records();
  const std::string content = file_of(records, &ends);
  for (std::size_t size = 0; size <= content.size(); ++size) {
    std::size_t whole = 0;
    while (whole < ends.size() && ends[whole] <= size) ++whole;
    kv::LogRead read;
    const std::vector<kv::LogRecord> got = read_all(content.substr(0, size), &read);
    ASSERT_EQ(got, std::vector<kv::LogRecord>(records.begin(), records.begin() + static_cast<long>(whole)))
        << "cut at " << size;
    EXPECT_EQ(read.whole_bytes + read.cut_bytes, size);
    const bool at_boundary = size == 0 || size == kv::kLogMagic.size() || (whole > 0 && ends[whole - 1] == size);
    EXPECT_EQ(read.cut_bytes == 0, at_boundary) << "cut at " << size << ": " << read.cut_reason;
  }
}

TEST(LogRecords, EveryFlippedByteCutsAtTheRecordItDamaged) {
  std::vector<std::size_t> ends;
  const std::vector<kv::LogRecord> records = sample_records();
  const std::string content = file_of(records, &ends);
  for (std::size_t at = 0; at < content.size(); ++at) {
    std::size_t damaged = 0;  // the record the byte belongs to
    while (damaged < ends.size() && ends[damaged] <= at) ++damaged;
    std::string bad = content;
    bad[at] = static_cast<char>(bad[at] ^ 0x40);
    kv::LogRead read;
    const std::vector<kv::LogRecord> got = read_all(bad, &read);
    const std::size_t kept = at < kv::kLogMagic.size() ? 0 : damaged;
    ASSERT_EQ(got, std::vector<kv::LogRecord>(records.begin(), records.begin() + static_cast<long>(kept)))
        << "byte " << at << " flipped";
    EXPECT_NE(read.cut_bytes, 0u) << "byte " << at << " flipped";
    EXPECT_FALSE(read.cut_reason.empty());
  }
}

TEST(LogRecords, HostileFramesAreCutNotTrusted) {
  const std::string magic(kv::kLogMagic);
  const auto cut_reason = [](const std::string& content) {
    kv::LogRead read;
    EXPECT_TRUE(read_all(content, &read).empty());
    EXPECT_EQ(read.whole_bytes + read.cut_bytes, content.size());
    return read.cut_reason;
  };
  EXPECT_EQ(cut_reason(""), "");
  EXPECT_EQ(cut_reason("SFKV"), "the file is shorter than its magic");
  EXPECT_EQ(cut_reason("SFKVLOG\x02" + std::string(20, 'x')), "the file does not begin with the log's magic");
  // A length of 4 GiB: refused before anything is allocated.
  EXPECT_EQ(cut_reason(magic + std::string("\xff\xff\xff\xff\0\0\0\0", 8)), "a record length of 4294967295 bytes at byte 8");
  EXPECT_EQ(cut_reason(magic + std::string(8, '\0')), "a record length of 0 bytes at byte 8");
  EXPECT_EQ(cut_reason(magic + std::string("\0\0\0\x10\0\0", 6)), "a torn record frame at byte 8");
  // Checksums that match payloads the reader still refuses.
  const std::string seq = std::string("\0\0\0\0\0\0\0\x05", 8);
  EXPECT_EQ(cut_reason(magic + framed("\x09" + seq)), "a record of unknown kind 9 at byte 8");
  EXPECT_EQ(cut_reason(magic + framed("\x02" + seq + std::string("\0\0\0\x50", 4) + "key")),
            "a delete record whose key runs past its payload at byte 8");
  EXPECT_EQ(cut_reason(magic + framed("\x03" + seq + "x")), "a record with bytes after its last field at byte 8");
  EXPECT_EQ(cut_reason(magic + framed("\x02" + std::string(8, '\0') + std::string("\0\0\0\x01", 4) + "k")),
            "sequence 0 below 1 at byte 8");
  // A CRC-valid record at 2^63 - 1 once wrapped the server's sequence negative.
  EXPECT_EQ(cut_reason(magic + framed("\x02" + std::string("\x7f\xff\xff\xff\xff\xff\xff\xff", 8) +
                                      std::string("\0\0\0\x01", 4) + "k")),
            "sequence 9223372036854775807 above 2^62 at byte 8");
  EXPECT_EQ(cut_reason(magic + framed("\x02" + seq + std::string("\0\0\0\0", 4))),
            "key of 0 bytes, expected 1 to 255 at byte 8");
  EXPECT_EQ(cut_reason(magic + framed(std::string("\x01", 1))),
            "a payload of 1 bytes, too short for a kind and a sequence at byte 8");
}

TEST(LogRecords, EncoderRefusesWhatTheReaderWould) {
  kv::LogRecord record = set_record(1, "k", "");
  EXPECT_THROW(kv::encode_log_record(record), kv::KvstoreError);
  record = set_record(0, "k", "v");
  EXPECT_THROW(kv::encode_log_record(record), kv::KvstoreError);
  record = set_record(1, std::string(256, 'k'), "v");
  EXPECT_THROW(kv::encode_log_record(record), kv::KvstoreError);
}

TEST(RecordLog, CompactedAndAppendedRecordsLoadBack) {
  TempDir dir;
  kv::RecordLogOptions options{dir.path().string(), kv::LogFsync::kAlways, std::chrono::milliseconds(1000), 1 << 20};
  {
    kv::RecordLog log(options);
    EXPECT_EQ(log.load([](kv::LogRecord&&) { FAIL() << "an empty directory holds no record"; }).records, 0u);
    log.compact(10, [](const kv::RecordLog::Sink& sink) { sink(set_record(9, "old", "\x01")); });
    for (const kv::LogRecord& record : {set_record(11, "new", "\x02"), delete_record(12, "old")}) log.append(record);
  }
  kv::RecordLog log(options);
  std::vector<kv::LogRecord> loaded;
  const kv::LogLoad load = log.load([&](kv::LogRecord&& r) { loaded.push_back(std::move(r)); });
  EXPECT_EQ(load.sequence, 12);
  EXPECT_EQ(load.tails_cut, 0u);
  ASSERT_EQ(loaded.size(), 3u);
  EXPECT_EQ(loaded[0].key, "old");
  EXPECT_EQ(loaded[1].key, "new");
  EXPECT_EQ(loaded[2].kind, kv::LogRecord::Kind::kDelete);
}

TEST(RecordLog, ACutTailIsReportedAndTheFileKept) {
  TempDir dir;
  const kv::RecordLogOptions options{dir.path().string(), kv::LogFsync::kNever, std::chrono::milliseconds(1000), 1 << 20};
  {
    kv::RecordLog log(options);
    log.load([](kv::LogRecord&&) {});
    log.compact(1, [](const kv::RecordLog::Sink&) {});
    log.append(set_record(2, "kept", "\x01"));
    log.append(set_record(3, "torn", "\x02"));
  }
  const fs::path file = dir.path() / "kvstore.log";
  fs::resize_file(file, fs::file_size(file) - 3);
  kv::RecordLog log(options);
  std::vector<std::string> keys;
  const kv::LogLoad load = log.load([&](kv::LogRecord&& r) { keys.push_back(r.key); });
  EXPECT_EQ(keys, std::vector<std::string>{"kept"});
  EXPECT_EQ(load.tails_cut, 1u);
  ASSERT_EQ(load.cuts.size(), 1u);
  EXPECT_NE(load.cuts[0].find("bytes cut after 1 whole records (a torn record at byte"), std::string::npos) << load.cuts[0];
  EXPECT_TRUE(fs::exists(dir.path() / "kvstore.log.cut"));
}

TEST(RecordLog, RefusesADirectoryItCannotUse) {
  TempDir dir;
  fs::create_directories(dir.path());
  write_file(dir.path() / "file", "x");
  const kv::RecordLogOptions on_file{(dir.path() / "file").string(), kv::LogFsync::kNever,
                                     std::chrono::milliseconds(1000), 1 << 20};
  try {
    kv::RecordLog log(on_file);
    FAIL() << "a file taken for a directory";
  } catch (const kv::KvstoreError& error) {
    EXPECT_NE(std::string(error.what()).find("cannot use the directory '" + on_file.dir + "'"), std::string::npos)
        << error.what();
  }
  const kv::RecordLogOptions options{(dir.path() / "log").string(), kv::LogFsync::kNever,
                                     std::chrono::milliseconds(1000), 1 << 20};
  kv::RecordLog first(options);
  try {
    kv::RecordLog second(options);
    FAIL() << "two logs in one directory";
  } catch (const kv::KvstoreError& error) {
    EXPECT_NE(std::string(error.what()).find("another kvstore server uses it"), std::string::npos) << error.what();
  }
}

TEST(RecordLog, KeepsTheStackIdItWasFirstGivenAndRefusesAFileWithoutOne) {
  TempDir dir;
  const kv::RecordLogOptions options{dir.path().string(), kv::LogFsync::kNever, std::chrono::milliseconds(1000), 1 << 20};
  const std::string first = kv::new_stack_id();
  {
    kv::RecordLog log(options);
    EXPECT_EQ(log.keep_stack_id(first), first);
  }
  EXPECT_EQ(read_file(dir.path() / "stack_id"), first + "\n");
  {
    kv::RecordLog log(options);
    EXPECT_EQ(log.keep_stack_id(kv::new_stack_id()), first) << "a restart with the directory is the same stack";
  }
  write_file(dir.path() / "stack_id", "0123456789ABCDEF\n");  // upper case: not what a server writes
  kv::RecordLog log(options);
  try {
    log.keep_stack_id(first);
    FAIL() << "a stack_id file without a stack id";
  } catch (const kv::KvstoreError& error) {
    EXPECT_NE(std::string(error.what()).find("stack_id holds no stack id (16 hex digits) on its first line; remove the "
                                             "file to make this a new stack"),
              std::string::npos)
        << error.what();
  }
}

TEST(StackId, IsSixteenLowercaseHexDigitsAndNewAtEveryCall) {
  const std::string a = kv::new_stack_id();
  EXPECT_TRUE(kv::is_stack_id(a)) << a;
  EXPECT_NE(a, kv::new_stack_id());
  for (const std::string bad : {"", "0123456789abcde", "0123456789abcdef0", "0123456789abcdeg", "0123456789ABCDEF"}) {
    EXPECT_FALSE(kv::is_stack_id(bad)) << bad;
  }
}

TEST(StackId, StatusFieldsSayTheStackAndOnlyAChangedOneSaysWhereItStarted) {
  sectorflow::protocol::ServiceStatus status;
  status.state = "idle";
  status.extra["stack_changed"] = std::string("stale");
  kv::set_stack_fields(status, {});
  EXPECT_TRUE(status.extra.empty()) << "no stack known: no stack fields";
  kv::set_stack_fields(status, {"bbbbbbbbbbbbbbbb", "bbbbbbbbbbbbbbbb"});
  EXPECT_EQ(status.extra, (decltype(status.extra){{"stack_id", std::string("bbbbbbbbbbbbbbbb")}}));
  kv::set_stack_fields(status, {"cccccccccccccccc", "bbbbbbbbbbbbbbbb"});
  EXPECT_EQ(status.extra, (decltype(status.extra){{"stack_id", std::string("cccccccccccccccc")},
                                                  {"stack_changed", std::string("bbbbbbbbbbbbbbbb")}}));
  sectorflow::protocol::ServiceStatus server;
  server.state = "idle";
  server.extra["stack_id"] = std::string("cccccccccccccccc");
  EXPECT_EQ(kv::stack_id_of(server), "cccccccccccccccc");
  server.extra["stack_id"] = std::int64_t{7};
  EXPECT_EQ(kv::stack_id_of(server), "") << "a field that is no stack id names no stack";
}
