// SPDX-License-Identifier: Apache-2.0
// squeeze/io/graph_files.hpp: readers and writers of graph_types.hpp's graphs: edge-list
// text, Matrix Market, and a binary file whose edge list a GPU can read through the bam cache
// at a 4096-byte aligned offset.
//
// Host-only. Bad parameters are invalid_argument; malformed input is a format_error naming the
// file (or stream) and, for text, the line; a file that cannot be opened, read or written is
// an io_error with the path and the system's reason. Every reader is bounded by its
// read_limits (read_limits.hpp).
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <istream>
#include <limits>
#include <memory>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "squeeze/core/checked.hpp"
#include "squeeze/core/error.hpp"
#include "squeeze/io/csr.hpp"
#include "squeeze/io/detail/binary_input.hpp"
#include "squeeze/io/detail/line_reader.hpp"
#include "squeeze/io/detail/text_writer.hpp"
#include "squeeze/io/graph_types.hpp"
#include "squeeze/io/matrix_market.hpp"
#include "squeeze/io/read_limits.hpp"

namespace squeeze::io {

// ---- edge-list text ----------------------------------------------------------------------

/// How read_edge_list interprets its input.
struct edge_list_options {
  bool one_based = false;  ///< ids start at 1 (as in Matrix Market and many SNAP-like dumps)
  bool directed = false;   ///< keep u -> v only; otherwise each edge is stored both ways
  bool allow_extra_columns = false;  ///< ignore words after "u v" (weights, timestamps)
  /// 0: one more than the largest id read (vertices past it are lost); otherwise exactly this
  /// many vertices, and a larger id is an error.
  std::uint64_t num_vertices = 0;
  /// With num_vertices = 0, the vertices up to the largest id cost graph_bytes_per_vertex
  /// each: refused past 16 bytes per byte of input plus limits.max_bytes (read_limits.hpp).
  read_limits limits{};
};

/// Bytes a graph reader allocates per vertex: row_offsets (8) and the builder's kept count
/// (4). What read_edge_list and read_matrix_market_graph weigh against their read_limits.
inline constexpr std::uint64_t graph_bytes_per_vertex = 12;

/// Reads an edge list: one edge "u v" per line (whitespace separated, base-10), blank lines
/// and lines whose first non-blank character is '#' or '%' skipped, `\r\n` accepted. The
/// graph is cleaned up as the generators' (self-loops and duplicates dropped, lists sorted,
/// symmetrized unless options.directed). `name` is what error messages call the input.
/// Throws format_error naming the input and line for a malformed line, a negative id, 0 in a
/// 1-based list, or an id too large, and naming the largest id when the vertices up to it
/// pass options.limits; io_error when the stream fails. Memory: 8 bytes per edge line (of
/// at least 4 bytes) while reading, then the graph.
[[nodiscard]] inline graph read_edge_list(std::istream& in, const std::string& name,
                                          const edge_list_options& options = {}) {
  SQUEEZE_EXPECTS(options.num_vertices <= graph_max_vertices,
                  "read_edge_list: num_vertices " + std::to_string(options.num_vertices) +
                      " does not fit 32-bit vertex ids");
  const std::uint64_t limit = options.num_vertices != 0 ? options.num_vertices : graph_max_vertices;
  detail::line_reader reader{in, name, "edge list"};
  const auto fail = [&](const std::string& what) {
    throw format_error{"'" + name + "' line " + std::to_string(reader.number()) + ": " + what};
  };
  const auto parse_id = [&](std::string_view word, const char* which) -> std::uint32_t {
    std::int64_t id = 0;
    if (!detail::text_parse_int(word, id)) {
      fail("cannot parse the " + std::string{which} + " vertex " + detail::text_quote(word) +
           " as an integer");
    }
    if (id < 0) fail(std::string{which} + " vertex " + std::to_string(id) + " is negative");
    if (options.one_based) {
      if (id == 0) {
        fail(std::string{which} +
             " vertex is 0 but ids are 1-based (read 0-based lists with one_based = false)");
      }
      --id;
    }
    if (static_cast<std::uint64_t>(id) >= limit) {
      const std::int64_t shown = options.one_based ? id + 1 : id;
      fail(std::string{which} + " vertex " + std::to_string(shown) +
           (options.num_vertices != 0
                ? " is out of range for the " + std::to_string(options.num_vertices) +
                      " vertices asked for"
                : " does not fit 32-bit vertex ids (at most " +
                      std::to_string(graph_max_vertices - (options.one_based ? 0 : 1)) + ")"));
    }
    return static_cast<std::uint32_t>(id);
  };

  std::vector<graph_edge> edges;
  std::uint64_t n = options.num_vertices;
  std::int64_t largest_line = 0;  // where the largest id was read
  std::string_view line;
  while (reader.next(line)) {
    std::size_t pos = 0;
    const std::string_view first = detail::text_word(line, pos);
    if (first.empty() || first[0] == '#' || first[0] == '%') continue;
    const std::string_view second = detail::text_word(line, pos);
    if (second.empty()) {
      fail("bad edge " + detail::text_quote(line) + ": expected two vertex ids 'u v'");
    }
    if (!options.allow_extra_columns && !detail::text_word(line, pos).empty()) {
      fail("bad edge " + detail::text_quote(line) +
           ": expected exactly two vertex ids 'u v' (set allow_extra_columns to ignore "
           "weights)");
    }
    const graph_edge e{parse_id(first, "source"), parse_id(second, "target")};
    if (options.num_vertices == 0 && std::max(e.u, e.v) + 1ull > n) {
      n = std::max(e.u, e.v) + 1ull;
      largest_line = reader.number();
    }
    edges.push_back(e);
  }
  if (options.num_vertices == 0) {
    const std::optional<std::uint64_t> bytes =
        core::checked_mul<std::uint64_t>(n, graph_bytes_per_vertex);
    if (!detail::declared_bytes_allowed(bytes, reader.bytes_read(), options.limits)) {
      const std::uint64_t shown = options.one_based ? n : n - 1;
      throw format_error{"'" + name + "' line " + std::to_string(largest_line) +
                         ": the largest vertex id, " + std::to_string(shown) + ", makes " +
                         std::to_string(n) + " vertices of " +
                         std::to_string(graph_bytes_per_vertex) + " bytes, " +
                         detail::declared_bytes_refusal(bytes, reader.bytes_read(),
                                                        options.limits) +
                         ", or give num_vertices"};
    }
  }
  return detail::build_graph(n, std::move(edges), options.directed);
}

/// Reads an edge-list file; see the stream overload. io_error when it cannot be opened.
[[nodiscard]] inline graph read_edge_list(const std::filesystem::path& path,
                                          const edge_list_options& options = {}) {
  std::ifstream in = detail::open_input(path, "edge list");
  return read_edge_list(in, path.string(), options);
}

/// Writes `g` as a 0-based edge list: a '#' comment line with the counts, then "u v" per
/// line, each undirected edge once (u < v), each directed edge u -> v once. Reading it back
/// with {.directed = g.directed, .num_vertices = g.num_vertices()} gives `g` again. Validates
/// `g` first (format_error); io_error when the stream fails.
inline void write_edge_list(std::ostream& out, const graph& g) {
  validate(g);
  detail::text_writer w{
      out, "# squeeze graph: " + std::to_string(g.num_vertices()) + " vertices, " +
               std::to_string(g.num_edges()) + " stored edges, " +
               (g.directed ? "directed (u -> v)" : "undirected (each edge once, u < v)") + "\n"};
  for (std::uint32_t u = 0; u < g.num_vertices(); ++u) {
    for (const std::uint32_t v : g.neighbors_of(u)) {
      if (!g.directed && v < u) continue;
      w.number(u);
      w.put(' ');
      w.number(v);
      w.end_line();
    }
  }
  w.finish("edge list");
}

/// Writes an edge-list file; see the stream overload. io_error when it cannot be written.
inline void write_edge_list(const std::filesystem::path& path, const graph& g) {
  validate(g);
  errno = 0;
  std::ofstream out{path, std::ios::binary | std::ios::trunc};
  if (!out) {
    throw io_error{"cannot create edge list '" + path.string() + "': " + std::strerror(errno)};
  }
  try {
    write_edge_list(out, g);
    out.close();
    if (!out) throw io_error{"close failed"};
  } catch (const io_error&) {
    throw io_error{"cannot write edge list '" + path.string() + "': " + std::strerror(errno)};
  }
}

// ---- Matrix Market -----------------------------------------------------------------------

/// Reads a square Matrix Market coordinate matrix (pattern, integer or real; general,
/// symmetric or skew-symmetric; see read_matrix_market) as a graph: every stored entry (i, j)
/// is an edge i -> j, whatever its value (explicit zeros included); symmetric files are
/// mirrored first. The graph is symmetrized unless `directed`; self-loops (diagonal entries)
/// and duplicates are dropped. Errors as read_matrix_market's, plus a format_error, at the
/// size line, for a matrix that is not square or has more than graph_max_vertices rows, and
/// one for vertices that pass `limits` (graph_bytes_per_vertex each; read_limits.hpp).
/// Memory: 8 bytes per stored entry (16 for a mirrored one) while reading, then the graph.
[[nodiscard]] inline graph read_matrix_market_graph(std::istream& in, const std::string& name,
                                                    bool directed = false,
                                                    const read_limits& limits = {}) {
  const std::optional<std::uint64_t> bytes_left = detail::bytes_left(in);
  detail::line_reader reader{in, name, "Matrix Market input"};
  const detail::mm_header h = detail::mm_read_header(reader, name);
  if (h.rows != h.cols) {
    detail::mm_fail(name, h.size_line,
                    "a graph needs a square matrix, but the size line declares " +
                        std::to_string(h.rows) + " x " + std::to_string(h.cols));
  }
  const auto n = static_cast<std::uint64_t>(h.rows);
  if (n > graph_max_vertices) {
    detail::mm_fail(name, h.size_line,
                    std::to_string(n) + " vertices; at most " +
                        std::to_string(graph_max_vertices) + " (32-bit vertex ids) are supported");
  }
  std::vector<graph_edge> edges;
  edges.reserve(detail::mm_reservable(h, bytes_left));
  // (Indices are checked against the size line, so they fit 32 bits.)
  detail::mm_read_entries<double>(reader, name, h, [&](std::int64_t i, std::int64_t j, double) {
    edges.push_back({static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(j)});
  });
  detail::mm_check_declared(name, h, n, graph_bytes_per_vertex, "vertices", reader.bytes_read(),
                            limits);
  return detail::build_graph(n, std::move(edges), directed);
}

/// Reads a Matrix Market file as a graph; see the stream overload. io_error when it cannot be
/// opened.
[[nodiscard]] inline graph read_matrix_market_graph(const std::filesystem::path& path,
                                                    bool directed = false,
                                                    const read_limits& limits = {}) {
  std::ifstream in = detail::open_input(path, "Matrix Market file");
  return read_matrix_market_graph(in, path.string(), directed, limits);
}

// ---- binary graph file -------------------------------------------------------------------
//
// A graph file places the edge list at a 4096-byte aligned offset, so that a GPU can read it
// in place, line by line, through the bam cache (a file backing), with element k of the edge
// list at byte neighbors_offset_bytes(num_vertices) + 4 k. Little-endian throughout.
//
//   byte  0  magic             8 bytes  "SQZGRAPH"
//         8  version           u32      1
//        12  flags             u32      bit 0: directed; the other bits are 0
//        16  num_vertices      u64      n <= 2^32 - 1
//        24  num_edges         u64      m, stored neighbor entries
//        32  offsets_at        u64      64, where row_offsets begins
//        40  neighbors_at      u64      neighbors_offset_bytes(n) = round_up(64 + 8 (n + 1), 4096)
//        48  file_bytes        u64      round_up(neighbors_at + 4 m, 4096)
//        56  reserved          u64      0
//        64  row_offsets       u64[n + 1]
//            zero padding up to neighbors_at
//  neighbors_at  neighbors     u32[m]
//            zero padding up to file_bytes (the last line of the edge list reads whole)
//
// The redundant fields (offsets_at, neighbors_at, file_bytes) let a reader check a header
// before it trusts the counts: read_graph_binary refuses any mismatch, and a file whose size
// differs from file_bytes, before it allocates anything.

/// The alignment of the edge list in a graph file, and of the file's length.
inline constexpr std::uint64_t graph_file_alignment = 4096;
/// The version a graph file's header carries.
inline constexpr std::uint32_t graph_file_version = 1;
/// Bytes of a graph file's header.
inline constexpr std::uint64_t graph_file_header_bytes = 64;

namespace detail {
inline constexpr char graph_file_magic[8] = {'S', 'Q', 'Z', 'G', 'R', 'A', 'P', 'H'};
[[nodiscard]] constexpr std::uint64_t graph_round_up(std::uint64_t x) noexcept {
  return (x + graph_file_alignment - 1) / graph_file_alignment * graph_file_alignment;
}
}  // namespace detail

/// Byte offset of the edge list (neighbors[0]) in the graph file of a graph with
/// `num_vertices` vertices: a multiple of 4096.
[[nodiscard]] constexpr std::uint64_t neighbors_offset_bytes(std::uint64_t num_vertices) noexcept {
  return detail::graph_round_up(graph_file_header_bytes + 8 * (num_vertices + 1));
}
/// Byte offset of the edge list in the graph file of `g`.
[[nodiscard]] inline std::uint64_t neighbors_offset_bytes(const graph& g) noexcept {
  return neighbors_offset_bytes(g.num_vertices());
}

/// The header of a graph file, as read_graph_binary_header returns it.
struct graph_file_header {
  std::uint32_t version = graph_file_version;          ///< the file's version
  bool directed = false;                               ///< false: each edge is stored both ways
  std::uint64_t num_vertices = 0;                      ///< vertices
  std::uint64_t num_edges = 0;                         ///< stored neighbor entries
  std::uint64_t offsets_at = graph_file_header_bytes;  ///< byte offset of row_offsets
  std::uint64_t neighbors_at = 0;  ///< byte offset of neighbors; a multiple of 4096
  std::uint64_t file_bytes = 0;    ///< the file's length; a multiple of 4096
};

namespace detail {

template <class T>
[[nodiscard]] constexpr T graph_byteswap(T x) noexcept {
  T y = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i) {
    y = static_cast<T>((y << 8) | ((x >> (8 * i)) & 0xff));
  }
  return y;
}

template <class T>
[[nodiscard]] constexpr T graph_to_le(T x) noexcept {
  if constexpr (std::endian::native == std::endian::little) {
    return x;
  } else {
    return graph_byteswap(x);
  }
}

// Writes `values` little-endian; false on a write error.
template <class T>
[[nodiscard]] bool graph_write_le(std::FILE* f, std::span<const T> values) {
  if (values.empty()) return true;  // (fwrite must not see the null data() of an empty vector)
  if constexpr (std::endian::native == std::endian::little) {
    return std::fwrite(values.data(), sizeof(T), values.size(), f) == values.size();
  } else {
    std::vector<T> chunk;
    for (std::size_t i = 0; i < values.size(); i += 65536) {
      const std::size_t count = std::min<std::size_t>(65536, values.size() - i);
      chunk.resize(count);
      for (std::size_t k = 0; k < count; ++k) chunk[k] = graph_byteswap(values[i + k]);
      if (std::fwrite(chunk.data(), sizeof(T), count, f) != count) return false;
    }
    return true;
  }
}

[[nodiscard]] inline bool graph_write_zeros(std::FILE* f, std::uint64_t count) {
  static constexpr std::array<char, graph_file_alignment> zeros{};
  return count == 0 || std::fwrite(zeros.data(), 1, static_cast<std::size_t>(count), f) == count;
}

template <class T>
[[nodiscard]] T graph_load_le(const unsigned char* p) noexcept {
  T x;
  std::memcpy(&x, p, sizeof(T));
  return graph_to_le(x);
}

// Reads and checks the header of a graph file. `whole`: the file must end where the header
// says (a path); otherwise it may go on (a stream). Where the input's size is known it is
// checked here, before anything is allocated.
[[nodiscard]] inline graph_file_header graph_read_header(binary_input& in, bool whole) {
  const std::string& path = in.name();
  const auto bad = [&](const std::string& what) {
    throw format_error{"'" + path + "' is not a valid squeeze graph file: " + what};
  };
  unsigned char raw[graph_file_header_bytes];
  const std::size_t got = in.read(raw, sizeof raw);
  if (got != sizeof raw) {
    bad("it has " + std::to_string(got) + " bytes, fewer than the " +
        std::to_string(graph_file_header_bytes) + "-byte header");
  }
  if (std::memcmp(raw, graph_file_magic, sizeof graph_file_magic) != 0) {
    bad("bad magic bytes (expected \"SQZGRAPH\"; write it with write_graph_binary)");
  }
  graph_file_header h;
  h.version = graph_load_le<std::uint32_t>(raw + 8);
  const auto flags = graph_load_le<std::uint32_t>(raw + 12);
  h.num_vertices = graph_load_le<std::uint64_t>(raw + 16);
  h.num_edges = graph_load_le<std::uint64_t>(raw + 24);
  h.offsets_at = graph_load_le<std::uint64_t>(raw + 32);
  h.neighbors_at = graph_load_le<std::uint64_t>(raw + 40);
  h.file_bytes = graph_load_le<std::uint64_t>(raw + 48);
  const auto reserved = graph_load_le<std::uint64_t>(raw + 56);
  if (h.version != graph_file_version) {
    bad("version " + std::to_string(h.version) + " (this reader knows version " +
        std::to_string(graph_file_version) + ")");
  }
  if ((flags & ~1u) != 0) bad("unknown flags " + std::to_string(flags) + " (only bit 0 is used)");
  h.directed = (flags & 1u) != 0;
  if (reserved != 0) bad("the reserved header field is " + std::to_string(reserved) + ", not 0");
  if (h.num_vertices > graph_max_vertices) {
    bad(std::to_string(h.num_vertices) + " vertices; at most " +
        std::to_string(graph_max_vertices) + " are supported");
  }
  if (h.offsets_at != graph_file_header_bytes) {
    bad("row_offsets at byte " + std::to_string(h.offsets_at) + ", not " +
        std::to_string(graph_file_header_bytes));
  }
  const std::uint64_t neighbors_at = neighbors_offset_bytes(h.num_vertices);
  if (h.neighbors_at != neighbors_at) {
    bad("neighbors at byte " + std::to_string(h.neighbors_at) + " but " +
        std::to_string(h.num_vertices) + " vertices put them at byte " +
        std::to_string(neighbors_at));
  }
  // neighbors_at + 4 m, rounded up to a multiple of 4096, must fit 64 bits.
  const std::optional<std::uint64_t> list_bytes = core::checked_mul<std::uint64_t>(4, h.num_edges);
  const std::optional<std::uint64_t> list_end =
      list_bytes ? core::checked_add<std::uint64_t>(neighbors_at + (graph_file_alignment - 1),
                                                    *list_bytes)
                 : std::nullopt;
  if (!list_end) bad(std::to_string(h.num_edges) + " edges cannot be right");
  const std::uint64_t file_bytes = *list_end / graph_file_alignment * graph_file_alignment;
  if (h.file_bytes != file_bytes) {
    bad("the header gives the file length as " + std::to_string(h.file_bytes) + " bytes but " +
        std::to_string(h.num_vertices) + " vertices and " + std::to_string(h.num_edges) +
        " edges make it " + std::to_string(file_bytes));
  }
  if (const std::optional<std::uint64_t> left = in.left()) {
    const std::uint64_t size = graph_file_header_bytes + *left;  // from the header on
    if (size < file_bytes) {
      bad("the file is truncated: it has " + std::to_string(size) +
          " bytes, its header describes " + std::to_string(file_bytes));
    }
    if (whole && size > file_bytes) {
      bad("the file has " + std::to_string(size) + " bytes, more than the " +
          std::to_string(file_bytes) + " its header describes");
    }
  }
  return h;
}

// Reads a graph file's header and body from `in` (see graph_read_header for `whole`) and
// validates the graph.
[[nodiscard]] inline graph graph_read_binary(binary_input& in, bool whole) {
  const std::string& name = in.name();
  const graph_file_header h = graph_read_header(in, whole);
  const auto truncated = [&](const char* where) {
    throw format_error{"'" + name + "' is not a valid squeeze graph file: the file is truncated: " +
                       "it ends inside its " + where + ", before the " +
                       std::to_string(h.file_bytes) + " bytes its header describes"};
  };
  graph g;
  g.directed = h.directed;
  std::array<char, graph_file_alignment> padding;
  // (The header's counts are checked against the input's size when that is known, and the
  // lists grow as their bytes arrive when it is not.)
  if (!in.read_declared(g.row_offsets, h.num_vertices + 1)) truncated("row_offsets");
  const auto gap = static_cast<std::size_t>(h.neighbors_at - graph_file_header_bytes -
                                            8 * (h.num_vertices + 1));  // < 4096
  if (!in.read_exact(padding.data(), gap)) truncated("padding");
  if (!in.read_declared(g.neighbors, h.num_edges)) truncated("neighbors");
  const auto tail = static_cast<std::size_t>(h.file_bytes - h.neighbors_at - 4 * h.num_edges);
  if (!in.read_exact(padding.data(), tail)) truncated("final padding");
  if (whole && !in.at_end()) {
    throw format_error{"'" + name + "' is not a valid squeeze graph file: it has more than the " +
                       std::to_string(h.file_bytes) + " bytes its header describes"};
  }
  if constexpr (std::endian::native != std::endian::little) {
    for (auto& x : g.row_offsets) x = graph_byteswap(x);
    for (auto& x : g.neighbors) x = graph_byteswap(x);
  }
  try {
    validate(g);
  } catch (const format_error& e) {
    throw format_error{"'" + name + "': " + e.message()};
  }
  return g;
}

}  // namespace detail

