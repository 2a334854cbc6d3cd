// The inproc messages from receiver threads to counting threads (private to the NodeGroup):
//   data: [Envelope{kind = kData, ...}, payload]  the payload frame moved on, never copied
//   end:  [Envelope{kind = kEnd, receiver, scan, timed_out}]  receiver's part of the scan is over;
//         sent after that receiver's last data message of the scan, on every counting thread's pipe
// Both ends run in one process, so the struct crosses as raw bytes.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace sectorflow::consumer::detail {

struct Envelope {
  enum Kind : std::uint32_t { kData = 1, kEnd = 2 };
  std::uint32_t kind = kData;
  std::uint32_t receiver = 0;
  std::uint32_t scan = 0;
  std::uint32_t frame = 0;
  std::uint32_t sector = 0;
  std::uint32_t scan_x = 0;
  std::uint32_t scan_y = 0;
  std::uint32_t timed_out = 0;
  std::uint64_t position = 0;
};
static_assert(std::is_trivially_copyable_v<Envelope>);

inline bool read_envelope(const void* data, std::size_t size, Envelope& out) {
  if (size != sizeof(Envelope)) return false;
  std::memcpy(&out, data, sizeof(Envelope));
  return true;
}

}  // namespace sectorflow::consumer::detail
