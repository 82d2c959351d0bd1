// SPDX-License-Identifier: Apache-2.0
// squeeze/core/arch.cuh: the thin layer of raw PTX and intrinsics everything above uses.
//
// Nothing outside core/ writes inline assembly: it goes here (or, for Hopper, in hopper.cuh
// and wgmma.cuh). Each wrapper here is per-thread.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "squeeze/core/config.hpp"

namespace squeeze::core::arch {

/// This thread's lane in its warp (the hardware lane id, valid for any block shape).
SQUEEZE_DEVICE unsigned lane_id() {
  unsigned lane;
  asm("mov.u32 %0, %%laneid;" : "=r"(lane));
  return lane;
}

/// The SM this thread runs on (%smid: stable for the life of a block, not across blocks).
SQUEEZE_DEVICE unsigned sm_id() {
  unsigned sm;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
  return sm;
}

/// The GPU's global nanosecond timer (%globaltimer).
SQUEEZE_DEVICE std::uint64_t global_timer_ns() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

/// 16-byte load cached in L2 only: streaming reads of mapped host memory or of data
/// read once, which would only evict useful lines from L1.
SQUEEZE_DEVICE uint4 load_global_cg(const uint4* p) {
  return __ldcg(p);
}

/// Shared-memory address of a generic pointer into shared memory.
SQUEEZE_DEVICE std::uint32_t shared_address(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

/// Generic pointer to a shared-memory address: the inverse of shared_address.
SQUEEZE_DEVICE void* shared_pointer(std::uint32_t address) {
  return __cvta_shared_to_generic(address);
}

/// Asynchronous 16-byte copy global -> shared, L2 only (cp.async.cg). Both addresses
/// 16-byte aligned. Falls back to a synchronous copy before sm_80.
SQUEEZE_DEVICE void cp_async_16(void* smem, const void* gmem) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(shared_address(smem)), "l"(gmem)
               : "memory");
#else
  *static_cast<uint4*>(smem) = __ldcg(static_cast<const uint4*>(gmem));
#endif
}

/// cp_async_16 that reads only the first `src_bytes` (0..16) of `gmem` and zero-fills the
/// rest of the 16 shared bytes; with 0 nothing is read (gmem must still be a valid address).
SQUEEZE_DEVICE void cp_async_16_zfill(void* smem, const void* gmem, unsigned src_bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address(smem)),
               "l"(gmem), "r"(src_bytes)
               : "memory");
#else
  uint4 v{0, 0, 0, 0};
  const auto* src = static_cast<const unsigned char*>(gmem);
  auto* bytes = reinterpret_cast<unsigned char*>(&v);
  for (unsigned i = 0; i < src_bytes; ++i) bytes[i] = src[i];
  *static_cast<uint4*>(smem) = v;
#endif
}

/// Closes the group of cp.async copies this thread issued since the last commit.
SQUEEZE_DEVICE void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

/// Waits until at most `Pending` of this thread's committed groups are still in flight.
template <int Pending>
SQUEEZE_DEVICE void cp_async_wait() {
  static_assert(Pending >= 0 && Pending <= 7, "cp.async.wait_group takes 0..7");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending) : "memory");
#endif
}

/// __shfl_up_sync / __shfl_sync of a 16-byte vector.
SQUEEZE_DEVICE uint4 shfl_up(uint4 v, unsigned delta, unsigned mask = full_warp_mask) {
  return uint4{__shfl_up_sync(mask, v.x, delta), __shfl_up_sync(mask, v.y, delta),
               __shfl_up_sync(mask, v.z, delta), __shfl_up_sync(mask, v.w, delta)};
}
/// __shfl_sync of the four words of v from lane src_lane.
SQUEEZE_DEVICE uint4 shfl(uint4 v, int src_lane, unsigned mask = full_warp_mask) {
  return uint4{__shfl_sync(mask, v.x, src_lane), __shfl_sync(mask, v.y, src_lane),
               __shfl_sync(mask, v.z, src_lane), __shfl_sync(mask, v.w, src_lane)};
}

}  // namespace squeeze::core::arch
