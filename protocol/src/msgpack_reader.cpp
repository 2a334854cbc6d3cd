#include "msgpack_reader.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "sectorflow/protocol/errors.hpp"
#include "sectorflow/protocol/text.hpp"

namespace sectorflow::protocol::detail {

std::string type_name(const msgpack::object& object) {
  switch (object.type) {
    case msgpack::type::NIL: return "nil";
    case msgpack::type::BOOLEAN: return "a bool";
    case msgpack::type::POSITIVE_INTEGER: return "an unsigned integer";
    case msgpack::type::NEGATIVE_INTEGER: return "a negative integer";
    case msgpack::type::FLOAT32:
    case msgpack::type::FLOAT64: return "a float";
    case msgpack::type::STR: return "a string";
    case msgpack::type::BIN: return "binary data";
    case msgpack::type::ARRAY: return "an array";
    case msgpack::type::MAP: return "a map";
    default: return "an extension type";
  }
}

msgpack::unpack_limit limits_for(std::size_t message_bytes) {
  return msgpack::unpack_limit(message_bytes, message_bytes, message_bytes, message_bytes, message_bytes,
                               kMaxMsgpackDepth);
}

msgpack::object_handle unpack_bounded(const void* data, std::size_t size, const msgpack::unpack_limit& caps,
                                      const std::string& what, Refusal kind) {
  const msgpack::unpack_limit own = limits_for(size);
  const msgpack::unpack_limit limit(std::min(own.array(), caps.array()), std::min(own.map(), caps.map()),
                                    std::min(own.str(), caps.str()), std::min(own.bin(), caps.bin()),
                                    std::min(own.ext(), caps.ext()), std::min(own.depth(), caps.depth()));
  std::size_t offset = 0;
  msgpack::object_handle handle;
  try {
    handle = msgpack::unpack(static_cast<const char*>(data), size, offset, nullptr, nullptr, limit);
  } catch (const std::exception& error) {
    throw ProtocolError(what + ": not valid msgpack within its bounds (" + error.what() + ")", kind);
  }
  if (offset != size) {
    throw ProtocolError(what + ": " + std::to_string(size - offset) + " bytes after the msgpack object", kind);
  }
  return handle;
}

namespace {

// Big-endian unsigned integer of `n` bytes at `p` (msgpack's byte order).
std::uint64_t big_endian(const unsigned char* p, std::size_t n) {
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < n; ++i) value = (value << 8) | p[i];
  return value;
}

// The header as every well-behaved peer writes it: one array of min_count to max_count unsigned
// integers below 2^32, nothing after it. Reads it without msgpack-c's object tree (the general unpacker cost
// as much per message as the rest of a relay's or NodeGroup's work on it); anything else (a near
// miss, a wrong type, trailing bytes) returns 0, and the general path reads it and says what is
// wrong. What this accepts, the general path accepts with the same values. Returns the length.
std::size_t unpack_u32_array_fast(const unsigned char* p, std::size_t size, std::size_t min_count,
                                  std::size_t max_count, std::uint32_t* out) {
  const unsigned char* const end = p + size;
  if (p == end) return 0;
  std::uint64_t n = 0;
  if ((*p & 0xf0u) == 0x90u) {  // fixarray
    n = *p & 0x0fu;
    p += 1;
  } else if (*p == 0xdc && end - p >= 3) {  // array 16
    n = big_endian(p + 1, 2);
    p += 3;
  } else if (*p == 0xdd && end - p >= 5) {  // array 32
    n = big_endian(p + 1, 4);
    p += 5;
  } else {
    return 0;
  }
  if (n < min_count || n > max_count) return 0;
  const auto count = static_cast<std::size_t>(n);
  for (std::size_t i = 0; i < count; ++i) {
    if (p == end) return 0;
    const unsigned char tag = *p;
    std::size_t width = 0;
    if (tag <= 0x7f) {  // positive fixint
      out[i] = tag;
      p += 1;
      continue;
    }
    switch (tag) {
      case 0xcc: width = 1; break;  // uint 8
      case 0xcd: width = 2; break;  // uint 16
      case 0xce: width = 4; break;  // uint 32
      case 0xcf: width = 8; break;  // uint 64
      default: return 0;
    }
    if (static_cast<std::size_t>(end - p) < 1 + width) return 0;
    const std::uint64_t value = big_endian(p + 1, width);
    if (value > std::numeric_limits<std::uint32_t>::max()) return 0;
    out[i] = static_cast<std::uint32_t>(value);
    p += 1 + width;
  }
  return p == end ? count : 0;
}

}  // namespace

