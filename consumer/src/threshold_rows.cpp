#include "threshold_rows.hpp"

#include "candidates.hpp"

// Each kernel is compiled twice where the compiler can dispatch at load time: for AVX2 (16 pixels
// per instruction) and for the baseline; the CPU picks. Neither enables FMA, so float results are
// bit-identical to stempy's.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__linux__)
#define SECTORFLOW_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define SECTORFLOW_CLONES
#endif

namespace sectorflow::consumer {
namespace {

// Pixels per chunk: a chunk is thresholded by one vectorised loop that also ORs its outputs, and
// only a chunk with a survivor is looked into.
constexpr std::uint32_t kChunk = 64;

}  // namespace

SECTORFLOW_CLONES
void threshold_row_integer(const std::uint16_t* in, const std::uint16_t* dark, std::uint16_t low, std::uint16_t span,
                           std::uint16_t* out, std::uint32_t n, std::uint32_t base,
                           std::vector<std::uint32_t>& candidates) {
  std::uint32_t c0 = 0;
  while (c0 < n) {
    const std::uint32_t c1 = n - c0 >= kChunk ? c0 + kChunk : n;
    std::uint16_t any = 0;
    if (dark) {
      for (std::uint32_t c = c0; c < c1; ++c) {
        const auto v = static_cast<std::uint16_t>(in[c] - dark[c]);
        const std::uint16_t kept = static_cast<std::uint16_t>(v - low) <= span ? v : std::uint16_t{0};
        out[c] = kept;
        any = static_cast<std::uint16_t>(any | kept);
      }
    } else {
      for (std::uint32_t c = c0; c < c1; ++c) {
        const std::uint16_t v = in[c];
        const std::uint16_t kept = static_cast<std::uint16_t>(v - low) <= span ? v : std::uint16_t{0};
        out[c] = kept;
        any = static_cast<std::uint16_t>(any | kept);
      }
    }
    if (any != 0) {
      append_row_candidates(out + c0, c1 - c0, base + c0, candidates);
    }
    c0 = c1;
  }
}

SECTORFLOW_CLONES
void threshold_row_float(const std::uint16_t* in, const float* dark, const float* gain, float low, float high,
                         float* out, std::uint32_t n, std::uint32_t base, bool collect,
                         std::vector<std::uint32_t>& candidates) {
  std::uint32_t c0 = 0;
  while (c0 < n) {
    const std::uint32_t c1 = n - c0 >= kChunk ? c0 + kChunk : n;
    std::uint32_t any = 0;
    if (dark) {
      for (std::uint32_t c = c0; c < c1; ++c) {
        const float v = (static_cast<float>(in[c]) - dark[c]) * gain[c];
        const bool zero = v <= low || v >= high;
        out[c] = zero ? 0.0f : v;
        any |= zero ? 0u : 1u;
      }
    } else {
      for (std::uint32_t c = c0; c < c1; ++c) {
        const float v = static_cast<float>(in[c]) * gain[c];
        const bool zero = v <= low || v >= high;
        out[c] = zero ? 0.0f : v;
        any |= zero ? 0u : 1u;
      }
    }
    if (collect && any != 0) {
      append_row_candidates(out + c0, c1 - c0, base + c0, candidates);
    }
    c0 = c1;
  }
}

}  // namespace sectorflow::consumer
