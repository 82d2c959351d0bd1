// SPDX-License-Identifier: Apache-2.0
// squeeze/xfer/async.cuh: asynchronous copies into shared memory, so a warp can decode
// one piece while the next is still on its way.
//
// The loads are cp.async (16-byte, L2-only) of the source's 16-byte granules, placed in
// shared memory at the same offsets modulo 16 (the bytes of a granule the range only
// partly covers, at most two, are copied synchronously, so nothing outside the range is
// read): a range starting at src lands at
//   smem + window.offset   with window.offset = src mod 16,
// so the caller's shared buffer (16-byte aligned) needs window_bytes(n) bytes. No
// realignment happens on the way: the consumer reads from smem + offset.
//
//   __shared__ alignas(16) std::byte stage[2][xfer::window_bytes(512)];
//   auto w = xfer::warp_load_bounded_async(stage[0], src, 128, total);   // issue
//   xfer::async_commit();
//   ... issue the next stage, commit ...
//   xfer::warp_async_wait<1>();        // all but the newest group landed, warp-visible
//   decode(stage[0] + w.offset, w.bytes);
//
// Or with a libcu++ pipeline (per-thread scope), the caller acquiring and committing:
//   pipe.producer_acquire(); xfer::warp_load_async(stage, src, n, pipe); pipe.producer_commit();
//
// From mapped host memory, cp.async reached about half the link rate of ordinary loads on
// an H200; warp_staged_load overlaps ordinary loads with other work instead, carrying
// the bytes in registers until land() stores them (see it below).
#pragma once

#include <cuda_runtime.h>
#include <cuda/pipeline>

#include <cstddef>
#include <cstdint>

#include "squeeze/core/arch.cuh"
#include "squeeze/core/bits.hpp"
#include "squeeze/core/config.hpp"
#include "squeeze/xfer/bounds.hpp"
#include "squeeze/xfer/detail/realign.cuh"