void unpack_u32_array(const void* data, std::size_t size, const char* const* names, std::size_t count,
                      std::uint32_t* out, const char* what) {
  (void)unpack_u32_array(data, size, names, count, count, out, what);
}

std::size_t unpack_u32_array(const void* data, std::size_t size, const char* const* names, std::size_t min_count,
                             std::size_t max_count, std::uint32_t* out, const char* what) {
  if (const std::size_t fast = unpack_u32_array_fast(static_cast<const unsigned char*>(data), size, min_count,
                                                     max_count, out)) {
    return fast;
  }
  static const msgpack::unpack_limit kHeaderLimit(/*array=*/64, /*map=*/16, /*str=*/64, /*bin=*/64, /*ext=*/64,
                                                  /*depth=*/4);
  const msgpack::object_handle handle = unpack_bounded(data, size, kHeaderLimit, what, Refusal::kHeader);
  const msgpack::object& root = handle.get();
  if (root.type != msgpack::type::ARRAY) {
    throw ProtocolError(std::string(what) + ": expected a msgpack array, got " + type_name(root), Refusal::kHeader);
  }
  const std::size_t count = root.via.array.size;
  if (count < min_count || count > max_count) {
    throw ProtocolError(std::string(what) + ": expected " + std::to_string(min_count) +
                            (max_count == min_count ? "" : " or " + std::to_string(max_count)) + " fields, got " +
                            std::to_string(count),
                        Refusal::kHeader);
  }
  for (std::size_t i = 0; i < count; ++i) {
    const msgpack::object& field = root.via.array.ptr[i];
    const auto label = [&] {
      return std::string(what) + " field '" + names[i] + "' (index " + std::to_string(i) + ")";
    };
    if (field.type != msgpack::type::POSITIVE_INTEGER) {
      throw ProtocolError(label() + ": expected an unsigned integer, got " + type_name(field), Refusal::kHeader);
    }
    if (field.via.u64 > std::numeric_limits<std::uint32_t>::max()) {
      throw ProtocolError(label() + ": expected a value below 2^32, got " + std::to_string(field.via.u64),
                          Refusal::kHeader);
    }
    out[i] = static_cast<std::uint32_t>(field.via.u64);
  }
  return count;
}

MapPacker::MapPacker(std::size_t fields, std::uint32_t version) : packer_(buffer_), declared_(fields) {
  packer_.pack_map(static_cast<std::uint32_t>(fields));
  pack_key(packer_, "version");
  packer_.pack_uint32(version);
  written_ = 1;
}

void MapPacker::field(std::string_view key, std::uint64_t value) {
  pack_key(packer_, key);
  packer_.pack_uint64(value);
  ++written_;
}

void MapPacker::field(std::string_view key, bool value) {
  pack_key(packer_, key);
  value ? packer_.pack_true() : packer_.pack_false();
  ++written_;
}

void MapPacker::field(std::string_view key, double value) {
  pack_key(packer_, key);
  pack_float64(buffer_, value);
  ++written_;
}

void MapPacker::field(std::string_view key, std::string_view value) {
  pack_key(packer_, key);
  pack_key(packer_, value);
  ++written_;
}

void MapPacker::field(std::string_view key, const std::vector<std::string>& values) {
  pack_key(packer_, key);
  packer_.pack_array(static_cast<std::uint32_t>(values.size()));
  for (const std::string& value : values) pack_key(packer_, value);
  ++written_;
}

void MapPacker::field(std::string_view key, const std::vector<std::uint64_t>& values) {
  pack_key(packer_, key);
  packer_.pack_array(static_cast<std::uint32_t>(values.size()));
  for (const std::uint64_t value : values) packer_.pack_uint64(value);
  ++written_;
}

void MapPacker::field(std::string_view key, const std::vector<std::int64_t>& values) {
  pack_key(packer_, key);
  packer_.pack_array(static_cast<std::uint32_t>(values.size()));
  for (const std::int64_t value : values) packer_.pack_int64(value);
  ++written_;
}

