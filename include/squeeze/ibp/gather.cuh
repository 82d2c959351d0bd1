// squeeze/ibp/gather.cuh: batched gather of IBP-compressed rows by index, from mapped host
// memory or device memory into a device tensor, decompressing on the way.
//
//   dst[i, :] = decode(row indices[i])     dst: [count, dst_stride B], rows of tensor_bytes
//
// The rows come from a compressed set (ibp/dataset.hpp) in either layout:
//   condensed   stored rows back to back in `data`, row r in [offsets[r], offsets[r+1]);
//               a row as long as tensor_bytes is raw
//   in place    row r in its slot data + r · tensor_bytes, raw when bit r of `raw` is
//               set; a compressed row's length is read from its participation bits
// and with one codebook, or one per cluster (ibp/cluster.hpp: `clusters`).
// One warp decodes one row at a time on a persistent grid, through one workspace. Before
// decoding a row, the warp issues the loads of its next row into registers
// (warp_decoder::prefetch: its first decode_policy::prefetch_waves · 512 bytes), so they
// are on their way while it decodes; they land in the workspace after the decode.
//
// Bad input is reported, never followed: an index >= rows -> status::out_of_bounds, the
// output row untouched; offsets that are not monotone, leave `data` or exceed
// tensor_bytes, or a cluster id >= clusters -> status::corrupt, the row untouched; a
// stream that does not decode -> status::truncated or status::corrupt. The first status
// is written to status_out.
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <atomic>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "squeeze/core/arch.cuh"
#include "squeeze/core/bits.hpp"
#include "squeeze/core/config.hpp"
#include "squeeze/core/cuda_error.hpp"
#include "squeeze/core/error.hpp"
#include "squeeze/core/report.cuh"
#include "squeeze/core/status.hpp"
#include "squeeze/ibp/dataset.hpp"
#include "squeeze/ibp/decode.cuh"
#include "squeeze/ibp/format.hpp"
#include "squeeze/xfer/async.cuh"
#include "squeeze/xfer/bounds.hpp"

