// The framing by which a fuzz target reads several ZeroMQ frames out of one fuzz input: each frame
// is a 4-byte big-endian length and then that many bytes, the format of the golden
// tests/data/*.frames files, so those files are seeds as they are. Every input splits: a length
// that runs past the end takes the bytes that are left, and 1 to 3 bytes left over after the last
// frame are ignored, so mutations land in the frames and not in "invalid framing".
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace sectorflow::fuzz {

/// The frames of `data` (views into it).
inline std::vector<std::string_view> split_frames(const std::uint8_t* data, std::size_t size) {
  std::vector<std::string_view> frames;
  const char* bytes = reinterpret_cast<const char*>(data);
  std::size_t offset = 0;
  while (size - offset >= 4) {
    std::size_t length = 0;
    for (std::size_t i = 0; i < 4; ++i) length = (length << 8) | data[offset + i];
    offset += 4;
    if (length > size - offset) length = size - offset;
    frames.emplace_back(bytes + offset, length);
    offset += length;
  }
  return frames;
}

}  // namespace sectorflow::fuzz