void MapPacker::field(std::string_view key, const std::vector<std::vector<std::int64_t>>& rows) {
  pack_key(packer_, key);
  packer_.pack_array(static_cast<std::uint32_t>(rows.size()));
  for (const std::vector<std::int64_t>& row : rows) {
    packer_.pack_array(static_cast<std::uint32_t>(row.size()));
    for (const std::int64_t value : row) packer_.pack_int64(value);
  }
  ++written_;
}

void MapPacker::field(std::string_view key, const std::map<std::string, std::uint64_t>& values) {
  pack_key(packer_, key);
  packer_.pack_map(static_cast<std::uint32_t>(values.size()));
  for (const auto& [name, value] : values) {
    pack_key(packer_, name);
    packer_.pack_uint64(value);
  }
  ++written_;
}

std::string MapPacker::bytes() const {
  if (written_ != declared_) {
    throw std::logic_error("a record of " + std::to_string(declared_) + " fields was written with " +
                           std::to_string(written_));
  }
  return std::string(buffer_.data(), buffer_.size());
}

void pack_key(msgpack::packer<msgpack::sbuffer>& packer, std::string_view key) {
  packer.pack_str(static_cast<std::uint32_t>(key.size()));
  packer.pack_str_body(key.data(), static_cast<std::uint32_t>(key.size()));
}

void pack_float64(msgpack::sbuffer& buffer, double value) {
  std::uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  char bytes[9];
  bytes[0] = static_cast<char>(0xcb);
  for (int i = 0; i < 8; ++i) bytes[1 + i] = static_cast<char>((bits >> (56 - 8 * i)) & 0xffU);
  buffer.write(bytes, sizeof bytes);
}

MsgpackMap::MsgpackMap(std::string_view bytes, std::string what, const msgpack::unpack_limit& caps,
                       std::uint32_t version, Refusal kind)
    : handle_(unpack_bounded(bytes.data(), bytes.size(), caps, what, kind)), what_(std::move(what)), kind_(kind) {
  const msgpack::object& root = handle_.get();
  if (root.type != msgpack::type::MAP) fail(what_ + ": expected a msgpack map, got " + type_name(root));
  for (std::uint32_t i = 0; i < root.via.map.size; ++i) {
    const msgpack::object_kv& kv = root.via.map.ptr[i];
    if (kv.key.type != msgpack::type::STR) fail(what_ + ": expected string keys, got " + type_name(kv.key));
    const std::string_view key(kv.key.via.str.ptr, kv.key.via.str.size);
    if (!valid_utf8(key)) fail(what_ + ": field name " + shown(key) + " is not valid UTF-8");
    fields_[std::string(key)] = &kv.val;
  }
  const std::uint64_t found = unsigned_int("version", std::numeric_limits<std::uint32_t>::max());
  if (found != version) {
    fail(what_ + ": version " + std::to_string(found) + ", this program reads version " + std::to_string(version) +
         " (update the writer or this program)");
  }
}

void MsgpackMap::fail(const std::string& what) const { throw ProtocolError(what, kind_); }

void MsgpackMap::name(const std::string& label) { what_ += " " + shown(label); }

std::string MsgpackMap::about(const std::string& key) const { return what_ + ": field " + shown(key); }

const msgpack::object& MsgpackMap::get(const std::string& key) const {
  const auto found = fields_.find(key);
  if (found == fields_.end()) fail(what_ + ": missing field " + shown(key));
  return *found->second;
}

std::string MsgpackMap::string(const std::string& key) const {
  const msgpack::object& object = get(key);
  if (object.type != msgpack::type::STR) {
    fail(about(key) + ": expected a string, got " + type_name(object));
  }
  const std::string_view value(object.via.str.ptr, object.via.str.size);
  if (!valid_utf8(value)) fail(about(key) + ": " + shown(value) + " is not valid UTF-8");
  return std::string(value);
}

std::string MsgpackMap::string(const std::string& key, std::size_t max_bytes) const {
  std::string value = string(key);
  if (value.size() > max_bytes) {
    fail(about(key) + ": a string of " + std::to_string(value.size()) + " bytes, expected at most " +
                       std::to_string(max_bytes));
  }
  return value;
}

std::uint64_t MsgpackMap::unsigned_int(const std::string& key, std::uint64_t max) const {
  const msgpack::object& object = get(key);
  if (object.type != msgpack::type::POSITIVE_INTEGER) {
    fail(about(key) + ": expected an unsigned integer, got " + type_name(object));
  }
  if (object.via.u64 > max) {
    fail(about(key) + ": " + std::to_string(object.via.u64) + " is above the maximum " +
                       std::to_string(max));
  }
  return object.via.u64;
}

