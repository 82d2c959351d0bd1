// SPDX-License-Identifier: Apache-2.0
// squeeze/io/graph_types.hpp: unweighted CSR graphs for the bam:: traversal examples and
// tests: the graph type, its invariants (validate) and the builder from edges.
//
//   row_offsets  [num_vertices + 1]  u64   vertex v owns neighbors[row_offsets[v] ..
//                                          row_offsets[v + 1] - 1]
//   neighbors    [num_edges]         u32   the edge list: neighbor ids, strictly increasing
//                                          within each vertex, no self-loops
//
// An undirected graph stores each edge {u, v} twice (v in u's list and u in v's), so
// num_edges() counts directed entries; a directed graph stores u -> v in u's list only.
// Vertex ids are 32-bit: the edge list is what the GPU streams (from host memory or a file,
// through the bam cache), and 4-byte ids halve its bytes against 8-byte ones; offsets stay
// 64-bit because the entries of Graph500 scale 27 (4.2 G, GAP-kron) nearly fill 32 bits and
// scale 28 passes them. num_vertices is at most 2^32 - 1, so ids are at most 2^32 - 2 and
// UINT32_MAX is free to mean "no vertex".
//
// Builders and validate() run on several threads (std::thread; 0 asks for the hardware's).
// Host-only. Bad parameters are invalid_argument; a graph that breaks an invariant is a
// format_error naming it. squeeze/io/graph.hpp includes this and the generators, files and
// references built on it.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "squeeze/core/checked.hpp"
#include "squeeze/core/error.hpp"

namespace squeeze::io {

/// The most vertices a graph may have: ids fit 32 bits and UINT32_MAX is never an id.
inline constexpr std::uint64_t graph_max_vertices = 0xffff'ffffu;

/// An unweighted graph in CSR form. Invariants (validate() checks them):
///   row_offsets.size() == num_vertices + 1 >= 1, num_vertices <= graph_max_vertices,
///   row_offsets[0] == 0, row_offsets never decreases, row_offsets.back() == neighbors.size(),
///   each vertex's neighbors lie in [0, num_vertices), strictly increase (sorted, no
///   duplicates) and differ from the vertex (no self-loops), and, unless `directed`, every
///   u -> v has its v -> u.
/// A default-constructed graph is the valid empty graph (no vertices).
struct graph {
  std::vector<std::uint64_t> row_offsets = {0};  ///< [num_vertices + 1]
  std::vector<std::uint32_t> neighbors;          ///< [num_edges], the edge list
  bool directed = false;                         ///< false: each edge is stored both ways

