// Electron strikes: where the electrons of a frame land and how their charge spreads over pixels.
// A frame's electrons are a pure function of the frame's key, drawn in a fixed order, so every
// sector of a frame sees the same strikes, including those that straddle a sector boundary.
#pragma once

#include <cstdint>

#include "sectorflow/protocol/geometry.hpp"
#include "sectorflow/simulator/random.hpp"
#include "sectorflow/simulator/settings.hpp"
#include "sectorflow/simulator/specimen.hpp"

namespace sectorflow::simulator {

/// Where an electron struck, in frame coordinates: pixel (r, c) covers [r, r+1) x [c, c+1).
struct Electron {
  double row = 0.0;
  double col = 0.0;
};

/// The electrons of one frame, drawn on demand in their fixed order; no allocation.
class FrameElectrons {
 public:
  /// `key` identifies the frame (seed, scan, frame); the count is drawn at construction. `specimen`
  /// is what lies under the probe (nullptr: nothing, the draws are those of an empty specimen).
  FrameElectrons(std::uint64_t key, const SimulatorSettings& settings, const protocol::Geometry& geometry,
                 const SpecimenPoint* specimen = nullptr);

  /// Electrons in this frame: Poisson with mean settings.dose_per_frame x the specimen's transmission.
  std::uint32_t count() const { return count_; }

  /// The next electron; call it count() times.
  Electron next();

 private:
  Stream stream_;
  std::uint32_t count_;
  double rows_;
  double cols_;
  double radius_;  ///< 0 when strikes are uniform over the frame
  bool specimen_ = false;
  double scattered_ = 0.0;
  double centre_row_;
  double centre_col_;
  double ring_inner2_ = 0.0;  ///< squared radii of the dark-field ring
  double ring_outer2_ = 0.0;
};

/// Largest footprint radius in pixels: 3 sigma of the largest allowed spread.
inline constexpr int kMaxFootprintRadius = 3 * static_cast<int>(kMaxElectronSpreadPx);
inline constexpr int kMaxFootprintSpan = 2 * kMaxFootprintRadius + 1;

/// The charge of one electron over the pixels around it: the Gaussian integrated over each pixel,
/// separable into row and column weights, each summing to 1 over the span.
struct Footprint {
  std::int64_t row0 = 0;  ///< first frame row covered; may lie outside the frame
  std::int64_t col0 = 0;
  int span = 1;  ///< rows and columns covered
  double row_weight[kMaxFootprintSpan] = {};
  double col_weight[kMaxFootprintSpan] = {};
};

/// Footprint radius in pixels for a spread: ceil(3 sigma).
int footprint_radius(double spread_px);

/// Fills `out` with the footprint of `electron` for a charge cloud of sigma `spread_px`.
void compute_footprint(const Electron& electron, double spread_px, Footprint& out);

}  // namespace sectorflow::simulator
