// Fuzz target: the raw fallback files (protocol/raw_file.hpp), which a producer replays from disk
// where anything may have written or cut them. The input is the content of one file, read with
// RawFileReader under the name data_scan0000000007_module1_0.data and a small geometry (4 x 4
// pixels in 2 sectors of 2 x 4, so a record is 16 + 16 bytes and an input holds several).
// Properties:
//   - the reader throws nothing but RawFileError, whatever the content, and stops;
//   - each record it returns is the file's bytes: its header encodes back to the 16 bytes it was
//     decoded from (decode_raw_header and encode_raw_header are inverse), with the file name's
//     sector and thread, and its payload is the next 16 bytes;
//   - it reads records in whole steps: offset() is records() records.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>
#include <unistd.h>
#include <vector>

#include "property.hpp"
#include "sectorflow/protocol/errors.hpp"
#include "sectorflow/protocol/raw_file.hpp"

namespace sp = sectorflow::protocol;
using sectorflow::fuzz::require;

namespace {

constexpr sp::RawFileName kName{7, 1, 0};

sp::Geometry small_geometry() { return {4, 4, 2, 4, 2}; }

// Where the scratch file goes: /dev/shm when there is one, since the file is rewritten for every
// input and a disk-backed /tmp slows the target from thousands of inputs a second to hundreds.
std::filesystem::path scratch_root() {
  std::error_code error;
  if (std::filesystem::is_directory("/dev/shm", error)) return "/dev/shm";
  return std::filesystem::temp_directory_path();
}

// The file every input is written to, in a directory of this process's own, removed at exit.
class ScratchFile {
 public:
  ScratchFile()
      : directory_(scratch_root() / ("sectorflow-fuzz-raw-" + std::to_string(::getpid()))),
        path_((directory_ / sp::raw_file_name(kName)).string()) {
    std::filesystem::create_directories(directory_);
  }
  ~ScratchFile() {
    std::error_code ignored;
    std::filesystem::remove_all(directory_, ignored);
  }
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;

  const std::string& write(const std::uint8_t* data, std::size_t size) {
    std::FILE* file = std::fopen(path_.c_str(), "wb");
    require(file != nullptr, "cannot create the scratch file");
    const bool written = size == 0 || std::fwrite(data, 1, size, file) == size;
    require(std::fclose(file) == 0 && written, "cannot write the scratch file");
    return path_;
  }

 private:
  std::filesystem::path directory_;
  std::string path_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static ScratchFile scratch;
  const sp::Geometry geometry = small_geometry();
  const std::size_t record_bytes = sp::kRawHeaderBytes + geometry.sector_bytes();

  sp::RawFileReader reader(scratch.write(data, size), geometry);
  std::vector<unsigned char> payload(geometry.sector_bytes());
  sp::DataHeader header;
  try {
    while (reader.next(header, payload.data(), payload.size())) {
      const std::size_t start = (reader.records() - 1) * record_bytes;
      require(reader.offset() == reader.records() * record_bytes, "the reader's offset is not whole records");
      require(header.sector == kName.sector && header.thread_id == kName.thread_id,
              "a record's sector or thread is not the file name's");
      unsigned char encoded[sp::kRawHeaderBytes];
      sp::encode_raw_header(header, encoded);
      require(std::memcmp(encoded, data + start, sp::kRawHeaderBytes) == 0,
              "encode_raw_header(decode_raw_header(bytes)) differs from the bytes");
      require(std::memcmp(payload.data(), data + start + sp::kRawHeaderBytes, payload.size()) == 0,
              "the payload is not the bytes after the header");
    }
  } catch (const sp::RawFileError&) {
  }
  return 0;
}
