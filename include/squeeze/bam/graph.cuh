// squeeze/bam/graph.cuh: graph traversal over a CSR graph whose edge list sits behind a
// bam::array (host memory read in place, or host memory behind the cache): the three ways
// of walking it, the FirstVertexList built on the GPU, and BFS and connected components.
//
//   row_offsets [vertices + 1]  uint64, GPU memory
//   neighbors   [edges]         uint32, an array_ref<std::uint32_t, Backing>: the large part
//
// Traversals (how warps are given work; every one gives the same result):
//   vertex      a warp per vertex; its lanes read the vertex's neighbors 32 at a time from a
//               128-byte-aligned start (EMOGI's merged, aligned access); with a cache, the
//               lanes on one line share one probe. Over a mapped_host_memory array this is the
//               direct zero-copy baseline.
//   line_aware  a warp per vertex, walking its neighbor range a cache line at a time: one
//               pin per line (warp_pin), then plain loads. Cached arrays only.
//   odt         On-demand Implicit Tiling: the active vertices mark the edge-list lines they
//               need; then a warp per marked line pins it once, and each lane finds the
//               owner of its element from the FirstVertexList, so each needed line is
//               fetched once per step and consumed by one warp. Cached arrays only.
//
// FirstVertexList (io::first_vertex_list is the host reference): for line l of E elements,
// fvl[l] is the vertex v with row_offsets[v] <= l*E < row_offsets[v + 1] (empty vertices
// are never named).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "squeeze/bam/array.cuh"
#include "squeeze/core/arch.cuh"
#include "squeeze/core/buffer.hpp"
#include "squeeze/core/config.hpp"
#include "squeeze/core/cuda_error.hpp"
#include "squeeze/core/device.hpp"
#include "squeeze/core/error.hpp"

