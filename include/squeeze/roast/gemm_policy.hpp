// SPDX-License-Identifier: Apache-2.0
// squeeze/roast/gemm_policy.hpp: the tuning of ROAST-MM's tensor-core kernel, as a policy.
//
// forward, backward_input and backward_memory (gemm.cuh) take a policy as their first
// template argument: roast::forward<my_policy>(x, ldx, ...). A policy is a struct with
// hopper_gemm_policy's static constexpr members; derive from it and override what you
// change. It never changes results beyond rounding, only which kernel runs and how it is
// laid out. The kernel's structure (blocks of a consumer warpgroup per 64 output rows and
// one producer warp, clusters of two blocks, 128-byte stages) is fixed by its code and is
// not a tunable.
#pragma once

#include <concepts>

namespace squeeze::roast {

/// ROAST-MM on Hopper tensor cores (sm_90a: TMA, thread-block clusters, wgmma).
struct hopper_gemm_policy {
  /// Output columns per block: 64, 128 or 256, or 0 for the widest of those that still
  /// gives `fill_percent` % of the SMs a block (all three widths are then compiled; a fixed
  /// width compiles one). A wider block reads each stage of A for more outputs; a narrower
  /// one gives a small output more blocks (512 x 2048 outputs fill an H100 only at 64).
  static constexpr int block_n = 0;
  /// Output rows per block: 128 (two consumer warpgroups) or 64 (one), or 0 for 128 unless
  /// blocks of 128 rows would give fewer than a quarter of the SMs a block (512 x 512
  /// outputs: 32 blocks of 128 x 64 on 132 SMs), in every pass.
  static constexpr int block_m = 0;
  /// With block_n = 0: the share of the SMs that must get a block, in percent.
  static constexpr int fill_percent = 90;
  /// Shared memory for the ring of pipeline stages, in bytes. A stage holds block_m rows of
  /// A and block_n rows of B, 128 bytes each: 192 KiB gives 4, 6 and 8 stages at block_n
  /// 256, 128 and 64 (12 in blocks of 64 x 64), the deepest ring that leaves room for the
  /// epilogue's staging (16 KiB) and fits one block per SM (227 KiB).
  static constexpr int stage_budget_bytes = 192 * 1024;
  /// Stages whose B sources (a hash and a few divisions each) the producer warp's 32 lanes
  /// work out at a time, ahead of the copies, into a table in shared memory; a multiple of
  /// 32. This keeps that work off lane 0, which issues the copies: done by lane 0 alone, it
  /// was slower than the tensor cores at small sizes.
  static constexpr int source_batch = 64;
};

/// A type with hopper_gemm_policy's members, within the ranges the kernel supports.
template <class P>
concept hopper_gemm_tuning = requires {
  { P::block_n } -> std::convertible_to<int>;
  { P::block_m } -> std::convertible_to<int>;
  { P::fill_percent } -> std::convertible_to<int>;
  { P::stage_budget_bytes } -> std::convertible_to<int>;
  { P::source_batch } -> std::convertible_to<int>;
}
&&(P::block_n == 0 || P::block_n == 64 || P::block_n == 128 || P::block_n == 256) &&
    (P::block_m == 0 || P::block_m == 64 || P::block_m == 128) && P::fill_percent > 0 &&
    P::fill_percent <= 100 && P::source_batch > 0 && P::source_batch % 32 == 0 &&
    P::stage_budget_bytes > 0;

/// hopper_gemm_policy with a fixed block width (64, 128 or 256).
template <int BlockN>
struct hopper_gemm_policy_n : hopper_gemm_policy {
  static constexpr int block_n = BlockN;  ///< the fixed block width
};

}  // namespace squeeze::roast
