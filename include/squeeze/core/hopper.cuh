// SPDX-License-Identifier: Apache-2.0
// squeeze/core/hopper.cuh: Hopper's asynchronous data movement, raw PTX (sm_90).
//
// Like arch.cuh, a thin per-thread layer: mbarriers (arrive, expect-tx, parity wait, and
// arrivals on a peer block's barrier in the cluster), thread-block clusters, 1-D bulk
// copies and 2-D tensor (TMA) loads into shared memory, optionally multicast to several
// blocks of the cluster; vector reductions into global memory. Addresses are 32-bit shared-memory
// addresses
// (`arch::shared_address`). Everything compiles to nothing below sm_90; callers launch the
// kernels that use it on sm_90 only.
#pragma once

#include <cuda.h>  // CUtensorMap

#include <cstdint>

#include "squeeze/core/arch.cuh"
#include "squeeze/core/config.hpp"

namespace squeeze::core::arch {

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define SQUEEZE_HOPPER_PTX 1
#else
#define SQUEEZE_HOPPER_PTX 0
#endif

// ---- mbarriers ------------------------------------------------------------------------

/// Initializes the barrier at `bar` to expect `count` arrivals per phase.
SQUEEZE_DEVICE void mbarrier_init(std::uint32_t bar, std::uint32_t count) {
#if SQUEEZE_HOPPER_PTX
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
#endif
}

/// Makes initialized barriers visible to the cluster (and to the async proxy).
SQUEEZE_DEVICE void fence_mbarrier_init() {
#if SQUEEZE_HOPPER_PTX
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}

/// Arrives once and adds `bytes` to the transactions the current phase waits for.
SQUEEZE_DEVICE void mbarrier_arrive_expect_tx(std::uint32_t bar, std::uint32_t bytes) {
#if SQUEEZE_HOPPER_PTX
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
               : "memory");
#endif
}

/// Waits until the phase with parity `parity` of the barrier has completed.
SQUEEZE_DEVICE void mbarrier_wait(std::uint32_t bar, std::uint32_t parity) {
#if SQUEEZE_HOPPER_PTX
  asm volatile(
      "{\n.reg .pred done;\n"
      "wait_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra wait_%=;\n}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
#endif
}

/// Arrives on the barrier at the same offset in the shared memory of block `cta_rank` of
/// this cluster (this block included). Release semantics at CTA scope only: enough to hand
/// back a buffer this thread has finished *reading* (a cluster-scope release would fence
/// every memory operation in flight, in-flight wgmma reads included, on every call).
SQUEEZE_DEVICE void mbarrier_arrive_cluster(std::uint32_t bar, std::uint32_t cta_rank) {
#if SQUEEZE_HOPPER_PTX
  asm volatile(
      "{\n.reg .b32 remote;\n"
      "mapa.shared::cluster.u32 remote, %0, %1;\n"
      "mbarrier.arrive.shared::cluster.b64 _, [remote];\n}\n" ::"r"(bar),
      "r"(cta_rank)
      : "memory");
#endif
}

// ---- programmatic dependent launch --------------------------------------------------

/// Lets the next kernel in the stream, if launched with
/// cudaLaunchAttributeProgrammaticStreamSerialization, start before this one has finished
/// (once every block of this grid has called this or exited).
SQUEEZE_DEVICE void launch_dependents() {
#if SQUEEZE_HOPPER_PTX
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

/// Waits until the kernels this one was launched after have finished and their writes are
/// visible; a no-op for a kernel launched the ordinary way.
SQUEEZE_DEVICE void wait_for_prerequisites() {
#if SQUEEZE_HOPPER_PTX
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

// ---- clusters -------------------------------------------------------------------------

/// This block's rank in its cluster.
SQUEEZE_DEVICE std::uint32_t cluster_rank() {
  std::uint32_t r = 0;
#if SQUEEZE_HOPPER_PTX
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
#endif
  return r;
}

/// The two halves of cluster_sync, for work in between that needs no other block: every
/// thread of the cluster arrives (releasing its writes), later waits for all the others.
/// Called by whole warps.
SQUEEZE_DEVICE void cluster_arrive() {
#if SQUEEZE_HOPPER_PTX
  asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
#endif
}
/// Waits until every thread of the cluster has arrived (barrier.cluster.wait.acquire).
SQUEEZE_DEVICE void cluster_wait() {
#if SQUEEZE_HOPPER_PTX
  asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
#endif
}

/// Every thread of every block of the cluster arrives, then waits for all the others.
SQUEEZE_DEVICE void cluster_sync() {
  cluster_arrive();
  cluster_wait();
}

// ---- bulk copies ----------------------------------------------------------------------

/// Copies `bytes` (a multiple of 16, both addresses 16-byte aligned) from global memory to
/// `dst` in this block's shared memory, signalling the barrier at `bar` as they land.
SQUEEZE_DEVICE void bulk_copy(std::uint32_t dst, const void* src, std::uint32_t bytes,
                              std::uint32_t bar) {
#if SQUEEZE_HOPPER_PTX
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1], %2, [%3];\n" ::"r"(dst),
      "l"(src), "r"(bytes), "r"(bar)
      : "memory");
#endif
}

/// bulk_copy into `dst` of every block in `cta_mask` (this cluster), signalling each one's
/// barrier at offset `bar`.
SQUEEZE_DEVICE void bulk_copy_multicast(std::uint32_t dst, const void* src, std::uint32_t bytes,
                                        std::uint32_t bar, std::uint16_t cta_mask) {
#if SQUEEZE_HOPPER_PTX
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1], %2, [%3], %4;\n" ::"r"(dst),
      "l"(src), "r"(bytes), "r"(bar), "h"(cta_mask)
      : "memory");
