// SPDX-License-Identifier: Apache-2.0
// squeeze/xfer/copy.cuh: warp- and block-cooperative copies that read their source in
// 128-byte aligned, coalesced segments whatever its alignment.
//
// The source is any device-accessible global memory: device memory, or mapped host
// memory (xfer/mapped_memory.hpp), where aligned 128-byte reads are what fills PCIe.
// A copy reads exactly [src, src + n) and writes exactly [dst, dst + n): whole 16-byte
// granules inside the range, and the bytes of the (at most two) granules that the range
// only partly covers with one extra byte-load instruction per warp. Callers that know a
// wider readable range (xfer/bounds.hpp, readable_range) pass it to skip that instruction.
//
// Cooperation: every lane of the warp (every thread of the block) calls with the same
// arguments, converged. The source must not overlap the destination.
#pragma once

#include <cuda_runtime.h>

#include <concepts>
#include <cstddef>
#include <cstdint>

#include "squeeze/core/arch_policy.hpp"
#include "squeeze/core/bits.hpp"
#include "squeeze/core/config.hpp"
#include "squeeze/xfer/bounds.hpp"
#include "squeeze/xfer/detail/realign.cuh"

namespace squeeze::xfer {

/// Tuning of the synchronous copies on Hopper (sm_90).
struct copy_policy_sm90 {
  /// The architecture this entry is for (core/arch_policy.hpp).
  static constexpr int arch = 90;
  /// Waves of loads (32 lanes x 16 B = 512 B each) a lane issues before it stores any.
  /// 4 waves keep 2 KiB per warp in flight: with 24+ warps per SM that covers PCIe
  /// latency (~1-2 us x 55 GB/s ~ 100 KB per GPU) many times over. 8 waves measured no
  /// faster from 1 KiB rows up and 14 % slower at 64 B (H200, docs/RESULTS.md, xfer).
  static constexpr int waves_in_flight = 4;
};

/// Tuning of the synchronous copies on Ampere (sm_80 and up to sm_89). Not measured on such
/// a GPU (the project has none); derived from sm_90's by the hardware's differences.
struct copy_policy_sm80 {
  /// The architecture this entry is for (core/arch_policy.hpp).
  static constexpr int arch = 80;
  /// 4, as on sm_90: by Little's law an A100 needs fewer bytes in flight than an H100
  /// (HBM2e ~2 TB/s x ~0.6 us ~ 1.2 MB, PCIe 4 ~25 GB/s x ~2 us ~ 50 KB per GPU) and has
  /// the same 64 warps and 64 K registers per SM, so 2 KiB per warp over 108 SMs still
  /// covers both several times; fewer waves would only lose where a row is one wave.
  static constexpr int waves_in_flight = 4;
};

/// The default: copy_policy_sm80 or copy_policy_sm90 by the architecture compiled for
/// (core/arch_policy.hpp). Only device code reads it.
struct copy_policy : core::arch_policy<copy_policy_sm80, copy_policy_sm90> {};

// (clang-format 14 mangles concept definitions)
// clang-format off
template <class P>
concept copy_policy_like = requires {
  { P::waves_in_flight } -> std::convertible_to<int>;
} && (P::waves_in_flight >= 1 && P::waves_in_flight <= 16);
// clang-format on

/// Warp-cooperative copy of n bytes from src to dst that may read whole edge granules
/// lying inside `readable` (which must contain [src, src + n)); see readable_range.
template <copy_policy_like Policy = copy_policy>
SQUEEZE_DEVICE void warp_copy(void* dst, const void* src, std::size_t n, readable_range readable) {
  if (n == 0) return;
  detail::copy_waves<Policy::waves_in_flight>(detail::make_plan(dst, src, n, readable));
}

/// Warp-cooperative copy of n bytes from src to dst. Reads exactly [src, src + n).
template <copy_policy_like Policy = copy_policy>
SQUEEZE_DEVICE void warp_copy(void* dst, const void* src, std::size_t n) {
  warp_copy<Policy>(dst, src, n, readable_range::of(src, n));
}

/// Warp-cooperative bounded copy: copies bounded_length(src, lower, upper) bytes and
/// returns that count (the same in every lane). Reading a stream as a sequence of bounded
/// copies keeps every read after the first one segment-aligned:
///
///   for (std::size_t done = 0; done < total;)
///     done += warp_copy_bounded(buf, src + done, 128, total - done);
template <copy_policy_like Policy = copy_policy>
SQUEEZE_DEVICE std::size_t warp_copy_bounded(void* dst, const void* src, std::size_t lower,
                                             std::size_t upper) {
  const std::size_t n = bounded_length(src, lower, upper);
  warp_copy<Policy>(dst, src, n);
  return n;
}

/// Block-cooperative copy of n bytes; BlockThreads (a multiple of 32) must equal the
/// block's thread count. Warps take turns over aligned source tiles of
/// 512 B x waves_in_flight, so every warp's reads stay segment-aligned.
template <int BlockThreads, copy_policy_like Policy = copy_policy>
SQUEEZE_DEVICE void block_copy(void* dst, const void* src, std::size_t n) {
  static_assert(BlockThreads % warp_threads == 0 && BlockThreads > 0,
                "block_copy: BlockThreads must be a positive multiple of 32");
  if (n == 0) return;
  constexpr std::size_t tile = warp_threads * granule_bytes * Policy::waves_in_flight;
  constexpr std::size_t warps = BlockThreads / warp_threads;
  const std::size_t warp =
      (threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) / warp_threads;
  const auto s = reinterpret_cast<std::uintptr_t>(src);
  const std::uintptr_t end = s + n;
  for (std::uintptr_t t = core::align_down<std::uintptr_t>(s, tile) + warp * tile; t < end;
       t += warps * tile) {
    const std::uintptr_t a = t > s ? t : s;
    const std::uintptr_t b = t + tile < end ? t + tile : end;
    warp_copy<Policy>(static_cast<std::byte*>(dst) + (a - s), reinterpret_cast<const void*>(a),
                      b - a);
  }
}

/// Block-cooperative bounded copy (see warp_copy_bounded); returns the bytes copied.
template <int BlockThreads, copy_policy_like Policy = copy_policy>
SQUEEZE_DEVICE std::size_t block_copy_bounded(void* dst, const void* src, std::size_t lower,
                                              std::size_t upper) {
  const std::size_t n = bounded_length(src, lower, upper);
  block_copy<BlockThreads, Policy>(dst, src, n);
  return n;
}

}  // namespace squeeze::xfer