double MsgpackMap::number(const std::string& key) const {
  const msgpack::object& object = get(key);
  switch (object.type) {
    case msgpack::type::FLOAT32:
    case msgpack::type::FLOAT64: return object.via.f64;
    case msgpack::type::POSITIVE_INTEGER: return static_cast<double>(object.via.u64);
    case msgpack::type::NEGATIVE_INTEGER: return static_cast<double>(object.via.i64);
    default: fail(about(key) + ": expected a number, got " + type_name(object));
  }
}

std::vector<std::uint16_t> MsgpackMap::ports(const std::string& key, std::size_t max_count) const {
  const msgpack::object& object = get(key);
  if (object.type != msgpack::type::ARRAY) {
    fail(about(key) + ": expected an array of ports, got " + type_name(object));
  }
  if (object.via.array.size > max_count) {
    fail(about(key) + ": " + std::to_string(object.via.array.size) + " ports, expected at most " +
                       std::to_string(max_count));
  }
  std::vector<std::uint16_t> ports;
  for (std::uint32_t i = 0; i < object.via.array.size; ++i) {
    const msgpack::object& port = object.via.array.ptr[i];
    if (port.type != msgpack::type::POSITIVE_INTEGER || port.via.u64 == 0 || port.via.u64 > 65535) {
      fail(about(key) + ": element " + std::to_string(i) + " is not a port from 1 to 65535");
    }
    ports.push_back(static_cast<std::uint16_t>(port.via.u64));
  }
  return ports;
}

std::vector<std::string> MsgpackMap::strings(const std::string& key, std::size_t max_count,
                                             std::size_t max_bytes) const {
  const msgpack::object& object = get(key);
  if (object.type != msgpack::type::ARRAY) {
    fail(about(key) + ": expected an array of strings, got " + type_name(object));
  }
  if (object.via.array.size > max_count) {
    fail(about(key) + ": " + std::to_string(object.via.array.size) + " strings, expected at most " +
                       std::to_string(max_count));
  }
  std::vector<std::string> strings;
  for (std::uint32_t i = 0; i < object.via.array.size; ++i) {
    const msgpack::object& element = object.via.array.ptr[i];
    if (element.type != msgpack::type::STR) {
      fail(about(key) + ": element " + std::to_string(i) + " is " + type_name(element) +
                         ", expected a string");
    }
    if (element.via.str.size > max_bytes) {
      fail(about(key) + ": element " + std::to_string(i) + " is a string of " +
                         std::to_string(element.via.str.size) + " bytes, expected at most " + std::to_string(max_bytes));
    }
    const std::string_view value(element.via.str.ptr, element.via.str.size);
    if (!valid_utf8(value)) {
      fail(about(key) + ": element " + std::to_string(i) + " " + shown(value) + " is not valid UTF-8");
    }
    strings.emplace_back(value);
  }
  return strings;
}

std::map<std::string, std::uint64_t> MsgpackMap::counts(const std::string& key, std::size_t max_count,
                                                      std::size_t max_bytes, std::uint64_t max) const {
  const msgpack::object& object = get(key);
  if (object.type != msgpack::type::MAP) fail(about(key) + ": expected a map of names to counts, got " + type_name(object));
  if (object.via.map.size > max_count) {
    fail(about(key) + ": " + std::to_string(object.via.map.size) + " entries, expected at most " +
         std::to_string(max_count));
  }
  std::map<std::string, std::uint64_t> counts;
  for (std::uint32_t i = 0; i < object.via.map.size; ++i) {
    const msgpack::object_kv& kv = object.via.map.ptr[i];
    if (kv.key.type != msgpack::type::STR || kv.key.via.str.size > max_bytes) {
      fail(about(key) + ": entry " + std::to_string(i) + " is not named by a string of at most " +
           std::to_string(max_bytes) + " bytes");
    }
    const std::string name(kv.key.via.str.ptr, kv.key.via.str.size);
    if (kv.val.type != msgpack::type::POSITIVE_INTEGER || kv.val.via.u64 > max) {
      fail(about(key) + ": " + shown(name) + " is " + type_name(kv.val) + ", expected an unsigned integer up to " +
           std::to_string(max));
    }
    counts[name] = kv.val.via.u64;
  }
  return counts;
}

