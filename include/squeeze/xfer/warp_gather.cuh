// SPDX-License-Identifier: Apache-2.0
// squeeze/xfer/warp_gather.cuh: what a row gather reads and writes (gather_args), its tuning
// (gather_policy), and the warp-cooperative gather of a few rows (warp_gather_rows) that
// xfer::gather_rows (xfer/gather.cuh) runs and user kernels can call.
#pragma once

#include <cuda_runtime.h>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "squeeze/core/arch.cuh"
#include "squeeze/core/config.hpp"
#include "squeeze/core/report.cuh"
#include "squeeze/core/status.hpp"
#include "squeeze/xfer/copy.cuh"

namespace squeeze::xfer {

/// What a row gather reads and writes. Plain parameters, passed by value to the kernel.
template <class Index>
struct gather_args {
  void* dst = nullptr;             ///< [count, dst_stride] device memory
  std::size_t dst_stride = 0;      ///< bytes between output rows, >= row_bytes
  const void* src = nullptr;       ///< [src_rows, src_stride] device-accessible memory
  std::size_t src_stride = 0;      ///< bytes between source rows, >= row_bytes
  std::size_t src_rows = 0;        ///< rows in src: larger indices are rejected
  std::size_t row_bytes = 0;       ///< bytes copied per row
  const Index* indices = nullptr;  ///< [count] device-accessible
  std::size_t count = 0;           ///< rows to gather
  status* status_out = nullptr;    ///< optional: receives the first error; untouched on success
};

/// Tuning of the gather kernel on Hopper (sm_90; measured on an H200, see docs/RESULTS.md,
/// section xfer).
struct gather_policy_sm90 {
  /// The architecture this entry is for (core/arch_policy.hpp).
  static constexpr int arch = 90;
  static constexpr int block_threads = 256;  ///< threads a block
  /// Blocks per SM the register budget is sized for: 3 x 256 threads (<= 85 registers)
  /// needs no spills with 8 rows in flight (nvcc 13.0, sm_90); 4 spilled 16 bytes.
  static constexpr int min_blocks_per_sm = 3;
  /// Rows a warp loads before it stores any, when a row fits one wave (<= 481 B at any
  /// alignment): a 256 B row alone is 8 lanes' worth of loads. 16 measured +8 % at 64 B
  /// aligned but -4 % to -12 % at 256 B (H200).
  static constexpr int rows_in_flight = 8;
  /// Policy of the per-row copy of larger rows.
  using copy = copy_policy;
};

/// Tuning of the gather kernel on Ampere (sm_80 .. sm_89). Not measured on such a GPU;
/// every member is one the host also reads (the launch shape, rows per block), so it must
/// equal sm_90's (checked below), and the reasons hold there too: the same 64 K registers
/// per SM (3 blocks of 256 threads at <= 85 registers), and 8 small rows a warp in flight
/// is more than an A100's lower bandwidth needs.
struct gather_policy_sm80 : gather_policy_sm90 {
  /// The architecture this entry is for (core/arch_policy.hpp).
  static constexpr int arch = 80;
};

/// The default: by the architecture compiled for (core/arch_policy.hpp).
struct gather_policy : core::arch_policy<gather_policy_sm80, gather_policy_sm90> {};

static_assert(gather_policy_sm80::block_threads == gather_policy_sm90::block_threads &&
                  gather_policy_sm80::min_blocks_per_sm == gather_policy_sm90::min_blocks_per_sm &&
                  gather_policy_sm80::rows_in_flight == gather_policy_sm90::rows_in_flight,
              "xfer::gather_policy: the host sizes the grid with these: one value on every arch");

// (clang-format 14 mangles concept definitions)
// clang-format off
template <class P>
concept gather_policy_like = requires {
  { P::block_threads } -> std::convertible_to<int>;
  { P::rows_in_flight } -> std::convertible_to<int>;
  { P::min_blocks_per_sm } -> std::convertible_to<int>;
  typename P::copy;
} && (P::block_threads % warp_threads == 0) && (P::rows_in_flight >= 1) &&
    (P::rows_in_flight <= warp_threads) && copy_policy_like<typename P::copy>;
// clang-format on

/// Largest row that one wave of loads covers at any source alignment: the 31 granules
/// of a wave minus 15 bytes of worst-case misalignment (the 32nd lane builds the last
/// output vector).
inline constexpr std::size_t one_wave_row_bytes =
    (warp_threads - 1) * granule_bytes - (granule_bytes - 1);

/// Warp-cooperative: gathers rows [first, first + rows) of the job (rows <=
/// Policy::rows_in_flight). All 32 lanes call with the same arguments.
template <gather_policy_like Policy = gather_policy, class Index>
SQUEEZE_DEVICE void warp_gather_rows(const gather_args<Index>& a, std::size_t first, int rows) {
  constexpr int R = Policy::rows_in_flight;
  const unsigned lane = core::arch::lane_id();
  // One coalesced load of up to R indices; lane r keeps row r's source row.
  std::size_t my_row = 0;
  bool my_valid = false;
  if (lane < static_cast<unsigned>(rows)) {
    const auto idx = a.indices[first + lane];
    if constexpr (std::is_signed_v<Index>) {
      my_valid = idx >= 0 && static_cast<std::size_t>(idx) < a.src_rows;
    } else {
      my_valid = static_cast<std::size_t>(idx) < a.src_rows;
    }
    my_row = my_valid ? static_cast<std::size_t>(idx) : 0;
    if (!my_valid) core::report_status(a.status_out, status::out_of_bounds);
  }
  const auto* src = static_cast<const std::byte*>(a.src);
  auto* dst = static_cast<std::byte*>(a.dst);
  const unsigned valid_mask = __ballot_sync(full_warp_mask, my_valid);

  // The table is readable as a whole: a row's edge granules are read whole unless they
  // stick out of the table (its first and last rows at most).
  const readable_range table =
      readable_range::of(src, a.src_rows == 0 ? 0 : (a.src_rows - 1) * a.src_stride + a.row_bytes);
  // Row r's copy plan, rebuilt where needed rather than kept (keeps registers for loads).
  const auto plan_of = [&](int r) {
    const std::size_t row = __shfl_sync(full_warp_mask, my_row, r);
    const bool live = r < rows && ((valid_mask >> r) & 1u) != 0;
    return detail::make_plan(dst + (first + r) * a.dst_stride, src + row * a.src_stride,
                             live ? a.row_bytes : 0, table);
  };
  if (a.row_bytes <= one_wave_row_bytes) {
    // Small rows: every row's loads first, then the shuffles and stores.
    uint4 cur[R];
    std::uint32_t edge[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const detail::copy_plan plan = plan_of(r);
      cur[r] = detail::load_granule(plan, lane);
      edge[r] = detail::load_edge_byte(plan, 0);
    }
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const detail::copy_plan plan = plan_of(r);
      detail::patch_edges(plan, 0, edge[r], cur[r]);
      uint4 prev = core::arch::shfl_up(cur[r], 1);
      if (lane == 0) prev = uint4{0, 0, 0, 0};
      detail::emit(plan, lane, prev, cur[r]);
    }
  } else {
    for (int r = 0; r < rows; ++r) {
      const std::size_t row = __shfl_sync(full_warp_mask, my_row, r);
      if (((valid_mask >> r) & 1u) == 0) continue;
      warp_copy<typename Policy::copy>(dst + (first + r) * a.dst_stride, src + row * a.src_stride,
                                       a.row_bytes, table);
    }
  }
}

}  // namespace squeeze::xfer
