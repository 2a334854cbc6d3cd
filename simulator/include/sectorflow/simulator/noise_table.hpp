// The dark background as a lookup table: entry i is the (i + 0.5) / 2^16 quantile of the dark
// level round(N(mean, sigma)) clipped to the pixel type. A pixel's noise is then one table lookup
// indexed by 16 random bits, four pixels per 64-bit random word: this is what makes sector
// generation run at several GB/s instead of paying for a normal variate per pixel. The table's
// tails end at about 4.2 sigma, below the counting background threshold (4.5 sigma).
#pragma once

#include <cstdint>
#include <vector>

namespace sectorflow::simulator {

inline constexpr unsigned kNoiseTableBits = 16;
inline constexpr std::size_t kNoiseTableSize = std::size_t{1} << kNoiseTableBits;

/// The kNoiseTableSize quantiles of round(N(mean, sigma)) clipped to [0, max_value], ascending.
std::vector<std::uint32_t> dark_quantiles(double mean, double sigma, std::uint32_t max_value);

/// Standard normal quantile (inverse CDF) for 0 < p < 1, accurate to about 1e-12.
double normal_quantile(double p);

}  // namespace sectorflow::simulator
