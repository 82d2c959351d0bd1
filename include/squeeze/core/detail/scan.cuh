// SPDX-License-Identifier: Apache-2.0
// squeeze/core/detail/scan.cuh: a device-wide prefix sum of unsigned integers, ordered on a
// stream (IBP's row offsets, its wire codec's tile bases). Internal: families call it.
//
//   bytes = scan_workspace_bytes<In, Out>(n);              // host arithmetic, no CUDA call
//   inclusive_sum(ws, bytes, in, out, n, stream);          // out[i] = in[0] + ... + in[i]
//   exclusive_sum(ws, bytes, in, out, n, stream);          // out[i] = in[0] + ... + in[i - 1]
//
// In is a 32- or 64-bit unsigned integer, Out an unsigned integer at least as wide; sums are
// taken in Out (modulo 2^bits, as CUB's). in == out (in place) is allowed when In and Out
// have the same size; otherwise the two ranges must not overlap.
//
// How. A tile is block_threads x vectors_per_thread 16-byte vectors (default 512 x 4: 4096
// 64-bit or 8192 32-bit values). Each warp owns a contiguous stretch of the tile, as rows of
// 32 lanes x V values: V = 16 B / sizeof(In) when in and out are 16-byte aligned (each row
// is one coalesced 512-byte vector load per warp), V = 1 otherwise (coalesced scalar loads,
// rows of 128 or 256 bytes). A thread loads all its rows first, then each row is scanned by
// a warp scan (shuffles), and the warps' totals are combined through shared memory: one
// barrier a tile (the totals are double buffered).
//
//   n <= single_block_tiles tiles   one launch of one block, no workspace. The wire codec's
//                                   case (n = its tiles + 1: a few hundred to a few thousand):
//                                   one launch where CUB makes two.
//   larger n                        reduce, then scan: two launches of G = min(tiles, 1024)
//                                   blocks, each owning an equal run of consecutive tiles.
//                                   (1) each block sums its run into partials[G] (the
//                                   workspace: G x sizeof(Out), at most 8 KiB); (2) each block
//                                   sums partials[0, b) (at most 1023 values, two loads a
//                                   thread, from L2) for its offset, then scans its run tile
//                                   by tile, carrying the sum. Any n (2^40 and beyond).
//
// Costs: one block: n values read, n written. Reduce-then-scan: read twice, written once;
// no atomics, no memset, no allocation, no host synchronization. Registers (ptxas, sm_90):
// 40 for the scan of 64-bit values, 32 for the reduction: 3 and 4 blocks of 512 an SM. The
// tile, the grid cap and the single-block limit are not yet measured on a GPU (scan_policy
// says what to measure). Compile cost: nothing until used; no CUB header.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string>

#include "squeeze/core/config.hpp"
#include "squeeze/core/cuda_error.hpp"
#include "squeeze/core/error.hpp"

