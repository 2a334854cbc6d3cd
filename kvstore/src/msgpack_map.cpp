#include "msgpack_map.hpp"

#include <cstring>
#include <limits>

#include "sectorflow/kvstore/errors.hpp"
#include "sectorflow/kvstore/schema.hpp"

namespace sectorflow::kvstore::detail {
namespace {

// Containers nested deeper are rejected as invalid msgpack: records nest 2 deep, and 8 leaves
// room for a field of the wrong type to be reported as that field's error.
constexpr std::size_t kMaxDepth = 8;

// msgpack-c allocates an array or map for the element count its header claims before it reads one
// element: unlimited, a 5-byte record claiming 2^32 entries asks for 190 GB (found by
// tests/fuzz/fuzz_nodegroup_record). No count or length can exceed the record's bytes; with the
// depth bounded too, what decoding allocates is a small multiple of the record's size.
msgpack::unpack_limit limits_for(std::size_t bytes) {
  return msgpack::unpack_limit(bytes, bytes, bytes, bytes, bytes, kMaxDepth);
}

}  // namespace

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

MsgpackMap::MsgpackMap(std::string_view bytes, std::string what) : what_(std::move(what)) {
  std::size_t offset = 0;
  try {
    handle_ = msgpack::unpack(bytes.data(), bytes.size(), offset, nullptr, nullptr, limits_for(bytes.size()));
  } catch (const std::exception& error) {
    throw KvstoreError(what_ + ": not valid msgpack (" + error.what() + ")");
  }
  if (offset != bytes.size()) throw KvstoreError(what_ + ": trailing bytes after the msgpack map");
  const msgpack::object& root = handle_.get();
  if (root.type != msgpack::type::MAP) {
    throw KvstoreError(what_ + ": expected a msgpack map, got " + type_name(root));
  }
  for (std::uint32_t i = 0; i < root.via.map.size; ++i) {
    const msgpack::object_kv& kv = root.via.map.ptr[i];
    if (kv.key.type != msgpack::type::STR) {
      throw KvstoreError(what_ + ": expected string keys, got " + type_name(kv.key));
    }
    fields_[std::string(kv.key.via.str.ptr, kv.key.via.str.size)] = &kv.val;
  }
  const std::uint64_t version = unsigned_int("version", std::numeric_limits<std::uint32_t>::max());
  if (version != kSchemaVersion) {
    throw KvstoreError(what_ + ": schema version " + std::to_string(version) + ", this program reads version " +
                       std::to_string(kSchemaVersion) + " (update the writer or this program)");
  }
}

void MsgpackMap::name(const std::string& label) { what_ += " '" + label + "'"; }

std::string MsgpackMap::about(const std::string& key) const { return what_ + ": field '" + key + "'"; }

const msgpack::object& MsgpackMap::get(const std::string& key) const {
  const auto found = fields_.find(key);
  if (found == fields_.end()) throw KvstoreError(what_ + ": missing field '" + key + "'");
  return *found->second;
}

std::string MsgpackMap::string(const std::string& key) const {
  const msgpack::object& object = get(key);
  if (object.type != msgpack::type::STR) {
    throw KvstoreError(about(key) + ": expected a string, got " + type_name(object));
  }
  return std::string(object.via.str.ptr, object.via.str.size);
}

std::uint64_t MsgpackMap::unsigned_int(const std::string& key, std::uint64_t max) const {
  const msgpack::object& object = get(key);
  if (object.type != msgpack::type::POSITIVE_INTEGER) {
    throw KvstoreError(about(key) + ": expected an unsigned integer, got " + type_name(object));
  }
  if (object.via.u64 > max) {
    throw KvstoreError(about(key) + ": " + std::to_string(object.via.u64) + " is above the maximum " +
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
    default: throw KvstoreError(about(key) + ": expected a number, got " + type_name(object));
  }
}

std::vector<std::uint16_t> MsgpackMap::ports(const std::string& key) const {
  const msgpack::object& object = get(key);
  if (object.type != msgpack::type::ARRAY) {
    throw KvstoreError(about(key) + ": expected an array of ports, got " + type_name(object));
  }
  std::vector<std::uint16_t> ports;
  for (std::uint32_t i = 0; i < object.via.array.size; ++i) {
    const msgpack::object& port = object.via.array.ptr[i];
    if (port.type != msgpack::type::POSITIVE_INTEGER || port.via.u64 == 0 || port.via.u64 > 65535) {
      throw KvstoreError(about(key) + ": element " + std::to_string(i) + " is not a port from 1 to 65535");
    }
    ports.push_back(static_cast<std::uint16_t>(port.via.u64));
  }
  return ports;
}

std::vector<std::string> MsgpackMap::strings(const std::string& key) const {
  const msgpack::object& object = get(key);
  if (object.type != msgpack::type::ARRAY) {
    throw KvstoreError(about(key) + ": expected an array of strings, got " + type_name(object));
  }
  std::vector<std::string> strings;
  for (std::uint32_t i = 0; i < object.via.array.size; ++i) {
    const msgpack::object& element = object.via.array.ptr[i];
    if (element.type != msgpack::type::STR) {
      throw KvstoreError(about(key) + ": element " + std::to_string(i) + " is " + type_name(element) +
                         ", expected a string");
    }
    strings.emplace_back(element.via.str.ptr, element.via.str.size);
  }
  return strings;
}

void MsgpackMap::reject_unknown(std::initializer_list<std::string_view> known) const {
  for (const auto& [key, value] : fields_) {
    bool listed = false;
    for (const std::string_view name : known) listed = listed || key == name;
    if (!listed) {
      std::string names;
      for (const std::string_view name : known) names += (names.empty() ? "" : ", ") + std::string(name);
      throw KvstoreError(what_ + ": unknown field '" + key + "' (known: " + names + ")");
    }
  }
}

}  // namespace sectorflow::kvstore::detail
