// squeeze/ibp/gather.cuh: batched gather of IBP-compressed rows by index, from mapped host
// memory or device memory into a device tensor, decompressing on the way.
//
//   dst[i, :] = decode(row indices[i])     dst: [count, dst_stride B], rows of tensor_bytes
//
// The rows come from a condensed set (ibp/dataset.hpp): stored rows back to back in
// `data`, row r in [offsets[r], offsets[r+1]); a row as long as tensor_bytes is raw.
// One warp decodes one row at a time on a persistent grid. Each warp fetches its next row
// into a second workspace before decoding the current one: with cp.async loads
// (decode_policy::async_loads) that fetch is in flight while it decodes; with the default
// ordinary loads it completes first, and other warps on the SM hide its latency.
//
// Bad input is reported, never followed: an index >= rows -> status::out_of_bounds, the
// output row untouched; offsets that are not monotone, leave `data` or exceed
// tensor_bytes -> status::corrupt, the row untouched; a stream that does not decode ->
// status::truncated or status::corrupt. The first status is written to status_out.
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <atomic>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "squeeze/core/arch.cuh"
#include "squeeze/core/bits.hpp"
#include "squeeze/core/config.hpp"
#include "squeeze/core/cuda_error.hpp"
#include "squeeze/core/report.cuh"
#include "squeeze/core/status.hpp"
#include "squeeze/ibp/decode.cuh"
#include "squeeze/ibp/format.hpp"
#include "squeeze/xfer/async.cuh"
#include "squeeze/xfer/bounds.hpp"

