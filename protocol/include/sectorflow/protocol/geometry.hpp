// Detector geometry: a frame of frame_rows x frame_cols pixels tiled by sectors of
// sector_rows x sector_cols, numbered row-major over the tile grid. Nothing else in sectorflow
// assumes 4 sectors or 576 x 576; it all comes from here, filled from the configuration's
// [detector] table (Config.geometry() in Python, sectorflow::configs::geometry() in C++). No
// field has a default: one left at 0 is refused by validate(), naming its key.
#pragma once

#include <cstddef>
#include <cstdint>

namespace sectorflow::protocol {

struct Geometry {
  std::uint32_t frame_rows = 0;   ///< [detector] frame_rows
  std::uint32_t frame_cols = 0;   ///< [detector] frame_cols
  std::uint32_t sector_rows = 0;  ///< [detector] sector_rows
  std::uint32_t sector_cols = 0;  ///< [detector] sector_cols
  std::uint32_t itemsize = 0;     ///< bytes per pixel of [detector] dtype (2 for uint16)

  /// Throws ProtocolError for a field left at 0 or sectors that do not tile the frame exactly.
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