namespace squeeze::core::detail {

/// The prefix sum's tunables (pass a struct with the same members to change them).
struct scan_policy {
  /// Threads of every scan block (a multiple of 32, at most 1024).
  static constexpr int block_threads = 512;
  /// 16-byte vectors each thread loads per tile: 8 64-bit values, 16 32-bit values.
  static constexpr int vectors_per_thread = 4;
  /// Blocks of the reduce-then-scan path at most (so partials take at most 8 KiB and a
  /// block's offset at most two loads a thread); larger n gives each block more tiles.
  static constexpr unsigned max_blocks = 1024;
  /// n up to this many tiles runs as one block (one launch). One tile is the guess to beat:
  /// measure one block's time per tile against the gap between two dependent launches.
  static constexpr unsigned single_block_tiles = 1;
};

/// A policy with scan_policy's members.
template <class P>
concept scan_policy_like = requires {
  { P::block_threads } -> std::convertible_to<int>;
  { P::vectors_per_thread } -> std::convertible_to<int>;
  { P::max_blocks } -> std::convertible_to<unsigned>;
  { P::single_block_tiles } -> std::convertible_to<unsigned>;
}
&&(P::block_threads % warp_threads == 0 && P::block_threads >= warp_threads &&
   P::block_threads <= 1024 && P::vectors_per_thread > 0 && P::max_blocks > 0 &&
   P::single_block_tiles > 0);

/// What the scan sums: 32- or 64-bit unsigned values into an unsigned type at least as wide.
template <class In, class Out>
concept scan_types = std::unsigned_integral<In> && std::unsigned_integral<Out> &&
                     (sizeof(In) == 4 || sizeof(In) == 8) &&
                     (sizeof(Out) == 4 || sizeof(Out) == 8) && sizeof(Out) >= sizeof(In);

/// Values of In in one tile.
template <class In, class Policy = scan_policy>
inline constexpr std::uint64_t scan_tile_items =
    (16 / sizeof(In)) * std::uint64_t{Policy::block_threads} * Policy::vectors_per_thread;

/// N values of T loaded or stored as one access (16 bytes at most).
template <class T, int N>
struct alignas(sizeof(T) * N) scan_vector {
  T v[N];
};

/// Inclusive sum over the warp's lanes (every lane of the warp calls it).
template <class T>
SQUEEZE_DEVICE T warp_scan_inclusive(T v, unsigned lane) {
#pragma unroll
  for (unsigned d = 1; d < warp_threads; d *= 2) {
    const T up = __shfl_up_sync(full_warp_mask, v, d);
    if (lane >= d) v += up;
  }
  return v;
}

/// The sum over the warp's lanes, in every lane.
template <class T>
SQUEEZE_DEVICE T warp_scan_total(T v) {
#pragma unroll
  for (unsigned d = warp_threads / 2; d >= 1; d /= 2) v += __shfl_xor_sync(full_warp_mask, v, d);
  return v;
}

/// The sum over the block, in every thread; `sums` is shared [Threads / 32]. Call once per
/// `sums` (no barrier guards its reuse).
template <int Threads, class T>
SQUEEZE_DEVICE T block_scan_total(T v, T* sums) {
  constexpr unsigned warps = Threads / warp_threads;
  const unsigned lane = threadIdx.x % warp_threads;
  v = warp_scan_total(v);
  if (lane == 0) sums[threadIdx.x / warp_threads] = v;
  __syncthreads();
  return warp_scan_total(lane < warps ? sums[lane] : T{0});
}

/// One tile of the scan: its shape, and the block-wide load and scan. Vec: values a lane
/// takes per row (16 / sizeof(In) when in and out are 16-byte aligned, else 1).
template <class Policy, class In, class Out, int Vec>
struct scan_tile {
  static constexpr int threads = Policy::block_threads;
  static constexpr int warps = threads / warp_threads;
  static constexpr int per_thread = Policy::vectors_per_thread * static_cast<int>(16 / sizeof(In));
  static constexpr int rows = per_thread / Vec;
  static constexpr int row_items = warp_threads * Vec;
  static constexpr int warp_items = rows * row_items;
  static constexpr std::uint64_t items = std::uint64_t{warps} * warp_items;
  static_assert(Vec == 1 || Vec * sizeof(In) == 16, "a lane's row is one value or 16 bytes");
  static_assert(items == scan_tile_items<In, Policy>);

  /// This thread's first value of the tile at `base`: rows follow every row_items values.
  SQUEEZE_DEVICE static std::uint64_t first(std::uint64_t base) {
    return base + (threadIdx.x / warp_threads) * std::uint64_t{warp_items} +
           (threadIdx.x % warp_threads) * std::uint64_t{Vec};
  }

