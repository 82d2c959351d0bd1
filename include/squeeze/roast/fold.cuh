// SPDX-License-Identifier: Apache-2.0
// squeeze/roast/fold.cuh: the fold of a module's weight gradient into dM through a workspace,
// in a fixed order (deterministic) and at memory bandwidth.
//
// backward_memory with a `gradient_fold` stores each tile's gradient (scale * g applied) in
// the fold's workspace, whole tiles in tile order (mapping::workspace_offset); then the fold
// adds the workspace into dM. Tile starts are multiples of one alignment unit (a 128-byte row
// of the tile layout: `align` = 32 fp32 or 64 16-bit elements) and a tile is `span` = Z1*Z2 /
// align whole units, so unit u of M is covered by whole unit-sized pieces of the tiles that
// start in units (u - span, u]:
//
//   M        | u-2 | u-1 |  u  | u+1 | ...            (units of `align` elements)
//   tile a         [ a0  | a1  | a2 ]                  starts at u-1: adds its piece a1 to u
//   tile b               [ b0  | b1  | b2 ]            starts at u:   adds b0
//   workspace  [ tile 0 ][ tile 1 ] ... each tile's pieces contiguous, in the in-tile order
//
// The fold gives each unit of M one warp: the covering tiles, sorted by start (then by tile
// number), are the entries first[u - span + 1] .. first[u + 1] of one sorted list, and the
// warp reads their pieces (128 bytes of floats per lane row) in that order and adds them in
// fp32 in that order. No atomics: the same inputs give the same bits on every run. The
// workspace is read once, coalesced, so the fold runs at memory bandwidth; the GEMM writes it
// once, as cuBLAS writes a dense dW. Only the values of tiles that pass W's last row or
// column (flagged in the list) are checked against W's bounds.
//
// Build one fold per module, once (it sorts the module's tile starts on the host and holds
// a workspace for a strip of the module's tiles), and pass it on every step through
// gemm_options::fold.
//
// The sorted list's entries, the view of a strip and the kernel are in roast/detail/.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "squeeze/core/buffer.hpp"
#include "squeeze/core/cuda_error.hpp"
#include "squeeze/core/launch.hpp"
#include "squeeze/roast/detail/fold_kernels.cuh"
#include "squeeze/roast/mapping.hpp"

namespace squeeze::roast {

/// The sorted tile starts of one module and a workspace for its tiles' gradients. Calls
/// that share a fold must be ordered (one stream): each rewrites the workspace.
///
/// The workspace holds one strip of W's tile rows (tile rows kb in [kb0, kb1): the columns
/// [kb0 * Z1, kb1 * Z1) of dW^T) at a time: backward_memory computes a strip's tiles, folds
/// them, and goes on to the next. A workspace that fits in L2 is folded while still there
/// and needs far less memory than the dense gradient; see `default_workspace_bytes`. The
/// order of the sums (strip by strip, then the sorted list) depends on the strips, so runs
/// give identical bits for the same mapping and the same workspace size.
class gradient_fold {
 public:
  /// A trade of memory for speed. Measured on the H200, 512 x 8192 x 8192 bf16, 2026-11-24
  /// (docs/RESULTS.md §roast), dM took 4.9x cuBLAS's dW with 8 MiB, 3.0x with 32 MiB, 2.4x
  /// with 64 MiB and 1.9x with the whole 268 MB gradient (one strip): pass more for speed.
  static constexpr std::uint64_t default_workspace_bytes = std::uint64_t{32} << 20;

  /// The tile rows one workspace holds and where their tiles sit in it.
  struct strip {
    std::uint64_t k_begin;         ///< first row of W (a multiple of Z1)
    std::uint64_t k_end;           ///< one past the strip's last row of W
    std::uint64_t workspace_base;  ///< mapping::workspace_offset of the strip's first value
  };

