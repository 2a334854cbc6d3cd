#include "write_policy.hpp"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <optional>
#include <string_view>
#include <system_error>
#include <vector>

#include "thread_names.hpp"

namespace sectorflow::kvstore::detail {
namespace {

struct Rule {
  std::string_view prefix;   // a pattern (matches() below)
  std::vector<std::string_view> roles;
  bool held;                 // only the identity that holds the key may write it again
  bool own_name = false;     // the key's last part must be the writer's name: one key per identity
};

// The table of kvstore/SPEC.md, "Security". A scan's request and its file may be written again by
// another party of the role (another operator's acquire; the next NodeGroup job's rank 0 merging a
// replay); what a process keeps alive may not.
const std::vector<Rule>& rules() {
  static const std::vector<Rule> table{
      {"nodegroups/", {"nodegroup"}, true},
      {"status/producer/", {"producer"}, true},
      {"status/aggregator/", {"aggregator"}, true},
      {"status/nodegroup/", {"nodegroup"}, true},
      // The LiberTEM bridge runs beside LiberTEM with the host's viewer key (its operator key where
      // the host has no viewer key): it may publish its own status and nothing else. Its own name
      // only, so that a viewer key, handed out to every screen, cannot fill the stack's room with
      // made-up statuses and so push out scans.
      {"status/libertem/", {"viewer", "operator"}, true, true},
      {"acquire/", {"operator"}, false},
      {"scans/*/request", {"operator", "aggregator"}, false},
      {"scans/*/claim", {"operator"}, false},
      {"scans/*/abort", {"operator"}, false},
      {"scans/*/instrument", {"operator"}, false},
      {"scans/*/producer/", {"producer"}, true},
      {"scans/*/aggregator/", {"aggregator"}, true},
      {"scans/*/nodegroup/", {"nodegroup"}, true},
      {"scans/*/file", {"nodegroup"}, false},
  };
  return table;
}

// Whether `key` matches `pattern`, part by part ('/'-separated): "*" matches any one non-empty part,
// and a pattern ending in '/' matches keys with one or more parts more.
bool matches(std::string_view key, std::string_view pattern) {
  for (;;) {
    const std::size_t pattern_end = pattern.find('/');
    const std::size_t key_end = key.find('/');
    const std::string_view want = pattern.substr(0, pattern_end);
    const std::string_view part = key.substr(0, key_end);
    if (want == "*" ? part.empty() : part != want) return false;
    if (pattern_end == std::string_view::npos) return key_end == std::string_view::npos;
    if (key_end == std::string_view::npos) return false;
    pattern.remove_prefix(pattern_end + 1);
    key.remove_prefix(key_end + 1);
    if (pattern.empty()) return !key.empty();
  }
}

// A producer key named `receiver-<r>` (docs/deployment.md, "Keys") speaks for receiver r alone: its
// records and statuses are named r<r>t<thread>. The receiver a key names, or nothing for a key of
// another name (one key for several receivers: it writes for any of them).
std::optional<std::string_view> named_receiver(std::string_view name) {
  constexpr std::string_view prefix = "receiver-";
  if (name.substr(0, prefix.size()) != prefix) return std::nullopt;
  const std::string_view digits = name.substr(prefix.size());
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string_view::npos) return std::nullopt;
  return digits;
}

// Whether the last part of `key` is the name of one of receiver `r`'s producer threads.
bool names_receiver(std::string_view key, std::string_view r) {
  const auto thread = parse_thread_name(key.substr(key.rfind('/') + 1));
  std::uint32_t receiver = 0;
  const auto [stop, error] = std::from_chars(r.data(), r.data() + r.size(), receiver);
  return thread && error == std::errc() && stop == r.data() + r.size() && thread->first == receiver;
}

}  // namespace

std::string write_refusal(const std::string& identity, const std::string& key, const std::string& holder) {
  if (identity.empty()) return "the writer is not authenticated";
  const std::string role = identity.substr(0, identity.find('/'));
  // The pair's peer holds the kvstore key to mirror the active (kvstore/SPEC.md, "Security"); it
  // never writes through a collector, so a write of that key is no server's but a stolen key's.
  if (role == "kvstore") return "the kvstore key writes nothing: a pair's peer only mirrors (" + identity + ")";
  for (const Rule& rule : rules()) {
    if (!matches(key, rule.prefix)) continue;
    bool allowed = false;
    std::string roles;
    for (const std::string_view r : rule.roles) {
      allowed = allowed || r == role;
      roles += (roles.empty() ? "" : " or ") + std::string(r);
    }
    if (!allowed) return "only a " + roles + " may write " + std::string(rule.prefix) + "..., not " + identity;
    if (rule.own_name) {
      const std::string name = identity.substr(role.size() + (role.size() < identity.size() ? 1 : 0));
      if (key.substr(rule.prefix.size()) != name)
        return "a " + role + " may write only " + std::string(rule.prefix) + name + " (its own name), not " + key;
    }
    if (role == "producer") {
      const std::string_view name = std::string_view(identity).substr(std::min(identity.size(), role.size() + 1));
      if (const auto r = named_receiver(name); r && !names_receiver(key, *r)) {
        return "a producer key named " + std::string(name) + " writes only receiver " + std::string(*r) +
               "'s records (r" + std::string(*r) + "t<thread>), not " + key;
      }
    }
    if (rule.held && !holder.empty() && holder != identity) return "the key is held by " + holder;
    return {};
  }
  return "no role may write keys outside nodegroups/, status/, acquire/ and scans/ (" + identity + ")";
}

std::string status_refusal(const std::string& key, const std::vector<std::uint32_t>& producer_threads) {
  constexpr std::string_view prefix = "status/producer/";
  if (std::string_view(key).substr(0, prefix.size()) != prefix) return {};
  const std::string_view name = std::string_view(key).substr(prefix.size());
  const auto thread = parse_thread_name(name);
  if (!thread) return "a producer's status is named r<receiver>t<thread>, not " + std::string(name);
  if (thread->first >= producer_threads.size()) {
    return "the stack has no receiver " + std::to_string(thread->first) + " (" +
           std::to_string(producer_threads.size()) + " receivers, [[receivers]])";
  }
  if (thread->second >= producer_threads[thread->first]) {
    return "receiver " + std::to_string(thread->first) + " has no producer thread " + std::to_string(thread->second) +
           " (" + std::to_string(producer_threads[thread->first]) + " threads, [[receivers]] threads)";
  }
  return {};
}

}  // namespace sectorflow::kvstore::detail
