// squeeze/ibp/compress.cuh: preprocessing and compression on the GPU.
//
//   counts = ibp::count_set_bits(rows, n, L, stream)        per-bit-position counters
//   sizes  = ibp::stored_sizes(rows, n, codebook, stream)   exact stored bytes per row
//   set    = ibp::compress_condensed(rows, n, codebook, stream)
//
// `rows` is [n, L] in any device-accessible memory: device memory, or mapped host memory
// for data sets larger than the GPU (read once per pass, 128 bytes per warp load). Every
// result is bit-identical to the host reference in ibp/dataset.hpp, which the tests check.
//
// Compression runs in two passes, as in the paper: exact stored sizes (warp per row,
// warp reduction), an exclusive scan for the offsets (CUB), then warp-per-row encoding:
// lanes own 16 / C consecutive chunks, a warp scan of their payload lengths gives each
// field's bit offset, and fields are OR-ed into a zeroed shared-memory copy of the row
// (fields of neighbouring lanes share words) before the warp writes the row out.
#pragma once

#include <cuda_runtime.h>
#include <cub/device/device_scan.cuh>

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
#include "squeeze/core/device.hpp"
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

inline unsigned grid_for(std::size_t warps_wanted, int warps_per_block) {
  const std::size_t blocks = core::div_ceil<std::size_t>(warps_wanted, warps_per_block);
  return static_cast<unsigned>(blocks < 65'536 ? blocks : 65'536);
}

}  // namespace detail

/// Longest stored row compress_condensed encodes in shared memory; longer ones are
/// encoded with atomics straight into the (zeroed) output.
inline constexpr std::uint32_t compress_workspace_bytes = 4096;

/// The tunables of IBP's preprocessing and compression (count_set_bits, stored_sizes,
/// sweep_threshold_on_gpu, compress_condensed take it as their template argument; pass a
/// struct with the same members to change them). Being templates, those functions compile
/// their kernels only in the translation units that call them.
struct compress_policy {
  /// Longest stored row encoded in shared memory (compress_workspace_bytes).
  static constexpr std::uint32_t workspace_bytes = compress_workspace_bytes;
  /// count_set_bits: row slices for about this many waves of 8 blocks per SM ...
  static constexpr std::size_t count_waves = 4;
  /// ... of at least this many rows each.
  static constexpr std::size_t count_min_slice_rows = 64;
};

/// A policy with compress_policy's members.
template <class P>
concept compress_policy_like = requires {
  { P::workspace_bytes } -> std::convertible_to<std::uint32_t>;
  { P::count_waves } -> std::convertible_to<std::size_t>;
  { P::count_min_slice_rows } -> std::convertible_to<std::size_t>;
}
&&P::workspace_bytes % 4 == 0 && P::workspace_bytes > 0 && P::count_waves > 0;

/// Per-bit-position counters of n rows of row_bytes: [8 * row_bytes], host vector (the
/// threshold sweep runs on the host over these few kilobytes).
template <compress_policy_like Policy = compress_policy>
std::vector<std::uint64_t> count_set_bits(const std::byte* rows, std::size_t n,
                                          std::uint32_t row_bytes, cudaStream_t stream) {
  SQUEEZE_EXPECTS(row_bytes > 0, "ibp::count_set_bits: row_bytes must be positive");
  SQUEEZE_EXPECTS(rows != nullptr || n == 0, "ibp::count_set_bits: rows is null");
  core::device_buffer<unsigned long long> counts{8 * std::size_t{row_bytes}, stream};
  SQUEEZE_CUDA_TRY(cudaMemsetAsync(counts.data(), 0, counts.bytes(), stream));
  if (n > 0) {
    const std::uint32_t columns = (row_bytes + 3) / 4;
    const dim3 block{256};
    // Enough row slices for ~count_waves waves of 8 blocks per SM, at least
    // count_min_slice_rows rows each.
    const int sms = core::current_sm_count();
    const std::size_t slices_wanted =
        std::max<std::size_t>(1, static_cast<std::size_t>(sms) * 8 * Policy::count_waves /
                                     core::div_ceil<std::uint32_t>(columns, 256));
    const std::size_t rows_per_slice =
        std::max<std::size_t>(Policy::count_min_slice_rows, core::div_ceil(n, slices_wanted));
    const dim3 grid{core::div_ceil<std::uint32_t>(columns, 256),
                    static_cast<unsigned>(core::div_ceil(n, rows_per_slice))};
    if (row_bytes <= detail::count_staged_row_limit) {
      detail::count_staged_kernel<256>
          <<<grid, block, 0, stream>>>(rows, n, row_bytes, rows_per_slice, counts.data());
    } else {
      detail::count_kernel<256>
          <<<grid, block, 0, stream>>>(rows, n, row_bytes, rows_per_slice, counts.data());
    }
    SQUEEZE_CHECK_LAUNCH();
  }
  std::vector<std::uint64_t> host(counts.size());
  SQUEEZE_CUDA_TRY(
      cudaMemcpyAsync(host.data(), counts.data(), counts.bytes(), cudaMemcpyDeviceToHost, stream));
  SQUEEZE_CUDA_TRY(cudaStreamSynchronize(stream));
  return host;
}

