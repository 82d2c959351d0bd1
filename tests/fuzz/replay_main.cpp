// SPDX-License-Identifier: Apache-2.0
// tests/fuzz/replay_main.cpp: runs a fuzz target's LLVMFuzzerTestOneInput on every file of
// the corpus folders (and single files) named on the command line, as libFuzzer does when it
// replays a corpus. Built with g++ and AddressSanitizer/UndefinedBehaviorSanitizer for CI
// (ctest's fuzz.* tests): any report aborts the run; an exception escaping the target is a
// failure too.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

int replay(const std::filesystem::path& file) {
  std::ifstream in{file, std::ios::binary};
  if (!in) {
    std::fprintf(stderr, "replay: cannot read %s\n", file.c_str());
    return 1;
  }
  const std::vector<char> bytes{std::istreambuf_iterator<char>{in}, {}};
  try {
    // libFuzzer passes a null pointer for an empty input only with size 0; so do we
    LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "replay: %s: an exception escaped the target: %s\n", file.c_str(),
                 e.what());
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int inputs = 0, failures = 0;
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path path{argv[i]};
    if (std::filesystem::is_directory(path)) {
      std::vector<std::filesystem::path> files;
      for (const auto& entry : std::filesystem::directory_iterator{path}) {
        if (entry.is_regular_file()) files.push_back(entry.path());
      }
      std::sort(files.begin(), files.end());
      for (const auto& f : files) {
        failures += replay(f);
        ++inputs;
      }
    } else {
      failures += replay(path);
      ++inputs;
    }
  }
  std::printf("replayed %d inputs, %d failed\n", inputs, failures);
  if (inputs == 0) {
    std::fprintf(stderr, "replay: no inputs\n");
    return 1;
  }
  return failures == 0 ? 0 : 1;
}
