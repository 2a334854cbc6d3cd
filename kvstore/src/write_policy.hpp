// Who may write which key of the map when the server authenticates its peers (kvstore/SPEC.md,
// "Security"): each key prefix belongs to the roles whose processes write it, and the keys a
// process keeps alive (registrations, statuses, its own part of a scan's record) to the identity
// that holds them. Reading is everyone's; deleting is checked as writing. Private to the kvstore.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sectorflow::kvstore::detail {

/// Why the peer authenticated as `identity` ("<role>/<name>", the ZAP User-Id) may not write or
/// delete `key`, which `holder` last wrote ("" for a new key); "" when it may.
std::string write_refusal(const std::string& identity, const std::string& key, const std::string& holder);

/// Why `key`, a producer thread's status (status/producer/r<R>t<T>), names a thread the stack does
/// not have: a receiver R at or past `producer_threads.size()` or a thread T at or past
/// `producer_threads[R]` ([[receivers]] threads, one entry per receiver); "" when it names one, or
/// when `key` is no producer status. The held rule bounds a producer key to its own records but not
/// their number: without this one key wrote millions of statuses (kvstore/SPEC.md, "Security").
std::string status_refusal(const std::string& key, const std::vector<std::uint32_t>& producer_threads);

}  // namespace sectorflow::kvstore::detail
