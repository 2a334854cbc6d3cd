// Fuzz target: parse_raw_file_name (protocol/raw_file.hpp), which find_raw_files applies to every
// name in a fallback directory, whoever put it there. The input is the name. Properties: parsing
// never throws, and a name it accepts formats (raw_file_name) to a name that parses to the same
// scan, sector and thread.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "property.hpp"
#include "sectorflow/protocol/raw_file.hpp"

namespace sp = sectorflow::protocol;
using sectorflow::fuzz::require;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string name(reinterpret_cast<const char*>(data), size);
  const std::optional<sp::RawFileName> parsed = sp::parse_raw_file_name(name);
  if (!parsed) return 0;
  require(sp::parse_raw_file_name(sp::raw_file_name(*parsed)) == parsed, "parse(format(name)) differs");
  return 0;
}
