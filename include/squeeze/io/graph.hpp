// squeeze/io/graph.hpp: unweighted CSR graphs for the bam:: traversal examples and tests:
// the graph type, seeded generators (Kronecker / R-MAT as in Graph500 and GAP "kron", uniform
// random as GAP "urand"), readers and writers (edge-list text, Matrix Market, a binary file
// whose edge list a GPU can read through the cache at a 4096-byte aligned offset), and the
// host references the GPU results are compared with (BFS depths, connected components, the
// FirstVertexList of On-demand Implicit Tiling).
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
// Determinism: every generator draws from splitmix64 (Steele, Lea and Flood 2014), bounded
// integers by Lemire's multiply-shift with rejection and probabilities by comparing 32-bit
// draws with fixed-point thresholds: integer arithmetic only, no <random> distributions
// (whose outputs the standard leaves to the implementation). Edges are drawn in chunks of
// 2^16, each from its own stream. The same options and seed give the same graph, bit for bit,
// with every compiler, on every platform, on any number of threads.
//
// Generators, builders and validate() run on several threads (std::thread; 0 asks for the
// hardware's). Measured on a 16-core host (the H200 node's CPU), kron with the defaults:
//   scale 22 (4.2 M vertices, 128 M entries)  generate 3.6 s (19.5 s on 1 thread),
//                                             validate 0.38 s (4.1 s), peak 1.1 GB
//   scale 26 (67 M vertices, 2.1 G entries)   generate 67 s, validate 8.7 s, peak 17.3 GB
//
// Host-only. Bad parameters are invalid_argument; malformed input is a format_error naming the
// file (or stream) and, for text, the line; a file that cannot be opened, read or written is
// an io_error with the path and the system's reason.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cmath>
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
#include <thread>
#include <utility>
#include <vector>

#include "squeeze/core/checked.hpp"
#include "squeeze/core/error.hpp"
#include "squeeze/io/csr.hpp"
#include "squeeze/io/detail/binary_input.hpp"
#include "squeeze/io/detail/line_reader.hpp"
#include "squeeze/io/detail/text_writer.hpp"
#include "squeeze/io/matrix_market.hpp"
#include "squeeze/io/read_limits.hpp"

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
  std::uint32_t u = 0;
  std::uint32_t v = 0;
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

// ---- generators --------------------------------------------------------------------------

namespace detail {

[[nodiscard]] constexpr std::uint64_t splitmix64_mix(std::uint64_t z) noexcept {
  z = (z ^ (z >> 30)) * 0xbf58'476d'1ce4'e5b9u;
  z = (z ^ (z >> 27)) * 0x94d0'49bb'1331'11ebu;
  return z ^ (z >> 31);
}

/// splitmix64: a 64-bit state advanced by the golden-ratio increment, then mixed.
class splitmix64 {
 public:
  constexpr explicit splitmix64(std::uint64_t state) noexcept : state_{state} {}
  constexpr std::uint64_t next() noexcept {
    state_ += 0x9e37'79b9'7f4a'7c15u;
    return splitmix64_mix(state_);
  }
  constexpr std::uint32_t next32() noexcept { return static_cast<std::uint32_t>(next() >> 32); }

