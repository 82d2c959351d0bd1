// SPDX-License-Identifier: Apache-2.0
// squeeze/io/graph_generate.hpp: seeded graph generators: Kronecker / R-MAT as in Graph500
// and GAP "kron", uniform random as GAP "urand" (graph_types.hpp's graph).
//
// Determinism: every generator draws from splitmix64 (Steele, Lea and Flood 2014), bounded
// integers by Lemire's multiply-shift with rejection and probabilities by comparing 32-bit
// draws with fixed-point thresholds: integer arithmetic only, no <random> distributions
// (whose outputs the standard leaves to the implementation). Edges are drawn in chunks of
// 2^16, each from its own stream. The same options and seed give the same graph, bit for bit,
// with every compiler, on every platform, on any number of threads.
//
// Generators run on several threads (std::thread; 0 asks for the hardware's). Measured on a
// 16-core host (the H200 node's CPU), kron with the defaults:
//   scale 22 (4.2 M vertices, 128 M entries)  generate 3.6 s (19.5 s on 1 thread),
//                                             validate 0.38 s (4.1 s), peak 1.1 GB
//   scale 26 (67 M vertices, 2.1 G entries)   generate 67 s, validate 8.7 s, peak 17.3 GB
//
// Host-only. Bad parameters are invalid_argument.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "squeeze/core/checked.hpp"
#include "squeeze/core/error.hpp"
#include "squeeze/io/graph_types.hpp"

namespace squeeze::io {

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
  std::uint64_t seed = 1;          ///< the same seed gives the same graph
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
  std::uint64_t seed = 1;          ///< the same seed gives the same graph
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

}  // namespace squeeze::io
