// Fuzz target: ProducerScanRecord::decode (protocol/scan_records.hpp), a part of a scan's record in the
// kvstore that acquire --wait and sectorflow status read. The input is the value; the properties are
// those of scan_record_target.hpp.
#include <cstddef>
#include <cstdint>

#include "scan_record_target.hpp"
#include "sectorflow/protocol/scan_records.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return sectorflow::fuzz::check_scan_record<sectorflow::protocol::ProducerScanRecord>(data, size);
}
