#include "sectorflow/consumer/counting/frame_shape.hpp"

#include <limits>

#include "sectorflow/consumer/counting/errors.hpp"

namespace sectorflow::consumer::counting {

std::string FrameShape::str() const { return std::to_string(rows) + " x " + std::to_string(cols); }

void FrameShape::validate() const {
  if (rows == 0 || cols == 0) {
    throw CountingError("frame shape " + str() + ": rows and columns must be positive");
  }
  // Padded scratch frames hold (rows + 2) x (cols + 2) pixels with uint32 indices too.
  const std::uint64_t padded = (std::uint64_t{rows} + 2) * (std::uint64_t{cols} + 2);
  if (padded > std::numeric_limits<std::uint32_t>::max()) {
    throw CountingError("frame shape " + str() + ": too many pixels for uint32 event indices");
  }
}

}  // namespace sectorflow::consumer::counting
