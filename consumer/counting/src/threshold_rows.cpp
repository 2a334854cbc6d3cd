#include "threshold_rows.hpp"

#include <algorithm>

#include "candidates.hpp"

// Each kernel is compiled twice where the compiler can dispatch at load time: for AVX2 (16 pixels
// per instruction) and for the baseline; the CPU picks. Neither enables FMA, so float results are
// bit-identical to stempy's.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__linux__)
#define SECTORFLOW_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define SECTORFLOW_CLONES
#endif

namespace sectorflow::consumer::counting {
namespace {

// Pixels per chunk: a chunk is thresholded by a loop of fixed length (fully vectorised) that
// also ORs its outputs, and only a chunk with a survivor is looked into. Measured on 576 x 576
// frames, 64 beats 16 and 32 even at 2000 electrons per frame (less loop overhead).
constexpr std::uint32_t kChunk = 64;

// __restrict__: the frame, the maps and the padded output never overlap; saying so spares the
// vectorised loops a run-time overlap check per chunk.
template <bool kDark>
inline std::uint16_t threshold_integer(const std::uint16_t* __restrict__ in, const std::uint16_t* __restrict__ dark,
                                       std::uint16_t low, std::uint16_t span, std::uint16_t* __restrict__ out,
                                       std::uint32_t n) {
  std::uint16_t any = 0;
  for (std::uint32_t c = 0; c < n; ++c) {
    const auto v = kDark ? static_cast<std::uint16_t>(in[c] - dark[c]) : in[c];
    const std::uint16_t kept = static_cast<std::uint16_t>(v - low) <= span ? v : std::uint16_t{0};
    out[c] = kept;
    any = static_cast<std::uint16_t>(any | kept);
  }
  return any;
}

template <bool kDark>
inline std::uint32_t threshold_float(const std::uint16_t* __restrict__ in, const float* __restrict__ dark,
                                     const float* __restrict__ gain, float low, float high, float* __restrict__ out,
                                     std::uint32_t n) {
  std::uint32_t any = 0;
  for (std::uint32_t c = 0; c < n; ++c) {
    const float raw = static_cast<float>(in[c]);
    const float v = (kDark ? raw - dark[c] : raw) * gain[c];
    const bool zero = v <= low || v >= high;
    out[c] = zero ? 0.0f : v;
    any |= zero ? 0u : 1u;
  }
  return any;
}

// Chunks are thresholded a block at a time, noting which hold a survivor, and only then are
// those looked into: reading a chunk right after storing it waits on store forwarding (about
// 10% slower at high dose, measured).
constexpr std::uint32_t kChunksPerBlock = 8;

template <bool kDark>
inline std::uint32_t* integer_row(const std::uint16_t* in, const std::uint16_t* dark, std::uint16_t low,
                                  std::uint16_t span, std::uint16_t* out, std::uint32_t n, std::uint32_t base,
                                  std::uint32_t* candidates) {
  std::uint32_t c = 0;
  while (c + kChunk <= n) {
    const std::uint32_t chunks = std::min(kChunksPerBlock, (n - c) / kChunk);
    std::uint32_t flagged = 0;
    for (std::uint32_t k = 0; k < chunks; ++k) {
      const std::uint32_t at = c + k * kChunk;
      if (threshold_integer<kDark>(in + at, dark + (kDark ? at : 0), low, span, out + at, kChunk) != 0) {
        flagged |= 1u << k;
      }
    }
    for (; flagged != 0; flagged &= flagged - 1) {
      const std::uint32_t at = c + static_cast<std::uint32_t>(__builtin_ctz(flagged)) * kChunk;
      candidates = append_row_candidates(out + at, kChunk, base + at, candidates);
    }
    c += chunks * kChunk;
  }
  if (c < n && threshold_integer<kDark>(in + c, dark + (kDark ? c : 0), low, span, out + c, n - c) != 0) {
    candidates = append_row_candidates(out + c, n - c, base + c, candidates);
  }
  return candidates;
}

template <bool kDark>
inline std::uint32_t* float_row(const std::uint16_t* in, const float* dark, const float* gain, float low, float high,
                                float* out, std::uint32_t n, std::uint32_t base, bool collect,
                                std::uint32_t* candidates) {
  std::uint32_t c = 0;
  while (c + kChunk <= n) {
    const std::uint32_t chunks = std::min(kChunksPerBlock, (n - c) / kChunk);
    std::uint32_t flagged = 0;
    for (std::uint32_t k = 0; k < chunks; ++k) {
      const std::uint32_t at = c + k * kChunk;
      if (threshold_float<kDark>(in + at, dark + (kDark ? at : 0), gain + at, low, high, out + at, kChunk) != 0) {
        flagged |= 1u << k;
      }
    }
    for (; collect && flagged != 0; flagged &= flagged - 1) {
      const std::uint32_t at = c + static_cast<std::uint32_t>(__builtin_ctz(flagged)) * kChunk;
      candidates = append_row_candidates(out + at, kChunk, base + at, candidates);
    }
    c += chunks * kChunk;
  }
  if (c < n && threshold_float<kDark>(in + c, dark + (kDark ? c : 0), gain + c, low, high, out + c, n - c) != 0 &&
      collect) {
    candidates = append_row_candidates(out + c, n - c, base + c, candidates);
  }
  return candidates;
}

}  // namespace

SECTORFLOW_CLONES
std::uint32_t* threshold_row_integer(const std::uint16_t* in, const std::uint16_t* dark, std::uint16_t low,
                                     std::uint16_t span, std::uint16_t* out, std::uint32_t n, std::uint32_t base,
                                     std::uint32_t* candidates) {
  return dark ? integer_row<true>(in, dark, low, span, out, n, base, candidates)
              : integer_row<false>(in, dark, low, span, out, n, base, candidates);
}

SECTORFLOW_CLONES
std::uint32_t* threshold_row_float(const std::uint16_t* in, const float* dark, const float* gain, float low,
                                   float high, float* out, std::uint32_t n, std::uint32_t base, bool collect,
                                   std::uint32_t* candidates) {
  return dark ? float_row<true>(in, dark, gain, low, high, out, n, base, collect, candidates)
              : float_row<false>(in, dark, gain, low, high, out, n, base, collect, candidates);
}

}  // namespace sectorflow::consumer::counting
