// SPDX-License-Identifier: Apache-2.0
// squeeze/ibp/detail/compress_kernels.cuh: the GPU compressor's kernels and their device
// helpers (bit-sliced per-position counters, the threshold sweep, stored sizes, the warp
// encoder). Internal: ibp/compress.cuh (and ibp/wire.cuh) launch them.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>
#include <vector>

#include "squeeze/core/arch.cuh"
#include "squeeze/core/bits.hpp"
#include "squeeze/core/buffer.hpp"
#include "squeeze/core/config.hpp"
#include "squeeze/core/cuda_error.hpp"
#include "squeeze/core/launch.hpp"
#include "squeeze/ibp/dataset.hpp"
#include "squeeze/ibp/decode.cuh"
#include "squeeze/ibp/format.hpp"
#include "squeeze/xfer/async.cuh"
#include "squeeze/xfer/bounds.hpp"
#include "squeeze/xfer/copy.cuh"

namespace squeeze::ibp {

namespace detail {

/// Rows up to this long are swept in one pass from shared memory (sweep_kernel).
inline constexpr std::uint32_t sweep_row_limit = 4096;
/// Codebooks one sweep pass measures at most.
inline constexpr std::uint32_t max_sweep_books = 64;

/// Where a column's counts go: the totals of the column's first `bytes` bytes at byte0 of
/// the row, counts[8 · byte0 + b] for bit b (global atomics).
struct column_totals {
  unsigned long long* counts;
  std::uint32_t byte0;
  unsigned bytes;
  SQUEEZE_DEVICE void operator()(unsigned b, std::uint32_t c) const {
    if (b < 8 * bytes)
      atomicAdd(counts + 8 * std::size_t{byte0} + b, static_cast<unsigned long long>(c));
  }
};

/// Per-bit-position counts of a stream of 32-bit words, bit-sliced: bit b of plane[k] is bit
/// k of position b's count. Sixteen words are added by a tree of carry-save adders (Harley
/// and Seal's popcount, kept per position: about 2 logic operations a word), single words
/// by a ripple through the planes; 32 per-position counters in registers cost 64 a word.
/// Holds up to `capacity` words; flush() adds the counts to a column's totals and clears.
struct bit_column_counter {
  static constexpr int planes = 16;
  static constexpr std::uint32_t capacity = (1u << planes) - 1;
  std::uint32_t plane[planes] = {};
  std::uint32_t held = 0;