namespace squeeze::bam {

enum class traversal { vertex, line_aware, odt };

/// BFS depth of a vertex the search never reached (io::unreached, the host reference's).
inline constexpr std::uint32_t unreached = 0xffffffffu;

/// A CSR graph on the GPU: offsets in GPU memory, the edge list through a bam array.
template <class NeighborRef>
struct graph_ref {
  static constexpr bool cached = NeighborRef::cached;
  const std::uint64_t* row_offsets = nullptr;  ///< [vertices + 1], GPU memory
  NeighborRef neighbors{};                     ///< [edges]
  std::uint32_t vertices = 0;
  const std::uint32_t* first_vertex = nullptr;  ///< [lines] (odt only)
};

namespace detail {

/// The first index in [lo, hi) with offsets[index] > x, minus one: the vertex owning
/// element x (offsets sorted; offsets[lo] <= x < offsets[hi]).
SQUEEZE_HOST_DEVICE std::uint32_t owner_of(const std::uint64_t* offsets, std::uint32_t lo,
                                           std::uint32_t hi, std::uint64_t x) {
  while (hi - lo > 1) {
    const std::uint32_t mid = lo + (hi - lo) / 2;
    if (offsets[mid] <= x) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return lo;
}

template <int BlockThreads>
SQUEEZE_KERNEL(BlockThreads)
void first_vertex_kernel(const std::uint64_t* offsets, std::uint32_t vertices, std::uint64_t lines,
                         std::uint64_t per_line, std::uint32_t* out) {
  for (std::uint64_t l = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; l < lines;
       l += std::uint64_t{gridDim.x} * blockDim.x) {
    out[l] = owner_of(offsets, 0, vertices, l * per_line);
  }
}

/// Warp `lane`s visit v's neighbors (vertex traversal).
template <class G, class Step>
SQUEEZE_DEVICE void warp_vertex(const G& g, std::uint32_t v, const Step& step) {
  const unsigned lane = core::arch::lane_id();
  const std::uint64_t begin = g.row_offsets[v];
  const std::uint64_t end = g.row_offsets[v + 1];
  if (begin == end) return;
  for (std::uint64_t j0 = begin & ~std::uint64_t{31}; j0 < end; j0 += 32) {
    const std::uint64_t j = j0 + lane;
    const bool mine = j >= begin && j < end;
    // Every lane reads (a clamped index), so the warp's lanes probe together.
    const std::uint32_t u = g.neighbors.read(mine ? j : begin);
    if (mine) step.visit(v, u);
  }
}

/// Warp lanes visit v's neighbors a pinned line at a time (line_aware traversal).
template <class G, class Step>
SQUEEZE_DEVICE void warp_vertex_by_line(const G& g, std::uint32_t v, const Step& step) {
  const unsigned lane = core::arch::lane_id();
  const std::uint64_t begin = g.row_offsets[v];
  const std::uint64_t end = g.row_offsets[v + 1];
  const std::uint64_t per_line = g.neighbors.line_elements();
  for (std::uint64_t l = begin / per_line; begin < end && l <= (end - 1) / per_line; ++l) {
    const auto line = g.neighbors.warp_pin(l * per_line);
    if (line.data != nullptr) {
      for (std::uint32_t k = lane; k < line.count; k += 32) {
        const std::uint64_t j = line.first + k;
        if (j >= begin && j < end) step.visit(v, line[k]);
      }
    }
    g.neighbors.warp_unpin(line);
  }
}

template <class G, class Step>
SQUEEZE_KERNEL(256)
void vertex_kernel(G g, Step step, bool by_line) {
  const std::uint64_t warps = std::uint64_t{gridDim.x} * blockDim.x / 32;
  for (std::uint64_t v = (blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x) / 32;
       v < g.vertices; v += warps) {
    if (!step.active(static_cast<std::uint32_t>(v))) continue;  // warp-uniform
    if constexpr (G::cached) {
      if (by_line) {
        warp_vertex_by_line(g, static_cast<std::uint32_t>(v), step);
        continue;
      }
    }
    warp_vertex(g, static_cast<std::uint32_t>(v), step);
  }
}

/// ODT, first half: each active vertex marks the lines its neighbors lie on.
template <class G, class Step>
SQUEEZE_KERNEL(256)
void mark_lines_kernel(G g, Step step, std::uint8_t* needed) {
  const std::uint64_t per_line = g.neighbors.line_elements();
  for (std::uint64_t v = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; v < g.vertices;
       v += std::uint64_t{gridDim.x} * blockDim.x) {
    if (!step.active(static_cast<std::uint32_t>(v))) continue;
    const std::uint64_t begin = g.row_offsets[v];
    const std::uint64_t end = g.row_offsets[v + 1];
    if (begin == end) continue;
    for (std::uint64_t l = begin / per_line; l <= (end - 1) / per_line; ++l) needed[l] = 1;
  }
}

/// ODT, second half: a warp per marked line: one pin, each lane finds its element's owner.
template <class G, class Step>
SQUEEZE_KERNEL(256)
void line_kernel(G g, Step step, std::uint8_t* needed, std::uint64_t lines) {
  const unsigned lane = core::arch::lane_id();
  const std::uint64_t warps = std::uint64_t{gridDim.x} * blockDim.x / 32;
  for (std::uint64_t l = (blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x) / 32; l < lines;
       l += warps) {
    if (needed[l] == 0) continue;  // warp-uniform
    __syncwarp();
    if (lane == 0) needed[l] = 0;
    const auto line = g.neighbors.warp_pin(l * g.neighbors.line_elements());
    if (line.data != nullptr) {
      // Owners of this line's elements lie in [fvl[l], fvl[l + 1]] (or the last vertex).
      const std::uint32_t lo = g.first_vertex[l];
      const std::uint32_t hi = l + 1 < lines ? g.first_vertex[l + 1] + 1 : g.vertices;
      for (std::uint32_t k = lane; k < line.count; k += 32) {
        const std::uint64_t j = line.first + k;
        const std::uint32_t v = owner_of(g.row_offsets, lo, hi, j);
        if (step.active(v)) step.visit(v, line[k]);
      }
    }
    g.neighbors.warp_unpin(line);
  }
}

/// One BFS level: the vertices at `level` reach the unvisited ones.
struct bfs_step {
  std::uint32_t* depth;
  std::uint32_t level;
  std::uint32_t* changed;
  SQUEEZE_DEVICE bool active(std::uint32_t v) const { return depth[v] == level; }
  SQUEEZE_DEVICE void visit(std::uint32_t, std::uint32_t u) const {
    if (depth[u] == unreached) {
      depth[u] = level + 1;
      *changed = 1;
    }
  }
};

/// One round of min-label propagation from the vertices whose label changed.
struct cc_step {
  std::uint32_t* label;
  const std::uint8_t* active_now;
  std::uint8_t* active_next;
  std::uint32_t* changed;
  SQUEEZE_DEVICE bool active(std::uint32_t v) const { return active_now[v] != 0; }
  SQUEEZE_DEVICE void visit(std::uint32_t v, std::uint32_t u) const {
    const std::uint32_t mine = label[v];
    if (mine < label[u] && atomicMin(label + u, mine) > mine) {
      active_next[u] = 1;
      *changed = 1;
    }
  }
};

template <int = 0>
SQUEEZE_KERNEL(256)
void iota_kernel(std::uint32_t* out, std::uint32_t n) {
  for (std::uint64_t i = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::uint64_t{gridDim.x} * blockDim.x) {
    out[i] = static_cast<std::uint32_t>(i);
  }
}

/// Blocks of 256 threads for the traversal kernels: 8 per SM. (Capping the warps over a
/// cache at half its slots, so no warp waits for a slot, was slower on the H200: BFS on kron
/// scale 24 with a 1 % cache, ODT 0.96x -> 1.04x direct zero-copy, vertex-centric 5.1x ->
/// 6.8x; scale 20, ODT 2.0x -> 2.3x.)
inline unsigned traversal_blocks() {
  return static_cast<unsigned>(core::current_sm_count()) * 8;
}

}  // namespace detail

/// The FirstVertexList of a graph whose edge list is cut into lines of `per_line`
/// elements, built on the GPU into `out` ([ceil(edges / per_line)]), in blocks of
/// BlockThreads. Asynchronous. (A template, so that its kernel is compiled only where it is
/// called.)
template <int BlockThreads = 256>
void first_vertex_list(const std::uint64_t* row_offsets, std::uint32_t vertices,
                       std::uint64_t edges, std::uint64_t per_line, std::uint32_t* out,
                       cudaStream_t stream) {
  SQUEEZE_EXPECTS(per_line > 0, "bam::first_vertex_list: per_line must be positive");
  const std::uint64_t lines = (edges + per_line - 1) / per_line;
  if (lines == 0) return;
  detail::first_vertex_kernel<BlockThreads>
      <<<detail::traversal_blocks(), BlockThreads, 0, stream>>>(row_offsets, vertices, lines,
                                                                per_line, out);
  SQUEEZE_CHECK_LAUNCH();
}

namespace detail {

/// Runs `make_step(changed)` rounds until a round changes nothing; returns the rounds run.
template <class Ref, class MakeStep, class AfterRound>
std::uint32_t run_rounds(const graph_ref<Ref>& g, std::uint64_t edges, traversal how,
                         MakeStep&& make_step, AfterRound&& after_round, cudaStream_t stream) {
  constexpr bool cached = Ref::cached;
  SQUEEZE_EXPECTS(how == traversal::vertex || cached,
                  "bam: the line_aware and odt traversals need a cached neighbor array");
  SQUEEZE_EXPECTS(how != traversal::odt || g.first_vertex != nullptr,
                  "bam: the odt traversal needs the FirstVertexList (bam::first_vertex_list)");
  std::uint64_t lines = 0;
  core::device_buffer<std::uint8_t> needed;
  if constexpr (cached) {
    if (how == traversal::odt) {
      lines = (edges + g.neighbors.line_elements() - 1) / g.neighbors.line_elements();
      needed = core::device_buffer<std::uint8_t>{std::max<std::uint64_t>(lines, 1)};
      needed.fill_bytes(0, stream);
    }
  }
  core::device_buffer<std::uint32_t> changed{1};
  std::uint32_t rounds = 0;
  for (;;) {
    changed.fill_bytes(0, stream);
    const auto step = make_step(changed.data(), rounds);
    if (how == traversal::odt) {
      if constexpr (cached) {
        mark_lines_kernel<<<traversal_blocks(), 256, 0, stream>>>(g, step, needed.data());
        SQUEEZE_CHECK_LAUNCH();
        line_kernel<<<traversal_blocks(), 256, 0, stream>>>(g, step, needed.data(), lines);
        SQUEEZE_CHECK_LAUNCH();
      }
    } else {
      vertex_kernel<<<traversal_blocks(), 256, 0, stream>>>(g, step, how == traversal::line_aware);
      SQUEEZE_CHECK_LAUNCH();
    }
    after_round(rounds);
    ++rounds;
    std::uint32_t any = 0;
    SQUEEZE_CUDA_TRY(
        cudaMemcpyAsync(&any, changed.data(), sizeof(any), cudaMemcpyDeviceToHost, stream));
    SQUEEZE_CUDA_TRY(cudaStreamSynchronize(stream));
    if (any == 0) return rounds;
  }
}

}  // namespace detail

/// Breadth-first search from `source`: depth[v] (GPU memory, [vertices]) = hops from the
/// source, `unreached` where none. Returns the number of levels run. Synchronizes `stream`
/// once per level; the neighbor array's check() reports access errors afterwards.
template <class Ref>
std::uint32_t bfs(const graph_ref<Ref>& g, std::uint64_t edges, std::uint32_t source, traversal how,
                  std::uint32_t* depth, cudaStream_t stream) {
  SQUEEZE_EXPECTS(source < g.vertices, "bam::bfs: the source is not a vertex of the graph");
  SQUEEZE_CUDA_TRY(
      cudaMemsetAsync(depth, 0xFF, std::uint64_t{g.vertices} * sizeof(std::uint32_t), stream));
  SQUEEZE_CUDA_TRY(cudaMemsetAsync(depth + source, 0, sizeof(std::uint32_t), stream));
  return detail::run_rounds(
      g, edges, how,
      [&](std::uint32_t* changed, std::uint32_t level) {
        return detail::bfs_step{depth, level, changed};
      },
      [](std::uint32_t) {}, stream);
}

/// Connected components of an undirected graph (each edge stored both ways) by min-label
/// propagation: label[v] (GPU memory, [vertices]) = the smallest vertex id in v's
/// component. Returns the rounds run. Synchronizes `stream` once per round.
template <class Ref>
std::uint32_t connected_components(const graph_ref<Ref>& g, std::uint64_t edges, traversal how,
                                   std::uint32_t* label, cudaStream_t stream) {
  if (g.vertices == 0) return 0;
  detail::iota_kernel<<<detail::traversal_blocks(), 256, 0, stream>>>(label, g.vertices);
  SQUEEZE_CHECK_LAUNCH();
  core::device_buffer<std::uint8_t> flags[2] = {core::device_buffer<std::uint8_t>{g.vertices},
                                                core::device_buffer<std::uint8_t>{g.vertices}};
  flags[0].fill_bytes(1, stream);
  flags[1].fill_bytes(0, stream);
  return detail::run_rounds(
      g, edges, how,
      [&](std::uint32_t* changed, std::uint32_t round) {
        return detail::cc_step{label, flags[round % 2].data(), flags[(round + 1) % 2].data(),
                               changed};
      },
      [&](std::uint32_t round) { flags[round % 2].fill_bytes(0, stream); }, stream);
}

}  // namespace squeeze::bam