 private:
  std::uint64_t state_;
};

/// The generator of stream `index` of purpose `purpose` under `seed`: independent,
/// reproducible streams (one per chunk of edges, one for the label permutation).
[[nodiscard]] constexpr splitmix64 graph_stream(std::uint64_t seed, std::uint64_t purpose,
                                                std::uint64_t index) noexcept {
  return splitmix64{splitmix64_mix(splitmix64_mix(seed ^ (purpose << 56)) + index)};
}

/// Uniform in [0, bound) for 1 <= bound <= 2^32 - 1: Lemire's multiply-shift on a 32-bit
/// draw, rejecting the low products that would bias it (D. Lemire, "Fast random integer
/// generation in an interval", 2019). Exact, and the same on every platform.
[[nodiscard]] constexpr std::uint32_t bounded(splitmix64& rng, std::uint32_t bound) noexcept {
  std::uint64_t m = std::uint64_t{rng.next32()} * bound;
  auto low = static_cast<std::uint32_t>(m);
  if (low < bound) {
    const std::uint32_t threshold = static_cast<std::uint32_t>(0u - bound) % bound;
    while (low < threshold) {
      m = std::uint64_t{rng.next32()} * bound;
      low = static_cast<std::uint32_t>(m);
    }
  }
  return static_cast<std::uint32_t>(m >> 32);
}

/// A probability in [0, 1] as a threshold for 32-bit draws: P(draw < t) = t / 2^32.
[[nodiscard]] inline std::uint64_t probability_threshold(double p) noexcept {
  return static_cast<std::uint64_t>(std::ldexp(p, 32));
}

/// Edges are drawn in chunks of this many, each from its own stream, so that the result does
/// not depend on how the chunks are scheduled.
inline constexpr std::uint64_t edges_per_chunk = std::uint64_t{1} << 16;

enum : std::uint64_t { stream_kron_edges = 1, stream_kron_labels = 2, stream_urand_edges = 3 };

}  // namespace detail

/// Parameters of generate_kron. Defaults: Graph500's (A, B, C, D) = (0.57, 0.19, 0.19, 0.05)
/// and edge factor 16, as GAP's "kron" (GAP-kron is scale 27).
struct kron_options {
  int scale = 20;                  ///< 2^scale vertices, 0 <= scale <= 31
  std::uint64_t edge_factor = 16;  ///< edges drawn = edge_factor * 2^scale, before clean-up
  double a = 0.57;                 ///< probability of the top-left quadrant at each level
  double b = 0.19;                 ///< top-right (u stays low, v goes high)
  double c = 0.19;                 ///< bottom-left; D = 1 - a - b - c
  bool permute_labels = true;      ///< relabel vertices by a random permutation (Graph500, GAP)
  std::uint64_t seed = 1;
  unsigned threads = 0;  ///< 0: the hardware's (at most 256); the graph does not depend on it
};

