// Detector geometry: a frame of frame_rows x frame_cols pixels tiled by sectors of
// sector_rows x sector_cols, numbered row-major over the tile grid. Nothing else in sectorflow
// assumes 4 sectors or 576 x 576; it all comes from here, filled from the configuration.
#pragma once

#include <cstddef>
#include <cstdint>

namespace sectorflow::protocol {

struct Geometry {
  std::uint32_t frame_rows = 576;
  std::uint32_t frame_cols = 576;
  std::uint32_t sector_rows = 144;
  std::uint32_t sector_cols = 576;
  std::uint32_t itemsize = 2;  ///< bytes per pixel (uint16 for the 4D Camera)

  /// Throws ProtocolError unless the sectors tile the frame exactly.
  void validate() const;

  std::uint32_t sector_grid_cols() const { return frame_cols / sector_cols; }
  std::uint32_t n_sectors() const { return (frame_rows / sector_rows) * sector_grid_cols(); }
  std::size_t sector_pixels() const { return std::size_t{sector_rows} * sector_cols; }
  std::size_t sector_bytes() const { return sector_pixels() * itemsize; }
  std::size_t frame_pixels() const { return std::size_t{frame_rows} * frame_cols; }
  /// First frame row and column covered by a sector.
  std::uint32_t sector_row0(std::uint32_t sector) const { return (sector / sector_grid_cols()) * sector_rows; }
  std::uint32_t sector_col0(std::uint32_t sector) const { return (sector % sector_grid_cols()) * sector_cols; }
};

}  // namespace sectorflow::protocol