  /// Vertices.
  [[nodiscard]] std::uint64_t num_vertices() const noexcept {
    return row_offsets.empty() ? 0 : row_offsets.size() - 1;
  }
  /// Stored neighbor entries: twice the undirected edges of an undirected graph.
  [[nodiscard]] std::uint64_t num_edges() const noexcept { return neighbors.size(); }
  /// Number of neighbors of v; v < num_vertices() (unchecked).
  [[nodiscard]] std::uint64_t degree(std::uint32_t v) const noexcept {
    return row_offsets[v + std::size_t{1}] - row_offsets[v];
  }
  /// The neighbors of v, sorted; v < num_vertices() (unchecked).
  [[nodiscard]] std::span<const std::uint32_t> neighbors_of(std::uint32_t v) const noexcept {
    return {neighbors.data() + row_offsets[v], static_cast<std::size_t>(degree(v))};
  }
};

/// One edge u -> v (both ways when the graph is undirected).
struct graph_edge {
  std::uint32_t u = 0;  ///< from
  std::uint32_t v = 0;  ///< to
};

namespace detail {

/// The threads a generator or builder uses: `requested`, or the hardware's when 0; at most
/// 256.
[[nodiscard]] inline unsigned graph_threads(unsigned requested) noexcept {
  const unsigned hardware = std::thread::hardware_concurrency();
  const unsigned wanted = requested != 0 ? requested : hardware != 0 ? hardware : 1;
  return std::min(wanted, 256u);
}

/// Runs work(t) for t in [0, threads): t = 0 on the calling thread, the others on their own
/// (joined before returning). `work` must not throw.
template <class Work>
void graph_run_threads(unsigned threads, const Work& work) {
  if (threads <= 1) {
    work(0u);
    return;
  }
  std::vector<std::jthread> workers;
  workers.reserve(threads - 1);
  for (unsigned t = 1; t < threads; ++t) workers.emplace_back([&work, t] { work(t); });
  work(0u);
}

/// The O(num_vertices) part of validate: sizes and offsets. Throws format_error.
inline void graph_check_offsets(const graph& g) {
  const auto fail = [](const std::string& what) { throw format_error{"invalid graph: " + what}; };
  const auto& off = g.row_offsets;
  if (off.empty()) {
    fail("row_offsets is empty; it holds num_vertices + 1 entries ({0} for no vertices)");
  }
  const std::uint64_t n = off.size() - 1;
  if (n > graph_max_vertices) {
    fail(std::to_string(n) + " vertices; at most " + std::to_string(graph_max_vertices) +
         " (32-bit vertex ids) are supported");
  }
  if (off[0] != 0) fail("row_offsets[0] is " + std::to_string(off[0]) + ", not 0");
  for (std::size_t v = 0; v < n; ++v) {
    if (off[v + 1] < off[v]) {
      fail("row_offsets is not monotone: row_offsets[" + std::to_string(v + 1) +
           "] = " + std::to_string(off[v + 1]) + " < row_offsets[" + std::to_string(v) +
           "] = " + std::to_string(off[v]));
    }
  }
  if (off[n] != g.neighbors.size()) {
    fail("row_offsets[num_vertices] = " + std::to_string(off[n]) + " but neighbors holds " +
         std::to_string(g.neighbors.size()) + " entries");
  }
}

/// The lists part of validate, serial, on offsets already checked: names the first broken
/// invariant (format_error). Symmetry: visiting u in increasing order, the sources that reach
/// v arrive in increasing order, so they must match v's sorted list one by one.
inline void graph_check_lists(const graph& g) {
  const auto fail = [](const std::string& what) { throw format_error{"invalid graph: " + what}; };
  const auto& off = g.row_offsets;
  const std::uint64_t n = off.size() - 1;
  for (std::size_t v = 0; v < n; ++v) {
    for (std::uint64_t k = off[v]; k < off[v + 1]; ++k) {
      const std::uint32_t w = g.neighbors[k];
      const auto where = [&] {
        return "vertex " + std::to_string(v) + ": neighbors[" + std::to_string(k) + "] = ";
      };
      if (w >= n) {
        fail(where() + std::to_string(w) + " is out of range [0, " + std::to_string(n) + ")");
      }
      if (w == v) fail(where() + std::to_string(w) + " is a self-loop (not allowed)");
      if (k > off[v] && w <= g.neighbors[k - 1]) {
        fail(where() + std::to_string(w) + " does not exceed the previous neighbor " +
             std::to_string(g.neighbors[k - 1]) +
             " (neighbors must strictly increase: sorted, no duplicates)");
      }
    }
  }
  if (g.directed) return;
  std::vector<std::uint64_t> cursor(off.begin(), off.end() - 1);  // next entry to match
  const auto missing = [&](std::uint64_t a, std::uint64_t b) {
    fail("the graph is undirected but edge " + std::to_string(a) + " -> " + std::to_string(b) +
         " has no reverse " + std::to_string(b) + " -> " + std::to_string(a));
  };
  for (std::size_t u = 0; u < n; ++u) {
    for (std::uint64_t k = off[u]; k < off[u + 1]; ++k) {
      const std::uint32_t v = g.neighbors[k];
      std::uint64_t& c = cursor[v];
      if (c == off[v + std::size_t{1}] || g.neighbors[c] > u) missing(u, v);
      if (g.neighbors[c] < u) missing(v, g.neighbors[c]);
      ++c;
    }
  }
  // Every entry was matched by one visit, and there are as many visits as entries, so every
  // cursor has reached the end of its list: nothing is left to check.
}

/// The lists part of validate on `threads` threads, each owning a block of vertices with
/// about equal shares of the entries: first each block's lists, then the symmetry check of
/// graph_check_lists restricted to the edges into the block (found by a binary search in
/// every sorted list). True when every invariant holds.
[[nodiscard]] inline bool graph_lists_hold(const graph& g, unsigned threads) {
  const auto& off = g.row_offsets;
  const std::uint64_t n = off.size() - 1;
  const std::uint32_t* const nb = g.neighbors.data();
  const std::uint64_t total = off[n];
  const auto workers = static_cast<unsigned>(
      std::min<std::uint64_t>(threads, std::max<std::uint64_t>(1, total >> 16)));
  std::vector<std::size_t> first(workers + 1, static_cast<std::size_t>(n));  // block starts
  for (unsigned t = 0; t < workers; ++t) {
    first[t] = static_cast<std::size_t>(
        std::lower_bound(off.begin(), off.end() - 1, total / workers * t) - off.begin());
  }
  std::atomic<bool> broken{false};
  graph_run_threads(workers, [&](unsigned t) {
    for (std::size_t v = first[t]; v < first[t + 1] && !broken.load(std::memory_order_relaxed);
         ++v) {
      for (std::uint64_t k = off[v]; k < off[v + 1]; ++k) {
        const std::uint32_t w = nb[k];
        if (w >= n || w == v || (k > off[v] && w <= nb[k - 1])) {
          broken.store(true, std::memory_order_relaxed);
          return;
        }
      }
    }
  });
  if (broken.load() || g.directed) return !broken.load();
  std::vector<std::uint64_t> cursor(off.begin(), off.end() - 1);
  graph_run_threads(workers, [&](unsigned t) {
    const auto low = static_cast<std::uint32_t>(first[t]);
    const std::size_t high = first[t + 1];
    if (low == high) return;
    for (std::size_t u = 0; u < n; ++u) {
      if ((u & 0xffff) == 0 && broken.load(std::memory_order_relaxed)) return;
      const std::uint32_t* k = std::lower_bound(nb + off[u], nb + off[u + 1], low);
      for (; k != nb + off[u + 1] && *k < high; ++k) {
        std::uint64_t& c = cursor[*k];
        if (c == off[*k + std::size_t{1}] || nb[c] != u) {
          broken.store(true, std::memory_order_relaxed);
          return;
        }
        ++c;
      }
    }
  });
  return !broken.load();
}

}  // namespace detail

/// Checks the invariants of `g` (see graph); throws format_error naming the first one broken
/// and where. O(num_vertices + num_edges) on `threads` threads (0: the hardware's); the
/// symmetry check of an undirected graph keeps a cursor per vertex (8 bytes each). When a
/// check fails, a serial pass finds the first failure, so the message does not depend on
/// the schedule. Scale 22 kron (128 M entries): 0.38 s on 16 cores, 4.1 s on one.
inline void validate(const graph& g, unsigned threads = 0) {
  detail::graph_check_offsets(g);
  if (detail::graph_lists_hold(g, detail::graph_threads(threads))) return;
  detail::graph_check_lists(g);
  throw format_error{"invalid graph (found by the parallel check; the serial one disagrees)"};
}

namespace detail {

/// Builds a graph from edges: drops self-loops, adds v -> u for every u -> v unless
/// `directed`, sorts each neighbor list and removes duplicates. Ids must be < n (checked by
/// the callers). Consumes `edges` (freed before the sort). Memory: the edges (8 bytes each)
/// plus row_offsets and neighbors, then 4 bytes per vertex while sorting; no per-vertex
/// containers. Runs on `threads` threads (0: the hardware's); the result does not depend on
/// their number.
[[nodiscard]] inline graph build_graph(std::uint64_t n, std::vector<graph_edge>&& edges,
                                       bool directed, unsigned threads = 0) {
  graph g;
  g.directed = directed;
  g.row_offsets.assign(static_cast<std::size_t>(n) + 1, 0);
  std::vector<std::uint64_t>& off = g.row_offsets;
  const std::uint64_t count = edges.size();
  const auto edge_threads = static_cast<unsigned>(
      std::min<std::uint64_t>(graph_threads(threads), std::max<std::uint64_t>(1, count >> 16)));
  // Each thread takes a share of the edges; the counters and cursors are atomic, so the order
  // within a list varies with the schedule, which the sort below removes.
  const auto for_edges = [&](const auto& visit) {
    graph_run_threads(edge_threads, [&](unsigned t) {
      for (std::uint64_t k = count * t / edge_threads; k < count * (t + 1) / edge_threads; ++k) {
        const graph_edge& e = edges[static_cast<std::size_t>(k)];
        if (e.u != e.v) visit(e);
      }
    });
  };
  const auto bump = [single = edge_threads == 1](std::uint64_t& x) {
    return single ? x++ : std::atomic_ref<std::uint64_t>{x}.fetch_add(1, std::memory_order_relaxed);
  };
  for_edges([&](const graph_edge& e) {
    bump(off[e.u + std::size_t{1}]);
    if (!directed) bump(off[e.v + std::size_t{1}]);
  });
  for (std::size_t v = 0; v < n; ++v) off[v + 1] += off[v];
  g.neighbors.resize(static_cast<std::size_t>(off[n]));
  // Scatter with off[v] as v's cursor: afterwards off[v] is v's end, i.e. (v + 1)'s start.
  std::uint32_t* const nb = g.neighbors.data();
  for_edges([&](const graph_edge& e) {
    nb[bump(off[e.u])] = e.v;
    if (!directed) nb[bump(off[e.v])] = e.u;
  });
  std::vector<graph_edge>{}.swap(edges);
  for (std::size_t v = n; v > 0; --v) off[v] = off[v - 1];
  off[0] = 0;

  // Sort each list and drop its duplicates, in blocks of vertices holding about equal shares
  // of the entries; kept[v] is what remains of v's list.
  std::vector<std::uint32_t> kept(static_cast<std::size_t>(n));
  const std::uint64_t total = off[n];
  const unsigned workers = static_cast<unsigned>(
      std::min<std::uint64_t>(graph_threads(threads), std::max<std::uint64_t>(1, total >> 16)));
  graph_run_threads(workers, [&](unsigned t) {
    const auto vertex_at = [&](unsigned i) {  // first vertex of block i
      return static_cast<std::size_t>(
          std::lower_bound(off.begin(), off.end() - 1, total / workers * i) - off.begin());
    };
    const std::size_t last = t + 1 == workers ? static_cast<std::size_t>(n) : vertex_at(t + 1);
    for (std::size_t v = t == 0 ? 0 : vertex_at(t); v < last; ++v) {
      std::sort(nb + off[v], nb + off[v + 1]);
      kept[v] =
          static_cast<std::uint32_t>(std::unique(nb + off[v], nb + off[v + 1]) - (nb + off[v]));
    }
  });
  // Compact the lists, in place, left to right.
  std::uint64_t out = 0;
  for (std::size_t v = 0; v < n; ++v) {
    const std::uint64_t begin = off[v];
    if (out != begin && kept[v] != 0) std::memmove(nb + out, nb + begin, kept[v] * 4ull);
    off[v] = out;
    out += kept[v];
  }
  off[n] = out;
  g.neighbors.resize(static_cast<std::size_t>(out));
  return g;
}

}  // namespace detail

/// Builds a graph with `num_vertices` vertices from edges u -> v (any order; duplicates and
/// self-loops are dropped; each edge is also stored as v -> u unless `directed`). Throws
/// invalid_argument when num_vertices exceeds graph_max_vertices or an id is not below it.
[[nodiscard]] inline graph graph_from_edges(std::uint64_t num_vertices,
                                            std::span<const graph_edge> edges,
                                            bool directed = false) {
  SQUEEZE_EXPECTS(num_vertices <= graph_max_vertices,
                  "graph_from_edges: " + std::to_string(num_vertices) +
                      " vertices do not fit 32-bit vertex ids");
  for (std::size_t k = 0; k < edges.size(); ++k) {
    if (edges[k].u >= num_vertices || edges[k].v >= num_vertices) {
      throw invalid_argument{"graph_from_edges: edge " + std::to_string(k) + " (" +
                             std::to_string(edges[k].u) + ", " + std::to_string(edges[k].v) +
                             ") names a vertex outside [0, " + std::to_string(num_vertices) + ")"};
    }
  }
  return detail::build_graph(num_vertices, {edges.begin(), edges.end()}, directed);
}

}  // namespace squeeze::io
