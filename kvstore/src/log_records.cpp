#include "sectorflow/kvstore/log_records.hpp"

#include <array>
#include <optional>

#include "sectorflow/kvstore/errors.hpp"
#include "sectorflow/kvstore/kvmsg.hpp"

namespace sectorflow::kvstore {
namespace {

constexpr std::uint32_t kCastagnoli = 0x82F63B78u;  // reflected polynomial

std::array<std::uint32_t, 256> crc_table() {
  std::array<std::uint32_t, 256> table{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t crc = i;
    for (int bit = 0; bit < 8; ++bit) crc = (crc & 1u) != 0 ? (crc >> 1) ^ kCastagnoli : crc >> 1;
    table[i] = crc;
  }
  return table;
}

void put_u32(std::string& out, std::uint32_t value) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((value >> shift) & 0xffu));
}

void put_i64(std::string& out, std::int64_t value) {
  const auto bits = static_cast<std::uint64_t>(value);
  for (int shift = 56; shift >= 0; shift -= 8) out.push_back(static_cast<char>((bits >> shift) & 0xffu));
}

void put_string(std::string& out, std::string_view text) {
  put_u32(out, static_cast<std::uint32_t>(text.size()));
  out.append(text);
}

// Reads big-endian fields from a payload, refusing to read past its end.
class Cursor {
 public:
  explicit Cursor(std::string_view bytes) : bytes_(bytes) {}

  std::optional<std::uint64_t> unsigned_bytes(std::size_t n) {
    if (bytes_.size() - at_ < n) return std::nullopt;
    std::uint64_t value = 0;
    for (std::size_t i = 0; i < n; ++i) value = (value << 8) | static_cast<unsigned char>(bytes_[at_ + i]);
    at_ += n;
    return value;
  }
  std::optional<std::string> string() {
    const std::optional<std::uint64_t> size = unsigned_bytes(4);
    if (!size || bytes_.size() - at_ < *size) return std::nullopt;
    std::string text(bytes_.substr(at_, static_cast<std::size_t>(*size)));
    at_ += static_cast<std::size_t>(*size);
    return text;
  }
  bool done() const { return at_ == bytes_.size(); }

 private:
  std::string_view bytes_;
  std::size_t at_ = 0;
};

// The highest sequence a record may carry: a server counts on from its log's last one, and past
// 2^63 - 1 its sequence would wrap negative (every later write then refused as stale). 2^62 leaves
// more writes than a server makes in any lifetime (a million a second for 146,000 years).
constexpr std::int64_t kMaxSequence = std::int64_t{1} << 62;

// Why a record may not be written or read ("" when it may).
std::string refusal(const LogRecord& r) {
  if (r.sequence < 1) return "sequence " + std::to_string(r.sequence) + " below 1";
  if (r.sequence > kMaxSequence) return "sequence " + std::to_string(r.sequence) + " above 2^62";
  if (r.kind == LogRecord::Kind::kSnapshot) return {};
  if (r.key.empty() || r.key.size() > kMaxKeyBytes) {
    return "key of " + std::to_string(r.key.size()) + " bytes, expected 1 to " + std::to_string(kMaxKeyBytes);
  }
  if (r.kind == LogRecord::Kind::kDelete) return {};
  if (!r.uuid.empty() && r.uuid.size() != kUuidBytes) return "uuid of " + std::to_string(r.uuid.size()) + " bytes";
  if (r.body.empty()) return "a set record of '" + r.key + "' without a value";
  if (r.deadline_ms < 0) return "deadline " + std::to_string(r.deadline_ms) + " below 0";
  if (r.properties.size() > kMaxPropertiesBytes) return "properties of " + std::to_string(r.properties.size()) + " bytes";
  try {
    decode_properties(r.properties);
  } catch (const KvstoreError& error) {
    return error.what();
  }
  return {};
}

// The record a payload holds, or why it holds none.
std::optional<LogRecord> decode_payload(std::string_view payload, std::string& why) {
  Cursor cursor(payload);
  LogRecord record;
  const std::optional<std::uint64_t> kind = cursor.unsigned_bytes(1);
  const std::optional<std::uint64_t> sequence = cursor.unsigned_bytes(8);
  if (!kind || !sequence) {
    why = "a payload of " + std::to_string(payload.size()) + " bytes, too short for a kind and a sequence";
    return std::nullopt;
  }
  record.sequence = static_cast<std::int64_t>(*sequence);
  switch (*kind) {
    case static_cast<std::uint64_t>(LogRecord::Kind::kSet): {
      record.kind = LogRecord::Kind::kSet;
      const std::optional<std::uint64_t> deadline = cursor.unsigned_bytes(8);
      std::optional<std::string> fields[6];
      bool whole = deadline.has_value();
      for (auto& field : fields) {
        if (whole) field = cursor.string();
        whole = whole && field.has_value();
      }
      if (!whole) {
        why = "a set record whose fields run past its payload";
        return std::nullopt;
      }
      record.deadline_ms = static_cast<std::int64_t>(*deadline);
      record.key = std::move(*fields[0]);
      record.uuid = std::move(*fields[1]);
      record.properties = std::move(*fields[2]);
      record.body = std::move(*fields[3]);
      record.writer = std::move(*fields[4]);
      record.account = std::move(*fields[5]);
      break;
    }
    case static_cast<std::uint64_t>(LogRecord::Kind::kDelete): {
      record.kind = LogRecord::Kind::kDelete;
      std::optional<std::string> key = cursor.string();
      if (!key) {
        why = "a delete record whose key runs past its payload";
        return std::nullopt;
      }
      record.key = std::move(*key);
      break;
    }
    case static_cast<std::uint64_t>(LogRecord::Kind::kSnapshot):
      record.kind = LogRecord::Kind::kSnapshot;
      break;
    default:
      why = "a record of unknown kind " + std::to_string(*kind);
      return std::nullopt;
  }
  if (!cursor.done()) {
    why = "a record with bytes after its last field";
    return std::nullopt;
  }
  why = refusal(record);
  if (!why.empty()) return std::nullopt;
  return record;
}

}  // namespace