namespace squeeze::xfer {

/// Where an asynchronous load put its bytes: byte k of the range is at smem + offset + k.
struct smem_window {
  unsigned offset;    ///< src mod 16
  std::size_t bytes;  ///< bytes of the range
};

namespace detail {

/// Calls issue(smem_granule, src_granule) for this thread's share of the granules the plan
/// reads whole, and copies its share of the bytes of the partial edge granules
/// synchronously (at most 30 bytes, so reads stay inside the readable range); rank/size
/// describe the cooperating group.
/// Copies this thread's share of the bytes of the plan's partial edge granules to smem
/// synchronously (at most 30 bytes in all, so reads stay inside the readable range).
SQUEEZE_DEVICE void copy_edge_bytes(void* smem, const copy_plan& p, unsigned rank, unsigned size) {
  const edge_set edges = all_edges(p);
  if (!edges.head && !edges.tail) return;
  for (unsigned k = rank; k < 2 * granule; k += size) {
    const std::size_t pos = edge_position(p, edges, k);
    if (pos != no_position) {
      static_cast<unsigned char*>(smem)[pos] = static_cast<unsigned char>(load_byte(p, pos));
    }
  }
}

/// Calls issue(smem_granule, src_granule) for this thread's share of the granules the plan
/// reads whole, and copies its share of the edge bytes; rank/size describe the group.
template <class Issue>
SQUEEZE_DEVICE smem_window for_each_granule(void* smem, const copy_plan& p, std::size_t n,
                                            unsigned rank, unsigned size, Issue&& issue) {
  auto* out = static_cast<uint4*>(smem);
  for (std::size_t i = rank; i < p.count; i += size) {
    if (!is_partial(p, i)) issue(out + i, p.granules + i);
  }
  copy_edge_bytes(smem, p, rank, size);
  return smem_window{static_cast<unsigned>(p.begin), n};
}

SQUEEZE_DEVICE void cp_async_granule(uint4* smem, const uint4* gmem) {
  core::arch::cp_async_16(smem, gmem);
}

SQUEEZE_DEVICE unsigned block_rank() {
  return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}

}  // namespace detail

/// Closes this thread's group of asynchronous loads issued since the last commit.
SQUEEZE_DEVICE void async_commit() {
  core::arch::cp_async_commit();
}

/// Waits until at most `Pending` of this thread's committed groups are in flight.
template <int Pending = 0>
SQUEEZE_DEVICE void async_wait() {
  core::arch::cp_async_wait<Pending>();
}

/// async_wait, then __syncwarp: the landed bytes are visible to every lane of the warp.
template <int Pending = 0>
SQUEEZE_DEVICE void warp_async_wait() {
  core::arch::cp_async_wait<Pending>();
  __syncwarp();
}

/// async_wait, then __syncthreads: the landed bytes are visible to the whole block.
template <int Pending = 0>
SQUEEZE_DEVICE void block_async_wait() {
  core::arch::cp_async_wait<Pending>();
  __syncthreads();
}

/// Warp-cooperative: starts loading the granules of [src, src + n) into smem (16-byte
/// aligned, window_bytes(n) long). Does not commit.
SQUEEZE_DEVICE smem_window warp_load_async(void* smem, const void* src, std::size_t n) {
  return detail::for_each_granule(smem, detail::make_plan(smem, src, n), n, core::arch::lane_id(),
                                  warp_threads, detail::cp_async_granule);
}

/// As above, reading whole edge granules that lie inside `readable` (xfer/bounds.hpp),
/// which saves the synchronous edge bytes. Does not commit.
SQUEEZE_DEVICE smem_window warp_load_async(void* smem, const void* src, std::size_t n,
                                           readable_range readable) {
  return detail::for_each_granule(smem, detail::make_plan(smem, src, n, readable), n,
                                  core::arch::lane_id(), warp_threads, detail::cp_async_granule);
}

namespace detail {

/// Loads granules [first, p.count) of the plan into out[i] (whole granules only; the
/// partial edges are copy_edge_bytes' job): 16-byte loads through registers, four
/// granules in flight per lane, then stores. All 32 lanes.
SQUEEZE_DEVICE void load_granules(uint4* out, const copy_plan& p, std::size_t first) {
  constexpr unsigned in_flight = 4;
  for (std::size_t base = first + core::arch::lane_id(); base < p.count;
       base += in_flight * warp_threads) {
    uint4 v[in_flight];
#pragma unroll
    for (unsigned u = 0; u < in_flight; ++u) v[u] = load_granule(p, base + u * warp_threads);
#pragma unroll
    for (unsigned u = 0; u < in_flight; ++u) {
      const std::size_t i = base + u * warp_threads;
      if (i < p.count && !is_partial(p, i)) out[i] = v[u];
    }
  }
}

}  // namespace detail

/// Warp-cooperative *synchronous* load into shared memory, in the same layout as
/// warp_load_async (byte k of the range at smem + offset + k): 16-byte loads through
/// registers, four granules in flight per lane, then stores; __syncwarp at the end.
///
/// Prefer it to warp_load_async when the source is mapped host memory: on an H200,
/// cp.async reads of mapped memory reached only about half the PCIe rate that the same
/// granules read by ordinary loads reached (IBP decoder, docs/RESULTS.md, ibp).
SQUEEZE_DEVICE smem_window warp_load(void* smem, const void* src, std::size_t n,
                                     readable_range readable) {
  const detail::copy_plan p = detail::make_plan(smem, src, n, readable);
  detail::load_granules(static_cast<uint4*>(smem), p, 0);
  detail::copy_edge_bytes(smem, p, core::arch::lane_id(), warp_threads);
  __syncwarp();
  return smem_window{static_cast<unsigned>(p.begin), n};
}

/// warp_load in two steps, so the bytes travel while the warp does other work (decodes
/// the row before, say) with ordinary loads, which read mapped host memory at the full
/// link rate where cp.async does not:
///
///   xfer::warp_staged_load<2> next;
///   next.issue(src, n, readable);           // this lane's first 2 granules -> registers
///   ... work that does not touch smem ...
///   auto w = next.land(smem, src, n, readable);   // same range: registers -> smem, the
///                                                 // rest of the range loaded, __syncwarp
///
/// Waves · 32 granules (Waves · 512 bytes) travel in registers; a longer range's rest is
/// loaded synchronously by land(). The range is not kept (it costs registers while the
/// warp works): land() takes the arguments issue() got. Reads and layout as warp_load.
template <unsigned Waves>
struct warp_staged_load {
  static_assert(Waves >= 1, "warp_staged_load: at least one wave of granules");
  uint4 granules[Waves];  ///< this lane's loaded granules, in registers