  /// high:low = a + b + c, per bit position.
  SQUEEZE_DEVICE static void csa(std::uint32_t& high, std::uint32_t& low, std::uint32_t a,
                                 std::uint32_t b, std::uint32_t c) {
    const std::uint32_t u = a ^ b;
    high = (a & b) | (u & c);
    low = u ^ c;
  }
  /// Adds w at weight 2^from.
  SQUEEZE_DEVICE void ripple(std::uint32_t w, int from) {
#pragma unroll
    for (int k = 0; k < planes; ++k) {
      if (k < from) continue;
      const std::uint32_t carry = plane[k] & w;
      plane[k] ^= w;
      w = carry;
    }
  }
  /// Eight words into plane[0..2]; returns the carry of weight 8.
  SQUEEZE_DEVICE std::uint32_t add8(const std::uint32_t* w) {
    std::uint32_t twos_a, twos_b, fours_a, fours_b, eights;
    csa(twos_a, plane[0], plane[0], w[0], w[1]);
    csa(twos_b, plane[0], plane[0], w[2], w[3]);
    csa(fours_a, plane[1], plane[1], twos_a, twos_b);
    csa(twos_a, plane[0], plane[0], w[4], w[5]);
    csa(twos_b, plane[0], plane[0], w[6], w[7]);
    csa(fours_b, plane[1], plane[1], twos_a, twos_b);
    csa(eights, plane[2], plane[2], fours_a, fours_b);
    return eights;
  }
  SQUEEZE_DEVICE void add16(const std::uint32_t (&w)[16]) {
    const std::uint32_t eights_a = add8(w);
    const std::uint32_t eights_b = add8(w + 8);
    std::uint32_t sixteens;
    csa(sixteens, plane[3], plane[3], eights_a, eights_b);
    ripple(sixteens, 4);
    held += 16;
  }
  SQUEEZE_DEVICE void add(std::uint32_t w) {
    ripple(w, 0);
    held += 1;
  }
  /// Hands each nonzero count to sink(bit, count), and clears.
  template <class Sink>
  SQUEEZE_DEVICE void flush(const Sink& sink) {
    if (held == 0) return;
    std::uint32_t c[32] = {};
#pragma unroll
    for (int k = 0; k < planes; ++k) {
      if ((held >> k) == 0) break;  // no count has bit k
#pragma unroll
      for (unsigned b = 0; b < 32; ++b) c[b] |= ((plane[k] >> b) & 1u) << k;
    }
#pragma unroll
    for (unsigned b = 0; b < 32; ++b) {
      if (c[b] != 0) sink(b, c[b]);
    }
#pragma unroll
    for (int k = 0; k < planes; ++k) plane[k] = 0;
    held = 0;
  }
  /// Adds load(i) for i in [0, n), flushing to sink whenever it would overflow.
  template <class Load, class Sink>
  SQUEEZE_DEVICE void add_all(std::size_t n, Load&& load, const Sink& sink) {
    std::size_t i = 0;
    for (; i + 16 <= n; i += 16) {
      if (held > capacity - 16) flush(sink);
      std::uint32_t w[16];
#pragma unroll
      for (unsigned u = 0; u < 16; ++u) w[u] = load(i + u);
      add16(w);
    }
    for (; i < n; ++i) {
      if (held == capacity) flush(sink);
      add(load(i));
    }
  }
};

/// The bytes of the 4-byte column at byte0 that a row of row_bytes has (0 to 4).
SQUEEZE_HOST_DEVICE constexpr unsigned column_bytes(std::uint32_t byte0,
                                                    std::uint32_t row_bytes) noexcept {
  return byte0 >= row_bytes ? 0u : row_bytes - byte0 < 4 ? row_bytes - byte0 : 4u;
}

/// Counts the 4-byte column at byte0 of rows [begin, end) (one thread) into sink(bit, count).
template <class Sink>
SQUEEZE_DEVICE void count_column(const std::byte* rows, std::uint32_t row_bytes,
                                 std::uint32_t byte0, std::size_t begin, std::size_t end,
                                 const Sink& sink) {
  const unsigned bytes = column_bytes(byte0, row_bytes);
  const bool aligned =
      bytes == 4 && row_bytes % 4 == 0 && reinterpret_cast<std::uintptr_t>(rows) % 4 == 0;
  const std::byte* column_start = rows + begin * row_bytes + byte0;
  bit_column_counter counter;
  counter.add_all(
      end - begin,
      [&](std::size_t i) {
        const std::byte* p = column_start + i * row_bytes;
        return aligned ? __ldcg(reinterpret_cast<const unsigned*>(p))
                       : static_cast<std::uint32_t>(load_chunk(p, bytes));
      },
      sink);
  counter.flush(sink);
}

/// Counters of one 4-byte column of the rows, rows [first, first + count) of the slice.
/// (A template, like every kernel in a header: a plain __global__ function would be
/// defined again in each translation unit that includes this file.)
template <int BlockThreads>
SQUEEZE_KERNEL(BlockThreads)
void count_kernel(const std::byte* rows, std::size_t n, std::uint32_t row_bytes,
                  std::size_t rows_per_slice, unsigned long long* counts) {
  const std::uint32_t byte0 = 4 * (blockIdx.x * blockDim.x + threadIdx.x);  // its column
  const std::size_t first = std::size_t{blockIdx.y} * rows_per_slice;
  const std::size_t last = first + rows_per_slice < n ? first + rows_per_slice : n;
  if (byte0 >= row_bytes || first >= last) return;
  count_column(rows, row_bytes, byte0, first, last,
               column_totals{counts, byte0, column_bytes(byte0, row_bytes)});
}

/// count_kernel for rows of at most 4 · Columns bytes, Groups row groups a block: thread
/// (column c, group g) counts column c over the g-th share of the block's rows; the groups'
/// counts meet in shared memory and leave the block in one global atomic per bit position,
/// a warp's 32 atomics on 32 neighbouring counters (one column's bits). Thread by thread,
/// 32 atomics on counters 256 bytes apart cost 32 sectors each, and the block as many of
/// them as it has groups.
template <int Columns, int Groups>
SQUEEZE_KERNEL(Columns* Groups)
void count_grouped_kernel(const std::byte* rows, std::size_t n, std::uint32_t row_bytes,
                          std::size_t rows_per_slice, unsigned long long* counts) {
  constexpr int pitch = Columns + 1;  // [bit][column], padded: no bank conflicts either way
  __shared__ std::uint32_t block_counts[32 * pitch];
  for (int i = static_cast<int>(threadIdx.x); i < 32 * pitch; i += Columns * Groups) {
    block_counts[i] = 0;
  }
  __syncthreads();
  const unsigned column = threadIdx.x % Columns;
  const unsigned group = threadIdx.x / Columns;
  const std::uint32_t byte0 = 4 * column;
  const std::size_t first = std::size_t{blockIdx.x} * rows_per_slice;
  const std::size_t last = first + rows_per_slice < n ? first + rows_per_slice : n;
  const std::size_t share = first < last ? (last - first + Groups - 1) / Groups : 0;
  const std::size_t begin = first + group * share < last ? first + group * share : last;
  const std::size_t end = begin + share < last ? begin + share : last;
  if (byte0 < row_bytes && begin < end) {
    count_column(rows, row_bytes, byte0, begin, end, [&](unsigned b, std::uint32_t c) {
      atomicAdd(&block_counts[b * pitch + column], c);
    });
  }
  __syncthreads();
  for (int e = static_cast<int>(threadIdx.x); e < 32 * Columns; e += Columns * Groups) {
    const auto c = static_cast<std::uint32_t>(e / 32);
    const auto b = static_cast<unsigned>(e % 32);
    const std::uint32_t v = block_counts[b * pitch + c];
    if (v != 0) column_totals{counts, 4 * c, column_bytes(4 * c, row_bytes)}(b, v);
  }
}

/// Rows up to this long are counted through shared memory (count_staged_kernel): a block
/// covers every 4-byte column of such a row.
inline constexpr std::uint32_t count_staged_row_limit = 1024;
inline constexpr std::uint32_t count_stage_bytes = 16384;

/// count_kernel for rows of at most 1 KiB, all columns in one block: the block's rows come
/// in stages of up to 16 KiB through xfer::block_copy, whose reads are whole, aligned
/// segments however the rows sit (rows of 784 B start 16 B past a segment in turn; read
/// column by column they cost two requests a warp), then each thread counts its column from
/// shared memory. Mapped host memory, H200 (2026-11-25), Fashion-MNIST's 784-byte rows:
/// 36 GB/s direct, the aligned read of the same bytes 51 GB/s.
template <int BlockThreads>
SQUEEZE_KERNEL(BlockThreads)
void count_staged_kernel(const std::byte* rows, std::size_t n, std::uint32_t row_bytes,
                         std::size_t rows_per_slice, unsigned long long* counts) {
  __shared__ alignas(16) std::byte stage[count_stage_bytes];
  const std::uint32_t byte0 = 4 * threadIdx.x;  // this thread's 4-byte column
  const bool active = byte0 < row_bytes;
  const unsigned bytes = column_bytes(byte0, row_bytes);
  const bool aligned = row_bytes % 4 == 0;
  const std::size_t first = std::size_t{blockIdx.y} * rows_per_slice;
  const std::size_t last = first + rows_per_slice < n ? first + rows_per_slice : n;
  const std::uint32_t per_stage = count_stage_bytes / row_bytes;
  const column_totals totals{counts, byte0, bytes};
  bit_column_counter counter;
  for (std::size_t r0 = first; r0 < last; r0 += per_stage) {
    const auto m = static_cast<std::uint32_t>(last - r0 < per_stage ? last - r0 : per_stage);
    __syncthreads();  // the last stage is counted
    xfer::block_copy<BlockThreads>(stage, rows + r0 * row_bytes, std::size_t{m} * row_bytes);
    __syncthreads();
    if (!active) continue;
    counter.add_all(
        m,
        [&](std::size_t r) {
          const std::byte* p = stage + r * row_bytes + byte0;
          return aligned && bytes == 4 ? *reinterpret_cast<const std::uint32_t*>(p)
                                       : static_cast<std::uint32_t>(load_chunk(p, bytes));
        },
        totals);
  }
  if (active) counter.flush(totals);
}

/// This lane's 16 / C chunks of a row: participation bits and payload lengths. The row
/// is in global memory (read past L1: it is streamed), or in shared memory (Shared).
template <unsigned C, bool Shared = false>
struct lane_chunks {
  static constexpr unsigned per_lane = 16 / C;
  std::uint64_t x[per_lane];
  std::uint64_t free_mask[per_lane];
  std::uint32_t n[per_lane];
  std::uint32_t pbits = 0;
  std::uint32_t bits = 0;  // payload bits of all of them
  unsigned mine = 0;       // chunks this lane has in the row