bool LogRecord::operator==(const LogRecord& o) const {
  return kind == o.kind && sequence == o.sequence && deadline_ms == o.deadline_ms && key == o.key && uuid == o.uuid &&
         properties == o.properties && body == o.body && writer == o.writer && account == o.account;
}

std::uint32_t crc32c(std::string_view bytes) {
  static const std::array<std::uint32_t, 256> table = crc_table();
  std::uint32_t crc = 0xffffffffu;
  for (const char c : bytes) crc = table[(crc ^ static_cast<unsigned char>(c)) & 0xffu] ^ (crc >> 8);
  return crc ^ 0xffffffffu;
}

std::string encode_log_record(const LogRecord& record) {
  if (const std::string why = refusal(record); !why.empty()) {
    throw KvstoreError("kvstore log: cannot write a record: " + why);
  }
  std::string payload;
  payload.push_back(static_cast<char>(record.kind));
  put_i64(payload, record.sequence);
  switch (record.kind) {
    case LogRecord::Kind::kSet:
      put_i64(payload, record.deadline_ms);
      for (const std::string* field :
           {&record.key, &record.uuid, &record.properties, &record.body, &record.writer, &record.account}) {
        put_string(payload, *field);
      }
      break;
    case LogRecord::Kind::kDelete:
      put_string(payload, record.key);
      break;
    case LogRecord::Kind::kSnapshot:
      break;
  }
  if (payload.size() > kMaxLogPayloadBytes) {
    throw KvstoreError("kvstore log: a record of " + std::to_string(payload.size()) + " bytes, at most " +
                       std::to_string(kMaxLogPayloadBytes));
  }
  std::string framed;
  framed.reserve(kLogFrameBytes + payload.size());
  put_u32(framed, static_cast<std::uint32_t>(payload.size()));
  put_u32(framed, crc32c(payload));
  framed += payload;
  return framed;
}

LogRead read_log_records(std::string_view content, const std::function<void(LogRecord&&)>& apply) {
  LogRead read;
  const auto cut = [&read, &content](std::string why) {
    read.cut_bytes = content.size() - read.whole_bytes;
    read.cut_reason = std::move(why);
    return read;
  };
  if (content.empty()) return read;  // no record, nothing to cut
  if (content.size() < kLogMagic.size() || content.substr(0, kLogMagic.size()) != kLogMagic) {
    return cut(content.size() < kLogMagic.size() ? "the file is shorter than its magic"
                                                 : "the file does not begin with the log's magic");
  }
  read.whole_bytes = kLogMagic.size();
  while (read.whole_bytes < content.size()) {
    Cursor frame(content.substr(read.whole_bytes));
    const std::optional<std::uint64_t> length = frame.unsigned_bytes(4);
    const std::optional<std::uint64_t> crc = frame.unsigned_bytes(4);
    if (!length || !crc) return cut("a torn record frame at byte " + std::to_string(read.whole_bytes));
    if (*length == 0 || *length > kMaxLogPayloadBytes) {
      return cut("a record length of " + std::to_string(*length) + " bytes at byte " +
                 std::to_string(read.whole_bytes));
    }
    const std::size_t start = read.whole_bytes + kLogFrameBytes;
    if (content.size() - start < *length) {
      return cut("a torn record at byte " + std::to_string(read.whole_bytes) + ": " + std::to_string(*length) +
                 " bytes announced, " + std::to_string(content.size() - start) + " there");
    }
    const std::string_view payload = content.substr(start, static_cast<std::size_t>(*length));
    if (crc32c(payload) != *crc) return cut("a record failing its checksum at byte " + std::to_string(read.whole_bytes));
    std::string why;
    std::optional<LogRecord> record = decode_payload(payload, why);
    if (!record) return cut(why + " at byte " + std::to_string(read.whole_bytes));
    apply(std::move(*record));
    ++read.records;
    read.whole_bytes = start + payload.size();
  }
  return read;
}

}  // namespace sectorflow::kvstore
