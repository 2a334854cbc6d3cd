// The info message (SPEC.md, "Info message"): one ZeroMQ frame, a msgpack map
//   { "version": kInfoVersion, "kind": "info", "scan_number": u32, "receiver": u32,
//     "thread_id": u32, "scan_x": u32, "scan_y": u32,
//     "routing": [uid, ...],            // sorted NodeGroup UIDs fixed for this scan
//     "counts": { uid: u64, ... },      // messages the sender will send (or forward) to each UID
//     "run": u32 }                      // optional: the relay thread's run the counts are of
//                                       // (SPEC.md "Runs of a scan"); absent: 0, none given
// A producer thread sends one before its data; the aggregator forwards one per NodeGroup, whose
// counts are the sums over the receiver's producer threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace sectorflow::protocol {

inline constexpr std::uint32_t kInfoVersion = 1;

struct InfoMessage {
  std::uint32_t scan_number = 0;
  std::uint32_t receiver = 0;
  std::uint32_t thread_id = 0;
  std::uint32_t scan_x = 0;
  std::uint32_t scan_y = 0;
  std::vector<std::string> routing;
  std::map<std::string, std::uint64_t> counts;
  /// The relay thread's run of the scan the counts are of; 0 (not encoded): none given.
  std::uint32_t run = 0;

  bool operator==(const InfoMessage& other) const;
};

std::string encode_info(const InfoMessage& info);

/// Decodes and validates an info message: map type, version, every key present with its type,
/// routing sorted without duplicates, every counted UID in the routing list.
InfoMessage decode_info(const void* data, std::size_t size);

}  // namespace sectorflow::protocol