  SQUEEZE_DEVICE lane_chunks(const std::byte* row, const codebook_ref& cb, std::uint32_t first) {
    const std::uint32_t k = cb.chunks();
    const std::uint32_t whole = cb.tensor_bytes / C;
    mine = first >= k ? 0u : (k - first < per_lane ? k - first : per_lane);
    // The lane's 16 bytes in one load when they are whole and aligned (a row in mapped
    // host memory is then read in 128-byte warp segments, not byte by byte).
    const std::size_t at = std::size_t{first} * C;
    const auto aligned = [](const std::byte* p) {
      return reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
    };
    const bool whole_lane = mine == per_lane && first + per_lane <= whole;
    const bool vector = whole_lane && aligned(row + at);
    // The codebook's 16 bytes in one load each too (a chunk at a time, the warp's loads
    // would span 512 bytes for 128 used).
    const bool vector_book = whole_lane && aligned(cb.mask + at) && aligned(cb.bitval + at);
    std::uint64_t half[2] = {0, 0}, mask_half[2] = {0, 0}, bitval_half[2] = {0, 0};
    const auto halves = [](const uint4& v, std::uint64_t(&h)[2]) {
      h[0] = (std::uint64_t{v.y} << 32) | v.x;
      h[1] = (std::uint64_t{v.w} << 32) | v.z;
    };
    if (vector) {
      halves(Shared ? *reinterpret_cast<const uint4*>(row + at)
                    : __ldcg(reinterpret_cast<const uint4*>(row + at)),
             half);
    }
    if (vector_book) {
      halves(__ldg(reinterpret_cast<const uint4*>(cb.mask + at)), mask_half);
      halves(__ldg(reinterpret_cast<const uint4*>(cb.bitval + at)), bitval_half);
    }
    const auto chunk_of = [](const std::uint64_t(&h)[2], unsigned u) {
      return C == 8
                 ? h[u]
                 : (h[(u * C) / 8] >> (8 * ((u * C) % 8))) & core::low_mask<std::uint64_t>(8 * C);
    };
#pragma unroll
    for (unsigned u = 0; u < per_lane; ++u) {
      const std::uint32_t i = first + u;
      const unsigned len = u < mine ? (i < whole ? C : cb.chunk_len(i)) : 0;
      if (vector) {
        x[u] = chunk_of(half, u);
      } else {
        x[u] = len == 0 ? 0 : load_chunk(row + std::size_t{i} * C, len);
      }
      const std::uint64_t mask = vector_book ? chunk_of(mask_half, u)
                                 : len == 0  ? 0
                                             : load_codebook_chunk(cb.mask, i, C, len);
      const std::uint64_t bitval = vector_book ? chunk_of(bitval_half, u)
                                   : len == 0  ? 0
                                               : load_codebook_chunk(cb.bitval, i, C, len);
      free_mask[u] = ~mask & core::low_mask<std::uint64_t>(8 * len);
      const bool p = len != 0 && (x[u] & mask) == bitval;
      n[u] =
          len == 0 ? 0u : (p ? static_cast<std::uint32_t>(core::popcount(free_mask[u])) : 8 * len);
      pbits |= (p ? 1u : 0u) << u;
      bits += n[u];
    }
  }
};

/// Bits of a 4-byte word of chunks (C <= 4) that participation saves: a participating
/// chunk stores 8C - popc(mask) bits instead of 8C, so the word saves popc(mask & equal),
/// `equal` marking the bytes of chunks whose masked bits equal Bitval.
template <unsigned C>
SQUEEZE_DEVICE std::uint32_t saved_bits(std::uint32_t x, std::uint32_t m, std::uint32_t b) {
  std::uint32_t equal;
  if constexpr (C == 1) {
    equal = __vcmpeq4(x & m, b);
  } else if constexpr (C == 2) {
    equal = __vcmpeq2(x & m, b);
  } else {
    equal = (x & m) == b ? ~0u : 0u;
  }
  return static_cast<std::uint32_t>(__popc(m & equal));
}

/// Payload bits of 16 whole, aligned bytes of a row (x) under the same bytes of a codebook
/// (m, b): 128 less what participation saves, by byte-parallel compares.
template <unsigned C>
SQUEEZE_DEVICE std::uint32_t payload_bits16(const uint4& x, const uint4& m, const uint4& b) {
  std::uint32_t saved = 0;
  if constexpr (C == 8) {
    const auto half = [](std::uint32_t x0, std::uint32_t x1, std::uint32_t m0, std::uint32_t m1,
                         std::uint32_t b0, std::uint32_t b1) {
      return (x0 & m0) == b0 && (x1 & m1) == b1
                 ? static_cast<std::uint32_t>(__popc(m0) + __popc(m1))
                 : 0u;
    };
    saved = half(x.x, x.y, m.x, m.y, b.x, b.y) + half(x.z, x.w, m.z, m.w, b.z, b.w);
  } else {
    saved = saved_bits<C>(x.x, m.x, b.x) + saved_bits<C>(x.y, m.y, b.y) +
            saved_bits<C>(x.z, m.z, b.z) + saved_bits<C>(x.w, m.w, b.w);
  }
  return 128 - saved;
}

/// Payload bits of this lane's 16 / C chunks from `first` (lane_chunks{row, cb,
/// first}.bits): when its 16 bytes of row, mask and bitval are whole and aligned, from
/// three 16-byte loads and byte-parallel compares (128 bits less what participation
/// saves), else chunk by chunk.
template <unsigned C, bool Shared>
SQUEEZE_DEVICE std::uint32_t lane_payload_bits(const std::byte* row, const codebook_ref& cb,
                                               std::uint32_t first) {
  constexpr unsigned per_lane = 16 / C;
  const std::size_t at = std::size_t{first} * C;
  const auto aligned = [](const std::byte* p) {
    return reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
  };
  if (first + per_lane > cb.tensor_bytes / C || !aligned(row + at) || !aligned(cb.mask + at) ||
      !aligned(cb.bitval + at)) {
    return lane_chunks<C, Shared>{row, cb, first}.bits;
  }
  const auto* xp = reinterpret_cast<const uint4*>(row + at);
  return payload_bits16<C>(Shared ? *xp : __ldcg(xp),
                           __ldg(reinterpret_cast<const uint4*>(cb.mask + at)),
                           __ldg(reinterpret_cast<const uint4*>(cb.bitval + at)));
}

/// Stored bytes of row r (warp per row).
template <unsigned C, bool Shared = false>
SQUEEZE_DEVICE std::uint32_t warp_stored_bytes(const std::byte* row, const codebook_ref& cb) {
  constexpr unsigned per_group = warp_threads * (16 / C);
  const unsigned lane = core::arch::lane_id();
  std::uint64_t bits = 0;
  for (std::uint32_t group = 0; group < cb.chunks(); group += per_group) {
    bits += lane_payload_bits<C, Shared>(row, cb, group + lane * (16 / C));
  }
#pragma unroll
  for (unsigned d = warp_threads / 2; d > 0; d /= 2)
    bits += __shfl_xor_sync(full_warp_mask, bits, d);
  return stored_bytes_for(bits + cb.chunks(), cb.tensor_bytes);
}

template <unsigned C>
SQUEEZE_KERNEL(256)
void sizes_kernel(const std::byte* rows, std::size_t n, codebook_ref cb, std::uint64_t* sizes,
                  unsigned long long* total) {
  const std::size_t warp = (std::size_t{blockIdx.x} * blockDim.x + threadIdx.x) / warp_threads;
  const std::size_t warps = std::size_t{gridDim.x} * blockDim.x / warp_threads;
  unsigned long long sum = 0;
  for (std::size_t r = warp; r < n; r += warps) {
    const std::uint32_t s = warp_stored_bytes<C>(rows + r * cb.tensor_bytes, cb);
    if (sizes != nullptr && core::arch::lane_id() == 0) sizes[r] = s;
    sum += s;
  }
  if (total != nullptr && core::arch::lane_id() == 0) atomicAdd(total, sum);
}

/// The threshold sweep's pass: each warp loads a row into shared memory once and measures
/// its stored size under every one of `books` codebooks ([books, L] masks and bitvals);
/// lane t % 32 keeps threshold t's running total, added to totals[t] at the end. One read
/// of the rows for the whole sweep, which matters when they are in mapped host memory.
template <unsigned C>
SQUEEZE_KERNEL(128)
void sweep_kernel(const std::byte* rows, std::size_t n, std::uint32_t row_bytes,
                  const std::byte* masks, const std::byte* bitvals, std::uint32_t books,
                  unsigned long long* totals) {
  constexpr std::size_t ws_bytes = xfer::window_bytes(sweep_row_limit) + 16;
  __shared__ alignas(16) std::byte ws[4][ws_bytes];
  const unsigned warp_in_block = threadIdx.x / warp_threads;
  const unsigned lane = core::arch::lane_id();
  const std::size_t warps = std::size_t{gridDim.x} * 4;
  const xfer::readable_range readable = xfer::readable_range::of(rows, n * row_bytes);
  unsigned long long acc[max_sweep_books / warp_threads] = {};
  for (std::size_t r = std::size_t{blockIdx.x} * 4 + warp_in_block; r < n; r += warps) {
    const unsigned off =
        xfer::warp_load(ws[warp_in_block], rows + r * row_bytes, row_bytes, readable).offset;
    const std::byte* row = ws[warp_in_block] + off;
    for (std::uint32_t t = 0; t < books; ++t) {
      const codebook_ref cb{masks + std::size_t{t} * row_bytes,
                            bitvals + std::size_t{t} * row_bytes, row_bytes, C};
      const std::uint32_t s = warp_stored_bytes<C, true>(row, cb);
#pragma unroll
      for (unsigned k = 0; k < max_sweep_books / warp_threads; ++k) {
        if (t == k * warp_threads + lane) acc[k] += s;
      }
    }
    __syncwarp();  // every lane is done with the row before the next load
  }
#pragma unroll
  for (unsigned k = 0; k < max_sweep_books / warp_threads; ++k) {
    const std::uint32_t t = k * warp_threads + lane;
    if (t < books && acc[k] != 0) atomicAdd(totals + t, acc[k]);
  }
}

/// ORs the low `count` (<= 64) bits of v into a zeroed bit stream of 32-bit words at bit
/// `at`, word by word with atomicOr: lanes' fields may share a word.
SQUEEZE_DEVICE void or_bits(std::uint32_t* words, std::uint64_t at, unsigned count,
                            std::uint64_t v) {
  while (count > 0) {
    const unsigned shift = static_cast<unsigned>(at % 32);
    const unsigned take = 32 - shift < count ? 32 - shift : count;
    const auto field = static_cast<std::uint32_t>(v & core::low_mask<std::uint64_t>(take));
    atomicOr(words + at / 32, field << shift);
    v = take >= 64 ? 0 : v >> take;
    at += take;
    count -= take;
  }
}

/// Writes a row's compressed stream (bits from 0) through put(at, count, v), which ORs
/// bits into a zeroed stream: participation bits and payloads, lanes in parallel.
template <unsigned C, class Put>
SQUEEZE_DEVICE void encode_stream(const std::byte* row, const codebook_ref& cb, Put&& put) {
  constexpr unsigned per_lane = 16 / C;
  constexpr unsigned per_group = warp_threads * per_lane;
  const unsigned lane = core::arch::lane_id();
  const std::uint32_t k = cb.chunks();
  std::uint64_t cursor = k;
  for (std::uint32_t group = 0; group < k; group += per_group) {
    const std::uint32_t first = group + lane * per_lane;
    const lane_chunks<C> lc{row, cb, first};
    std::uint32_t group_bits = 0;
    std::uint64_t at = cursor + warp_exclusive_sum(lc.bits, group_bits);
    if (lc.mine != 0) put(first, lc.mine, lc.pbits);
#pragma unroll
    for (unsigned u = 0; u < per_lane; ++u) {
      if (u >= lc.mine) break;
      const bool p = ((lc.pbits >> u) & 1u) != 0;
      put(at, lc.n[u],
          p ? static_cast<std::uint64_t>(extract_runs<chunk_word<C>>(
                  static_cast<chunk_word<C>>(lc.x[u]), static_cast<chunk_word<C>>(lc.free_mask[u])))
            : lc.x[u]);
      at += lc.n[u];
    }
    cursor += group_bits;
  }
}

/// out[0, bytes) = the bytes at `words` (shared memory, 4-byte aligned, readable one word
/// past `bytes`), a warp: whole aligned 4-byte stores inside out's span (each assembled
/// from two words by a funnel shift), single bytes at its unaligned edges. Bytes next to
/// the span belong to other rows and are never written.
SQUEEZE_DEVICE void warp_store_bytes(std::byte* out, const std::uint32_t* words,
                                     std::uint32_t bytes) {
  const unsigned lane = core::arch::lane_id();
  const auto* src = reinterpret_cast<const std::byte*>(words);
  const auto head = static_cast<std::uint32_t>((4 - reinterpret_cast<std::uintptr_t>(out) % 4) % 4);
  if (bytes < head + 4) {
    for (std::uint32_t b = lane; b < bytes; b += warp_threads) out[b] = src[b];
    return;
  }
  const std::uint32_t whole = (bytes - head) / 4;
  const std::uint32_t tail = head + 4 * whole;
  if (lane < head) out[lane] = src[lane];
  if (lane < bytes - tail) out[tail + lane] = src[tail + lane];
  auto* out_words = reinterpret_cast<std::uint32_t*>(out + head);
  const unsigned shift = 8 * (head % 4);
  for (std::uint32_t w = lane; w < whole; w += warp_threads) {
    const std::uint32_t at = (head + 4 * w) / 4;
    out_words[w] = __funnelshift_r(words[at], words[at + 1], shift);
  }
}

/// Encodes a row into out (its `stored` bytes) through `ws` (shared, >= stored + 4 bytes,
/// 4-byte aligned), then copies it out. Raw rows are copied through ws too (word loads where
/// the row is aligned).
template <unsigned C>
SQUEEZE_DEVICE void warp_encode(const std::byte* row, const codebook_ref& cb, std::byte* out,
                                std::uint32_t stored, std::uint32_t* ws) {
  const unsigned lane = core::arch::lane_id();
  const std::uint32_t words = (stored + 3) / 4;
  if (stored == cb.tensor_bytes) {
    const bool aligned = reinterpret_cast<std::uintptr_t>(row) % 4 == 0;
    for (std::uint32_t w = lane; w < words + 1; w += warp_threads) {
      const std::uint32_t b = 4 * w;
      ws[w] =
          b >= stored ? 0u
          : aligned && b + 4 <= stored
              ? __ldcg(reinterpret_cast<const unsigned*>(row + b))
              : static_cast<std::uint32_t>(load_chunk(row + b, stored - b < 4 ? stored - b : 4u));
    }
  } else {
    for (std::uint32_t w = lane; w < words + 1; w += warp_threads) ws[w] = 0;
    __syncwarp();
    encode_stream<C>(row, cb, [ws](std::uint64_t at, unsigned count, std::uint64_t v) {
      or_bits(ws, at, count, v);
    });
  }
  __syncwarp();
  warp_store_bytes(out, ws, stored);
  __syncwarp();
}

/// Encodes a row longer than the shared workspace straight into the zeroed output
/// (`out_words`, 4-byte aligned) at byte `begin`, with global atomicOr: neighbouring rows
/// share the words at their edges, and OR-ing disjoint bits keeps both. Raw rows too.
template <unsigned C>
SQUEEZE_DEVICE void warp_encode_global(const std::byte* row, const codebook_ref& cb,
                                       std::uint32_t* out_words, std::uint64_t begin,
                                       std::uint32_t stored) {
  const unsigned lane = core::arch::lane_id();
  const std::uint64_t base = 8 * begin;
  if (stored == cb.tensor_bytes) {
    for (std::uint32_t b = 4 * lane; b < stored; b += 4 * warp_threads) {
      const unsigned len = stored - b < 4 ? stored - b : 4;
      or_bits(out_words, base + 8 * std::uint64_t{b}, 8 * len, load_chunk(row + b, len));
    }
    return;
  }
  encode_stream<C>(row, cb, [&](std::uint64_t at, unsigned count, std::uint64_t v) {
    or_bits(out_words, base + at, count, v);
  });
}

template <unsigned C, int WorkspaceWords>
SQUEEZE_KERNEL(128)
void encode_kernel(const std::byte* rows, std::size_t n, codebook_ref cb,
                   const std::uint64_t* offsets, std::byte* out) {
  __shared__ std::uint32_t ws[4][WorkspaceWords];
  const unsigned warp_in_block = threadIdx.x / warp_threads;
  const std::size_t warp = std::size_t{blockIdx.x} * 4 + warp_in_block;
  const std::size_t warps = std::size_t{gridDim.x} * 4;
  for (std::size_t r = warp; r < n; r += warps) {
    const auto stored = static_cast<std::uint32_t>(offsets[r + 1] - offsets[r]);
    const std::byte* row = rows + r * cb.tensor_bytes;
    if (4 * (WorkspaceWords - 1) >= stored) {
      warp_encode<C>(row, cb, out + offsets[r], stored, ws[warp_in_block]);
    } else {
      warp_encode_global<C>(row, cb, reinterpret_cast<std::uint32_t*>(out), offsets[r], stored);
    }
  }
}

template <class Launch>
void dispatch_chunk(std::uint32_t chunk_bytes, Launch&& launch) {
  switch (chunk_bytes) {
    case 1: launch(std::integral_constant<unsigned, 1>{}); break;
    case 2: launch(std::integral_constant<unsigned, 2>{}); break;
    case 4: launch(std::integral_constant<unsigned, 4>{}); break;
    case 8: launch(std::integral_constant<unsigned, 8>{}); break;
    default: SQUEEZE_EXPECTS(false, "ibp: chunk_bytes must be 1, 2, 4 or 8");
  }
}

inline unsigned grid_for(std::size_t warps_wanted, std::size_t warps_per_block) {
  return core::grid_for(warps_wanted, warps_per_block, 65'536);
}

}  // namespace detail

}  // namespace squeeze::ibp