/// Writes `g` as a graph file (layout above). Validates `g` first (format_error); io_error
/// with the path and reason when the file cannot be created or written.
inline void write_graph_binary(const std::filesystem::path& path, const graph& g) {
  validate(g);
  const std::string name = path.string();
  const std::uint64_t n = g.num_vertices(), m = g.num_edges();
  const std::uint64_t neighbors_at = neighbors_offset_bytes(n);
  const std::uint64_t file_bytes = detail::graph_round_up(neighbors_at + 4 * m);
  const std::array<std::uint64_t, 6> fields = {n,          m, graph_file_header_bytes, neighbors_at,
                                               file_bytes, 0};
  const std::array<std::uint32_t, 2> words = {graph_file_version, g.directed ? 1u : 0u};
  detail::file_ptr f = detail::open_file(name, "wb", "graph file");
  const std::uint64_t offsets_end = graph_file_header_bytes + 8 * (n + 1);
  const bool ok = std::fwrite(detail::graph_file_magic, 1, 8, f.get()) == 8 &&
                  detail::graph_write_le<std::uint32_t>(f.get(), words) &&
                  detail::graph_write_le<std::uint64_t>(f.get(), fields) &&
                  detail::graph_write_le<std::uint64_t>(f.get(), g.row_offsets) &&
                  detail::graph_write_zeros(f.get(), neighbors_at - offsets_end) &&
                  detail::graph_write_le<std::uint32_t>(f.get(), g.neighbors) &&
                  detail::graph_write_zeros(f.get(), file_bytes - neighbors_at - 4 * m);
  if (!ok) throw io_error{"cannot write graph file '" + name + "': " + std::strerror(errno)};
  if (std::fclose(f.release()) != 0) {
    throw io_error{"cannot write graph file '" + name + "': " + std::strerror(errno)};
  }
}

