// A folded scan's summary, scans/<n>/summary (kvstore/SPEC.md, "Folding"): the scan's parts as
// they were when the server folded them, in one record that replaces their keys. Written only by
// the server, from the parts it holds; readers build the scan's records from it exactly as from
// the parts (operations/scan_account.py, records_of; the aggregator's RecordStore).
//
// Body: one msgpack map {"version": 1, "folded_s": float (Unix seconds), "parts": {part: bin}},
// where part is the key's suffix after scans/<n:010d>/ ("request", "file", "producer/r0t1", ...)
// and bin the part's value, byte for byte.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "sectorflow/protocol/scan_records.hpp"

namespace sectorflow::protocol {

inline constexpr std::string_view kSummaryPart = "summary";
inline constexpr std::int64_t kSummaryVersion = 1;

/// part ("request", "producer/r0t1") -> the part's value.
using ScanParts = std::map<std::string, std::string>;

std::string summary_key(std::uint32_t scan);

/// The part of `scan` that `key` names ("producer/r0t1" of scans/<n>/producer/r0t1).
std::string part_of(std::uint32_t scan, const std::string& key);

/// The parts a summary holds that begin with `prefix`, by their whole key (scans/<n>/...).
std::map<std::string, std::string> folded_keys(std::uint32_t scan, std::string_view summary, std::string_view prefix);

std::string encode_summary(const ScanParts& parts, double folded_s);

/// The parts of a summary; throws ProtocolError if the body is not one (the server's own record:
/// only a damaged one fails).
ScanParts decode_summary(std::string_view body);

/// Why the scan whose parts are `parts` is not over yet, or nothing when it is: its request is in,
/// every producer thread it names wrote a final part (finished or error; a native scan's senders
/// write none), and its file record is in, or it was planned to disk (an empty routing list: no
/// NodeGroup writes a file). What the account (operations/scan_account.py) adds up then changes
/// only by a part written later, which the server folds in too.
std::optional<std::string> not_over(const ScanParts& parts);

}  // namespace sectorflow::protocol
