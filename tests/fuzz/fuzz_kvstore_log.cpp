// Fuzz target: the reader of a kvstore server's durable records (kvstore/log_records.hpp), which
// reads files a crash, a full disk or anything else may have cut or damaged. The input is the
// content of one log or snapshot file.
// Properties:
//   - read_log_records throws nothing, whatever the content;
//   - it reads whole records from the front: whole_bytes + cut_bytes is the input's size, a cut has
//     a reason and a whole file has none;
//   - each record it returns encodes back to exactly the bytes it was read from.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "property.hpp"
#include "sectorflow/kvstore/log_records.hpp"

namespace kv = sectorflow::kvstore;
using sectorflow::fuzz::require;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view content(reinterpret_cast<const char*>(data), size);
  std::size_t at = kv::kLogMagic.size();
  const kv::LogRead read = kv::read_log_records(content, [&](kv::LogRecord&& record) {
    const std::string framed = kv::encode_log_record(record);
    require(content.substr(at, framed.size()) == framed, "a record does not encode back to its bytes");
    at += framed.size();
  });
  require(read.whole_bytes + read.cut_bytes == size, "whole and cut bytes are not the input");
  require(read.cut_bytes == 0 || !read.cut_reason.empty(), "a cut without a reason");
  require(read.cut_bytes != 0 || read.cut_reason.empty(), "a whole file with a cut reason");
  require(read.records == 0 || read.whole_bytes == at, "the whole bytes are not the records read");
  return 0;
}
