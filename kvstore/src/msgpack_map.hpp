// Reading a schema record: a msgpack map with string keys, fields fetched by name and type, and
// errors that name the record and the field. Private to the kvstore library.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <msgpack.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace sectorflow::kvstore::detail {

class MsgpackMap {
 public:
  /// Parses `bytes`; `what` names the record in errors ("NodeGroupRecord"). Throws KvstoreError
  /// unless the bytes are one msgpack map with string keys whose "version" is kSchemaVersion.
  MsgpackMap(std::string_view bytes, std::string what);

  /// Adds "'<label>'" after the record name in later errors (e.g. the uid once it is known).
  void name(const std::string& label);

  bool has(const std::string& key) const { return fields_.count(key) != 0; }
  std::string string(const std::string& key) const;
  /// The string field `key`; throws KvstoreError naming it if it is longer than `max_bytes`.
  std::string string(const std::string& key, std::size_t max_bytes) const;
  std::uint64_t unsigned_int(const std::string& key, std::uint64_t max) const;
  double number(const std::string& key) const;
  /// At most `max_count` ports, each 1..65535.
  std::vector<std::uint16_t> ports(const std::string& key, std::size_t max_count) const;
  /// At most `max_count` strings of at most `max_bytes` each.
  std::vector<std::string> strings(const std::string& key, std::size_t max_count, std::size_t max_bytes) const;
  /// Throws KvstoreError if a field outside `known` is present.
  void reject_unknown(std::initializer_list<std::string_view> known) const;
  const std::map<std::string, const msgpack::object*>& fields() const { return fields_; }
  /// "<what> '<label>': <field> '<key>'": the start of an error message about one field.
  std::string about(const std::string& key) const;

 private:
  const msgpack::object& get(const std::string& key) const;

  msgpack::object_handle handle_;
  std::string what_;
  std::map<std::string, const msgpack::object*> fields_;
};

/// A short description of a msgpack object's type for error messages ("a string", "an array").
std::string type_name(const msgpack::object& object);

/// Parses `bytes` as msgpack within limits that make the parse cost at most a few times the input:
/// msgpack-c reserves a container's elements from its header, so an array header claiming 2^32
/// elements in five bytes would otherwise ask for 100 GB. Throws what msgpack-c throws.
msgpack::object_handle unpack_bounded(std::string_view bytes, std::size_t& offset);

/// Packs a string key (msgpack str).
void pack_key(msgpack::packer<msgpack::sbuffer>& packer, std::string_view key);

/// Appends a msgpack float 64 even for integral values (msgpack-c's pack_double writes 1000.0 as
/// the integer 1000), so that a float field stays a float for every reader.
void pack_float64(msgpack::sbuffer& buffer, double value);

}  // namespace sectorflow::kvstore::detail
