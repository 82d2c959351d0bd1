// SPDX-License-Identifier: Apache-2.0
// Fuzz target: io::read_npy on arbitrary bytes from a std::istream that cannot seek and hands
// out a few bytes a read, as a pipe does (so the reader cannot know the size in advance and
// must grow its buffers as bytes arrive), against the same bytes from a std::istringstream
// (size known). Bad input must end in a squeeze::error; both readers must agree on what they
// accept and return the same, consistent array.
#include <squeeze/io/npy.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <sstream>
#include <streambuf>
#include <string>

#include "fuzz/fuzz_support.hpp"

namespace io = squeeze::io;

namespace {

std::optional<io::npy_array> read_stream(std::istream& in) {
  try {
    io::npy_array a = io::read_npy(in, "fuzz.npy");
    SQUEEZE_FUZZ_ASSERT_TRUE(a.data.size() == a.elements() * a.item_bytes);
    SQUEEZE_FUZZ_ASSERT_TRUE(a.data.size() == a.rows() * a.row_bytes());
    return a;
  } catch (const squeeze::error&) {
    return std::nullopt;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto [a, b] = squeeze::fuzz::read_piped_and_sized(data, size, read_stream);
  if (a)
    SQUEEZE_FUZZ_ASSERT_TRUE(a->descr == b->descr && a->shape == b->shape && a->data == b->data);
  return 0;
}