  /// x[j][v] = in[first + j * row_items + v], 0 at or past `end`. x: [rows][Vec].
  SQUEEZE_DEVICE static void load(const In* in, std::uint64_t base, std::uint64_t end,
                                  In (&x)[rows][Vec]) {
    const std::uint64_t at = first(base);
    if (base + items <= end) {
#pragma unroll
      for (int j = 0; j < rows; ++j) {
        if constexpr (Vec == 1) {
          x[j][0] = in[at + j * std::uint64_t{row_items}];
        } else {
          const auto v = *reinterpret_cast<const scan_vector<In, Vec>*>(
              in + at + j * std::uint64_t{row_items});
#pragma unroll
          for (int k = 0; k < Vec; ++k) x[j][k] = v.v[k];
        }
      }
      return;
    }
#pragma unroll
    for (int j = 0; j < rows; ++j) {
#pragma unroll
      for (int k = 0; k < Vec; ++k) {
        const std::uint64_t i = at + j * std::uint64_t{row_items} + k;
        x[j][k] = i < end ? in[i] : In{0};
      }
    }
  }

  /// Scans the tile at `base` (x, as load() left it) into out[base, min(base + items, end)),
  /// after `carry` (the sum of everything before the tile); returns the tile's sum, in every
  /// thread. Block-wide. totals: shared [2][warps]; parity: 0, 1, 0, ... on consecutive
  /// calls (one barrier a call).
  SQUEEZE_DEVICE static Out block_scan(const In (&x)[rows][Vec], Out* out, std::uint64_t base,
                                       std::uint64_t end, Out carry, bool inclusive,
                                       Out (&totals)[2][warps], unsigned parity) {
    const unsigned warp = threadIdx.x / warp_threads;
    const unsigned lane = threadIdx.x % warp_threads;
    // The warps' totals (a reduction each): this warp's offset in the tile, the tile's sum.
    Out mine = 0;
#pragma unroll
    for (int j = 0; j < rows; ++j) {
#pragma unroll
      for (int k = 0; k < Vec; ++k) mine += static_cast<Out>(x[j][k]);
    }
    const Out warp_total = warp_scan_total(mine);
    if (lane == 0) totals[parity][warp] = warp_total;
    __syncthreads();
    const Out upto = warp_scan_inclusive(lane < warps ? totals[parity][lane] : Out{0}, lane);
    const Out tile_total = __shfl_sync(full_warp_mask, upto, warps - 1);
    // Then row by row: a warp scan of the lanes' sums gives each value's prefix (rows are
    // scanned after the barrier, so that only x is live across it).
    Out row_start =
        carry + (__shfl_sync(full_warp_mask, upto, static_cast<int>(warp)) - warp_total);
    const std::uint64_t at = first(base);
    const bool whole = base + items <= end;
#pragma unroll
    for (int j = 0; j < rows; ++j) {
      Out s = 0;
#pragma unroll
      for (int k = 0; k < Vec; ++k) s += static_cast<Out>(x[j][k]);
      const Out upto_lane = warp_scan_inclusive(s, lane);
      Out acc = row_start + (upto_lane - s);
      row_start += __shfl_sync(full_warp_mask, upto_lane, warp_threads - 1);
      Out y[Vec];
#pragma unroll
      for (int k = 0; k < Vec; ++k) {
        const auto v = static_cast<Out>(x[j][k]);
        y[k] = acc + (inclusive ? v : Out{0});
        acc += v;
      }
      Out* row = out + at + j * std::uint64_t{row_items};
      if (whole) {
        store(row, y);
      } else {
#pragma unroll
        for (int k = 0; k < Vec; ++k) {
          if (at + j * std::uint64_t{row_items} + k < end) row[k] = y[k];
        }
      }
    }
    return tile_total;
  }

