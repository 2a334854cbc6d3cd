// The main of a fuzz target built without libFuzzer (the g++ build of `make build`, the sanitizer
// builds): runs the target once on every file named on the command line or found in a directory
// named there (the seed corpus and the regression inputs of past findings), so that CTest checks
// every finding in every build. A target that breaks a property aborts (property.hpp); a
// decoder that crashes or throws an exception it should not fails the run the same way.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

std::vector<std::filesystem::path> inputs_of(const std::filesystem::path& argument) {
  if (!std::filesystem::is_directory(argument)) return {argument};
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(argument)) {
    if (entry.is_regular_file()) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());  // the same order on every run
  return files;
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t replayed = 0;
  for (int i = 1; i < argc; ++i) {
    if (!std::filesystem::exists(argv[i])) {
      std::fprintf(stderr, "%s: no such corpus file or directory\n", argv[i]);
      return 2;
    }
    for (const std::filesystem::path& path : inputs_of(argv[i])) {
      std::ifstream in(path, std::ios::binary);
      const std::vector<char> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
      if (!in.eof() && in.fail()) {
        std::fprintf(stderr, "%s: cannot read\n", path.c_str());
        return 2;
      }
      std::fprintf(stderr, "replaying %s (%zu bytes)\n", path.c_str(), bytes.size());
      LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
      ++replayed;
    }
  }
  if (replayed == 0) {
    std::fprintf(stderr, "no input replayed: name corpus files or directories\n");
    return 2;
  }
  std::printf("%zu inputs replayed\n", replayed);
  return 0;
}
