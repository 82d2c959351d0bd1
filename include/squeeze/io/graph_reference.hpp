// SPDX-License-Identifier: Apache-2.0
// squeeze/io/graph_reference.hpp: the host references that GPU traversals of
// graph_types.hpp's graphs are checked against: BFS depths, connected components, and the
// FirstVertexList of On-demand Implicit Tiling.
//
// Host-only. Each validates its graph (format_error); bad parameters are invalid_argument.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "squeeze/core/error.hpp"
#include "squeeze/io/graph_types.hpp"

namespace squeeze::io {

// ---- host references ---------------------------------------------------------------------

/// The depth bfs_reference gives a vertex the source does not reach: the value bam's
/// traversals write there too (bam::unreached).
inline constexpr std::uint32_t unreached = std::numeric_limits<std::uint32_t>::max();

/// Breadth-first search from `source` following stored edges (out-edges of a directed
/// graph): depth[v] is the number of edges on a shortest path source -> v, 0 for the source,
/// unreached for vertices not reached. Validates `g` (format_error); invalid_argument
/// when source >= num_vertices.
[[nodiscard]] inline std::vector<std::uint32_t> bfs_reference(const graph& g,
                                                              std::uint32_t source) {
  validate(g);
  SQUEEZE_EXPECTS(source < g.num_vertices(),
                  "bfs_reference: source " + std::to_string(source) + " is not a vertex of a " +
                      std::to_string(g.num_vertices()) + "-vertex graph");
  std::vector<std::uint32_t> depth(static_cast<std::size_t>(g.num_vertices()), unreached);
  std::vector<std::uint32_t> queue(static_cast<std::size_t>(g.num_vertices()));
  std::size_t head = 0, tail = 0;
  depth[source] = 0;
  queue[tail++] = source;
  while (head < tail) {
    const std::uint32_t u = queue[head++];
    for (const std::uint32_t v : g.neighbors_of(u)) {
      if (depth[v] == unreached) {
        depth[v] = depth[u] + 1;
        queue[tail++] = v;
      }
    }
  }
  return depth;
}

/// Connected components of an undirected graph: labels[v] is the smallest vertex id in v's
/// component (so a GPU result, brought to the same convention, compares exactly; an isolated
/// vertex is its own label). Validates `g` (format_error); invalid_argument for a directed
/// graph (read it undirected to get its weakly connected components).
[[nodiscard]] inline std::vector<std::uint32_t> cc_reference(const graph& g) {
  validate(g);
  SQUEEZE_EXPECTS(!g.directed,
                  "cc_reference: the graph is directed; connected components need an undirected "
                  "graph (read or build it with directed = false)");
  const auto n = static_cast<std::size_t>(g.num_vertices());
  constexpr std::uint32_t none = std::numeric_limits<std::uint32_t>::max();
  std::vector<std::uint32_t> label(n, none);
  std::vector<std::uint32_t> queue(n);
  for (std::size_t s = 0; s < n; ++s) {
    if (label[s] != none) continue;
    // Every smaller vertex is labeled already, so s is the smallest of its component.
    const auto root = static_cast<std::uint32_t>(s);
    std::size_t head = 0, tail = 0;
    label[s] = root;
    queue[tail++] = root;
    while (head < tail) {
      for (const std::uint32_t v : g.neighbors_of(queue[head++])) {
        if (label[v] == none) {
          label[v] = root;
          queue[tail++] = v;
        }
      }
    }
  }
  return label;
}

/// Number of distinct labels (any labeling: one label per component gives the component
/// count).
[[nodiscard]] inline std::uint64_t count_components(std::span<const std::uint32_t> labels) {
  std::vector<std::uint32_t> sorted(labels.begin(), labels.end());
  std::sort(sorted.begin(), sorted.end());
  return static_cast<std::uint64_t>(std::unique(sorted.begin(), sorted.end()) - sorted.begin());
}

/// Number of connected components of an undirected graph (isolated vertices count one each).
[[nodiscard]] inline std::uint64_t count_components(const graph& g) {
  const std::vector<std::uint32_t> labels = cc_reference(g);
  std::uint64_t count = 0;
  for (std::size_t v = 0; v < labels.size(); ++v) count += labels[v] == v ? 1 : 0;
  return count;
}

/// The FirstVertexList of On-demand Implicit Tiling (Mailthody, PhD thesis, UIUC 2022,
/// §6.3.4-6.3.5): the edge list is cut into lines of `elements_per_line` entries (a cache line
/// of the edge array: 1024 for 4 KiB lines of 32-bit ids), and fvl[l] is the vertex that owns
/// the first element of line l, i.e. the one vertex v with
///
///   row_offsets[v] <= l * elements_per_line < row_offsets[v + 1]
///
/// Empty vertices own no element and are never named. There are
/// ceil(num_edges / elements_per_line) lines (the last may be partial); a graph without edges
/// has none. Example, 6 vertices, 13 entries, elements_per_line = 4:
///
///   vertex         0        1   2      3                    4   5
///   degree         3        0   2      7                    0   1
///   row_offsets    0        3   3      5                    12  12  13
///   element        0  1  2      3 | 4  5  6  7 | 8  9 10 11        | 12
///   owner          0  0  0      2 | 2  3  3  3 | 3  3  3  3        | 5
///   line           0              | 1          | 2                 | 3 (partial)
///   fvl            0                2            3                   5
///
/// Line 1 starts inside vertex 2's list; vertex 3 spans lines 1 and 2; line 3 starts at the
/// empty vertex 4's offset but 4 owns nothing, so its owner is 5. A warp on line l starts at
/// fvl[l] and walks vertices upward (empty ones contribute nothing) until the line ends.
/// Validates `g` (format_error); invalid_argument when elements_per_line is 0.
[[nodiscard]] inline std::vector<std::uint32_t> first_vertex_list(const graph& g,
                                                                  std::uint64_t elements_per_line) {
  validate(g);
  SQUEEZE_EXPECTS(elements_per_line > 0, "first_vertex_list: elements_per_line must be positive");
  const std::uint64_t m = g.num_edges();
  const std::uint64_t lines = m / elements_per_line + (m % elements_per_line != 0 ? 1 : 0);
  std::vector<std::uint32_t> fvl(static_cast<std::size_t>(lines));
  std::uint32_t v = 0;
  for (std::uint64_t l = 0; l < lines; ++l) {
    const std::uint64_t first = l * elements_per_line;
    // row_offsets[v] <= first holds throughout (first grows); advance past the lists that
    // end at or before it, empty ones included.
    while (g.row_offsets[v + std::size_t{1}] <= first) ++v;
    fvl[static_cast<std::size_t>(l)] = v;
  }
  return fvl;
}

}  // namespace squeeze::io
