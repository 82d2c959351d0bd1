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

/// Warp-cooperative *synchronous* load into shared memory, in the same layout as
/// warp_load_async (byte k of the range at smem + offset + k): 16-byte loads through
/// registers, four granules in flight per lane, then stores; __syncwarp at the end.
///
/// Prefer it to warp_load_async when the source is mapped host memory: on an H200,
/// cp.async reads of mapped memory reached only about half the PCIe rate that the same
/// granules read by ordinary loads reached (IBP decoder, docs/RESULTS.md, ibp).
SQUEEZE_DEVICE smem_window warp_load(void* smem, const void* src, std::size_t n,
                                     readable_range readable) {
  constexpr unsigned in_flight = 4;
  const detail::copy_plan p = detail::make_plan(smem, src, n, readable);
  const unsigned lane = core::arch::lane_id();
  auto* out = static_cast<uint4*>(smem);
  for (std::size_t base = lane; base < p.count; base += in_flight * warp_threads) {
    uint4 v[in_flight];
#pragma unroll
    for (unsigned u = 0; u < in_flight; ++u)
      v[u] = detail::load_granule(p, base + u * warp_threads);
#pragma unroll
    for (unsigned u = 0; u < in_flight; ++u) {
      const std::size_t i = base + u * warp_threads;
      if (i < p.count && !detail::is_partial(p, i)) out[i] = v[u];
    }
  }
  detail::copy_edge_bytes(smem, p, lane, warp_threads);
  __syncwarp();
  return smem_window{static_cast<unsigned>(p.begin), n};
}

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
