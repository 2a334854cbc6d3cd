// Who may write which key of the map when the server authenticates its peers (kvstore/SPEC.md,
// "Security"): each key prefix belongs to the roles whose processes write it, and the keys a
// process keeps alive (registrations, statuses, its own part of a scan's record) to the identity
// that holds them. Reading is everyone's; deleting is checked as writing. Private to the kvstore.
#pragma once

#include <string>

namespace sectorflow::kvstore::detail {

/// Why the peer authenticated as `identity` ("<role>/<name>", the ZAP User-Id) may not write or
/// delete `key`, which `holder` last wrote ("" for a new key); "" when it may.
std::string write_refusal(const std::string& identity, const std::string& key, const std::string& holder);

}  // namespace sectorflow::kvstore::detail
