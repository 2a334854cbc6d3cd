// The store's groups (store.hpp): the stack's policy names them (StackPolicy::group_of); the store
// keeps their age, evicts the oldest whole when the reserved room is full, folds a group the policy
// says is over into one key, and keeps scans_kept folds (kvstore/SPEC.md, "Bounds", "Folding").
#include <iterator>
#include <utility>

#include "store.hpp"

namespace sectorflow::kvstore::detail {

void Store::drop(std::map<std::string, Entry>::iterator entry) {
  forget_expiry(entry);
  const std::string group = policy->group_of(entry->first);
  (policy->reserved(entry->first) ? stack_usage : usage).release(entry->second.held);
  if (!group.empty() && entry->first == policy->fold_key(group)) forget_fold(group);
  map.erase(entry);
  if (group.empty()) return;
  const auto next = map.lower_bound(group);
  if (next != map.end() && next->first.compare(0, group.size(), group) == 0) return;
  if (const auto born = group_born.find(group); born != group_born.end()) {
    groups_by_age.erase({born->second, group});
    group_born.erase(born);
  }
}

void Store::erase_published(std::map<std::string, Entry>::iterator entry) {
  KvMsg deletion;
  deletion.key = entry->first;
  deletion.uuid = entry->second.msg->uuid;
  publish(deletion);
  drop(entry);
}

// Publishes the deletion of every key of `group` and erases it.
void Store::erase_group(const std::string& group) {
  for (auto it = map.lower_bound(group); it != map.end() && it->first.compare(0, group.size(), group) == 0;
       it = map.lower_bound(group)) {
    erase_published(it);
  }
}

// Erases every record of the group first written longest ago, other than `keep`, publishing each
// deletion; false when no other group holds records.
bool Store::evict_oldest_group_but(const std::string& keep) {
  auto victim = groups_by_age.begin();
  if (victim != groups_by_age.end() && !keep.empty() && victim->second == keep) ++victim;
  if (victim == groups_by_age.end()) return false;
  erase_group(std::string(victim->second));
  count([](ServerStats& s) { ++s.scans_evicted; });
  return true;
}

// Folds `group` when the stack's policy says it is over: its keys become one fold, which the
// server writes, and their keys are erased (kvstore/SPEC.md, "Folding").
void Store::maybe_fold(const std::string& group) {
  std::optional<std::string> body = policy->fold(group, view);
  if (!body) return;
  KvMsg msg;
  msg.key = policy->fold_key(group);
  msg.uuid = new_uuid();
  msg.body = std::move(*body);
  if (msg.body.size() > options.max_value_bytes) {
    count([](ServerStats& s) { ++s.folds_too_large; });
    return;  // the parts stay, with their ttl
  }
  const auto existing = map.find(msg.key);
  const MapUsage::Held* old = existing != map.end() ? &existing->second.held : nullptr;
  const MapUsage::Held held{kStackRoom, footprint(msg)};
  // The parts it replaces are bigger than the fold: it fits once they go, so it is charged after
  // them, and written before them so that no reader ever sees the group without both.
  publish(msg, 0, {}, kStackRoom);
  const std::int64_t born = sequence;
  std::string key = msg.key;
  const MapUsage::Held previous = old != nullptr ? *old : MapUsage::Held{};
  if (old != nullptr) stack_usage.release(previous);
  map[key] = Entry{std::make_shared<const KvMsg>(std::move(msg)), std::nullopt, held, {}};
  for (auto it = map.lower_bound(group); it != map.end() && it->first.compare(0, group.size(), group) == 0;) {
    const auto next = std::next(it);
    if (it->first != key) erase_published(it);
    it = next;
  }
  stack_usage.charge(held, nullptr);
  note_fold(group, born);
  count([](ServerStats& s) { ++s.scans_folded; });
  while (folds_by_age.size() > options.scans_kept) drop_oldest_fold(group);
}

void Store::note_fold(const std::string& group, std::int64_t born) {
  if (const auto old = fold_born.find(group); old != fold_born.end()) {
    folds_by_age.erase({old->second, group});
  }
  fold_born[group] = born;
  folds_by_age.emplace(born, group);
}

void Store::forget_fold(const std::string& group) {
  if (const auto old = fold_born.find(group); old != fold_born.end()) {
    folds_by_age.erase({old->second, group});
    fold_born.erase(old);
  }
}

// Erases the group folded longest ago (not `current`, the group just folded), or only its fold
// when the policy keeps its live keys.
void Store::drop_oldest_fold(const std::string& current) {
  auto victim = folds_by_age.begin();
  if (victim->second == current) ++victim;
  if (victim == folds_by_age.end()) return;
  const std::string group = victim->second;
  if (policy->keeps_live_keys(group, view)) {
    erase_published(map.find(policy->fold_key(group)));
  } else {
    erase_group(group);
  }
  count([](ServerStats& s) { ++s.summaries_dropped; });
}

}  // namespace sectorflow::kvstore::detail
