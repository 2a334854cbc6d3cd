#include "sectorflow/protocol/raw_file.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <system_error>
#include <tuple>

#include "sectorflow/protocol/errors.hpp"

namespace sectorflow::protocol {
namespace {

constexpr const char* kPattern = "data_scan{scan:010d}_module{sector}_{thread}.data";

// Reads decimal digits at `pos` into `value`; false unless at least one digit fits in 32 bits.
bool parse_u32(const std::string& text, std::size_t& pos, std::uint32_t& value) {
  const std::size_t start = pos;
  std::uint64_t result = 0;
  while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
    result = result * 10 + static_cast<std::uint64_t>(text[pos] - '0');
    if (result > std::numeric_limits<std::uint32_t>::max()) return false;
    ++pos;
  }
  value = static_cast<std::uint32_t>(result);
  return pos > start;
}

bool expect(const std::string& text, std::size_t& pos, const char* literal) {
  const std::string expected(literal);
  if (text.compare(pos, expected.size(), expected) != 0) return false;
  pos += expected.size();
  return true;
}

void put_u16(unsigned char* out, std::uint32_t value) {
  out[0] = static_cast<unsigned char>(value & 0xff);
  out[1] = static_cast<unsigned char>((value >> 8) & 0xff);
}

void put_u32(unsigned char* out, std::uint32_t value) {
  put_u16(out, value & 0xffff);
  put_u16(out + 2, value >> 16);
}

std::uint32_t get_u16(const unsigned char* in) { return std::uint32_t{in[0]} | (std::uint32_t{in[1]} << 8); }

std::uint32_t get_u32(const unsigned char* in) { return get_u16(in) | (get_u16(in + 2) << 16); }

}  // namespace

bool RawFileName::operator==(const RawFileName& o) const {
  return scan_number == o.scan_number && sector == o.sector && thread_id == o.thread_id;
}

std::string raw_file_name(const RawFileName& name) {
  char scan[16];
  std::snprintf(scan, sizeof scan, "%010u", static_cast<unsigned>(name.scan_number));
  return std::string("data_scan") + scan + "_module" + std::to_string(name.sector) + "_" +
         std::to_string(name.thread_id) + ".data";
}

std::optional<RawFileName> parse_raw_file_name(const std::string& path) {
  const std::string file = std::filesystem::path(path).filename().string();
  RawFileName name;
  std::size_t pos = 0;
  if (expect(file, pos, "data_scan") && parse_u32(file, pos, name.scan_number) && expect(file, pos, "_module") &&
      parse_u32(file, pos, name.sector) && expect(file, pos, "_") && parse_u32(file, pos, name.thread_id) &&
      expect(file, pos, ".data") && pos == file.size()) {
    return name;
  }
  return std::nullopt;
}

std::vector<std::string> find_raw_files(const std::string& directory, std::uint32_t scan_number) {
  std::vector<std::pair<RawFileName, std::string>> found;
  std::error_code error;
  std::filesystem::directory_iterator it(directory, error);
  for (; !error && it != std::filesystem::directory_iterator(); it.increment(error)) {
    const std::optional<RawFileName> name = parse_raw_file_name(it->path().string());
    if (name && name->scan_number == scan_number) found.emplace_back(*name, it->path().string());
  }
  if (error) {
    throw RawFileError(directory + ": cannot list raw files of scan " + std::to_string(scan_number) + ": " +
                       error.message() + " (files are named " + kPattern + ")");
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) {
    return std::tie(a.first.sector, a.first.thread_id) < std::tie(b.first.sector, b.first.thread_id);
  });
  std::vector<std::string> paths;
  paths.reserve(found.size());
  for (auto& [name, path] : found) paths.push_back(std::move(path));
  return paths;
}

std::optional<RawFileName> parse_replay_file_name(const std::string& path, bool& partial) {
  partial = false;
  std::string file = std::filesystem::path(path).filename().string();
  const std::string suffix = kRawPartialSuffix;
  if (file.size() > suffix.size() && file.compare(file.size() - suffix.size(), suffix.size(), suffix) == 0) {
    file.resize(file.size() - suffix.size());
    // <name>.<k>.partial: a later incomplete attempt numbered beside an earlier one.
    const std::size_t dot = file.rfind('.');
    if (dot != std::string::npos && dot + 1 < file.size() &&
        file.find_first_not_of("0123456789", dot + 1) == std::string::npos) {
      file.resize(dot);
    }
    partial = true;
  }
  return parse_raw_file_name(file);
}

std::vector<std::string> find_replay_files(const std::string& directory, std::uint32_t scan_number) {
  std::vector<std::pair<RawFileName, std::string>> found;
  std::error_code error;
  std::filesystem::directory_iterator it(directory, error);
  for (; !error && it != std::filesystem::directory_iterator(); it.increment(error)) {
    bool partial = false;
    const std::optional<RawFileName> name = parse_replay_file_name(it->path().string(), partial);
    if (name && name->scan_number == scan_number) found.emplace_back(*name, it->path().string());
  }
  if (error) {
    throw RawFileError(directory + ": cannot list raw files of scan " + std::to_string(scan_number) + ": " +
                       error.message() + " (files are named " + kPattern + ", or that + .partial)");
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) {
    return std::tie(a.first.sector, a.first.thread_id, a.second) < std::tie(b.first.sector, b.first.thread_id, b.second);
  });
  std::vector<std::string> paths;
  paths.reserve(found.size());
  for (auto& [name, path] : found) paths.push_back(std::move(path));
  return paths;
}

void encode_raw_header(const DataHeader& header, unsigned char* out) {
  for (std::uint32_t value : {header.scan_x, header.scan_y, header.position_x, header.position_y}) {
    if (value > kRawMaxScanSide) {
      throw RawFileError(header.where() + ": scan shape " + std::to_string(header.scan_x) + " x " +
                         std::to_string(header.scan_y) + " or position (" + std::to_string(header.position_x) +
                         ", " + std::to_string(header.position_y) + ") does not fit the raw format's uint16 fields");
    }
  }
  put_u32(out, header.scan_number);
  put_u32(out + 4, header.frame_number);
  put_u16(out + 8, header.scan_x);
  put_u16(out + 10, header.scan_y);
  put_u16(out + 12, header.position_x);
  put_u16(out + 14, header.position_y);
}

DataHeader decode_raw_header(const unsigned char* in, const RawFileName& name) {
  DataHeader header;
  header.scan_number = get_u32(in);
  header.frame_number = get_u32(in + 4);
  header.scan_x = get_u16(in + 8);
  header.scan_y = get_u16(in + 10);
  header.position_x = get_u16(in + 12);
  header.position_y = get_u16(in + 14);
  header.sector = name.sector;
  header.thread_id = name.thread_id;
  return header;
}

}  // namespace sectorflow::protocol
