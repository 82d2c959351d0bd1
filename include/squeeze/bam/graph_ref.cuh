// SPDX-License-Identifier: Apache-2.0
// squeeze/bam/graph_ref.cuh: what bam's graph traversals take: a CSR graph whose edge list
// sits behind a bam array (graph_ref, by value in kernels), the ways of walking it
// (traversal), and the depth of a vertex BFS never reached (unreached).
#pragma once

#include <cstdint>

namespace squeeze::bam {

/// How a traversal gives warps work (bam/graph.cuh): a warp per vertex; a warp per vertex
/// walking its neighbors a cache line at a time; On-demand Implicit Tiling (a warp per needed
/// line).
enum class traversal { vertex, line_aware, odt };

/// BFS depth of a vertex the search never reached (io::unreached, the host reference's).
inline constexpr std::uint32_t unreached = 0xffffffffu;

/// A CSR graph on the GPU: offsets in GPU memory, the edge list through a bam array.
template <class NeighborRef>
struct graph_ref {
  static constexpr bool cached = NeighborRef::cached;  ///< whether the edge list is cached
  const std::uint64_t* row_offsets = nullptr;  ///< [vertices + 1], GPU memory
  NeighborRef neighbors{};                     ///< [edges]
  std::uint32_t vertices = 0;                  ///< vertices of the graph
  const std::uint32_t* first_vertex = nullptr;  ///< [lines] (odt only)
};

}  // namespace squeeze::bam
