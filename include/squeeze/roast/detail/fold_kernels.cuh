// SPDX-License-Identifier: Apache-2.0
// squeeze/roast/detail/fold_kernels.cuh: the fold's kernel (a warp per alignment unit of M
// adds the workspace pieces that cover it, in list order) and what it reads: the sorted
// tile list's entries and the view of one strip. Internal: roast/fold.cuh's gradient_fold
// builds the list and launches it.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "squeeze/core/config.hpp"
#include "squeeze/roast/mapping.hpp"

namespace squeeze::roast {
namespace detail {

/// One tile in the fold's sorted list: the alignment unit it starts at and its number in
/// its strip, with `edge_tile` set when the tile passes W's last row or column.
struct fold_entry {
  std::uint32_t start_unit;
  std::uint32_t tile;
};
inline constexpr std::uint32_t edge_tile = 1u << 31;

/// What the fold kernel reads for one strip: its sorted list, first[] over units, the
/// workspace.
struct fold_view {
  const fold_entry* entries;   ///< [tiles], sorted by (start_unit, tile)
  const std::uint32_t* first;  ///< [units + 1]: the first entry with start_unit >= u
  const float* workspace;      ///< [tiles * tile_values]
  std::uint64_t units;         ///< alignment units of M that some tile covers
  std::uint32_t span;          ///< units per tile
  std::uint32_t tile_values;   ///< Z1 * Z2
  mapping map;                 ///< for the bounds of edge tiles
  std::uint64_t first_tile;    ///< the strip's first tile number (kb0 * tiles_n)
};

/// Whether the value at `offset` of tile `tile` (its global number) lies inside W.
SQUEEZE_DEVICE bool inside(const mapping& map, std::uint64_t tile, std::uint32_t offset) {
  std::uint32_t i = 0;
  std::uint32_t j = 0;
  map.layout().position(offset, i, j);
  return (tile / map.tiles_n()) * map.tile().k + i < map.rows() &&
         (tile % map.tiles_n()) * map.tile().n + j < map.cols();
}

/// Workspace pieces in flight per lane: enough loads to cover HBM latency with ~32 warps
/// per SM.
inline constexpr int fold_batch = 8;

/// One warp per alignment unit (`PerLane` = align / 32 floats per lane); dM += the unit's
/// pieces in list order.
template <int PerLane, int BlockThreads>
SQUEEZE_KERNEL(BlockThreads)
void fold_kernel(fold_view f, float* dmemory) {
  using piece = std::conditional_t<PerLane == 1, float, float2>;
  const unsigned lane = threadIdx.x % 32;
  const std::uint64_t warps = std::uint64_t{gridDim.x} * (blockDim.x / 32);
  for (std::uint64_t u = (blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x) / 32; u < f.units;
       u += warps) {
    const std::uint32_t begin = f.first[u + 1 > f.span ? u + 1 - f.span : 0];
    const std::uint32_t end = f.first[u + 1];
    float sum[PerLane] = {};
    for (std::uint32_t base = begin; base < end; base += 32) {
      // Lane j finds entry base + j's piece; the warp then reads the pieces in order.
      const std::uint32_t count = min(end - base, 32u);
      fold_entry mine{0, 0};
      if (lane < count) mine = f.entries[base + lane];
      for (std::uint32_t j = 0; j < count; j += fold_batch) {
        piece got[fold_batch];
        SQUEEZE_UNROLL
        for (int b = 0; b < fold_batch; ++b) {  // all loads first, then the adds in order
          const auto from = static_cast<int>((j + b) % 32);
          const std::uint32_t start = __shfl_sync(full_warp_mask, mine.start_unit, from);
          const std::uint32_t tile = __shfl_sync(full_warp_mask, mine.tile, from);
          got[b] = piece{};
          if (j + b >= count) continue;
          const auto offset =
              static_cast<std::uint32_t>((u - start) * (32 * PerLane) + lane * PerLane);
          const std::uint64_t t = tile & ~edge_tile;
          got[b] = reinterpret_cast<const piece*>(f.workspace + t * f.tile_values + offset)[0];
          if ((tile & edge_tile) != 0) {  // rare: a tile past W's edge, whose outside is unset
            if constexpr (PerLane == 1) {
              if (!inside(f.map, f.first_tile + t, offset)) got[b] = 0.0f;
            } else {
              if (!inside(f.map, f.first_tile + t, offset)) got[b].x = 0.0f;
              if (!inside(f.map, f.first_tile + t, offset + 1)) got[b].y = 0.0f;
            }
          }
        }
        SQUEEZE_UNROLL
        for (int b = 0; b < fold_batch; ++b) {
          if constexpr (PerLane == 1) {
            sum[0] += got[b];
          } else {
            sum[0] += got[b].x;
            sum[1] += got[b].y;
          }
        }
      }
    }
    if (begin == end) continue;  // no tile covers this unit
    float* out = dmemory + u * (32 * PerLane) + lane * PerLane;
    SQUEEZE_UNROLL
    for (int v = 0; v < PerLane; ++v) out[v] += sum[v];
  }
}

}  // namespace detail

}  // namespace squeeze::roast
