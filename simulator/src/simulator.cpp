#include "sectorflow/simulator/simulator.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "sectorflow/simulator/noise_table.hpp"
#include "sectorflow/simulator/random.hpp"

namespace sectorflow::simulator {
namespace {

// Independent random domains under one seed.
enum Domain : std::uint64_t { kNoiseDomain = 1, kElectronDomain = 2, kDropDomain = 3 };

template <typename T>
std::vector<T> narrow(const std::vector<std::uint32_t>& table) {
  return std::vector<T>(table.begin(), table.end());
}

std::string where(std::uint32_t scan, std::uint32_t frame) {
  return "scan " + std::to_string(scan) + ", frame " + std::to_string(frame);
}

SimulatorSettings validated(const SimulatorSettings& settings) {
  settings.validate();
  return settings;
}

}  // namespace

Simulator::Simulator(const SimulatorSettings& settings, const protocol::Geometry& geometry)
    : settings_(validated(settings)),  // first: the seed is set
      geometry_(geometry),
      specimen_(settings_),
      noise_root_(derive(*settings_.seed, kNoiseDomain)),
      electron_root_(derive(*settings_.seed, kElectronDomain)),
      drop_root_(derive(*settings_.seed, kDropDomain)) {
  geometry_.validate();
  switch (geometry_.itemsize) {
    case 1:
      noise8_ = narrow<std::uint8_t>(
          dark_quantiles(settings_.dark_mean_adu, settings_.dark_sigma_adu, std::numeric_limits<std::uint8_t>::max()));
      break;
    case 2:
      noise16_ = narrow<std::uint16_t>(dark_quantiles(settings_.dark_mean_adu, settings_.dark_sigma_adu,
                                                      std::numeric_limits<std::uint16_t>::max()));
      break;
    case 4:
      noise32_ = dark_quantiles(settings_.dark_mean_adu, settings_.dark_sigma_adu,
                                std::numeric_limits<std::uint32_t>::max());
      break;
    default:
      throw SimulatorError("simulator: pixels of " + std::to_string(geometry_.itemsize) +
                           " bytes are not supported; use uint8, uint16 or uint32 (1, 2 or 4 bytes)");
  }
}

std::uint64_t Simulator::frame_key(std::uint32_t scan, std::uint32_t frame) const {
  return derive(derive(electron_root_, scan), frame);
}

template <typename T>
void Simulator::fill(const T* table, std::uint32_t scan, std::uint32_t frame, std::uint32_t sector, T* out,
                     std::size_t row_stride, std::uint32_t scan_x) const {
  const std::uint32_t rows = geometry_.sector_rows;
  const std::uint32_t cols = geometry_.sector_cols;
  constexpr std::uint64_t kIndexMask = kNoiseTableSize - 1;

  // Dark background: one random word per 4 pixels; row r starts at its own counter, so rows
  // (and sectors generated into a frame with a stride) never depend on each other.
  const std::uint64_t key = derive(derive(derive(noise_root_, scan), frame), sector);
  const std::uint32_t full_words = cols / 4;
  const std::uint64_t words_per_row = (cols + 3) / 4;
  for (std::uint32_t r = 0; r < rows; ++r) {
    T* row = out + r * row_stride;
    std::uint64_t counter = key + r * words_per_row * kGolden;
    for (std::uint32_t w = 0; w < full_words; ++w) {
      counter += kGolden;
      const std::uint64_t z = mix64(counter);
      T* p = row + 4 * w;
      p[0] = table[z & kIndexMask];
      p[1] = table[(z >> 16) & kIndexMask];
      p[2] = table[(z >> 32) & kIndexMask];
      p[3] = table[z >> 48];
    }
    if (full_words * 4 < cols) {
      counter += kGolden;
      std::uint64_t z = mix64(counter);
      for (std::uint32_t c = full_words * 4; c < cols; ++c, z >>= kNoiseTableBits) row[c] = table[z & kIndexMask];
    }
  }

  // Electrons: every strike of the frame, in order; those whose footprint misses this sector
  // cost only their random draws.
  const std::int64_t row_lo = geometry_.sector_row0(sector);
  const std::int64_t row_hi = row_lo + rows;
  const std::int64_t col_lo = geometry_.sector_col0(sector);
  const std::int64_t col_hi = col_lo + cols;
  const int radius = footprint_radius(settings_.electron_spread_px);
  constexpr std::uint64_t kMax = std::numeric_limits<T>::max();
  FrameElectrons electrons = frame_electrons(scan, frame, scan_x);
  Footprint footprint;
  for (std::uint32_t i = 0, n = electrons.count(); i < n; ++i) {
    const Electron e = electrons.next();
    const auto pixel_row = static_cast<std::int64_t>(e.row);
    const auto pixel_col = static_cast<std::int64_t>(e.col);
    if (pixel_row + radius < row_lo || pixel_row - radius >= row_hi || pixel_col + radius < col_lo ||
        pixel_col - radius >= col_hi) {
      continue;
    }
    compute_footprint(e, settings_.electron_spread_px, footprint);
    for (int k = 0; k < footprint.span; ++k) {
      const std::int64_t frame_row = footprint.row0 + k;
      if (frame_row < row_lo || frame_row >= row_hi) continue;
      const double row_adu = settings_.electron_adu * footprint.row_weight[k];
      T* row = out + static_cast<std::size_t>(frame_row - row_lo) * row_stride;
      for (int j = 0; j < footprint.span; ++j) {
        const std::int64_t frame_col = footprint.col0 + j;
        if (frame_col < col_lo || frame_col >= col_hi) continue;
        const auto adu = static_cast<std::uint64_t>(std::llround(row_adu * footprint.col_weight[j]));
        T& pixel = row[frame_col - col_lo];
        pixel = static_cast<T>(std::min<std::uint64_t>(pixel + adu, kMax));
      }
    }
  }
}

FrameElectrons Simulator::frame_electrons(std::uint32_t scan, std::uint32_t frame, std::uint32_t scan_x) const {
  if (specimen_.empty()) return FrameElectrons(frame_key(scan, frame), settings_, geometry_);
  if (scan_x == 0) {
    throw SimulatorError(where(scan, frame) + ": a specimen needs the scan's width (scan_x) to place the frame");
  }
  const SpecimenPoint point = specimen_.at(frame % scan_x, frame / scan_x);
  return FrameElectrons(frame_key(scan, frame), settings_, geometry_, &point);
}

void Simulator::dispatch(std::uint32_t scan, std::uint32_t frame, std::uint32_t sector, void* out,
                         std::size_t row_stride, std::uint32_t scan_x) const {
  switch (geometry_.itemsize) {
    case 1:
      fill(noise8_.data(), scan, frame, sector, static_cast<std::uint8_t*>(out), row_stride, scan_x);
      break;
    case 2:
      fill(noise16_.data(), scan, frame, sector, static_cast<std::uint16_t*>(out), row_stride, scan_x);
      break;
    default:
      fill(noise32_.data(), scan, frame, sector, static_cast<std::uint32_t*>(out), row_stride, scan_x);
      break;
  }
}

void Simulator::generate_sector(std::uint32_t scan, std::uint32_t frame, std::uint32_t sector, void* out,
                                std::size_t out_bytes, std::uint32_t scan_x) const {
  if (sector >= geometry_.n_sectors()) {
    throw SimulatorError(where(scan, frame) + ": sector " + std::to_string(sector) + " out of range; the geometry has " +
                         std::to_string(geometry_.n_sectors()) + " sectors");
  }
  if (out_bytes != geometry_.sector_bytes()) {
    throw SimulatorError(where(scan, frame) + ", sector " + std::to_string(sector) + ": buffer of " +
                         std::to_string(out_bytes) + " bytes, expected " + std::to_string(geometry_.sector_bytes()));
  }
  if (reinterpret_cast<std::uintptr_t>(out) % geometry_.itemsize != 0) {
    throw SimulatorError(where(scan, frame) + ", sector " + std::to_string(sector) +
                         ": buffer not aligned to the pixel size of " + std::to_string(geometry_.itemsize) + " bytes");
  }
  dispatch(scan, frame, sector, out, geometry_.sector_cols, scan_x);
}

void Simulator::generate_frame(std::uint32_t scan, std::uint32_t frame, void* out, std::size_t out_bytes,
                               std::uint32_t scan_x) const {
  const std::size_t frame_bytes = geometry_.frame_pixels() * geometry_.itemsize;
  if (out_bytes != frame_bytes) {
    throw SimulatorError(where(scan, frame) + ": buffer of " + std::to_string(out_bytes) + " bytes, expected " +
                         std::to_string(frame_bytes));
  }
  if (reinterpret_cast<std::uintptr_t>(out) % geometry_.itemsize != 0) {
    throw SimulatorError(where(scan, frame) + ": buffer not aligned to the pixel size of " +
                         std::to_string(geometry_.itemsize) + " bytes");
  }
  auto* base = static_cast<unsigned char*>(out);
  for (std::uint32_t s = 0; s < geometry_.n_sectors(); ++s) {
    const std::size_t first_pixel = std::size_t{geometry_.sector_row0(s)} * geometry_.frame_cols + geometry_.sector_col0(s);
    dispatch(scan, frame, s, base + first_pixel * geometry_.itemsize, geometry_.frame_cols, scan_x);
  }
}

bool Simulator::dropped(std::uint32_t scan, std::uint32_t frame, std::uint32_t sector) const {
  return to_unit(derive(derive(derive(drop_root_, scan), frame), sector)) < settings_.dropped_fraction;
}

std::uint32_t Simulator::electron_count(std::uint32_t scan, std::uint32_t frame, std::uint32_t scan_x) const {
  return frame_electrons(scan, frame, scan_x).count();
}

std::vector<Electron> Simulator::electrons(std::uint32_t scan, std::uint32_t frame, std::uint32_t scan_x) const {
  FrameElectrons source = frame_electrons(scan, frame, scan_x);
  std::vector<Electron> result(source.count());
  for (Electron& e : result) e = source.next();
  return result;
}

}  // namespace sectorflow::simulator
