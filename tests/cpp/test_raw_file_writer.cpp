// RawFileWriter: a raw file carries its final name only once it is whole (protocol/SPEC.md, "Raw
// fallback files"); anything not closed whole ends as <name>.partial, or is removed when empty.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "sectorflow/protocol/errors.hpp"
#include "sectorflow/protocol/raw_file.hpp"

namespace fs = std::filesystem;
using sectorflow::protocol::DataHeader;
using sectorflow::protocol::Geometry;
using sectorflow::protocol::RawFileError;
using sectorflow::protocol::RawFileWriter;

namespace {

const Geometry kGeometry{32, 32, 8, 32, 2};  // 4 sectors of 512 bytes

// A directory of its own, removed with everything in it.
struct ScratchDir {
  fs::path path;
  ScratchDir() {
    std::string name = (fs::temp_directory_path() / "sectorflow-rawfile-XXXXXX").string();
    path = ::mkdtemp(name.data());
  }
  ~ScratchDir() { fs::remove_all(path); }
  std::vector<std::string> names() const {
    std::vector<std::string> found;
    for (const auto& entry : fs::directory_iterator(path)) found.push_back(entry.path().filename().string());
    std::sort(found.begin(), found.end());
    return found;
  }
};

DataHeader header(std::uint32_t frame) {
  DataHeader h;
  h.scan_number = 7;
  h.frame_number = frame;
  h.sector = 1;
  h.scan_x = 4;
  h.scan_y = 2;
  h.position_x = frame % 4;
  h.position_y = frame / 4;
  return h;
}

void write_frames(RawFileWriter& writer, std::uint32_t n) {
  const std::vector<unsigned char> sector(kGeometry.sector_bytes(), 0x5a);
  for (std::uint32_t frame = 0; frame < n; ++frame) writer.write(header(frame), sector.data(), sector.size());
}

const std::string kName = "data_scan0000000007_module1_0.data";

}  // namespace

TEST(RawFileWriter, IsWrittenUnderATemporaryNameAndRenamedWhenClosedWhole) {
  ScratchDir dir;
  RawFileWriter writer(dir.path.string(), 7, 1, 0, kGeometry);
  write_frames(writer, 3);
  writer.flush();
  EXPECT_EQ(dir.names(), std::vector<std::string>{kName + ".writing"});
  EXPECT_EQ(writer.current_path(), (dir.path / (kName + ".writing")).string());
  writer.close();
  EXPECT_EQ(dir.names(), std::vector<std::string>{kName});
  EXPECT_EQ(writer.current_path(), writer.path());
  EXPECT_FALSE(writer.failed());
  EXPECT_EQ(writer.records_in_file(), 3U);
  EXPECT_EQ(fs::file_size(writer.path()), 3 * (sectorflow::protocol::kRawHeaderBytes + kGeometry.sector_bytes()));
}

TEST(RawFileWriter, FollowsTheUmask) {
  ScratchDir dir;
  const mode_t previous = ::umask(002);  // a facility whose group shares its files
  RawFileWriter writer(dir.path.string(), 7, 1, 0, kGeometry);
  ::umask(previous);
  write_frames(writer, 1);
  writer.close();
  EXPECT_EQ(fs::status(writer.path()).permissions(),
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read | fs::perms::group_write |
                fs::perms::others_read);
}

TEST(RawFileWriter, AFileNobodyClosedBecomesPartialWithItsBufferedRecords) {
  ScratchDir dir;
  {
    RawFileWriter writer(dir.path.string(), 7, 1, 0, kGeometry);
    write_frames(writer, 2);  // still in the writer's buffer
  }
  EXPECT_EQ(dir.names(), std::vector<std::string>{kName + ".partial"});
  EXPECT_EQ(fs::file_size(dir.path / (kName + ".partial")),
            2 * (sectorflow::protocol::kRawHeaderBytes + kGeometry.sector_bytes()));
}

TEST(RawFileWriter, AbandonedEmptyFileIsRemovedAndAnEarlierPartialKeepsItsName) {
  ScratchDir dir;
  {
    RawFileWriter writer(dir.path.string(), 7, 1, 0, kGeometry);
    EXPECT_EQ(writer.abandon(), "");
    EXPECT_TRUE(writer.failed());
    EXPECT_EQ(writer.abandon(), "") << "idempotent";
  }
  EXPECT_TRUE(dir.names().empty());
  for (int attempt = 0; attempt < 2; ++attempt) {
    RawFileWriter writer(dir.path.string(), 7, 1, 0, kGeometry);
    write_frames(writer, 1);
    writer.abandon();
  }
  EXPECT_EQ(dir.names(), (std::vector<std::string>{kName + ".1.partial", kName + ".partial"}));
}

TEST(RawFileWriter, NeverReplacesAWholeFile) {
  ScratchDir dir;
  {
    RawFileWriter writer(dir.path.string(), 7, 1, 0, kGeometry);
    write_frames(writer, 1);
    writer.close();
  }
  EXPECT_THROW(RawFileWriter(dir.path.string(), 7, 1, 0, kGeometry), RawFileError);
  // A whole file that appears while another writer runs is not replaced by it: that one is partial.
  fs::remove(dir.path / kName);
  RawFileWriter late(dir.path.string(), 7, 1, 0, kGeometry);
  write_frames(late, 2);
  fs::copy_file(dir.path / (kName + ".writing"), dir.path / kName);
  try {
    late.close();
    FAIL() << "close() replaced a whole file";
  } catch (const RawFileError& error) {
    EXPECT_NE(std::string(error.what()).find("not completed"), std::string::npos) << error.what();
  }
  EXPECT_EQ(late.current_path(), (dir.path / (kName + ".partial")).string());
  EXPECT_EQ(dir.names(), (std::vector<std::string>{kName, kName + ".partial"}));
}

TEST(RawFileWriter, MovingOntoAnOpenWriterAbandonsItsFile) {
  ScratchDir dir;
  RawFileWriter first(dir.path.string(), 7, 1, 0, kGeometry);
  write_frames(first, 1);
  RawFileWriter second(dir.path.string(), 8, 1, 0, kGeometry);
  first = std::move(second);
  EXPECT_EQ(dir.names(),
            (std::vector<std::string>{kName + ".partial", "data_scan0000000008_module1_0.data.writing"}));
  first.close();
  EXPECT_TRUE(fs::exists(dir.path / "data_scan0000000008_module1_0.data")) << "empty but whole: closed normally";
}