  /// Vec values to 16-byte aligned p (Vec > 1), in 16-byte stores.
  SQUEEZE_DEVICE static void store(Out* p, const Out (&y)[Vec]) {
    if constexpr (Vec == 1) {
      *p = y[0];
    } else {
      constexpr int per = static_cast<int>(16 / sizeof(Out));
#pragma unroll
      for (int k = 0; k < Vec; k += per) {
        scan_vector<Out, per> v;
#pragma unroll
        for (int i = 0; i < per; ++i) v.v[i] = y[k + i];
        *reinterpret_cast<scan_vector<Out, per>*>(p + k) = v;
      }
    }
  }
};

/// Reduce-then-scan, pass 1: partials[b] = the sum of block b's run of `tiles_per_block`
/// tiles (the last run ends at n).
template <class Policy, class In, class Out, int Vec>
SQUEEZE_KERNEL(Policy::block_threads)
void scan_reduce_kernel(const In* in, std::uint64_t n, std::uint64_t tiles_per_block,
                        Out* partials) {
  using tile = scan_tile<Policy, In, Out, Vec>;
  __shared__ Out sums[tile::warps];
  const std::uint64_t begin = blockIdx.x * tiles_per_block * tile::items;
  const std::uint64_t stop = begin + tiles_per_block * tile::items;
  const std::uint64_t end = stop < n ? stop : n;
  Out acc = 0;
  for (std::uint64_t base = begin; base < end; base += tile::items) {
    In x[tile::rows][Vec];
    tile::load(in, base, end, x);
#pragma unroll
    for (int j = 0; j < tile::rows; ++j) {
#pragma unroll
      for (int k = 0; k < Vec; ++k) acc += static_cast<Out>(x[j][k]);
    }
  }
  const Out total = block_scan_total<Policy::block_threads>(acc, sums);
  if (threadIdx.x == 0) partials[blockIdx.x] = total;
}

/// The scan proper: block b scans its run of `tiles_per_block` tiles after the sum of
/// partials[0, b) (none for a single block: then partials may be null).
template <class Policy, class In, class Out, int Vec>
SQUEEZE_KERNEL(Policy::block_threads)
void scan_tiles_kernel(const In* in, Out* out, std::uint64_t n, std::uint64_t tiles_per_block,
                       const Out* partials, bool inclusive) {
  using tile = scan_tile<Policy, In, Out, Vec>;
  __shared__ Out totals[2][tile::warps];
  __shared__ Out sums[tile::warps];
  Out carry = 0;
  if (blockIdx.x > 0) {  // block-uniform
    Out mine = 0;
    for (unsigned i = threadIdx.x; i < blockIdx.x; i += Policy::block_threads) mine += partials[i];
    carry = block_scan_total<Policy::block_threads>(mine, sums);
  }
  const std::uint64_t begin = blockIdx.x * tiles_per_block * tile::items;
  const std::uint64_t stop = begin + tiles_per_block * tile::items;
  const std::uint64_t end = stop < n ? stop : n;
  unsigned parity = 0;
  for (std::uint64_t base = begin; base < end; base += tile::items) {
    In x[tile::rows][Vec];
    tile::load(in, base, end, x);
    carry += tile::block_scan(x, out, base, end, carry, inclusive, totals, parity);
    parity ^= 1u;
  }
}

/// Bytes of device workspace the scan of n values needs (0 when one block does it): host
/// arithmetic only. Nondecreasing in n, at most Policy::max_blocks x sizeof(Out).
template <class In, class Out, scan_policy_like Policy = scan_policy>
requires scan_types<In, Out>
constexpr std::size_t scan_workspace_bytes(std::size_t n) noexcept {
  constexpr std::uint64_t tile = scan_tile_items<In, Policy>;
  const std::uint64_t tiles = n / tile + (n % tile != 0);
  if (tiles <= Policy::single_block_tiles) return 0;
  return static_cast<std::size_t>(std::min<std::uint64_t>(tiles, Policy::max_blocks)) * sizeof(Out);
}

template <class Policy, class In, class Out, int Vec>
void launch_scan(void* workspace, const In* in, Out* out, std::uint64_t n, bool inclusive,
                 cudaStream_t stream) {
  constexpr std::uint64_t tile = scan_tile_items<In, Policy>;
  const std::uint64_t tiles = n / tile + (n % tile != 0);
  if (tiles <= Policy::single_block_tiles) {
    scan_tiles_kernel<Policy, In, Out, Vec>
        <<<1, Policy::block_threads, 0, stream>>>(in, out, n, tiles, nullptr, inclusive);
    SQUEEZE_CHECK_LAUNCH();
    return;
  }
  // Equal runs of tiles: 10 tiles on a cap of 8 blocks run as 5 blocks of 2.
  const std::uint64_t cap = std::min<std::uint64_t>(tiles, Policy::max_blocks);
  const std::uint64_t per_block = tiles / cap + (tiles % cap != 0);
  const auto blocks = static_cast<unsigned>(tiles / per_block + (tiles % per_block != 0));
  auto* partials = static_cast<Out*>(workspace);
  scan_reduce_kernel<Policy, In, Out, Vec>
      <<<blocks, Policy::block_threads, 0, stream>>>(in, n, per_block, partials);
  SQUEEZE_CHECK_LAUNCH();
  scan_tiles_kernel<Policy, In, Out, Vec>
      <<<blocks, Policy::block_threads, 0, stream>>>(in, out, n, per_block, partials, inclusive);
  SQUEEZE_CHECK_LAUNCH();
}

template <class In, class Out, class Policy>
void run_scan(void* workspace, std::size_t workspace_bytes, const In* in, Out* out, std::size_t n,
              bool inclusive, cudaStream_t stream, const char* who) {
  if (n == 0) return;
  // (The messages are built only when a check fails: this runs on the wire codec's hot path.)
  SQUEEZE_EXPECTS(in != nullptr && out != nullptr,
                  std::string{"core::detail::"} + who + ": null input or output");
  const auto in_at = reinterpret_cast<std::uintptr_t>(in);
  const auto out_at = reinterpret_cast<std::uintptr_t>(out);
  const bool in_place = in_at == out_at && sizeof(In) == sizeof(Out);
  SQUEEZE_EXPECTS(
      in_place || in_at + n * sizeof(In) <= out_at || out_at + n * sizeof(Out) <= in_at,
      std::string{"core::detail::"} + who + ": in and out overlap without being the same values");
  const std::size_t needed = scan_workspace_bytes<In, Out, Policy>(n);
  SQUEEZE_EXPECTS(workspace_bytes >= needed && (needed == 0 || workspace != nullptr),
                  std::string{"core::detail::"} + who +
                      ": the workspace is smaller than scan_workspace_bytes(n) = " +
                      std::to_string(needed) + " bytes");
  SQUEEZE_EXPECTS(
      reinterpret_cast<std::uintptr_t>(workspace) % alignof(Out) == 0,
      std::string{"core::detail::"} + who + ": the workspace must be aligned for the output type");
  if ((in_at | out_at) % 16 == 0) {
    launch_scan<Policy, In, Out, static_cast<int>(16 / sizeof(In))>(workspace, in, out, n,
                                                                    inclusive, stream);
  } else {
    launch_scan<Policy, In, Out, 1>(workspace, in, out, n, inclusive, stream);
  }
}

/// out[i] = in[0] + ... + in[i] for i < n, ordered on `stream`; `workspace` is device memory
/// of at least scan_workspace_bytes<In, Out, Policy>(n) bytes (null when that is 0), used
/// until the scan is done on the stream. Throws squeeze::invalid_argument on a null or
/// overlapping range or a short workspace, squeeze::cuda_error if a launch fails.
template <class In, class Out, scan_policy_like Policy = scan_policy>
requires scan_types<In, Out>
void inclusive_sum(void* workspace, std::size_t workspace_bytes, const In* in, Out* out,
                   std::size_t n, cudaStream_t stream) {
  run_scan<In, Out, Policy>(workspace, workspace_bytes, in, out, n, true, stream, "inclusive_sum");
}

/// out[i] = in[0] + ... + in[i - 1] (out[0] = 0) for i < n; otherwise as inclusive_sum.
template <class In, class Out, scan_policy_like Policy = scan_policy>
requires scan_types<In, Out>
void exclusive_sum(void* workspace, std::size_t workspace_bytes, const In* in, Out* out,
                   std::size_t n, cudaStream_t stream) {
  run_scan<In, Out, Policy>(workspace, workspace_bytes, in, out, n, false, stream, "exclusive_sum");
}

}  // namespace squeeze::core::detail
