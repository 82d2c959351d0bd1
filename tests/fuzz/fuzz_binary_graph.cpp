// SPDX-License-Identifier: Apache-2.0
// Fuzz target: io::read_graph_binary (the squeeze graph file) on arbitrary bytes: by path (an
// in-memory regular file: the header is checked against its exact length), from a
// std::istringstream (size known) and from a stream that cannot seek and hands out a few bytes
// a read, as a pipe does (the lists grow as their bytes arrive). Bad input must end in a
// squeeze::error; the two streams must agree, the path reader must accept exactly what they
// accept when the graph ends the input, and an accepted graph must pass io::validate.
#include <squeeze/io/graph.hpp>

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

bool same(const io::graph& a, const io::graph& b) {
  return a.directed == b.directed && a.row_offsets == b.row_offsets && a.neighbors == b.neighbors;
}

void check(const io::graph& g) {
  try {
    io::validate(g, 1);
  } catch (const squeeze::error&) {
    __builtin_trap();
  }
}

// `whole`: whether the graph ended the stream.
// The graph, and whether it ended the stream.
std::optional<std::pair<io::graph, bool>> read_stream(std::istream& in) {
  try {
    io::graph g = io::read_graph_binary(in, "fuzz.sqzg");
    return std::pair{std::move(g), in.peek() == std::char_traits<char>::eof()};
  } catch (const squeeze::error&) {
    return std::nullopt;
  }
}

// The bytes as a regular file in memory, read by path.
std::optional<io::graph> read_path(const std::string& bytes) {
  const squeeze::fuzz::memory_file file{"fuzz.sqzg", bytes.data(), bytes.size()};
  try {
    return io::read_graph_binary(file.path());
  } catch (const squeeze::error&) {
    return std::nullopt;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto [a, b] = squeeze::fuzz::read_piped_and_sized(data, size, read_stream);
  if (a) {
    check(a->first);
    SQUEEZE_FUZZ_ASSERT_TRUE(same(a->first, b->first) && a->second == b->second);
  }
  const std::optional<io::graph> c =
      read_path(std::string(reinterpret_cast<const char*>(data), size));
  SQUEEZE_FUZZ_ASSERT_TRUE(c.has_value() == (a.has_value() && a->second));
  if (c) SQUEEZE_FUZZ_ASSERT_TRUE(same(a->first, *c));
  return 0;
}
