// Counter-based random numbers for the simulator. Every random value is a pure function of a key
// derived from (seed, domain, scan, frame, sector) and a counter, so what a thread generates does
// not depend on what any other thread generated before: the simulator's determinism rests here.
// The mixing function is splitmix64's finalizer (Steele, Lea, Flood 2014), which passes BigCrush
// when applied to a counter.
#pragma once

#include <cstdint>

namespace sectorflow::simulator {

inline constexpr std::uint64_t kGolden = 0x9e3779b97f4a7c15ULL;

/// splitmix64's finalizer: a bijection of 64-bit words with full avalanche.
inline std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/// A key for `value` under `key`: derive(derive(seed, scan), frame) keys one frame of one scan.
inline std::uint64_t derive(std::uint64_t key, std::uint64_t value) { return mix64(key ^ mix64(value + kGolden)); }

/// Uniform double in [0, 1) from the top 53 bits of a word.
inline double to_unit(std::uint64_t word) { return static_cast<double>(word >> 11) * 0x1.0p-53; }

/// A sequential stream of words under one key (splitmix64 started at the key).
class Stream {
 public:
  explicit Stream(std::uint64_t key) : state_(key) {}
  std::uint64_t next() {
    state_ += kGolden;
    return mix64(state_);
  }
  double uniform() { return to_unit(next()); }

 private:
  std::uint64_t state_;
};

/// A Poisson-distributed count with the given mean (mean >= 0), drawn from `stream`: inversion by
/// multiplication below a mean of 10, Hörmann's transformed rejection (PTRS, 1993) above.
std::uint32_t sample_poisson(Stream& stream, double mean);

}  // namespace sectorflow::simulator
