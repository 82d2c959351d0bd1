// SPDX-License-Identifier: Apache-2.0
// tests/fuzz/replay_main.cpp: runs a fuzz target's LLVMFuzzerTestOneInput on every file of
// the corpus folders (and single files) named on the command line, as libFuzzer does when it
// replays a corpus: one GoogleTest test per input (FuzzReplay.<index>_<file>). Built with the host
// compiler and AddressSanitizer/UndefinedBehaviorSanitizer for CI (ctest's fuzz.* tests): a
// sanitizer report aborts the run; an input that cannot be read, or an exception escaping
// the target, fails its test; no inputs at all fail FuzzReplay.HasInputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

void replay(const std::filesystem::path& file) {
  std::ifstream in{file, std::ios::binary};
  ASSERT_TRUE(in) << "cannot read " << file;
  const std::vector<char> bytes{std::istreambuf_iterator<char>{in}, {}};
  try {
    // libFuzzer passes a null pointer for an empty input only with size 0; so do we
    LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
  } catch (const std::exception& e) {
    FAIL() << file << ": an exception escaped the target: " << e.what();
  } catch (...) {
    FAIL() << file << ": an exception of unknown type escaped the target";
  }
}

/// The files named on the command line: folders' regular files in name order, then files.
std::vector<std::filesystem::path> inputs_of(int argc, char** argv) {
  std::vector<std::filesystem::path> inputs;
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path path{argv[i]};
    if (!std::filesystem::is_directory(path)) {
      inputs.push_back(path);
      continue;
    }
    std::vector<std::filesystem::path> files;
    for (const auto& entry : std::filesystem::directory_iterator{path}) {
      if (entry.is_regular_file()) files.push_back(entry.path());
    }
    std::sort(files.begin(), files.end());
    inputs.insert(inputs.end(), files.begin(), files.end());
  }
  return inputs;
}

/// A test name from a file name: letters, digits and underscores (prefixed with the input's
/// index, as two names may map to one).
std::string test_name(const std::filesystem::path& file) {
  std::string name = file.filename().string();
  for (char& c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (!ok) c = '_';
  }
  return name;
}

/// A test whose body is a function (for tests registered at run time).
class function_test : public ::testing::Test {
 public:
  explicit function_test(std::function<void()> body) : body_{std::move(body)} {}
  void TestBody() override { body_(); }

 private:
  std::function<void()> body_;
};

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);  // removes its own flags from argv
  const std::vector<std::filesystem::path> inputs = inputs_of(argc, argv);
  const std::size_t count = inputs.size();
  ::testing::RegisterTest(
      "FuzzReplay", "HasInputs", nullptr, nullptr, __FILE__, __LINE__,
      [count]() -> ::testing::Test* {
        return new function_test{[count] { ASSERT_GT(count, 0u) << "no corpus inputs given"; }};
      });
  for (std::size_t i = 0; i < count; ++i) {
    const std::filesystem::path& file = inputs[i];
    const std::string name = std::to_string(i) + "_" + test_name(file);  // unique
    ::testing::RegisterTest(
        "FuzzReplay", name.c_str(), nullptr, file.string().c_str(), __FILE__, __LINE__,
        [file]() -> ::testing::Test* { return new function_test{[file] { replay(file); }}; });
  }
  return RUN_ALL_TESTS();
}