  /// Uploads the sorted lists on `stream` and waits for it (the host lists die on return);
  /// build once per module. `workspace_bytes`: the workspace holds as many whole tile rows as
  /// fit (at least one).
  gradient_fold(const mapping& map, cudaStream_t stream,
                std::uint64_t workspace_bytes = default_workspace_bytes)
      : map_{map},
        units_{map.slots() - 1 + tile_values() / align()},
        rows_per_strip_{std::clamp<std::uint64_t>(
            workspace_bytes / (map.tiles_n() * tile_values() * sizeof(float)), 1, map.tiles_k())},
        strips_{(map.tiles_k() + rows_per_strip_ - 1) / rows_per_strip_},
        entries_{map.tiles_k() * map.tiles_n()},
        first_{strips_ * (units_ + 1)},
        workspace_{rows_per_strip_ * map.tiles_n() * tile_values()} {
    SQUEEZE_EXPECTS(entries_.size() < (std::uint64_t{1} << 31) && units_ < (std::uint64_t{1} << 32),
                    "roast::gradient_fold: a module with 2^31 tiles or more, or an M of 2^32 "
                    "alignment units or more, is not supported");
    // Strip by strip: its tiles sorted by (start, tile), tiles numbered within the strip.
    std::vector<detail::fold_entry> entries(entries_.size());
    std::vector<std::uint32_t> first(first_.size());
    for (std::uint64_t i = 0; i < strips_; ++i) {
      const std::uint64_t t0 = i * rows_per_strip_ * map.tiles_n();
      const std::uint64_t t1 = std::min(entries.size(), t0 + rows_per_strip_ * map.tiles_n());
      for (std::uint64_t t = t0; t < t1; ++t) {
        const std::uint64_t kb = t / map.tiles_n();
        const std::uint64_t nb = t % map.tiles_n();
        const bool edge =
            (kb + 1) * map.tile().k > map.rows() || (nb + 1) * map.tile().n > map.cols();
        entries[t] = {static_cast<std::uint32_t>(map.tile_offset(kb, nb) / align()),
                      static_cast<std::uint32_t>(t - t0) | (edge ? detail::edge_tile : 0u)};
      }
      std::sort(entries.begin() + t0, entries.begin() + t1, [](const auto& a, const auto& b) {
        return a.start_unit != b.start_unit ? a.start_unit < b.start_unit : a.tile < b.tile;
      });
      std::uint64_t e = t0;
      for (std::uint64_t u = 0; u <= units_; ++u) {
        while (e < t1 && entries[e].start_unit < u) ++e;
        first[i * (units_ + 1) + u] = static_cast<std::uint32_t>(e - t0);
      }
    }
    entries_.copy_from(std::span<const detail::fold_entry>{entries}, stream);
    first_.copy_from(std::span<const std::uint32_t>{first}, stream);
    // Never read unmasked where unset, but zeroed so no uninitialized memory is ever read.
    SQUEEZE_CUDA_TRY(
        cudaMemsetAsync(workspace_.data(), 0, workspace_.size() * sizeof(float), stream));
    SQUEEZE_CUDA_TRY(cudaStreamSynchronize(stream));  // the host vectors die here
  }

  /// The module this fold was built for.
  [[nodiscard]] const mapping& map() const noexcept { return map_; }
  /// Strips of tile rows the fold takes a pass at a time.
  [[nodiscard]] std::uint64_t strips() const noexcept { return strips_; }
  /// Strip i: its rows of W and where its tiles start in the workspace.
  [[nodiscard]] strip strip_at(std::uint64_t i) const noexcept {
    const std::uint64_t kb0 = i * rows_per_strip_;
    const std::uint64_t kb1 = std::min(map_.tiles_k(), kb0 + rows_per_strip_);
    return {kb0 * map_.tile().k, std::min(map_.rows(), kb1 * map_.tile().k),
            kb0 * map_.tiles_n() * tile_values()};
  }
  /// Where backward_memory stores a strip's tiles (mapping::workspace_offset - base).
  [[nodiscard]] float* workspace() const noexcept { return workspace_.data(); }
  /// Bytes of the workspace (one strip's tiles).
  [[nodiscard]] std::uint64_t workspace_bytes() const noexcept {
    return workspace_.size() * sizeof(float);
  }

  /// dM += the workspace holding strip i, unit by unit in the fixed order, a warp a unit in
  /// blocks of WarpsPerBlock warps. Asynchronous on `stream`. (A template, so that its kernel
  /// is compiled only where it is called.)
  template <unsigned WarpsPerBlock = 8>
  void fold_strip(std::uint64_t i, float* dmemory, cudaStream_t stream) const {
    const detail::fold_view view{entries_.data() + i * rows_per_strip_ * map_.tiles_n(),
                                 first_.data() + i * (units_ + 1),
                                 workspace_.data(),
                                 units_,
                                 static_cast<std::uint32_t>(tile_values() / align()),
                                 static_cast<std::uint32_t>(tile_values()),
                                 map_,
                                 i * rows_per_strip_ * map_.tiles_n()};
    constexpr unsigned threads = 32 * WarpsPerBlock;
    const unsigned blocks = core::grid_for(units_, WarpsPerBlock, core::per_sm(32));
    if (align() == 32) {
      detail::fold_kernel<1, threads><<<blocks, threads, 0, stream>>>(view, dmemory);
    } else {
      detail::fold_kernel<2, threads><<<blocks, threads, 0, stream>>>(view, dmemory);
    }
    SQUEEZE_CHECK_LAUNCH();
  }

 private:
  /// Elements per alignment unit: one 128-byte row of the tile layout (32 or 64).
  [[nodiscard]] std::uint64_t align() const noexcept { return map_.layout().atom_k(); }
  [[nodiscard]] std::uint64_t tile_values() const noexcept {
    return std::uint64_t{map_.tile().k} * map_.tile().n;
  }

  mapping map_;
  std::uint64_t units_;
  std::uint64_t rows_per_strip_;
  std::uint64_t strips_;
  core::device_buffer<detail::fold_entry> entries_;
  core::device_buffer<std::uint32_t> first_;
  core::device_buffer<float> workspace_;
};

}  // namespace squeeze::roast
