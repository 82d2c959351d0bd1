// SPDX-License-Identifier: Apache-2.0
// squeeze/bam/detail/graph_kernels.cuh: the traversal kernels (vertex, line-aware, the two
// halves of on-demand implicit tiling), the BFS and CC steps they apply, and the
// FirstVertexList kernel. Internal: bam/graph.cuh launches them.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "squeeze/bam/array.cuh"
#include "squeeze/bam/graph_ref.cuh"
#include "squeeze/core/arch.cuh"
#include "squeeze/core/buffer.hpp"
#include "squeeze/core/config.hpp"
#include "squeeze/core/cuda_error.hpp"
#include "squeeze/core/error.hpp"
#include "squeeze/core/launch.hpp"

namespace squeeze::bam {

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
  return static_cast<unsigned>(core::per_sm(8));
}

}  // namespace detail

}  // namespace squeeze::bam