/// A Kronecker (R-MAT) graph: edge_factor * 2^scale edges, each endpoint pair chosen by
/// descending `scale` levels of the 2 x 2 quadrant probabilities (a, b; c, d) with the same
/// probabilities at every level (Chakrabarti, Zhan and Faloutsos 2004; Graph500 without
/// noise, as GAP's generator), vertex labels then permuted uniformly at random; undirected:
/// symmetrized, self-loops and duplicate edges removed, neighbors sorted. The degree
/// distribution is heavily skewed and many vertices are isolated: at scale 14, 24 % isolated
/// and a maximum degree 140 times the mean; at scale 20, 38 % and 2150 times, and the
/// 2 * 16 * 2^20 entries drawn shrink to 31.4 M. The labels come from their own stream, so
/// permute_labels = false gives the same graph before relabeling. Throws invalid_argument for
/// a scale outside [0, 31] or probabilities that are negative or sum past 1.
///
/// Cost: 8 bytes per drawn edge while drawing, then 8 bytes per stored entry (the offsets and
/// the edge list); scale 26 (2^30 edges drawn) peaks near 17 GB. Runs on options.threads
/// threads; the graph does not depend on their number (edges are drawn in chunks of 2^16,
/// each chunk from its own stream).
[[nodiscard]] inline graph generate_kron(const kron_options& options = {}) {
  SQUEEZE_EXPECTS(options.scale >= 0 && options.scale <= 31,
                  "generate_kron: scale " + std::to_string(options.scale) +
                      " is outside [0, 31] (2^scale vertices must fit 32-bit ids)");
  const double d = 1.0 - options.a - options.b - options.c;
  SQUEEZE_EXPECTS(options.a >= 0 && options.b >= 0 && options.c >= 0 && d >= -1e-12,
                  "generate_kron: quadrant probabilities a, b, c must be >= 0 and sum to at most "
                  "1 (d = 1 - a - b - c)");
  const int scale = options.scale;
  const std::uint64_t n = std::uint64_t{1} << scale;
  SQUEEZE_EXPECTS(options.edge_factor <= (std::uint64_t{1} << 40) >> scale,
                  "generate_kron: edge_factor * 2^scale exceeds 2^40 edges");
  const std::uint64_t m = options.edge_factor * n;
  const std::uint64_t t_a = detail::probability_threshold(options.a);
  const std::uint64_t t_ab = detail::probability_threshold(options.a + options.b);
  const std::uint64_t t_abc = detail::probability_threshold(options.a + options.b + options.c);

  std::vector<graph_edge> edges(static_cast<std::size_t>(m));
  const std::uint64_t chunks = (m + detail::edges_per_chunk - 1) / detail::edges_per_chunk;
  const auto threads = static_cast<unsigned>(std::min<std::uint64_t>(
      detail::graph_threads(options.threads), std::max<std::uint64_t>(1, chunks)));
  const auto draw = [&](std::uint64_t chunk) {
    detail::splitmix64 rng = detail::graph_stream(options.seed, detail::stream_kron_edges, chunk);
    const std::uint64_t last = std::min(m, (chunk + 1) * detail::edges_per_chunk);
    for (std::uint64_t k = chunk * detail::edges_per_chunk; k < last; ++k) {
      std::uint32_t u = 0, v = 0;
      const auto level = [&](std::uint64_t r) {  // r: a 32-bit draw
        const auto ge_a = static_cast<std::uint32_t>(r >= t_a);
        const auto ge_ab = static_cast<std::uint32_t>(r >= t_ab);
        const auto ge_abc = static_cast<std::uint32_t>(r >= t_abc);
        // [0, a): (0, 0)   [a, a+b): (0, 1)   [a+b, a+b+c): (1, 0)   [a+b+c, 1): (1, 1)
        u = (u << 1) | ge_ab;
        v = (v << 1) | (ge_a ^ ge_ab ^ ge_abc);
      };
      int depth = 0;
      for (; depth + 1 < scale; depth += 2) {  // two levels per 64-bit output
        const std::uint64_t bits = rng.next();
        level(bits >> 32);
        level(bits & 0xffff'ffffu);
      }
      if (depth < scale) level(rng.next() >> 32);
      edges[static_cast<std::size_t>(k)] = {u, v};
    }
  };
  detail::graph_run_threads(threads, [&](unsigned t) {
    for (std::uint64_t c = chunks * t / threads; c < chunks * (t + 1) / threads; ++c) draw(c);
  });
  if (options.permute_labels && n > 1) {
    std::vector<std::uint32_t> label(static_cast<std::size_t>(n));
    for (std::size_t v = 0; v < n; ++v) label[v] = static_cast<std::uint32_t>(v);
    detail::splitmix64 rng = detail::graph_stream(options.seed, detail::stream_kron_labels, 0);
    for (std::size_t i = static_cast<std::size_t>(n) - 1; i > 0; --i) {  // Fisher-Yates
      std::swap(label[i], label[detail::bounded(rng, static_cast<std::uint32_t>(i + 1))]);
    }
    detail::graph_run_threads(threads, [&](unsigned t) {
      for (std::uint64_t k = m * t / threads; k < m * (t + 1) / threads; ++k) {
        graph_edge& e = edges[static_cast<std::size_t>(k)];
        e = {label[e.u], label[e.v]};
      }
    });
  }
  return detail::build_graph(n, std::move(edges), false, options.threads);
}

/// Parameters of generate_urand.
struct urand_options {
  std::uint64_t num_vertices = std::uint64_t{1} << 20;  ///< <= graph_max_vertices
  std::uint64_t edge_factor = 16;  ///< edges drawn = edge_factor * num_vertices (GAP's -k)
  std::uint64_t seed = 1;
  unsigned threads = 0;  ///< 0: the hardware's (at most 256); the graph does not depend on it
};

/// A uniform random graph (Erdős–Rényi style, GAP's "urand"): edge_factor * num_vertices
/// edges with both endpoints uniform in [0, num_vertices), then cleaned up as generate_kron:
/// undirected, no self-loops or duplicates, neighbors sorted. Each vertex ends with about
/// 2 * edge_factor neighbors, Poisson distributed. Throws invalid_argument when num_vertices
/// exceeds graph_max_vertices.
[[nodiscard]] inline graph generate_urand(const urand_options& options = {}) {
  const std::uint64_t n = options.num_vertices;
  SQUEEZE_EXPECTS(n <= graph_max_vertices, "generate_urand: " + std::to_string(n) +
                                               " vertices do not fit 32-bit vertex ids");
  SQUEEZE_EXPECTS(n == 0 || options.edge_factor <= (std::uint64_t{1} << 40) / n,
                  "generate_urand: edge_factor * num_vertices exceeds 2^40 edges");
  const std::uint64_t m = n == 0 ? 0 : options.edge_factor * n;
  std::vector<graph_edge> edges(static_cast<std::size_t>(m));
  const auto bound = static_cast<std::uint32_t>(n);
  const std::uint64_t chunks = (m + detail::edges_per_chunk - 1) / detail::edges_per_chunk;
  const auto threads = static_cast<unsigned>(std::min<std::uint64_t>(
      detail::graph_threads(options.threads), std::max<std::uint64_t>(1, chunks)));
  detail::graph_run_threads(threads, [&](unsigned t) {
    for (std::uint64_t c = chunks * t / threads; c < chunks * (t + 1) / threads; ++c) {
      detail::splitmix64 rng = detail::graph_stream(options.seed, detail::stream_urand_edges, c);
      const std::uint64_t last = std::min(m, (c + 1) * detail::edges_per_chunk);
      for (std::uint64_t k = c * detail::edges_per_chunk; k < last; ++k) {
        const std::uint32_t u = detail::bounded(rng, bound);
        edges[static_cast<std::size_t>(k)] = {u, detail::bounded(rng, bound)};
      }
    }
  });
  return detail::build_graph(n, std::move(edges), false, options.threads);
}

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
/// and lines whose first non-blank character is '#' or '%' skipped, '\r\n' accepted. The
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
  errno = 0;
  std::ifstream in{path, std::ios::binary};
  if (!in) {
    throw io_error{"cannot open edge list '" + path.string() + "': " + std::strerror(errno)};
  }
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
  errno = 0;
  std::ifstream in{path, std::ios::binary};
  if (!in) {
    throw io_error{"cannot open Matrix Market file '" + path.string() +
                   "': " + std::strerror(errno)};
  }
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
inline constexpr std::uint32_t graph_file_version = 1;
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
  std::uint32_t version = graph_file_version;
  bool directed = false;
  std::uint64_t num_vertices = 0;
  std::uint64_t num_edges = 0;
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

// ---- host references ---------------------------------------------------------------------

/// The depth bfs_reference gives a vertex the source does not reach.
inline constexpr std::uint32_t bfs_unreachable = std::numeric_limits<std::uint32_t>::max();

/// Breadth-first search from `source` following stored edges (out-edges of a directed
/// graph): depth[v] is the number of edges on a shortest path source -> v, 0 for the source,
/// bfs_unreachable for vertices not reached. Validates `g` (format_error); invalid_argument
/// when source >= num_vertices.
[[nodiscard]] inline std::vector<std::uint32_t> bfs_reference(const graph& g,
                                                              std::uint32_t source) {
  validate(g);
  SQUEEZE_EXPECTS(source < g.num_vertices(),
                  "bfs_reference: source " + std::to_string(source) + " is not a vertex of a " +
                      std::to_string(g.num_vertices()) + "-vertex graph");
  std::vector<std::uint32_t> depth(static_cast<std::size_t>(g.num_vertices()), bfs_unreachable);
  std::vector<std::uint32_t> queue(static_cast<std::size_t>(g.num_vertices()));
  std::size_t head = 0, tail = 0;
  depth[source] = 0;
  queue[tail++] = source;
  while (head < tail) {
    const std::uint32_t u = queue[head++];
    for (const std::uint32_t v : g.neighbors_of(u)) {
      if (depth[v] == bfs_unreachable) {
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

/// The FirstVertexList of On-demand Implicit Tiling (BaM thesis §6.3.4-6.3.5): the edge list
/// is cut into lines of `elements_per_line` entries (a cache line of the edge array: 1024 for
/// 4 KiB lines of 32-bit ids), and fvl[l] is the vertex that owns the first element of line
/// l, i.e. the one vertex v with
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