/// Stored bytes of each of n rows under a codebook whose mask and bitval are in device-
/// accessible memory, into sizes[n] (device); and/or their sum into *total (device).
template <compress_policy_like Policy = compress_policy>
void stored_sizes(const std::byte* rows, std::size_t n, const codebook_ref& cb,
                  std::uint64_t* sizes, unsigned long long* total, cudaStream_t stream) {
  SQUEEZE_EXPECTS(valid_chunk_bytes(cb.chunk_bytes),
                  "ibp::stored_sizes: chunk_bytes must be 1, 2, 4 or 8");
  if (n == 0) return;
  detail::dispatch_chunk(cb.chunk_bytes, [&](auto c) {
    detail::sizes_kernel<decltype(c)::value>
        <<<detail::grid_for(n, 8), 256, 0, stream>>>(rows, n, cb, sizes, total);
    SQUEEZE_CHECK_LAUNCH();
  });
}

/// The paper's threshold sweep on the GPU: for `steps` + 1 (<= 64) thresholds T evenly
/// spaced from 0.70 n to n, the codebooks make_codebook builds from `counts` are sent to
/// the GPU and the rows' total stored size under each measured there, in one pass over
/// the rows (rows up to 4 KiB: each warp stages a row in shared memory and measures it
/// under every codebook; longer rows or more thresholds: one pass per T); the codebook
/// with the smallest total is kept (ties: the larger T). Pass a sample of the rows (and
/// counts over the same sample) to preprocess faster still.
template <compress_policy_like Policy = compress_policy>
sweep_result sweep_threshold_on_gpu(const std::byte* rows, std::size_t n,
                                    std::span<const std::uint64_t> counts,
                                    std::uint32_t chunk_bytes, int steps, cudaStream_t stream) {
  const auto row_bytes = static_cast<std::uint32_t>(counts.size() / 8);
  SQUEEZE_EXPECTS(valid_chunk_bytes(chunk_bytes),
                  "ibp::sweep_threshold_on_gpu: chunk_bytes must be 1, 2, 4 or 8");
  return sweep_thresholds_batched(
      counts, n, chunk_bytes, steps, [&](std::span<const codebook> books) {
        const std::size_t k = books.size();
        std::vector<std::byte> masks(k * row_bytes), bitvals(k * row_bytes);
        for (std::size_t t = 0; t < k; ++t) {
          std::copy(books[t].mask.begin(), books[t].mask.end(), masks.begin() + t * row_bytes);
          std::copy(books[t].bitval.begin(), books[t].bitval.end(),
                    bitvals.begin() + t * row_bytes);
        }
        core::device_buffer<std::byte> d_masks{masks.size(), stream};
        core::device_buffer<std::byte> d_bitvals{bitvals.size(), stream};
        core::device_buffer<unsigned long long> d_totals{k, stream};
        d_masks.copy_from(std::span<const std::byte>{masks}, stream);
        d_bitvals.copy_from(std::span<const std::byte>{bitvals}, stream);
        d_totals.fill_bytes(0, stream);
        if (row_bytes <= detail::sweep_row_limit && k <= detail::max_sweep_books) {
          // One pass over the rows for every threshold.
          detail::dispatch_chunk(chunk_bytes, [&](auto c) {
            detail::sweep_kernel<decltype(c)::value><<<detail::grid_for(n, 4), 128, 0, stream>>>(
                rows, n, row_bytes, d_masks.data(), d_bitvals.data(), static_cast<std::uint32_t>(k),
                d_totals.data());
            SQUEEZE_CHECK_LAUNCH();
          });
        } else {  // longer rows: one pass per threshold
          for (std::size_t t = 0; t < k; ++t) {
            stored_sizes<Policy>(
                rows, n,
                codebook_ref{d_masks.data() + t * row_bytes, d_bitvals.data() + t * row_bytes,
                             row_bytes, chunk_bytes},
                nullptr, d_totals.data() + t, stream);
          }
        }
        std::vector<unsigned long long> totals(k);
        d_totals.copy_to(std::span<unsigned long long>{totals}, stream);
        SQUEEZE_CUDA_TRY(cudaStreamSynchronize(stream));
        return std::vector<std::uint64_t>(totals.begin(), totals.end());
      });
}

/// A codebook's Mask and Bitval copied to device memory; ref() is what kernels take.
class device_codebook {
 public:
  device_codebook() = default;
  /// Copies cb (validated) on `stream`; the copy is ordered before work on that stream.
  explicit device_codebook(const codebook& cb, cudaStream_t stream = nullptr)
      : mask_{validated(cb).tensor_bytes},
        bitval_{cb.tensor_bytes},
        tensor_bytes_{cb.tensor_bytes},
        chunk_bytes_{cb.chunk_bytes} {
    mask_.copy_from(std::span<const std::byte>{cb.mask}, stream);
    bitval_.copy_from(std::span<const std::byte>{cb.bitval}, stream);
  }
  [[nodiscard]] codebook_ref ref() const noexcept {
    return {mask_.data(), bitval_.data(), tensor_bytes_, chunk_bytes_};
  }

