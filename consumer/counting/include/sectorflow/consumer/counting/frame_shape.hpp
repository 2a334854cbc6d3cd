// The shape of one detector frame, from the configuration: nothing here assumes 576 x 576.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace sectorflow::consumer::counting {

struct FrameShape {
  std::uint32_t rows = 0;
  std::uint32_t cols = 0;

  std::size_t pixels() const { return std::size_t{rows} * cols; }
  /// "576 x 576": how error messages show a shape.
  std::string str() const;
  /// Throws CountingError unless both sides are positive and every flat pixel index fits uint32
  /// (the event format stores row * cols + col as uint32).
  void validate() const;
  bool operator==(const FrameShape& other) const { return rows == other.rows && cols == other.cols; }
  bool operator!=(const FrameShape& other) const { return !(*this == other); }
};

}  // namespace sectorflow::consumer::counting