  /// Issues this lane's loads of the range's first Waves · 32 granules; does not wait.
  SQUEEZE_DEVICE void issue(const void* src, std::size_t n, readable_range readable) {
    // The plan's loads do not depend on the destination.
    const detail::copy_plan p = detail::make_plan(nullptr, src, n, readable);
    const unsigned lane = core::arch::lane_id();
#pragma unroll
    for (unsigned u = 0; u < Waves; ++u)
      granules[u] = detail::load_granule(p, lane + u * warp_threads);
  }

  /// Completes the load issue(src, n, readable) started, into smem (16-byte aligned,
  /// window_bytes(n) long).
  SQUEEZE_DEVICE smem_window land(void* smem, const void* src, std::size_t n,
                                  readable_range readable) const {
    const detail::copy_plan p = detail::make_plan(smem, src, n, readable);
    const unsigned lane = core::arch::lane_id();
    auto* out = static_cast<uint4*>(smem);
#pragma unroll
    for (unsigned u = 0; u < Waves; ++u) {
      const std::size_t i = lane + u * warp_threads;
      if (i < p.count && !detail::is_partial(p, i)) out[i] = granules[u];
    }
    detail::load_granules(out, p, Waves * warp_threads);
    detail::copy_edge_bytes(smem, p, lane, warp_threads);
    __syncwarp();
    return smem_window{static_cast<unsigned>(p.begin), n};
  }
};

/// Warp-cooperative bounded load (bounded_length bytes; see warp_copy_bounded). Does not
/// commit.
SQUEEZE_DEVICE smem_window warp_load_bounded_async(void* smem, const void* src, std::size_t lower,
                                                   std::size_t upper) {
  return warp_load_async(smem, src, bounded_length(src, lower, upper));
}

/// Block-cooperative variants; BlockThreads must equal the block's thread count.
template <int BlockThreads>
SQUEEZE_DEVICE smem_window block_load_async(void* smem, const void* src, std::size_t n) {
  static_assert(BlockThreads > 0, "block_load_async: BlockThreads must be positive");
  return detail::for_each_granule(smem, detail::make_plan(smem, src, n), n, detail::block_rank(),
                                  BlockThreads, detail::cp_async_granule);
}
/// Block-cooperative bounded load (see warp_load_bounded_async). Does not commit.
template <int BlockThreads>
SQUEEZE_DEVICE smem_window block_load_bounded_async(void* smem, const void* src, std::size_t lower,
                                                    std::size_t upper) {
  return block_load_async<BlockThreads>(smem, src, bounded_length(src, lower, upper));
}

/// Warp-cooperative load through a libcu++ pipeline (each lane's own thread-scope
/// pipeline): cuda::memcpy_async of each granule. The caller acquires and commits.
template <cuda::thread_scope Scope>
SQUEEZE_DEVICE smem_window warp_load_async(void* smem, const void* src, std::size_t n,
                                           cuda::pipeline<Scope>& pipe) {
  return detail::for_each_granule(smem, detail::make_plan(smem, src, n), n, core::arch::lane_id(),
                                  warp_threads, [&pipe](uint4* d, const uint4* s) {
                                    cuda::memcpy_async(d, s, cuda::aligned_size_t<16>(16), pipe);
                                  });
}

}  // namespace squeeze::xfer
