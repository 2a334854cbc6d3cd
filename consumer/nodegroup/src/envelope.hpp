// The inproc messages from receiver threads to counting threads (private to the NodeGroup):
//   data: [Envelope{kind = kData, ...}, payload]  the payload frame moved on, never copied
//   end:  [Envelope{kind = kEnd, receiver, scan, timed_out}]  receiver's part of the scan is over;
//         sent after that receiver's last data message of the scan, on every counting thread's pipe
// Both ends run in one process, so the struct crosses as raw bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace sectorflow::consumer::nodegroup::detail {

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

// The counting thread of a frame: the same for every receiver (all sectors of a frame meet in one
// pool), from the frame number alone (a receiver may see data before the scan's info). Not
// frame % workers: a NodeGroup gets the frames f % n_groups == g, and with n_groups a multiple of
// the workers every frame would go to one thread. Fibonacci hashing spreads any such progression
// evenly while each thread still sees its frames in order.
inline std::size_t worker_of(std::uint32_t frame, std::size_t workers) {
  const std::uint64_t mixed = std::uint64_t{frame} * 0x9E3779B97F4A7C15ull;
  return static_cast<std::size_t>((mixed >> 32) % workers);
}

// High-water mark of both ends of an inproc hand-off pipe. The hand-off only decouples the
// threads; what it queues lies between the aggregator's merge of a receiver's producer threads
// and the assembly pool, so it widens the frame-order spread the pool must absorb (and holds
// payload memory). A few messages keep the threads busy without that.
inline constexpr int kHandOffHwm = 8;

inline bool read_envelope(const void* data, std::size_t size, Envelope& out) {
  if (size != sizeof(Envelope)) return false;
  std::memcpy(&out, data, sizeof(Envelope));
  return true;
}

}  // namespace sectorflow::consumer::nodegroup::detail
