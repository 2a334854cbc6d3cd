// The stack's policy: what the kvstore server knows of the records the stack keeps in it
// (kvstore/SPEC.md, "Bounds", "Folding", "Security"), handed to the Server at construction so that
// the store itself knows keys, rooms, groups and folds, never scans, NodeGroups or roles.
//
// The store asks the policy, for each key, whether it is one of the stack's records (kept in a room
// of its own), which group of records it belongs to (the unit the store evicts, oldest first, when
// that room is full), and when a group is over (then the store replaces its records by the one
// record the policy folds them into). With [security] on it asks who may write a key, given what
// the map holds. The store owns the map and every counter; the policy keeps no state of its own, so
// a map restored from the log or a mirrored snapshot needs nothing told to it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sectorflow::kvstore {

/// The map as the policy reads it: each key's body and the identity that last wrote it ("" without
/// CURVE, and for the server's own records).
class StoreView {
 public:
  struct Value {
    std::string_view body;
    std::string_view writer;
  };
  /// Told each key under a prefix, in key order; returns false to stop.
  using Visit = std::function<bool(const std::string& key, const Value& value)>;

  /// The key's value, or nothing when the map does not hold it.
  virtual std::optional<Value> find(const std::string& key) const = 0;
  /// Visits every key starting with `prefix`, in key order, until `visit` returns false.
  virtual void visit(const std::string& prefix, const Visit& visit) const = 0;

 protected:
  ~StoreView() = default;
};

class StackPolicy {
 public:
  virtual ~StackPolicy() = default;

  /// Whether `key` is one of the stack's own records, charged to the reserved room (max_stack_keys,
  /// max_stack_bytes) instead of its writer's account.
  virtual bool reserved(const std::string& key) const = 0;
  /// The group a key belongs to, as the prefix all of the group's keys share, or "" for none. A
  /// group is evicted whole, oldest first, when the reserved room is full, and folded whole.
  virtual std::string group_of(const std::string& key) const = 0;
  /// The key a group's records are folded into.
  virtual std::string fold_key(const std::string& group) const = 0;
  /// The body of `group`'s fold when the group is over, or nothing while it is not. The store
  /// then writes it under fold_key(group) and erases the group's other keys.
  virtual std::optional<std::string> fold(const std::string& group, const StoreView& map) const = 0;
  /// Whether `key`, absent from the map, is still taken: its group's fold holds it, so a create
  /// (create=1) of it is refused as if the key existed.
  virtual bool folded(const std::string& key, const StoreView& map) const = 0;
  /// Whether the retention of folds (scans_kept) takes only `group`'s fold, because a new run of
  /// the group is under way whose keys must stay; otherwise it erases every key of the group.
  virtual bool keeps_live_keys(const std::string& group, const StoreView& map) const = 0;

  /// Why no client may write `key` (the server alone writes it: a fold), "" when clients may.
  /// Judged with and without [security]; counted refused_fold.
  virtual std::string server_only(const std::string& key) const = 0;
  /// With [security] on: why the peer authenticated as `identity` ("<role>/<name>") may not write
  /// (or, `deletion`, delete) `key`, which `holder` last wrote ("" for a new key), given the map;
  /// "" when it may. Counted unauthorised.
  virtual std::string write_refusal(const std::string& identity, const std::string& key, const std::string& holder,
                                    bool deletion, const StoreView& map) const = 0;
  /// With [security] on: whether a snapshot request of `identity` counts in a pair's vote (a role
  /// that writes the stack's records: every screen's viewer key could otherwise make an active).
  virtual bool votes(const std::string& identity) const = 0;
};

/// sectorflow's stack (kvstore/SPEC.md): nodegroups/, status/, acquire/ and scans/ in the reserved
/// room, each scan a group folded into scans/<n>/summary when over, writes judged by the roles'
/// table and by the scan's request. `producer_threads`: [[receivers]] threads, one entry per
/// receiver (ServerOptions::producer_threads).
std::unique_ptr<const StackPolicy> scan_stack_policy(std::vector<std::uint32_t> producer_threads);

}  // namespace sectorflow::kvstore