#endif
}

/// Loads the box at coordinates (c0 innermost, c1) of the tensor map into `dst` of this
/// block, signalling the barrier at `bar`. The map lives in kernel parameter space.
SQUEEZE_DEVICE void tensor_load_2d(std::uint32_t dst, const CUtensorMap* map, std::int32_t c0,
                                   std::int32_t c1, std::uint32_t bar) {
#if SQUEEZE_HOPPER_PTX
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3}], [%4];\n" ::"r"(dst),
      "l"(reinterpret_cast<std::uint64_t>(map)), "r"(c0), "r"(c1), "r"(bar)
      : "memory");
#endif
}

/// Loads the box at coordinates (c0 innermost, c1) of the tensor map into `dst` of every
/// block in `cta_mask`, signalling each one's barrier at offset `bar`. The map lives in
/// kernel parameter space (`const __grid_constant__ CUtensorMap`).
SQUEEZE_DEVICE void tensor_load_2d_multicast(std::uint32_t dst, const CUtensorMap* map,
                                             std::int32_t c0, std::int32_t c1, std::uint32_t bar,
                                             std::uint16_t cta_mask) {
#if SQUEEZE_HOPPER_PTX
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      ".multicast::cluster [%0], [%1, {%2, %3}], [%4], %5;\n" ::"r"(dst),
      "l"(reinterpret_cast<std::uint64_t>(map)), "r"(c0), "r"(c1), "r"(bar), "h"(cta_mask)
      : "memory");
#endif
}

// ---- reductions ----------------------------------------------------------------------

/// p[0..3] += v as one 16-byte reduction (p 16-byte aligned; relaxed, no result).
SQUEEZE_DEVICE void red_add_v4(float* p, float4 v) {
#if SQUEEZE_HOPPER_PTX
  asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"l"(p), "f"(v.x), "f"(v.y),
               "f"(v.z), "f"(v.w)
               : "memory");
#else
  atomicAdd(p, v.x);
  atomicAdd(p + 1, v.y);
  atomicAdd(p + 2, v.z);
  atomicAdd(p + 3, v.w);
#endif
}

}  // namespace squeeze::core::arch