 private:
  static const codebook& validated(const codebook& cb) {
    validate(cb);  // before anything is allocated
    return cb;
  }
  core::device_buffer<std::byte> mask_;
  core::device_buffer<std::byte> bitval_;
  std::uint32_t tensor_bytes_ = 0;
  std::uint32_t chunk_bytes_ = 4;
};

/// A condensed set in device memory (data and offsets), as ibp::gather_rows reads it.
struct device_set {
  core::device_buffer<std::byte> data;         ///< data_bytes used, padded to whole words
  std::uint64_t data_bytes = 0;                ///< the stored rows' total
  core::device_buffer<std::uint64_t> offsets;  ///< [rows + 1]
  std::uint64_t rows = 0;
};

/// Compresses n rows (device-accessible) into a condensed set in device memory; the
/// codebook's mask and bitval must be device-accessible. Synchronizes once, to size the
/// output. Rows of any length (stored rows longer than compress_workspace_bytes are
/// encoded more slowly, with global atomics).
template <compress_policy_like Policy = compress_policy>
device_set compress_condensed(const std::byte* rows, std::size_t n, const codebook_ref& cb,
                              cudaStream_t stream) {
  SQUEEZE_EXPECTS(cb.tensor_bytes > 0, "ibp::compress_condensed: tensor_bytes must be positive");
  SQUEEZE_EXPECTS(rows != nullptr || n == 0, "ibp::compress_condensed: rows is null");
  device_set set;
  set.rows = n;
  set.offsets = core::device_buffer<std::uint64_t>{n + 1};
  SQUEEZE_CUDA_TRY(cudaMemsetAsync(set.offsets.data(), 0, set.offsets.bytes(), stream));
  if (n == 0) return set;
  stored_sizes<Policy>(rows, n, cb, set.offsets.data() + 1, nullptr, stream);
  std::size_t temp_bytes = 0;
  SQUEEZE_CUDA_TRY(cub::DeviceScan::InclusiveSum(nullptr, temp_bytes, set.offsets.data() + 1,
                                                 set.offsets.data() + 1, n, stream));
  core::device_buffer<std::byte> temp{temp_bytes, stream};
  SQUEEZE_CUDA_TRY(cub::DeviceScan::InclusiveSum(temp.data(), temp_bytes, set.offsets.data() + 1,
                                                 set.offsets.data() + 1, n, stream));
  std::uint64_t total = 0;
  SQUEEZE_CUDA_TRY(cudaMemcpyAsync(&total, set.offsets.data() + n, sizeof total,
                                   cudaMemcpyDeviceToHost, stream));
  SQUEEZE_CUDA_TRY(cudaStreamSynchronize(stream));
  // Padded to whole words for the atomics of long rows, which need the output zeroed.
  set.data_bytes = total;
  set.data = core::device_buffer<std::byte>{core::align_up<std::uint64_t>(total, 4)};
  if (cb.tensor_bytes > Policy::workspace_bytes) set.data.fill_bytes(0, stream);
  constexpr int workspace_words = static_cast<int>(Policy::workspace_bytes / 4 + 1);
  detail::dispatch_chunk(cb.chunk_bytes, [&](auto c) {
    detail::encode_kernel<decltype(c)::value, workspace_words>
        <<<detail::grid_for(n, 4), 128, 0, stream>>>(rows, n, cb, set.offsets.data(),
                                                     set.data.data());
    SQUEEZE_CHECK_LAUNCH();
  });
  return set;
}

/// A device set's copy on the host (for the host reference, files, or a cache's insert):
/// data, offsets and the raw-row bitmask (a row as long as tensor_bytes is raw).
/// Synchronizes `stream`.
inline compressed_set to_host(const device_set& set, std::uint32_t tensor_bytes,
                              cudaStream_t stream) {
  compressed_set out;
  out.kind = layout::condensed;
  out.rows = set.rows;
  out.data.resize(set.data_bytes);
  out.offsets.resize(set.rows + 1);
  set.data.copy_to(std::span<std::byte>{out.data}, stream);
  set.offsets.copy_to(std::span<std::uint64_t>{out.offsets}, stream);
  SQUEEZE_CUDA_TRY(cudaStreamSynchronize(stream));
  out.raw.assign((set.rows + 31) / 32, 0);
  for (std::uint64_t r = 0; r < set.rows; ++r) {
    if (out.offsets[r + 1] - out.offsets[r] == tensor_bytes) out.raw[r / 32] |= 1u << (r % 32);
  }
  return out;
}

}  // namespace squeeze::ibp
