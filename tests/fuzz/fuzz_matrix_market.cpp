// SPDX-License-Identifier: Apache-2.0
// Fuzz target: io::read_matrix_market on arbitrary bytes (from a std::istringstream). Bad
// input must end in a squeeze::error; an accepted matrix must pass io::validate, keep within
// the limits it was read under and hold no more entries than its lines can stand for.
#include <squeeze/io/matrix_market.hpp>

#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "fuzz/fuzz_support.hpp"

namespace io = squeeze::io;

namespace {

// A small allowance keeps runs fast; the checks are the same as with the default.
constexpr io::read_limits limits{.max_bytes = std::uint64_t{1} << 20};

template <class Value, class Index>
void read(const std::string& text) {
  try {
    std::istringstream in{text};
    const io::csr_matrix<Value, Index> a =
        io::read_matrix_market<Value, Index>(in, "fuzz.mtx", limits);
    try {
      io::validate(a);
    } catch (const squeeze::error&) {
      __builtin_trap();
    }
    // Each entry line ("1 1" at least) stands for at most two entries.
    SQUEEZE_FUZZ_ASSERT_TRUE(static_cast<std::uint64_t>(a.nnz()) <= 2 * text.size());
    // The rows cost (16 + sizeof(Index)) bytes each: within 16 per input byte plus max_bytes.
    SQUEEZE_FUZZ_ASSERT_TRUE((static_cast<std::uint64_t>(a.rows) + 1) * (16 + sizeof(Index)) <=
                             16 * text.size() + limits.max_bytes);
  } catch (const squeeze::error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  read<double, std::int32_t>(text);
  read<float, std::int16_t>(text);  // narrow indices: dimensions and nnz that do not fit
  return 0;
}
