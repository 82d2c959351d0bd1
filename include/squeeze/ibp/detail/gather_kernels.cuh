// SPDX-License-Identifier: Apache-2.0
// squeeze/ibp/detail/gather_kernels.cuh: the IBP gather's kernel, the gather loop that it and
// the compressed cache's kernel run (a warp per row, the next row's loads in flight), the
// location of a row in a set, and the persistent launch. Internal: ibp/gather.cuh's
// gather_rows and ibp/cache.cuh's gather_cached launch them.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "squeeze/core/arch.cuh"
#include "squeeze/core/config.hpp"
#include "squeeze/core/cuda_error.hpp"
#include "squeeze/core/launch.hpp"
#include "squeeze/core/report.cuh"
#include "squeeze/core/status.hpp"
#include "squeeze/ibp/dataset.hpp"
#include "squeeze/ibp/decode.cuh"
#include "squeeze/ibp/format.hpp"
#include "squeeze/ibp/gather_args.cuh"
#include "squeeze/xfer/bounds.hpp"

namespace squeeze::ibp {

namespace detail {

/// Where a row lies and how to read it, or why it cannot be read. Warp-uniform.
struct row_location {
  row_source row;
  status st = status::ok;
};

/// Checks index idx against the set and finds its codebook: the row's number, or a
/// location carrying the status that stops it.
template <class Index>
SQUEEZE_DEVICE row_location identify_row(const gather_args<Index>& a, Index idx, std::uint64_t& r) {
  row_location s;
  bool valid = static_cast<std::uint64_t>(idx) < a.rows;
  if constexpr (std::is_signed_v<Index>) valid = valid && idx >= 0;
  if (!valid) {
    s.st = status::out_of_bounds;
    return s;
  }
  r = static_cast<std::uint64_t>(idx);
  s.row.codebook = a.codebook;
  if (a.clusters.clusters != 0) {
    const std::uint32_t c = a.clusters.unchecked_cluster_of(r);
    if (c >= a.clusters.clusters) {
      s.st = status::corrupt;
      return s;
    }
    s.row.codebook = a.clusters.unchecked_book(c);
  }
  return s;
}

/// Where row r, identified as `s` by identify_row, lies in the set `a` describes.
template <class Index>
SQUEEZE_DEVICE row_location place_row(const gather_args<Index>& a, std::uint64_t r,
                                      row_location s) {
  s.row.readable = xfer::readable_range::of(a.data, a.data_bytes);
  const std::uint32_t l = s.row.codebook.tensor_bytes;
  if (a.kind == layout::in_place) {
    s.row.in_place = true;
    s.row.raw = ((a.raw[r / 32] >> (r % 32)) & 1u) != 0;
    s.row.src = a.data + r * l;
    return s;
  }
  const std::uint64_t begin = a.offsets[r];
  const std::uint64_t end = a.offsets[r + 1];
  if (begin > end || end > a.data_bytes || end - begin > l || end == begin) {
    s.st = status::corrupt;
    return s;
  }
  s.row.src = a.data + begin;
  s.row.stored = static_cast<std::uint32_t>(end - begin);
  return s;
}

/// Row indices[i] of a plain gather.
template <class Index>
SQUEEZE_DEVICE row_location locate(const gather_args<Index>& a, std::size_t i) {
  std::uint64_t r = 0;
  const row_location s = identify_row(a, a.indices[i], r);
  return s.st == status::ok ? place_row(a, r, s) : s;
}

/// The gather loop: output rows of `out` (dst, dst_stride, count, status_out), each found
/// by a `locate(req, i)` overload (plain gathers here; the compressed cache adds its own).
/// While a warp decodes one row, the next one's loads are in flight. Rows that fit the
/// workspace are located a row earlier still: the row after next is located (its index
/// and offsets, two dependent loads from device memory) once the decode is issued, so the
/// lookups overlap the next row's crossing of PCIe instead of coming before it (H100, 91 %
/// savings, against the ideal rate: 1 KiB rows 0.85 -> 0.88 in gathers of 20 000 rows, 1
/// and 4 KiB 0.93 -> 0.94 in gathers of 100 000). Streamed rows, long enough to hide the
/// lookups, keep the registers that would take.
template <class Policy, bool Streaming, unsigned Chunk, class Request, class Index>
SQUEEZE_DEVICE void gather_loop(const Request& req, const gather_args<Index>& out) {
  using decoder = warp_decoder<typename Policy::decode, Streaming, Chunk>;
  constexpr bool locate_early = !Streaming;
  extern __shared__ std::byte smem[];
  constexpr int warps_per_block = Policy::block_threads / warp_threads;
  const unsigned warp_in_block = threadIdx.x / warp_threads;
  decoder dec{reinterpret_cast<typename decoder::TempStorage*>(smem)[warp_in_block], out.codebook};
  auto* dst = static_cast<std::byte*>(out.dst);

  const std::size_t warps = std::size_t{gridDim.x} * warps_per_block;
  std::size_t i = std::size_t{blockIdx.x} * warps_per_block + warp_in_block;
  if (i >= out.count) return;
  typename decoder::stage staged;
  row_location cur = locate(req, i);
  if (cur.st == status::ok) decoder::prefetch(cur.row, staged);
  row_location next;  // row i + warps
  if (locate_early && i + warps < out.count) next = locate(req, i + warps);
  for (;; i += warps) {
    __syncwarp();  // every lane is done with the workspace the row lands in
    if (cur.st == status::ok) dec.land(cur.row, staged);
    // Issue the next row's loads before decoding this one.
    const bool more = i + warps < out.count;
    if (!locate_early && more) next = locate(req, i + warps);
    if (more && next.st == status::ok) decoder::prefetch(next.row, staged);
    status st = cur.st;
    if (st == status::ok) st = dec.decode_loaded(dst + i * out.dst_stride);
    if (core::arch::lane_id() == 0) core::report_status(out.status_out, st);
    if (!more) break;
    cur = next;
    if (locate_early && i + 2 * warps < out.count) next = locate(req, i + 2 * warps);
  }
}

// Policy::min_blocks_per_sm blocks per SM (5: at most 102 registers a thread). One kernel
// per shape of set, which the host knows (with_kernel_shape): Streaming, whether rows may
// be longer than the workspace (its path needs more registers: a kernel with it unbounded
// took 128 registers, four blocks per SM, and ran an example's gather 10 % slower on an
// H200), and Chunk, the chunk size (one decoder instead of four: with all four the
// kernel spilled its prefetched rows to local memory, which made it wait for them).
template <class Policy, bool Streaming, unsigned Chunk, class Index>
SQUEEZE_KERNEL_MIN_BLOCKS(Policy::block_threads, Policy::min_blocks_per_sm)
void gather_kernel(gather_args<Index> a) {
  gather_loop<Policy, Streaming, Chunk>(a, a);
}

/// Calls f(std::bool_constant<Streaming>, std::integral_constant<unsigned, Chunk>) with the
/// kernel shape a set whose rows decode with `cb` needs (cb is valid: validate_set).
template <class Policy, class F>
void with_kernel_shape(const codebook_ref& cb, F&& f) {
  const auto chunk = [&](auto streaming) {
    switch (cb.chunk_bytes) {
      case 1: return f(streaming, std::integral_constant<unsigned, 1>{});
      case 2: return f(streaming, std::integral_constant<unsigned, 2>{});
      case 4: return f(streaming, std::integral_constant<unsigned, 4>{});
      default: return f(streaming, std::integral_constant<unsigned, 8>{});
    }
  };
  if (cb.tensor_bytes > Policy::decode::workspace_bytes) {
    chunk(std::true_type{});
  } else {
    chunk(std::false_type{});
  }
}

/// Launches Kernel(arg) on a persistent grid (core::persistent_grid): as many blocks as fit
/// at once, never more than `count` rows need, so each warp decodes a sequence of rows and
/// keeps the next one's load in flight.
template <class Policy, auto Kernel, class Arg>
void launch_persistent(const Arg& arg, std::size_t count, cudaStream_t stream) {
  constexpr std::size_t smem = gather_shared_bytes<Policy>();
  if constexpr (smem > 48 * 1024) {
    SQUEEZE_CUDA_TRY(cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(smem)));
  }
  const unsigned blocks = core::persistent_grid<Kernel>(count, Policy::block_threads / warp_threads,
                                                        Policy::block_threads, smem);
  Kernel<<<blocks, Policy::block_threads, smem, stream>>>(arg);
  SQUEEZE_CHECK_LAUNCH();
}

}  // namespace detail

}  // namespace squeeze::ibp
