// A stack's identity (kvstore/SPEC.md, "The stack's identity"): the id a kvstore server makes when
// it starts, keeps in its log_dir across restarts, and publishes as the `stack_id` of its status;
// and the fields with which every client says, in each status it writes, which stack it is in.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "sectorflow/protocol/records.hpp"

namespace sectorflow::kvstore {

/// Hex digits of a stack id; defined beside the records that carry one (NodeGroupRecord).
using protocol::kStackIdChars;
/// The status field naming the stack: in the server's status, and in every status a client writes.
inline constexpr std::string_view kStackIdField = "stack_id";
/// The status field a client adds once its server is another stack than the one it first synced
/// with: that first stack's id.
inline constexpr std::string_view kStackChangedField = "stack_changed";
/// The file in the log_dir that keeps a durable server's stack id.
inline constexpr const char* kStackIdFile = "stack_id";

/// A new random stack id: kStackIdChars lowercase hex digits.
std::string new_stack_id();
/// Whether `text` is a stack id (kStackIdChars lowercase hex digits).
using protocol::is_stack_id;

/// What a client knows of its server's stack.
struct StackIdentity {
  std::string id;     ///< the stack its last snapshot came from; "" before one named a stack
  std::string first;  ///< the stack of its first snapshot that named one: the stack it joined

  /// The server is another stack than the one the client joined.
  bool changed() const { return !first.empty() && id != first; }
  bool operator==(const StackIdentity& other) const { return id == other.id && first == other.first; }
};

/// The stack id a server's status names, or "" (none, or not a stack id).
std::string stack_id_of(const protocol::ServiceStatus& server_status);

/// Sets `status`'s stack fields to `stack`: kStackIdField (erased while the id is unknown) and
/// kStackChangedField (the first id, only while changed()).
void set_stack_fields(protocol::ServiceStatus& status, const StackIdentity& stack);

}  // namespace sectorflow::kvstore
