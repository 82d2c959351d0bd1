// SPDX-License-Identifier: Apache-2.0
// squeeze/roast/detail/sm90/scheduler.cuh: which output tiles a cluster of ROAST-MM's Hopper
// kernel takes, and where its two blocks lie in them.
//
// Persistent: cluster c (blockIdx.x) takes the cluster tiles c, c + gridDim.x, ...; a
// cluster tile is 2 x BM output rows by BN columns (along_rows) or BM rows by 2 x BN
// columns, block rank r (blockIdx.y) taking the r-th half. Both blocks of a cluster walk the
// same tiles, so the multicast stays paired. In the forward and input passes, at BN >= 128
// or in blocks of 64 rows, and where the output rows make whole pairs of blocks, the two lie
// one above the other and share B: each copies half of every B stage from M (half of each
// run, or in dX every other whole 8 KiB block), multicast to both, and reads its A whole.
// Otherwise they lie side by side and share A the same way (blocks of 128 rows) or share
// nothing (64 rows). Sharing B leaves A, which every block of a row reads, in plain copies
// that the L2's request coalescer merges across blocks; it did not merge the plain copies of
// B that four blocks read (eighth round of ROAST's tuning, 2026-11-25).
#pragma once

#include <cstdint>

#include "squeeze/core/config.hpp"
#include "squeeze/roast/detail/sm90/config.cuh"

namespace squeeze::roast::detail::sm90 {

/// How the blocks of a cluster pair up and how many cluster tiles cover `rows` x `cols`
/// outputs (cols counted from the first column of a strip).
struct cluster_layout {
  bool along_rows;  ///< one above the other, sharing B; else side by side, sharing A
  std::uint32_t row_blocks;
  std::uint32_t tiles;
};

template <class Config, pass Pass>
SQUEEZE_HOST_DEVICE cluster_layout layout_for(std::uint64_t rows, std::uint64_t cols) {
  constexpr int bn = Config::block_n;
  const auto row_blocks =
      static_cast<std::uint32_t>((rows + Config::block_m - 1) / Config::block_m);
  // A stage's own L2 reads: 128 rows of A and BN / 2 of B one above the other, against 64
  // and BN side by side; at BN = 64 that is more, so those stay side by side. Blocks of 64
  // rows read their A whole either way (it is one copy), so they share B where they can.
  const bool along_rows =
      Pass != pass::memory && (bn >= 128 || Config::block_m == 64) && row_blocks % 2 == 0;
  const auto col_blocks = static_cast<std::uint32_t>((cols + bn - 1) / bn);
  return {along_rows, row_blocks,
          along_rows ? row_blocks / 2 * col_blocks : row_blocks * ((col_blocks + 1) / 2)};
}

/// The cluster tiles of one launch, and where this block's part of each one starts.
template <class Config, pass Pass>
struct tile_scheduler {
  cluster_layout layout;
  std::uint32_t col0;  ///< the first output column (a gradient_fold's strip)

  SQUEEZE_DEVICE tile_scheduler(std::uint32_t rows, std::uint32_t cols, std::uint32_t first_col)
      : layout{layout_for<Config, Pass>(rows, cols - first_col)}, col0{first_col} {}

  /// This cluster's first tile, and the stride to its next.
  SQUEEZE_DEVICE static std::uint32_t first() { return blockIdx.x; }
  SQUEEZE_DEVICE static std::uint32_t stride() { return gridDim.x; }
  SQUEEZE_DEVICE bool valid(std::uint32_t ct) const { return ct < layout.tiles; }

  /// The first output row (m0) and column (n0) of this block's part of cluster tile ct.
  SQUEEZE_DEVICE void origin(std::uint32_t ct, std::uint32_t& m0, std::uint32_t& n0) const {
    if (layout.along_rows) {
      const std::uint32_t pairs = layout.row_blocks / 2;
      m0 = ((ct % pairs) * Config::cluster + blockIdx.y) * Config::block_m;
      n0 = col0 + (ct / pairs) * Config::block_n;
    } else {
      m0 = (ct % layout.row_blocks) * Config::block_m;
      n0 = col0 + ((ct / layout.row_blocks) * Config::cluster + blockIdx.y) * Config::block_n;
    }
  }
};

}  // namespace squeeze::roast::detail::sm90