/// Reads and checks the header of a graph file alone (for a reader that maps the edge list:
/// neighbors_at and num_edges say where it lies). format_error for a header that is not
/// valid or does not match the file's length (when it has one: not a pipe); io_error when
/// the file cannot be read.
[[nodiscard]] inline graph_file_header read_graph_binary_header(const std::filesystem::path& path) {
  const std::string name = path.string();
  const detail::file_ptr f = detail::open_file(name, "rb", "graph file");
  detail::binary_input in{f.get(), name};
  return detail::graph_read_header(in, true);
}

/// Reads a graph file written by write_graph_binary. The header is checked against the file's
/// length before anything is allocated (a pipe, whose length is unknown, is read in steps),
/// and the graph is validated (format_error naming the file and the broken invariant);
/// io_error when the file cannot be read.
[[nodiscard]] inline graph read_graph_binary(const std::filesystem::path& path) {
  const std::string name = path.string();
  const detail::file_ptr f = detail::open_file(name, "rb", "graph file");
  detail::binary_input in{f.get(), name};
  return detail::graph_read_binary(in, true);
}

/// Reads one graph file's bytes from `in`'s current position and leaves `in` just past them;
/// `name` is what messages call the input. Errors as the path overload's.
[[nodiscard]] inline graph read_graph_binary(std::istream& in, const std::string& name) {
  detail::binary_input input{in, name};
  return detail::graph_read_binary(input, false);
}

}  // namespace squeeze::io