namespace squeeze::ibp {

template <class Index>
struct gather_args {
  void* dst = nullptr;                     ///< [count, dst_stride] device memory
  std::size_t dst_stride = 0;              ///< bytes between output rows, >= tensor_bytes
  const std::byte* data = nullptr;         ///< condensed stored rows, device-accessible
  std::uint64_t data_bytes = 0;            ///< bytes in data
  const std::uint64_t* offsets = nullptr;  ///< [rows + 1], device-accessible
  std::uint64_t rows = 0;                  ///< rows in the set
  const Index* indices = nullptr;          ///< [count], device-accessible
  std::size_t count = 0;                   ///< rows to gather
  codebook_ref codebook;                   ///< mask / bitval in device-accessible memory
  status* status_out = nullptr;            ///< optional: the first error; untouched on success
};

struct gather_policy {
  static constexpr int block_threads = 128;
  using decode = decode_policy;
};

// (clang-format 14 mangles concept definitions)
// clang-format off
template <class P>
concept gather_policy_like = requires {
  { P::block_threads } -> std::convertible_to<int>;
  typename P::decode;
} && (P::block_threads % warp_threads == 0) && decode_policy_like<typename P::decode>;
// clang-format on

namespace detail {

/// Where output row i's source row lies, or why it cannot be read. Warp-uniform.
struct row_source {
  std::uint64_t begin = 0;
  std::uint32_t stored = 0;
  status st = status::ok;
};

template <class Index>
SQUEEZE_DEVICE row_source locate(const gather_args<Index>& a, std::size_t i) {
  row_source s;
  const Index idx = a.indices[i];
  bool valid = static_cast<std::uint64_t>(idx) < a.rows;
  if constexpr (std::is_signed_v<Index>) valid = valid && idx >= 0;
  if (!valid) {
    s.st = status::out_of_bounds;
    return s;
  }
  const std::uint64_t begin = a.offsets[idx];
  const std::uint64_t end = a.offsets[idx + 1];
  if (begin > end || end > a.data_bytes || end - begin > a.codebook.tensor_bytes || end == begin) {
    s.st = status::corrupt;
    return s;
  }
  s.begin = begin;
  s.stored = static_cast<std::uint32_t>(end - begin);
  return s;
}

template <class Policy, class Index>
SQUEEZE_KERNEL(Policy::block_threads)
void gather_kernel(gather_args<Index> a) {
  using decoder = warp_decoder<typename Policy::decode>;
  extern __shared__ std::byte smem[];
  constexpr int warps_per_block = Policy::block_threads / warp_threads;
  const unsigned warp_in_block = threadIdx.x / warp_threads;
  auto* storage = reinterpret_cast<typename decoder::TempStorage*>(smem) + 2 * warp_in_block;
  decoder even{storage[0], a.codebook};
  decoder odd{storage[1], a.codebook};
  const xfer::readable_range readable = xfer::readable_range::of(a.data, a.data_bytes);
  auto* dst = static_cast<std::byte*>(a.dst);

  const std::size_t warps = std::size_t{gridDim.x} * warps_per_block;
  std::size_t i = std::size_t{blockIdx.x} * warps_per_block + warp_in_block;
  if (i >= a.count) return;
  row_source cur = locate(a, i);
  if (cur.st == status::ok) even.load(a.data + cur.begin, cur.stored, readable);
  xfer::async_commit();
  for (bool odd_turn = false; i < a.count; i += warps, odd_turn = !odd_turn) {
    decoder& now = odd_turn ? odd : even;
    decoder& then = odd_turn ? even : odd;
    // Issue the next row's load before decoding this one.
    const std::size_t next_i = i + warps;
    row_source next;
    __syncwarp();  // every lane is done with the buffer about to be refilled
    if (next_i < a.count) {
      next = locate(a, next_i);
      if (next.st == status::ok) then.load(a.data + next.begin, next.stored, readable);
    }
    xfer::async_commit();
    xfer::warp_async_wait<1>();
    status st = cur.st;
    if (st == status::ok) st = now.decode_loaded(dst + i * a.dst_stride, cur.stored);
    if (core::arch::lane_id() == 0) core::report_status(a.status_out, st);
    cur = next;
  }
}

}  // namespace detail

/// Dynamic shared memory a block of the gather kernel needs.
template <gather_policy_like Policy = gather_policy>
constexpr std::size_t gather_shared_bytes() {
  return 2 * sizeof(typename warp_decoder<typename Policy::decode>::TempStorage) *
         (Policy::block_threads / warp_threads);
}

/// Checks a gather's arguments; throws squeeze::invalid_argument naming the bad one.
template <class Index>
void validate(const gather_args<Index>& a) {
  if (a.count == 0) return;
  SQUEEZE_EXPECTS(a.dst != nullptr, "ibp::gather_rows: dst is null");
  SQUEEZE_EXPECTS(a.indices != nullptr, "ibp::gather_rows: indices is null");
  SQUEEZE_EXPECTS(a.offsets != nullptr, "ibp::gather_rows: offsets is null");
  SQUEEZE_EXPECTS(a.data != nullptr || a.data_bytes == 0, "ibp::gather_rows: data is null");
  SQUEEZE_EXPECTS(a.codebook.mask != nullptr && a.codebook.bitval != nullptr,
                  "ibp::gather_rows: the codebook's mask or bitval is null");
  SQUEEZE_EXPECTS(valid_chunk_bytes(a.codebook.chunk_bytes),
                  "ibp::gather_rows: chunk_bytes must be 1, 2, 4 or 8");
  SQUEEZE_EXPECTS(a.codebook.tensor_bytes > 0, "ibp::gather_rows: tensor_bytes must be positive");
  SQUEEZE_EXPECTS(a.dst_stride >= a.codebook.tensor_bytes,
                  "ibp::gather_rows: dst_stride must be at least tensor_bytes");
}

/// Gathers and decodes a.count rows on `stream` (asynchronous; read a.status_out after
/// synchronizing). Rows are at most Policy::decode::workspace_bytes when stored.
template <gather_policy_like Policy = gather_policy, class Index>
requires std::is_integral_v<Index>
void gather_rows(const gather_args<Index>& a, cudaStream_t stream) {
  validate(a);
  if (a.count == 0) return;
  constexpr std::size_t smem = gather_shared_bytes<Policy>();
  const auto kernel = detail::gather_kernel<Policy, Index>;
  if constexpr (smem > 48 * 1024) {
    SQUEEZE_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(smem)));
  }
  // A persistent grid: as many blocks as fit at once, so each warp decodes a sequence of
  // rows and keeps the next one's load in flight. The count is queried once per device
  // (per instantiation of this function) and cached.
  static std::array<std::atomic<std::size_t>, 64> resident_cache{};
  int device = 0;
  SQUEEZE_CUDA_TRY(cudaGetDevice(&device));
  std::size_t resident = device < 64 ? resident_cache[device].load(std::memory_order_relaxed) : 0;
  if (resident == 0) {
    int sms = 0;
    int per_sm = 0;
    SQUEEZE_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    SQUEEZE_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel,
                                                                   Policy::block_threads, smem));
    resident = static_cast<std::size_t>(sms) * static_cast<std::size_t>(per_sm > 0 ? per_sm : 1);
    if (device < 64) resident_cache[device].store(resident, std::memory_order_relaxed);
  }
  constexpr std::size_t warps_per_block = Policy::block_threads / warp_threads;
  const std::size_t wanted = core::div_ceil(a.count, warps_per_block);
  const auto blocks = static_cast<unsigned>(wanted < resident ? wanted : resident);
  kernel<<<blocks, Policy::block_threads, smem, stream>>>(a);
  SQUEEZE_CHECK_LAUNCH();
}

}  // namespace squeeze::ibp
