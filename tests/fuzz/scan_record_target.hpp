// What every scan record's fuzz target checks (protocol/scan_records.hpp): decode throws nothing
// but ProtocolError, and a decoded record encodes (the encoder checks its bounds again) and decodes
// back to itself. Each fuzz_scan_*.cpp instantiates it for one record.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "property.hpp"
#include "sectorflow/protocol/errors.hpp"

namespace sectorflow::fuzz {

template <typename Record>
int check_scan_record(const std::uint8_t* data, std::size_t size) {
  std::optional<Record> record;
  try {
    record = Record::decode(std::string_view(reinterpret_cast<const char*>(data), size));
  } catch (const protocol::ProtocolError&) {
    return 0;
  }
  require(Record::decode(record->encode()) == *record, "decode(encode(record)) differs");
  return 0;
}

}  // namespace sectorflow::fuzz
