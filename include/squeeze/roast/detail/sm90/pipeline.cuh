// SPDX-License-Identifier: Apache-2.0
// squeeze/roast/detail/sm90/pipeline.cuh: the shared memory of ROAST-MM's Hopper kernel and
// its ring of pipeline stages.
//
// Stage s holds A (128 rows x 128 bytes) then B (BN rows x 128 bytes). Two mbarriers guard
// it: `full` (the producer arms it with the stage's byte count, expect-tx, and the copies
// complete it) and `empty` (one arrival per consumer warp of both blocks of the cluster).
// Iterations count on across the tiles a block takes: iteration `it` uses stage
// it % stages at phase (it / stages) & 1, so the producer runs ahead into the next tile
// while the consumers store this one.
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
  SQUEEZE_DEVICE static int slot(int it) { return it % stages; }

  /// One thread: initializes every barrier (then a cluster-wide barrier must follow before
  /// the peer block signals or copies into this one).
  SQUEEZE_DEVICE void init() const {
    for (int s = 0; s < stages; ++s) {
      core::arch::mbarrier_init(full(s), 1);
      core::arch::mbarrier_init(empty(s), Config::cluster * Config::consumer_warps);
    }
    core::arch::fence_mbarrier_init();
  }
  /// Producer: waits until both blocks' consumers have released the stage that iteration
  /// `it` reuses, then arms its full barrier for `bytes` of copies.
  SQUEEZE_DEVICE void acquire(int it, std::uint32_t bytes) const {
    const int s = slot(it);
    if (it >= stages) core::arch::mbarrier_wait(empty(s), ((it / stages) - 1) & 1);
    core::arch::mbarrier_arrive_expect_tx(full(s), bytes);
  }
  /// Consumers: waits until iteration `it`'s copies have landed.
  SQUEEZE_DEVICE void wait_full(int it) const {
    core::arch::mbarrier_wait(full(slot(it)), (it / stages) & 1);
  }
  /// Producer, at the end: waits until both blocks' consumers have released the last
  /// min(stages, issued) iterations, so every signal the peer sends this block's barriers
  /// has landed, and every copy this block multicast into the peer has been consumed there:
  /// the block may then leave without a cluster-wide barrier.
  SQUEEZE_DEVICE void drain(int issued) const {
    for (int it = issued > stages ? issued - stages : 0; it < issued; ++it) {
      core::arch::mbarrier_wait(empty(slot(it)), (it / stages) & 1);
    }
  }
  /// A consumer warp, all lanes: hands iteration `it`'s stage back to the producers of both
  /// blocks (lane r signals block r).
  SQUEEZE_DEVICE void release(int it, int lane) const {
    __syncwarp();
    if (lane < Config::cluster) {
      core::arch::mbarrier_arrive_cluster(empty(slot(it)), static_cast<std::uint32_t>(lane));
    }
  }
};

}  // namespace squeeze::roast::detail::sm90