namespace squeeze::ibp {

template <class Index>
struct gather_args {
  void* dst = nullptr;                     ///< [count, dst_stride] device memory
  std::size_t dst_stride = 0;              ///< bytes between output rows, >= tensor_bytes
  layout kind = layout::condensed;         ///< how `data` holds the rows
  const std::byte* data = nullptr;         ///< stored rows, device-accessible
  std::uint64_t data_bytes = 0;            ///< bytes in data (in place: rows · tensor_bytes)
  const std::uint64_t* offsets = nullptr;  ///< condensed: [rows + 1], device-accessible
  const std::uint32_t* raw = nullptr;      ///< in place: raw-row bitmask, [ceil(rows / 32)]
  std::uint64_t rows = 0;                  ///< rows in the set
  const Index* indices = nullptr;          ///< [count], device-accessible
  std::size_t count = 0;                   ///< rows to gather
  codebook_ref codebook;                   ///< mask / bitval in device-accessible memory
  cluster_ref clusters;                    ///< clusters > 0: per-row codebooks instead
  status* status_out = nullptr;            ///< optional: the first error; untouched on success
};

struct gather_policy {
  static constexpr int block_threads = 128;
  /// The kernel's occupancy bound (__launch_bounds__): 5 blocks of 4 warps per SM.
  static constexpr int min_blocks_per_sm = 5;
  using decode = decode_policy;
};

// (clang-format 14 mangles concept definitions)
// clang-format off
template <class P>
concept gather_policy_like = requires {
  { P::block_threads } -> std::convertible_to<int>;
  { P::min_blocks_per_sm } -> std::convertible_to<int>;
  typename P::decode;
} && (P::block_threads % warp_threads == 0) && decode_policy_like<typename P::decode>;
// clang-format on

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
template <class Policy, bool Streaming, unsigned Chunk, class Request, class Index>
SQUEEZE_DEVICE void gather_loop(const Request& req, const gather_args<Index>& out) {
  using decoder = warp_decoder<typename Policy::decode, Streaming, Chunk>;
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
  for (; i < out.count; i += warps) {
    __syncwarp();  // every lane is done with the workspace the row lands in
    if (cur.st == status::ok) dec.land(cur.row, staged);
    // Issue the next row's loads before decoding this one.
    const std::size_t next_i = i + warps;
    row_location next;
    if (next_i < out.count) {
      next = locate(req, next_i);
      if (next.st == status::ok) decoder::prefetch(next.row, staged);
    }
    status st = cur.st;
    if (st == status::ok) st = dec.decode_loaded(dst + i * out.dst_stride);
    if (core::arch::lane_id() == 0) core::report_status(out.status_out, st);
    cur = next;
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

}  // namespace detail

/// Dynamic shared memory a block of the gather kernel needs.
template <gather_policy_like Policy = gather_policy>
constexpr std::size_t gather_shared_bytes() {
  return sizeof(typename warp_decoder<typename Policy::decode>::TempStorage) *
         (Policy::block_threads / warp_threads);
}

/// The codebook rows of the set decode with (the first cluster's for clustered sets).
template <class Index>
codebook_ref row_codebook(const gather_args<Index>& a) {
  return a.clusters.clusters != 0 ? a.clusters.unchecked_book(0) : a.codebook;
}

/// Checks the set a gather reads (all but dst, indices and count); throws
/// squeeze::invalid_argument naming the bad field. `who` names the caller.
template <class Index>
void validate_set(const gather_args<Index>& a, const char* who) {
  if (a.clusters.clusters != 0) {
    const cluster_ref& c = a.clusters;
    SQUEEZE_EXPECTS(c.masks != nullptr && c.bitvals != nullptr,
                    std::string{who} + ": the clusters' masks or bitvals are null");
    SQUEEZE_EXPECTS(c.id_bits <= 32 && (c.id_bits == 0 || c.ids != nullptr),
                    std::string{who} + ": cluster ids are null or wider than 32 bits");
    SQUEEZE_EXPECTS(
        c.clusters == 1 || (c.id_bits > 0 && (std::uint64_t{1} << c.id_bits) >= c.clusters),
        std::string{who} + ": id_bits cannot name every cluster");
  } else {
    SQUEEZE_EXPECTS(a.codebook.mask != nullptr && a.codebook.bitval != nullptr,
                    std::string{who} + ": the codebook's mask or bitval is null");
  }
  const codebook_ref cb = row_codebook(a);
  SQUEEZE_EXPECTS(valid_chunk_bytes(cb.chunk_bytes),
                  std::string{who} + ": chunk_bytes must be 1, 2, 4 or 8");
  SQUEEZE_EXPECTS(cb.tensor_bytes > 0, std::string{who} + ": tensor_bytes must be positive");
  SQUEEZE_EXPECTS(a.data != nullptr || a.data_bytes == 0, std::string{who} + ": data is null");
  if (a.kind == layout::in_place) {
    SQUEEZE_EXPECTS(a.raw != nullptr || a.rows == 0,
                    std::string{who} + ": an in-place set needs its raw bitmask");
    SQUEEZE_EXPECTS(a.data_bytes / cb.tensor_bytes >= a.rows,
                    std::string{who} + ": an in-place set of " + std::to_string(a.rows) +
                        " rows of " + std::to_string(cb.tensor_bytes) + " B needs " +
                        std::to_string(a.rows * cb.tensor_bytes) + " data bytes, has " +
                        std::to_string(a.data_bytes));
  } else {
    SQUEEZE_EXPECTS(a.offsets != nullptr, std::string{who} + ": offsets is null");
  }
}

/// Checks a gather's arguments; throws squeeze::invalid_argument naming the bad one.
template <class Index>
void validate(const gather_args<Index>& a) {
  if (a.count == 0) return;
  SQUEEZE_EXPECTS(a.dst != nullptr, "ibp::gather_rows: dst is null");
  SQUEEZE_EXPECTS(a.indices != nullptr, "ibp::gather_rows: indices is null");
  validate_set(a, "ibp::gather_rows");
  SQUEEZE_EXPECTS(a.dst_stride >= row_codebook(a).tensor_bytes,
                  "ibp::gather_rows: dst_stride must be at least tensor_bytes");
}

namespace detail {

/// Launches Kernel(arg) on a persistent grid: as many blocks as fit at once (never more
/// than `count` rows need), so each warp decodes a sequence of rows and keeps the next
/// one's load in flight. The fit is queried once per device and instantiation, and cached.
template <class Policy, auto Kernel, class Arg>
void launch_persistent(const Arg& arg, std::size_t count, cudaStream_t stream) {
  constexpr std::size_t smem = gather_shared_bytes<Policy>();
  if constexpr (smem > 48 * 1024) {
    SQUEEZE_CUDA_TRY(cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(smem)));
  }
  static std::array<std::atomic<std::size_t>, 64> resident_cache{};
  int device = 0;
  SQUEEZE_CUDA_TRY(cudaGetDevice(&device));
  std::size_t resident = device < 64 ? resident_cache[device].load(std::memory_order_relaxed) : 0;
  if (resident == 0) {
    int sms = 0;
    int per_sm = 0;
    SQUEEZE_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    SQUEEZE_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, Kernel,
                                                                   Policy::block_threads, smem));
    resident = static_cast<std::size_t>(sms) * static_cast<std::size_t>(per_sm > 0 ? per_sm : 1);
    if (device < 64) resident_cache[device].store(resident, std::memory_order_relaxed);
  }
  constexpr std::size_t warps_per_block = Policy::block_threads / warp_threads;
  const std::size_t wanted = core::div_ceil(count, warps_per_block);
  const auto blocks = static_cast<unsigned>(wanted < resident ? wanted : resident);
  Kernel<<<blocks, Policy::block_threads, smem, stream>>>(arg);
  SQUEEZE_CHECK_LAUNCH();
}

}  // namespace detail

/// Gathers and decodes a.count rows on `stream` (asynchronous; read a.status_out after
/// synchronizing). Rows of any length: those longer than Policy::decode::workspace_bytes
/// are streamed through the workspace.
template <gather_policy_like Policy = gather_policy, class Index>
requires std::is_integral_v<Index>
void gather_rows(const gather_args<Index>& a, cudaStream_t stream) {
  validate(a);
  if (a.count == 0) return;
  detail::with_kernel_shape<Policy>(row_codebook(a), [&](auto streaming, auto chunk) {
    detail::launch_persistent<Policy, detail::gather_kernel<Policy, decltype(streaming)::value,
                                                            decltype(chunk)::value, Index>>(
        a, a.count, stream);
  });
}

}  // namespace squeeze::ibp
