// SPDX-License-Identifier: Apache-2.0
// squeeze/roast/detail/sm90/consumer.cuh: the consumers' main loop of ROAST-MM's Hopper
// kernel: one or two warpgroups of wgmma over the ring's stages, one output tile at a time.
#pragma once

#include <cstdint>
#include <type_traits>

#include "squeeze/core/config.hpp"
#include "squeeze/core/hopper.cuh"
#include "squeeze/core/wgmma.cuh"
#include "squeeze/roast/detail/operand.cuh"
#include "squeeze/roast/detail/sm90/config.cuh"
#include "squeeze/roast/detail/sm90/pipeline.cuh"

namespace squeeze::roast::detail::sm90 {

/// A warpgroup's accumulators of one output tile: BN / IN wgmma column blocks of m64nINk
/// fragments (warp w of the warpgroup holds rows 16w .. 16w + 15; lane l holds rows l/4 and
/// l/4 + 8, columns 8i + 2(l%4) + {0, 1}), and, with sign hashes, the sign each block's sum
/// is held with.
template <int BN, int IN>
struct accumulators {
  float acc[BN / IN][IN / 2];
  bool flipped[BN / IN];
};

/// Sums this warpgroup's 64 rows of the tile at column n0 over all k_tiles stages (the ring's
/// next k_tiles iterations from `at`, which it advances past them), into `out` (zeroed
/// first). `wg`: the warpgroup (0, or 1 in blocks of 128 rows).
template <class Config, class T, pass Pass, int IN, bool Signs>
__device__ SQUEEZE_FORCEINLINE void mainloop(const stage_ring<Config>& ring, const mapping& map,
                                             std::uint32_t n0, int k_tiles,
                                             typename stage_ring<Config>::position& at, int wg,
                                             int lane, accumulators<Config::block_n, IN>& out) {
  namespace arch = core::arch;
  constexpr int BN = Config::block_n;
  using tag = typename operand_traits<T>::tag;
  constexpr bool k_major_a = Pass != pass::memory;
  constexpr bool k_major_b = Pass == pass::forward;
  constexpr int bk = 128 / static_cast<int>(sizeof(T));  // reduction per stage: 128 bytes
  constexpr int k_steps = bk / operand_traits<T>::k_step;
  // Per k-step, the descriptors move 32 bytes along a K-major row, or 2 row groups (2 KiB)
  // down an MN-major stack.
  constexpr std::uint32_t a_step = k_major_a ? 32 : 2048;
  constexpr std::uint32_t b_step = k_major_b ? 32 : 2048;
  constexpr auto swizzle = core::arch::smem_swizzle::bytes128;
  static_assert(std::is_same_v<T, float> ? (k_major_a && k_major_b) : true,
                "TF32 wgmma takes K-major operands only");
  static_assert(BN % IN == 0 && (k_major_b || IN % bk == 0), "instruction shape");
  auto& acc = out.acc;
  auto& flipped = out.flipped;
  SQUEEZE_UNROLL
  for (int j = 0; j < BN / IN; ++j) {
    SQUEEZE_UNROLL
    for (int i = 0; i < IN / 2; ++i) acc[j][i] = 0.0f;
    flipped[j] = false;
  }
  const std::uint32_t tile_k = map.tile().k;
  const std::uint32_t tile_n = map.tile().n;
  // With sign hashes: bit kt % 32 of negative[j] says whether column block j's tile at
  // stage kt has sign -1. Worked out 32 stages at a time, a stage a lane, before the wait
  // for the stage: a hash and two divisions a stage on the path from a stage's arrival to
  // its wgmma held up the tensor cores.
  std::uint32_t negative[Signs ? BN / IN : 1] = {};
  for (int kt = 0; kt < k_tiles; ++kt) {
    const int s = at.stage();
    if constexpr (Signs) {
      if (kt % 32 == 0) {
        const int stage = kt + lane;
        const auto r0 = static_cast<std::uint32_t>(stage) * bk;
        SQUEEZE_UNROLL
        for (int j = 0; j < BN / IN; ++j) {
          const std::uint32_t col = n0 + static_cast<std::uint32_t>(j * IN);
          const bool minus = stage < k_tiles &&
                             (Pass == pass::forward ? map.tile_sign(r0 / tile_k, col / tile_n) < 0
                                                    : map.tile_sign(col / tile_k, r0 / tile_n) < 0);
          negative[j] = __ballot_sync(0xffffffffu, minus);
        }
      }
    }
    ring.wait_full(at);
    const std::uint32_t a_s = ring.a(s);
    const std::uint32_t b_s = ring.b(s);
    SQUEEZE_UNROLL
    for (int j = 0; j < BN / IN; ++j) arch::wgmma_fence_operands(acc[j]);
    // One column block: the stage's wgmma add with B scaled by the tile's sign (both
    // instruction sequences compiled; no accumulator is touched outside wgmma). Several:
    // the accumulator of column block j holds sign[j] * (the true sum); when a tile's sign
    // differs from it, flip it (the wgmma of the last stage has finished), so every wgmma
    // adds with +1: a run-time choice of each instruction's B scale would make the compiler
    // serialize every wgmma.
    constexpr bool whole_stage_sign = Signs && BN == IN;
    if constexpr (Signs && !whole_stage_sign) {
      SQUEEZE_UNROLL
      for (int j = 0; j < BN / IN; ++j) {
        const bool minus = ((negative[j] >> (kt % 32)) & 1u) != 0;
        if (minus != flipped[j]) {  // warp-uniform
          flipped[j] = minus;
          SQUEEZE_UNROLL
          for (int i = 0; i < IN / 2; ++i) acc[j][i] = -acc[j][i];
        }
        arch::wgmma_fence_operands(acc[j]);
      }
    }
    const auto issue = [&]<int ScaleB>() {
      arch::wgmma_fence();
      SQUEEZE_UNROLL
      for (int ks = 0; ks < k_steps; ++ks) {
        const std::uint64_t da = arch::smem_descriptor(a_s + wg * 8192 + ks * a_step,
                                                       k_major_a ? 16 : 8192, 1024, swizzle);
        SQUEEZE_UNROLL
        for (int j = 0; j < BN / IN; ++j) {
          const std::uint32_t b_j = k_major_b ? j * IN * 128 : j * (IN / bk) * 8192;
          const std::uint64_t db =
              arch::smem_descriptor(b_s + b_j + ks * b_step, k_major_b ? 16 : 8192, 1024, swizzle);
          arch::wgmma_ss<tag, IN, ScaleB, k_major_a ? 0 : 1, k_major_b ? 0 : 1>(acc[j], da, db);
        }
      }
      arch::wgmma_commit();
      // Finish this stage's wgmma and hand the stage back at once: the copies are the
      // bottleneck, and a stage more in flight is worth more than overlapping the next
      // wgmma issue, which the other warpgroup covers. (Finished inside each branch of the
      // sign: no wgmma in flight where the two join.) One stage's wgmma left in flight
      // instead took 0.95-1.09 x the time at K = N = 512-8192 (bf16, H200, 2026-11-28),
      // in blocks of 64 rows too.
      arch::wgmma_wait<0>();
    };
    if constexpr (whole_stage_sign) {
      if (((negative[0] >> (kt % 32)) & 1u) != 0) {  // warp-uniform
        issue.template operator()<-1>();
      } else {
        issue.template operator()<1>();
      }
    } else {
      issue.template operator()<1>();
    }
    SQUEEZE_UNROLL
    for (int j = 0; j < BN / IN; ++j) arch::wgmma_fence_operands(acc[j]);
    ring.release(at, lane);
    at.advance();
  }
}

}  // namespace squeeze::roast::detail::sm90
