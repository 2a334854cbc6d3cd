// Why a message from a peer was refused, and the counters every receiving thread keeps of it.
//
// The aggregator's relay threads and the NodeGroups' receivers refuse the same messages for the
// same reasons (SPEC.md, "Refusals"), with one vocabulary: each kind is counted, its first
// occurrence kept as text so that a service logs it once, and published as malformed_<name> in
// the service's kvstore status. A refused message is never forwarded.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>

namespace sectorflow::protocol {

enum class Refusal : std::size_t {
  kParts = 0,  ///< neither one frame (info) nor two (data: header, payload)
  kHeader,     ///< a data header that does not decode: msgpack, field count, version, field types
  kShape,      ///< scan shape outside 1..kMaxScanSide per side, or more positions than allowed
  kPosition,   ///< probe position outside the scan, or sectors of one frame naming different positions
  kSector,     ///< a sector this port does not carry (receiver r carries sector r)
  kPayload,    ///< a payload that is not exactly one sector
  kInfo,       ///< an info message that does not decode or does not fit this receiver
  kNoInfo,     ///< data of a scan no open info message announced (the aggregator routes by it)
  kScan,       ///< data that contradicts its scan (another shape, or a native thread's other frame count)
  kOpenScans,  ///< a new scan while every open-scan slot holds a scan that is being finished
  kError,      ///< handling the message failed unexpectedly; caught, counted, the thread goes on
};
inline constexpr std::size_t kRefusalKinds = 11;

/// "parts", "header", "shape", ...: the suffix of the malformed_<name> status fields.
const char* to_string(Refusal kind);

/// A copy of the counters: per kind, how many and the text of the first.
struct RefusalStats {
  std::array<std::uint64_t, kRefusalKinds> counts{};
  std::array<std::string, kRefusalKinds> first;  ///< "" until the kind occurs

  std::uint64_t total() const;
};

/// Counters one thread writes and anyone may read. Counting is one relaxed atomic increment, the
/// lock is taken only for the first message of a kind: refusals cost nothing on the hot path even
/// in a flood.
class RefusalCounters {
 public:
  /// Counts one refused message; keeps `what` if it is the first of its kind.
  void count(Refusal kind, const std::string& what);
  RefusalStats snapshot() const;

 private:
  std::array<std::atomic<std::uint64_t>, kRefusalKinds> counts_{};
  mutable std::mutex first_mutex_;
  std::array<std::string, kRefusalKinds> first_;
};

}  // namespace sectorflow::protocol
