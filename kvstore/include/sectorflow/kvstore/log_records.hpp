// The records of a kvstore server's log on disk and their framing (kvstore/SPEC.md, "Durable
// records"). A file is the 8 bytes kLogMagic, then records, each framed as
//
//   u32 length   big-endian, bytes of the payload (1 .. kMaxLogPayloadBytes)
//   u32 crc      big-endian, CRC32C (Castagnoli) of the payload
//   payload      u8 kind, i64 sequence (big-endian), then by kind:
//                  kSet       i64 deadline (Unix ms, 0: no ttl), then six strings, each a u32
//                             big-endian length and its bytes: key, uuid, properties (the kvmsg
//                             frame), body, writer (the authenticated identity, or ""), account
//                             (who the key is charged to)
//                  kDelete    one string: key
//                  kSnapshot  nothing more: a snapshot file's first record, the server's
//                             sequence when the snapshot was taken
//
// A reader stops at the first record that is torn (fewer bytes than its frame says), fails its
// checksum or does not decode: that record and everything after it are the file's cut tail.
// Nothing here trusts the bytes it reads: lengths are checked against what is there before
// anything is allocated.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace sectorflow::kvstore {

/// The first bytes of every log and snapshot file (version 1 of the format).
inline constexpr std::string_view kLogMagic{"SFKVLOG\x01", 8};
/// Bytes of a record's frame before its payload: length and checksum.
inline constexpr std::size_t kLogFrameBytes = 8;
/// The largest payload a reader accepts: the largest kvmsg (a body of up to 2^30 bytes, key,
/// properties) with room to spare. A longer length field is a corrupt record.
inline constexpr std::size_t kMaxLogPayloadBytes = (std::size_t{1} << 30) + (std::size_t{1} << 20);

struct LogRecord {
  enum class Kind : std::uint8_t { kSet = 1, kDelete = 2, kSnapshot = 3 };
  Kind kind = Kind::kSet;
  std::int64_t sequence = 0;     ///< the sequence the update was published with (> 0)
  std::int64_t deadline_ms = 0;  ///< kSet: when the key expires, Unix milliseconds; 0: never
  std::string key;               ///< kSet, kDelete: 1 .. kMaxKeyBytes bytes
  std::string uuid;              ///< kSet: 0 or kUuidBytes bytes
  std::string properties;        ///< kSet: the properties frame ("name=value\n" lines)
  std::string body;              ///< kSet: the value, not empty
  std::string writer;            ///< kSet: the writer's identity with CURVE, else ""
  std::string account;           ///< kSet: who the key is charged to (server.hpp, "Bounds")

  bool operator==(const LogRecord& other) const;
};

/// CRC32C (Castagnoli, reflected, as iSCSI and ext4 use it) of `bytes`.
std::uint32_t crc32c(std::string_view bytes);

/// One record, framed (length, checksum, payload). Throws KvstoreError for a record the reader
/// would refuse (a key or uuid out of bounds, an empty body, a sequence below 1).
std::string encode_log_record(const LogRecord& record);

/// What reading one file found.
struct LogRead {
  std::size_t records = 0;      ///< whole records handed to the callback
  std::size_t whole_bytes = 0;  ///< bytes of the magic and the whole records: where a cut tail begins
  std::size_t cut_bytes = 0;    ///< bytes after them (0: the file is whole)
  std::string cut_reason;       ///< why the tail was cut ("" when whole)
};

/// Reads the records of one file's content in order, calling `apply` with each whole one, and
/// stops at the first that is not (LogRead says where and why). An empty file is whole; one
/// shorter than the magic, or with another magic, has no whole record. Throws only what `apply` throws (and bad_alloc).
LogRead read_log_records(std::string_view content, const std::function<void(LogRecord&&)>& apply);

}  // namespace sectorflow::kvstore
