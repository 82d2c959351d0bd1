// SPDX-License-Identifier: Apache-2.0
// squeeze/roast/detail/sm90/config.cuh: what every piece of ROAST-MM's Hopper kernel shares:
// the pass, the arguments, and the kernel's shape and shared-memory budget for a policy.
//
// One kernel, three passes (the `pass` parameter, resolved with if constexpr):
//
//   pass       output (rows x cols)   reduction   A (smem)                 B (smem)
//   forward    Y  = X . W      b x N   K           X, K-major (TMA)         W tiles, K-major
//   input      dX = dY . W^T   b x K   N           dY, K-major (TMA)        W tiles, MN-major
//   memory     dW^T = dY^T . X N x K   batch       dY, MN-major (TMA)       X, MN-major (TMA)
//                folded into dM in whole lines of reductions: dM[h + o(k, n)] += scale g dW
//
// W's tiles are copied from M unchanged: an atom of M (8 rows n x 128 bytes of k, 128-byte
// swizzle, mapping.hpp) is a K-major atom of B for the forward pass and an MN-major atom of
// B (transposed, 16-bit types only) for dX. A block computes BM x BN outputs with BM / 64
// consumer warpgroups (64 rows each; BM = 128, or 64 for small outputs) and one producer
// warp; two blocks form a cluster (scheduler.cuh). The pieces: pipeline.cuh (the ring of
// stages and its barriers), scheduler.cuh (which output tiles a cluster takes), producer.cuh
// (the copies), consumer.cuh (the wgmma main loop), epilogue.cuh (the stores),
// ../hopper_gemm.cuh (the kernel that joins them, its launch and the choice of
// instantiation).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "squeeze/roast/gemm_policy.hpp"
#include "squeeze/roast/mapping.hpp"

namespace squeeze::roast::detail {

enum class pass { forward, input, memory };

template <class T, class Out>
struct gemm_args {
  const T* memory;  ///< M (forward, input)
  mapping map;
  Out* out;  ///< Y, dX, or dM (memory pass; Out = float)
  std::uint64_t ld_out;
  std::uint32_t rows;   ///< output rows: batch, or N for the memory pass
  std::uint32_t cols;   ///< output columns: N, K, K
  std::uint32_t depth;  ///< reduction: K, N, batch
  /// Memory pass: when set, each tile's sums are stored here at mapping::workspace_offset
  /// minus workspace_base (a gradient_fold's strip) instead of added to dM.
  float* workspace = nullptr;
  std::uint64_t workspace_base = 0;
  /// The first output column: blocks cover [col0, cols) (a strip of a gradient_fold).
  std::uint32_t col0 = 0;
};

namespace sm90 {

/// The kernel's shape for a policy, a block height BM and a block width BN; the fixed parts
/// are the kernel's structure, the rest follows from the policy.
template <class Policy, int BM, int BN>
struct kernel_config {
  static constexpr int block_m = BM;        ///< output rows per block: BM / 64 warpgroups x 64
  static constexpr int block_n = BN;        ///< output columns per block
  static constexpr int consumers = BM * 2;  ///< a warpgroup (128 threads) per 64 rows
  static constexpr int consumer_warps = consumers / 32;
  static constexpr int threads = consumers + 32;  ///< + the producer warp
  static constexpr int cluster = 2;               ///< blocks of a cluster sharing A or B
  /// Stage s of the ring: A = BM rows x 128 bytes (8 or 16 KiB), then B = BN rows x 128
  /// bytes.
  static constexpr int a_bytes = block_m * 128;
  static constexpr int stage_bytes = a_bytes + BN * 128;
  static constexpr int stages = Policy::stage_budget_bytes / stage_bytes;
  /// The epilogue's staging area: 16 rows x 128 bytes (2 KiB) per consumer warp.
  static constexpr int staging_bytes = consumer_warps * 2048;
  /// The producer works out B's sources this many stages at a time, into a table of up to
  /// 4 pointers a stage.
  static constexpr int source_batch = Policy::source_batch;
  static constexpr int source_bytes = source_batch * 4 * 8;
  /// Dynamic shared memory: the stages (aligned to 1024 bytes: up to 1024 of padding), the
  /// staging area, the full and empty barriers, the source table.
  static constexpr int smem_bytes =
      stages * stage_bytes + 1024 + staging_bytes + 2 * stages * 8 + source_bytes;

  static_assert(BN == 64 || BN == 128 || BN == 256, "block_n: 64, 128 or 256");
  static_assert(BM == 64 || BM == 128, "block_m: 64 or 128");
  static_assert(stages >= 2, "stage_budget_bytes: room for at least two stages");
  static_assert(smem_bytes <= 227 * 1024,
                "stage_budget_bytes and source_batch: a Hopper block has 227 KiB of shared memory");
};

}  // namespace sm90
}  // namespace squeeze::roast::detail