bool MsgpackMap::boolean(const std::string& key) const {
  const msgpack::object& object = get(key);
  if (object.type != msgpack::type::BOOLEAN) fail(about(key) + ": expected true or false, got " + type_name(object));
  return object.via.boolean;
}

std::vector<std::uint64_t> MsgpackMap::unsigned_ints(const std::string& key, std::size_t max_count,
                                                     std::uint64_t max) const {
  const msgpack::object& object = get(key);
  if (object.type != msgpack::type::ARRAY) fail(about(key) + ": expected an array of integers, got " + type_name(object));
  if (object.via.array.size > max_count) {
    fail(about(key) + ": " + std::to_string(object.via.array.size) + " elements, expected at most " +
         std::to_string(max_count));
  }
  std::vector<std::uint64_t> values;
  for (std::uint32_t i = 0; i < object.via.array.size; ++i) {
    const msgpack::object& element = object.via.array.ptr[i];
    if (element.type != msgpack::type::POSITIVE_INTEGER || element.via.u64 > max) {
      fail(about(key) + ": element " + std::to_string(i) + " is " + type_name(element) +
           ", expected an unsigned integer up to " + std::to_string(max));
    }
    values.push_back(element.via.u64);
  }
  return values;
}

namespace {

/// The elements of `array` as counts or -1; `fail` gets what is wrong with element i.
template <typename Fail>
std::vector<std::int64_t> counts_or_unknown_of(const msgpack::object_array& array, const Fail& fail) {
  std::vector<std::int64_t> values;
  for (std::uint32_t i = 0; i < array.size; ++i) {
    const msgpack::object& element = array.ptr[i];
    const bool count = element.type == msgpack::type::POSITIVE_INTEGER &&
                       element.via.u64 <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
    const bool unknown = element.type == msgpack::type::NEGATIVE_INTEGER && element.via.i64 == -1;
    if (!count && !unknown) fail(i, element);
    values.push_back(count ? static_cast<std::int64_t>(element.via.u64) : -1);
  }
  return values;
}

}  // namespace

std::vector<std::int64_t> MsgpackMap::counts_or_unknown(const std::string& key, std::size_t max_count) const {
  const msgpack::object& object = get(key);
  if (object.type != msgpack::type::ARRAY) fail(about(key) + ": expected an array of integers, got " + type_name(object));
  if (object.via.array.size > max_count) {
    fail(about(key) + ": " + std::to_string(object.via.array.size) + " elements, expected at most " +
         std::to_string(max_count));
  }
  return counts_or_unknown_of(object.via.array, [&](std::uint32_t i, const msgpack::object& element) {
    fail(about(key) + ": element " + std::to_string(i) + " is " + type_name(element) + ", expected a count or -1");
  });
}

std::vector<std::vector<std::int64_t>> MsgpackMap::count_rows(const std::string& key, std::size_t max_rows,
                                                              std::size_t width) const {
  const msgpack::object& object = get(key);
  if (object.type != msgpack::type::ARRAY) fail(about(key) + ": expected an array of arrays, got " + type_name(object));
  if (object.via.array.size > max_rows) {
    fail(about(key) + ": " + std::to_string(object.via.array.size) + " elements, expected at most " +
         std::to_string(max_rows));
  }
  std::vector<std::vector<std::int64_t>> rows;
  for (std::uint32_t r = 0; r < object.via.array.size; ++r) {
    const msgpack::object& row = object.via.array.ptr[r];
    const std::string where = about(key) + ": element " + std::to_string(r);
    if (row.type != msgpack::type::ARRAY || row.via.array.size != width) {
      fail(where + " is " + type_name(row) + ", expected an array of " + std::to_string(width) + " integers");
    }
    rows.push_back(counts_or_unknown_of(row.via.array, [&](std::uint32_t i, const msgpack::object& element) {
      fail(where + ", item " + std::to_string(i) + " is " + type_name(element) + ", expected a count or -1");
    }));
  }
  return rows;
}

void MsgpackMap::reject_unknown(const std::vector<std::string_view>& known) const {
  for (const auto& [key, value] : fields_) {
    bool listed = false;
    for (const std::string_view name : known) listed = listed || key == name;
    if (!listed) {
      std::string names;
      for (const std::string_view name : known) names += (names.empty() ? "" : ", ") + std::string(name);
      fail(what_ + ": unknown field " + shown(key) + " (known: " + names + ")");
    }
  }
}

}  // namespace sectorflow::protocol::detail
