// SPDX-License-Identifier: Apache-2.0
// Fuzz target: io::read_idx on arbitrary bytes, from a std::istringstream (size known, so
// declared dimensions are checked against it) and from a stream that cannot seek and hands
// out a few bytes a read, as a pipe does (the reader grows its buffer as bytes arrive). Bad
// input must end in a squeeze::error; both must agree, and an accepted array must hold
// exactly the product of its dimensions.
#include <squeeze/io/idx.hpp>

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

std::optional<io::idx_array> read_stream(std::istream& in) {
  try {
    io::idx_array a = io::read_idx(in, "fuzz.idx");
    std::uint64_t count = 1;
    for (const std::uint32_t d : a.dims) count *= d;  // (the reader refuses a product that wraps)
    SQUEEZE_FUZZ_ASSERT_TRUE(!a.dims.empty() && a.data.size() == count * a.element_bytes());
    SQUEEZE_FUZZ_ASSERT_TRUE(a.data.size() == a.dims[0] * a.row_elements() * a.element_bytes());
    return a;
  } catch (const squeeze::error&) {
    return std::nullopt;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto [a, b] = squeeze::fuzz::read_piped_and_sized(data, size, read_stream);
  if (a) SQUEEZE_FUZZ_ASSERT_TRUE(a->type == b->type && a->dims == b->dims && a->data == b->data);
  return 0;
}
