// Reading msgpack that came from a peer: one object within bounds, and a map of named fields
// fetched by name and type with errors that name the message and the field. Every decoder of the
// protocol library reads through here (data header, info message, kvstore records). Private to
// the protocol library.
//
// Bounds: msgpack-c allocates an array or map for the element count its header claims before it
// reads one element, so without limits a few bytes claiming 2^32 elements ask for up to 190 GB
// (found by every fuzz target in tests/fuzz). No count or length may exceed the bytes of the
// message, nesting is bounded, and each message type adds the ceilings of its own contract; what
// decoding allocates is then a small multiple of the message's size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <msgpack.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "sectorflow/protocol/refusal.hpp"

namespace sectorflow::protocol::detail {

/// Containers nested deeper are rejected as invalid msgpack. Above the contracts' 2, so that a
/// field of the wrong type is reported as that field's error.
inline constexpr std::size_t kMaxMsgpackDepth = 8;

/// No count or length beyond the message's own bytes, nesting at most kMaxMsgpackDepth.
msgpack::unpack_limit limits_for(std::size_t message_bytes);

/// Exactly one msgpack object filling `size` bytes, within limits_for(size) and `caps` (the
/// contract's own ceilings). Throws ProtocolError of `kind` starting with `what` ("data header").
msgpack::object_handle unpack_bounded(const void* data, std::size_t size, const msgpack::unpack_limit& caps,
                                      const std::string& what, Refusal kind);

/// A short description of a msgpack object's type for error messages ("a string", "an array").
std::string type_name(const msgpack::object& object);

/// A data header of either dialect: exactly `count` unsigned integers below 2^32 in one msgpack
/// array, stored in `out` (a short array: its bounds leave room for near misses, a tenth field or a
/// string where a number belongs, so that their errors say what was wrong). `what` starts the
/// errors ("data header"), `names[i]` names field i; throws ProtocolError(Refusal::kHeader). The
/// hot path of every relay and NodeGroup thread: it allocates nothing unless it throws.
void unpack_u32_array(const void* data, std::size_t size, const char* const* names, std::size_t count,
                      std::uint32_t* out, const char* what);
/// As above, for an array of `min_count`..`max_count` fields (out holds max_count); returns the count.
std::size_t unpack_u32_array(const void* data, std::size_t size, const char* const* names, std::size_t min_count,
                             std::size_t max_count, std::uint32_t* out, const char* what);

/// A msgpack map with string keys and a "version" field: a record or an info message.
class MsgpackMap {
 public:
  /// Parses `bytes` (unpack_bounded with `caps`); `what` names the message in errors
  /// ("NodeGroupRecord", "info message"). Throws ProtocolError of `kind` unless the bytes are one
  /// msgpack map with UTF-8 string keys whose "version" is `version`.
  MsgpackMap(std::string_view bytes, std::string what, const msgpack::unpack_limit& caps, std::uint32_t version,
             Refusal kind);

  /// Adds "'<label>'" after the message's name in later errors (e.g. the uid once it is known).
  void name(const std::string& label);

  bool has(const std::string& key) const { return fields_.count(key) != 0; }
  std::string string(const std::string& key) const;
  /// The string field `key`; throws ProtocolError naming it if it is longer than `max_bytes`.
  std::string string(const std::string& key, std::size_t max_bytes) const;
  std::uint64_t unsigned_int(const std::string& key, std::uint64_t max) const;
  double number(const std::string& key) const;
  /// At most `max_count` ports, each 1..65535.
  std::vector<std::uint16_t> ports(const std::string& key, std::size_t max_count) const;
  /// At most `max_count` strings of at most `max_bytes` each.
  std::vector<std::string> strings(const std::string& key, std::size_t max_count, std::size_t max_bytes) const;
  /// The map field `key` of strings to unsigned integers (at most `max` each); at most `max_count`
  /// entries, keys of at most `max_bytes`.
  std::map<std::string, std::uint64_t> counts(const std::string& key, std::size_t max_count, std::size_t max_bytes,
                                              std::uint64_t max) const;
  bool boolean(const std::string& key) const;
  /// At most `max_count` unsigned integers of at most `max` each.
  std::vector<std::uint64_t> unsigned_ints(const std::string& key, std::size_t max_count, std::uint64_t max) const;
  /// At most `max_count` integers from -1 up.
  std::vector<std::int64_t> counts_or_unknown(const std::string& key, std::size_t max_count) const;
  /// At most `max_rows` arrays of exactly `width` integers from -1 up each.
  std::vector<std::vector<std::int64_t>> count_rows(const std::string& key, std::size_t max_rows,
                                                    std::size_t width) const;
  /// Throws ProtocolError if a field outside `known` is present.
  void reject_unknown(const std::vector<std::string_view>& known) const;
  const std::map<std::string, const msgpack::object*>& fields() const { return fields_; }
  /// "<what> '<label>': field '<key>'": the start of an error message about one field.
  std::string about(const std::string& key) const;
  /// A ProtocolError of this message's refusal kind.
  [[noreturn]] void fail(const std::string& what) const;

 private:
  const msgpack::object& get(const std::string& key) const;

  msgpack::object_handle handle_;
  std::string what_;
  Refusal kind_;
  std::map<std::string, const msgpack::object*> fields_;
};

/// Writes a record: a msgpack map of `fields` entries, "version" first, each field by name. The
/// number of fields is the record's field list's, so bytes() refuses a record written short.
class MapPacker {
 public:
  MapPacker(std::size_t fields, std::uint32_t version);
  void field(std::string_view key, std::uint64_t value);
  void field(std::string_view key, bool value);
  void field(std::string_view key, double value);
  void field(std::string_view key, std::string_view value);
  void field(std::string_view key, const std::vector<std::string>& values);
  void field(std::string_view key, const std::vector<std::uint64_t>& values);
  void field(std::string_view key, const std::vector<std::int64_t>& values);
  void field(std::string_view key, const std::vector<std::vector<std::int64_t>>& rows);
  void field(std::string_view key, const std::map<std::string, std::uint64_t>& values);
  /// The encoded map; throws std::logic_error if fewer or more fields were written than declared.
  std::string bytes() const;

 private:
  msgpack::sbuffer buffer_;
  msgpack::packer<msgpack::sbuffer> packer_;
  std::size_t declared_;
  std::size_t written_ = 0;
};

/// Packs a string (msgpack str).
void pack_key(msgpack::packer<msgpack::sbuffer>& packer, std::string_view key);

/// Appends a msgpack float 64 even for integral values (msgpack-c's pack_double writes 1000.0 as
/// the integer 1000), so that a float field stays a float for every reader.
void pack_float64(msgpack::sbuffer& buffer, double value);

}  // namespace sectorflow::protocol::detail
