// The detector simulator: the sectors of a scan as a 4D-STEM detector would read them out.
//
// Frame f is the frame at flat probe position f of the scan; with a specimen (specimen.hpp) its
// electrons depend on where that position lies, (f % scan_x, f / scan_x), so every call that
// makes electrons takes the scan's width scan_x (0 is refused with a specimen, ignored without).
//
// Sector s of frame f of scan n is a pure function of (seed, n, f, s, scan_x): any thread may generate
// any sector in any order and get the same bytes. A frame holds a Poisson number of electron
// strikes (positions a function of the frame alone, so sectors agree across their boundaries),
// each depositing electron_adu spread over the pixels around it, on a dark background with
// Gaussian noise (a function of frame and sector), clipped to the pixel type. Whether a sector is
// lost upstream is a separate deterministic draw, dropped(); generation ignores it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "sectorflow/protocol/geometry.hpp"
#include "sectorflow/simulator/electrons.hpp"
#include "sectorflow/simulator/settings.hpp"
#include "sectorflow/simulator/specimen.hpp"

namespace sectorflow::simulator {

class Simulator {
 public:
  /// Validates both; throws SimulatorError for bad settings or an item size other than 1, 2 or 4,
  /// protocol::ProtocolError for a geometry whose sectors do not tile the frame.
  Simulator(const SimulatorSettings& settings, const protocol::Geometry& geometry);

  const SimulatorSettings& settings() const { return settings_; }
  const protocol::Geometry& geometry() const { return geometry_; }

  /// Writes the sector's pixels (C order, geometry().sector_bytes() bytes) into `out`, which the
  /// caller owns. Thread-safe and allocation-free: the producer's hot loop. Throws
  /// SimulatorError if `sector` is out of range, `out_bytes` is not the sector size or `out` is
  /// not aligned to the pixel type.
  void generate_sector(std::uint32_t scan, std::uint32_t frame, std::uint32_t sector, void* out,
                       std::size_t out_bytes, std::uint32_t scan_x = 0) const;

  /// Writes a whole frame (geometry().frame_pixels() pixels, C order), assembled from its
  /// sectors at Geometry::sector_row0/sector_col0: byte-identical to generating each sector.
  void generate_frame(std::uint32_t scan, std::uint32_t frame, void* out, std::size_t out_bytes,
                      std::uint32_t scan_x = 0) const;

  /// Whether this sector is lost upstream: true with probability settings().dropped_fraction.
  bool dropped(std::uint32_t scan, std::uint32_t frame, std::uint32_t sector) const;

  /// Ground truth: how many electrons struck this frame.
  std::uint32_t electron_count(std::uint32_t scan, std::uint32_t frame, std::uint32_t scan_x = 0) const;

  /// Ground truth: where they struck, in the order they were deposited (allocates).
  std::vector<Electron> electrons(std::uint32_t scan, std::uint32_t frame, std::uint32_t scan_x = 0) const;

  /// Ground truth: the specimen at probe position (x, y) (the identity point without one).
  SpecimenPoint specimen_at(std::uint32_t x, std::uint32_t y) const { return specimen_.at(x, y); }

 private:
  template <typename T>
  void fill(const T* table, std::uint32_t scan, std::uint32_t frame, std::uint32_t sector, T* out,
            std::size_t row_stride, std::uint32_t scan_x) const;
  void dispatch(std::uint32_t scan, std::uint32_t frame, std::uint32_t sector, void* out,
                std::size_t row_stride, std::uint32_t scan_x) const;
  /// The frame's electrons under the specimen; throws SimulatorError for scan_x 0 with a specimen.
  FrameElectrons frame_electrons(std::uint32_t scan, std::uint32_t frame, std::uint32_t scan_x) const;
  std::uint64_t frame_key(std::uint32_t scan, std::uint32_t frame) const;

  SimulatorSettings settings_;
  protocol::Geometry geometry_;
  Specimen specimen_;
  std::uint64_t noise_root_;
  std::uint64_t electron_root_;
  std::uint64_t drop_root_;
  // The dark-level table in the pixel type (only the one for geometry_.itemsize is filled), so
  // the inner loop reads 2^16 entries of the output width: 128 KiB for uint16, L2-resident.
  std::vector<std::uint8_t> noise8_;
  std::vector<std::uint16_t> noise16_;
  std::vector<std::uint32_t> noise32_;
};

}  // namespace sectorflow::simulator
