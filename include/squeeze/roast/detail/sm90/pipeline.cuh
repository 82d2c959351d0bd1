// SPDX-License-Identifier: Apache-2.0
// squeeze/roast/detail/sm90/pipeline.cuh: the shared memory of ROAST-MM's Hopper kernel and
// its ring of pipeline stages.
//
// Stage s holds A (128 rows x 128 bytes) then B (BN rows x 128 bytes). Two mbarriers guard
// it: `full` (the producer arms it with the stage's byte count, expect-tx, and the copies
// complete it) and `empty` (one arrival per consumer warp of both blocks of the cluster).
// Iterations count on across the tiles a block takes: iteration i uses stage i % stages at
// phase (i / stages) & 1 (stage_ring::position), so the producer runs ahead into the next
// tile while the consumers store this one.
#pragma once

#include <cstdint>

#include "squeeze/core/arch.cuh"
#include "squeeze/core/config.hpp"
#include "squeeze/core/hopper.cuh"
#include "squeeze/roast/detail/sm90/config.cuh"

namespace squeeze::roast::detail::sm90 {

/// Where each part of the dynamic shared memory starts (shared-window addresses): the
/// stages (1024-byte aligned, as the 128-byte swizzle needs), the epilogue's staging area,
/// the barriers, the producer's table of B sources.
template <class Config>
struct shared_layout {
  std::uint32_t stages;
  std::uint32_t staging;
  std::uint32_t barriers;
  std::uint32_t sources;

  SQUEEZE_DEVICE static shared_layout at(unsigned char* raw) {
    shared_layout s{};
    s.stages = (core::arch::shared_address(raw) + 1023) & ~1023u;
    s.staging = s.stages + Config::stages * Config::stage_bytes;
    s.barriers = s.staging + Config::staging_bytes;
    s.sources = s.barriers + 2 * Config::stages * 8;
    return s;
  }
};

/// The ring of stages and its full/empty barriers.
template <class Config>
struct stage_ring {
  static constexpr int stages = Config::stages;
  std::uint32_t base;      ///< stage 0
  std::uint32_t barriers;  ///< full(0 .. stages - 1), then empty(0 .. stages - 1)

  /// Where an iteration lies in the ring: its count, its stage and the parity of its lap
  /// (iteration i: stage i % stages, lap i / stages). With a power of two of stages, stage
  /// and lap come from the count; otherwise they advance one iteration at a time, so that no
  /// thread divides by the stage count on its way from one stage to the next (at 6 stages,
  /// K = N = 4096, the two divisions cost 2-4 % of the forward and dX time; stepping where
  /// a count serves made the 8-stage forward at 1024 7-11 % slower; H200, 2026-11-28).
  struct position {
    static constexpr bool counted = (stages & (stages - 1)) == 0;
    std::uint32_t count = 0;   ///< iterations so far
    int at_stage = 0;          ///< the stage (not counted)
    std::uint32_t at_lap = 0;  ///< the lap's parity (not counted)
    SQUEEZE_DEVICE int stage() const {
      return counted ? static_cast<int>(count % stages) : at_stage;
    }
    SQUEEZE_DEVICE std::uint32_t lap() const { return counted ? (count / stages) & 1u : at_lap; }
    SQUEEZE_DEVICE void advance() {
      ++count;
      if constexpr (!counted) {
        if (++at_stage == stages) {
          at_stage = 0;
          at_lap ^= 1u;
        }
      }
    }
  };

  SQUEEZE_DEVICE std::uint32_t full(int s) const {
    return barriers + static_cast<std::uint32_t>(s) * 8;
  }
  SQUEEZE_DEVICE std::uint32_t empty(int s) const {
    return barriers + static_cast<std::uint32_t>(stages + s) * 8;
  }
  SQUEEZE_DEVICE std::uint32_t a(int s) const {
    return base + static_cast<std::uint32_t>(s) * Config::stage_bytes;
  }
  SQUEEZE_DEVICE std::uint32_t b(int s) const { return a(s) + Config::a_bytes; }

  /// One thread: initializes every barrier (then a cluster-wide barrier must follow before
  /// the peer block signals or copies into this one).
  SQUEEZE_DEVICE void init() const {
    for (int s = 0; s < stages; ++s) {
      core::arch::mbarrier_init(full(s), 1);
      core::arch::mbarrier_init(empty(s), Config::cluster * Config::consumer_warps);
    }
    core::arch::fence_mbarrier_init();
  }
  /// Producer: waits until both blocks' consumers have released the stage that the
  /// iteration at `at` reuses (from the second lap on), then arms its full barrier for
  /// `bytes` of copies.
  SQUEEZE_DEVICE void acquire(const position& at, std::uint32_t bytes) const {
    if (at.count >= static_cast<std::uint32_t>(stages))
      core::arch::mbarrier_wait(empty(at.stage()), at.lap() ^ 1u);
    core::arch::mbarrier_arrive_expect_tx(full(at.stage()), bytes);
  }
  /// Consumers: waits until the copies of the iteration at `at` have landed.
  SQUEEZE_DEVICE void wait_full(const position& at) const {
    core::arch::mbarrier_wait(full(at.stage()), at.lap());
  }
  /// Producer, at the end (`next`: the position after its last iteration): waits until both
  /// blocks' consumers have released the last min(stages, issued) iterations (as the next
  /// lap's acquires would), so every signal the peer sends this block's barriers has landed,
  /// and every copy this block multicast into the peer has been consumed there: the block
  /// may then leave without a cluster-wide barrier.
  SQUEEZE_DEVICE void drain(position next) const {
    for (int s = 0; s < stages; ++s, next.advance()) {
      if (next.count >= static_cast<std::uint32_t>(stages))
        core::arch::mbarrier_wait(empty(next.stage()), next.lap() ^ 1u);
    }
  }
  /// A consumer warp, all lanes: hands the stage of the iteration at `at` back to the
  /// producers of both blocks (lane r signals block r).
  SQUEEZE_DEVICE void release(const position& at, int lane) const {
    __syncwarp();
    if (lane < Config::cluster) {
      core::arch::mbarrier_arrive_cluster(empty(at.stage()), static_cast<std::uint32_t>(lane));
    }
  }
};

}  // namespace squeeze::roast::detail::sm90
