// SPDX-License-Identifier: Apache-2.0
// squeeze/bam/graph.cuh: graph traversal over a CSR graph whose edge list sits behind a
// bam::array (host memory read in place, or host memory behind the cache): the three ways
// of walking it, the FirstVertexList built on the GPU, and BFS and connected components.
//
//   row_offsets [vertices + 1]  uint64, GPU memory
//   neighbors   [edges]         uint32, an array_ref<std::uint32_t, Backing>: the large part
//
// Everything is ordered on the stream each call takes. bfs and connected_components
// synchronize that stream once per round (to see whether anything changed), never the
// device; their scratch memory is allocated and freed on it (stream-ordered).
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
//
// The graph view and traversal kinds are in bam/graph_ref.cuh, the kernels in bam/detail/.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "squeeze/bam/array.cuh"
#include "squeeze/bam/detail/graph_kernels.cuh"
#include "squeeze/bam/graph_ref.cuh"
#include "squeeze/core/arch.cuh"
#include "squeeze/core/buffer.hpp"
#include "squeeze/core/config.hpp"
#include "squeeze/core/cuda_error.hpp"
#include "squeeze/core/device.hpp"
#include "squeeze/core/error.hpp"

namespace squeeze::bam {

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
      needed = core::device_buffer<std::uint8_t>{std::max<std::uint64_t>(lines, 1), stream};
      needed.fill_bytes(0, stream);
    }
  }
  core::device_buffer<std::uint32_t> changed{1, stream};
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
/// once per level; the neighbor array's check(stream) reports access errors afterwards.
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
  core::device_buffer<std::uint8_t> flags[2] = {
      core::device_buffer<std::uint8_t>{g.vertices, stream},
      core::device_buffer<std::uint8_t>{g.vertices, stream}};
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
