#include "sectorflow/protocol/geometry.hpp"

#include <string>

#include "sectorflow/protocol/errors.hpp"

namespace sectorflow::protocol {

void Geometry::validate() const {
  auto positive = [](const char* name, std::uint32_t value, const char* key) {
    if (value == 0) {
      throw ProtocolError(std::string("geometry: ") + name + " must be positive, got 0 (set [detector] " + key + ")");
    }
  };
  positive("frame_rows", frame_rows, "frame_rows");
  positive("frame_cols", frame_cols, "frame_cols");
  positive("sector_rows", sector_rows, "sector_rows");
  positive("sector_cols", sector_cols, "sector_cols");
  positive("itemsize", itemsize, "dtype");
  if (frame_rows % sector_rows != 0 || frame_cols % sector_cols != 0) {
    throw ProtocolError("geometry: sectors of " + std::to_string(sector_rows) + " x " +
                        std::to_string(sector_cols) + " do not tile a frame of " +
                        std::to_string(frame_rows) + " x " + std::to_string(frame_cols));
  }
}

}  // namespace sectorflow::protocol
