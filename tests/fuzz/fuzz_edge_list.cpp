// SPDX-License-Identifier: Apache-2.0
// Fuzz target: io::read_edge_list on arbitrary bytes (from a std::istringstream), with the
// default options and with every option set. Bad input must end in a squeeze::error; an
// accepted graph must pass io::validate and keep within the limits it was read under.
#include <squeeze/io/graph.hpp>

#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "fuzz/fuzz_support.hpp"

namespace io = squeeze::io;

namespace {

void read(const std::string& text, io::edge_list_options options) {
  // A small allowance keeps runs fast; the checks are the same as with the default.
  options.limits.max_bytes = std::uint64_t{1} << 20;
  try {
    std::istringstream in{text};
    const io::graph g = io::read_edge_list(in, "fuzz.el", options);
    try {
      io::validate(g, 1);
    } catch (const squeeze::error&) {
      __builtin_trap();
    }
    SQUEEZE_FUZZ_ASSERT_TRUE(g.directed == options.directed);
    if (options.num_vertices != 0) {
      SQUEEZE_FUZZ_ASSERT_TRUE(g.num_vertices() == options.num_vertices);
    } else {
      SQUEEZE_FUZZ_ASSERT_TRUE(g.num_vertices() * io::graph_bytes_per_vertex <=
                               16 * text.size() + options.limits.max_bytes);
    }
    SQUEEZE_FUZZ_ASSERT_TRUE(g.num_edges() <= 2 * text.size());  // lines of at least "0 1"
  } catch (const squeeze::error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  read(text, {});
  read(text, {.one_based = true, .directed = true, .allow_extra_columns = true});
  read(text, {.num_vertices = 1000});
  return 0;
}
