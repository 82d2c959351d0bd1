// SPDX-License-Identifier: Apache-2.0
// Fuzz target: io::read_npy on arbitrary bytes as a file: by path (an in-memory file, so the
// reader sees a regular file of known size) and as a FILE opened with fmemopen (one array
// from the start, bytes after it left alone). Bad input must end in a squeeze::error; an
// accepted array must be consistent (data.size() == elements() * item_bytes ==
// rows() * row_bytes()), and the two readers must agree: the path reader accepts exactly
// what the FILE reader accepts when the array ends the file.
#include <squeeze/io/npy.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "fuzz/fuzz_support.hpp"

namespace io = squeeze::io;

namespace {

void check(const io::npy_array& a) {
  SQUEEZE_FUZZ_ASSERT_TRUE(a.data.size() == a.elements() * a.item_bytes);
  SQUEEZE_FUZZ_ASSERT_TRUE(a.data.size() == a.rows() * a.row_bytes());
  SQUEEZE_FUZZ_ASSERT_TRUE(a.descr.size() == 3 && a.descr[1] == a.kind &&
                           static_cast<std::size_t>(a.descr[2] - '0') == a.item_bytes);
}

// The bytes as a regular file in memory, read by path.
std::optional<io::npy_array> read_path(const std::uint8_t* data, std::size_t size) {
  const squeeze::fuzz::memory_file file{"fuzz.npy", data, size};
  try {
    return io::read_npy(file.path());
  } catch (const squeeze::error&) {
    return std::nullopt;
  }
}

// The bytes through fmemopen; `whole`: whether the array ended the input.
std::optional<io::npy_array> read_file(const std::uint8_t* data, std::size_t size, bool& whole) {
  if (size == 0) return std::nullopt;  // (fmemopen needs a buffer)
  std::vector<char> copy(data, data + size);
  std::FILE* const f = fmemopen(copy.data(), copy.size(), "rb");
  if (f == nullptr) __builtin_trap();
  std::optional<io::npy_array> a;
  try {
    a = io::read_npy(f, "fuzz.npy");
    whole = std::fgetc(f) == EOF;
  } catch (const squeeze::error&) {
  }
  std::fclose(f);
  return a;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::optional<io::npy_array> by_path = read_path(data, size);
  bool whole = false;
  const std::optional<io::npy_array> by_file = read_file(data, size, whole);
  if (by_path) check(*by_path);
  if (by_file) check(*by_file);
  SQUEEZE_FUZZ_ASSERT_TRUE(by_path.has_value() == (by_file.has_value() && whole));
  if (by_path) {
    SQUEEZE_FUZZ_ASSERT_TRUE(by_path->descr == by_file->descr && by_path->shape == by_file->shape &&
                             by_path->data == by_file->data);
  }
  return 0;
}
