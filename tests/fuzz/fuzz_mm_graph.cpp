// SPDX-License-Identifier: Apache-2.0
// Fuzz target: io::read_matrix_market_graph on arbitrary bytes (from a std::istringstream),
// undirected and directed. Bad input must end in a squeeze::error; an accepted graph must pass
// io::validate and keep within the limits it was read under.
#include <squeeze/io/graph.hpp>

#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "fuzz/fuzz_support.hpp"

namespace io = squeeze::io;

namespace {

// A small allowance keeps runs fast; the checks are the same as with the default.
constexpr io::read_limits limits{.max_bytes = std::uint64_t{1} << 20};

void read(const std::string& text, bool directed) {
  try {
    std::istringstream in{text};
    const io::graph g = io::read_matrix_market_graph(in, "fuzz.mtx", directed, limits);
    try {
      io::validate(g, 1);
    } catch (const squeeze::error&) {
      __builtin_trap();
    }
    SQUEEZE_FUZZ_ASSERT_TRUE(g.directed == directed);
    SQUEEZE_FUZZ_ASSERT_TRUE(g.num_vertices() * io::graph_bytes_per_vertex <=
                             16 * text.size() + limits.max_bytes);
    // An entry line stands for at most two edges, each stored at most twice.
    SQUEEZE_FUZZ_ASSERT_TRUE(g.num_edges() <= 4 * text.size());
  } catch (const squeeze::error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  read(text, false);
  read(text, true);
  return 0;
}
