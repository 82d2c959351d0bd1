// SPDX-License-Identifier: Apache-2.0
// squeeze/xfer/detail/realign.cuh: the engine behind every synchronous xfer copy.
//
// A warp reads the source as 16-byte granules: lane l of wave w loads granule 32w + l of
// the source rounded down to 16 bytes, so each warp-wide load instruction covers four
// 128-byte aligned segments (one PCIe read request or one DRAM sector group each)
// whatever the source alignment. Reads never leave the readable range (by default the
// copied range itself): a granule only partly inside the copy (at most the first and
// the last) and not wholly inside the readable range is read byte-exact by one extra
// warp instruction in which lanes 0-15 load the first granule's bytes and lanes 16-31
// the last's; shuffles hand each to the lane that owns it. (On an H200 that extra
// instruction costs 40 % of the rate of 64 B rows misaligned by 4 B, 15 % at 256 B,
// 5 % at 1 KiB: hence the wider readable range where the caller knows one.)
//
// The destination may have any other alignment: each lane builds one 16-byte aligned
// output vector from its own granule and its left neighbour's (a shuffle and four funnel
// shifts) and stores it whole; only the first and last vector are stored in pieces.
//
//   source positions (relative to the granule base; [begin, end) is the range):
//     granule:   |  g0  |  g1  |  g2  | ...
//   output vector o covers positions [16(o-1) + shift, 16o + shift):
//     bytes [shift, 16) of granule o-1 followed by bytes [0, shift) of granule o,
//   where shift = (begin - dst) mod 16 makes every output vector 16-byte aligned in dst.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "squeeze/core/arch.cuh"
#include "squeeze/core/config.hpp"
#include "squeeze/xfer/bounds.hpp"

namespace squeeze::xfer::detail {

inline constexpr std::size_t granule = granule_bytes;

/// Warp-uniform description of one copy.
struct copy_plan {
  const uint4* granules;  // source rounded down to 16 bytes
  std::uintptr_t out;     // address of output vector 0 (16-byte aligned)
  std::size_t begin;      // first source position, in [0, 16)
  std::size_t end;        // one past the last source position
  std::size_t count;      // granules overlapping [begin, end)
  unsigned shift;         // in [0, 16)
  bool head_partial;      // granule 0 is only partly inside the range
  bool tail_partial;      // granule count - 1 (count >= 2) is only partly inside
};

/// The plan of copying [src, src + n) to dst; edge granules that lie inside `readable`
/// are read whole, the others byte-exact.
SQUEEZE_DEVICE copy_plan make_plan(void* dst, const void* src, std::size_t n,
                                   readable_range readable) {
  const auto s = reinterpret_cast<std::uintptr_t>(src);
  const auto d = reinterpret_cast<std::uintptr_t>(dst);
  copy_plan p;
  p.begin = s & (granule - 1);
  p.granules = reinterpret_cast<const uint4*>(s - p.begin);
  p.end = p.begin + n;
  p.count = granules_touched(s, n);
  p.shift = static_cast<unsigned>((p.begin - (d & (granule - 1))) & (granule - 1));
  p.out = d - p.begin + p.shift - granule;
  const std::uintptr_t first = s - p.begin;
  const std::uintptr_t last = first + (p.count - 1) * granule;
  p.head_partial =
      p.count > 0 && (p.begin != 0 || p.end < granule) && !readable.holds_granule(first);
  p.tail_partial = p.count >= 2 && p.end % granule != 0 && !readable.holds_granule(last);
  return p;
}
SQUEEZE_DEVICE copy_plan make_plan(void* dst, const void* src, std::size_t n) {
  return make_plan(dst, src, n, readable_range::of(src, n));
}

/// Granule i of the plan when it lies wholly inside the range; zeros otherwise (no load
/// is issued: past the end, and for partial edge granules, which patch_edges fills).
SQUEEZE_DEVICE bool is_partial(const copy_plan& p, std::size_t i) {
  return (i == 0 && p.head_partial) || (i + 1 == p.count && p.tail_partial);
}
SQUEEZE_DEVICE uint4 load_granule(const copy_plan& p, std::size_t i) {
  return i < p.count && !is_partial(p, i) ? core::arch::load_global_cg(p.granules + i)
                                          : uint4{0, 0, 0, 0};
}

/// Which partial edge granules a read handles: all of them (an asynchronous load), or
/// those in one wave of granules [base, base + 32) (a synchronous copy).
struct edge_set {
  bool head;
  bool tail;
};
SQUEEZE_DEVICE edge_set all_edges(const copy_plan& p) {
  return {p.head_partial, p.tail_partial};
}
SQUEEZE_DEVICE edge_set edges_in_wave(const copy_plan& p, std::size_t base) {
  const std::size_t last = p.count - 1;
  return {p.head_partial && base == 0,
          p.tail_partial && last >= base && last < base + warp_threads};
}

inline constexpr std::size_t no_position = ~std::size_t{0};

/// Edge slot k in [0, 32): slots 0-15 are the bytes of granule 0 (when e.head), slots
/// 16-31 those of the last granule (when e.tail). Returns the source position the slot
/// reads, or no_position when the slot is off or its byte lies outside the range.
SQUEEZE_DEVICE std::size_t edge_position(const copy_plan& p, edge_set e, unsigned k) {
  const bool want = k < 16 ? e.head : e.tail;
  const std::size_t pos = (k < 16 ? 0 : p.count - 1) * granule + (k & 15u);
  return want && pos >= p.begin && pos < p.end ? pos : no_position;
}

/// The byte at source position pos of the plan.
SQUEEZE_DEVICE std::uint32_t load_byte(const copy_plan& p, std::size_t pos) {
  return __ldcg(reinterpret_cast<const unsigned char*>(p.granules) + pos);
}

/// Phase 1 of an exact edge read: this lane's edge byte of the wave at `base` (zero when
/// it has none). Issue it with the wave's other loads; consume it with patch_edges.
SQUEEZE_DEVICE std::uint32_t load_edge_byte(const copy_plan& p, std::size_t base) {
  const std::size_t pos = edge_position(p, edges_in_wave(p, base), core::arch::lane_id());
  return pos != no_position ? load_byte(p, pos) : 0u;
}

/// Phase 2: packs the wave's edge bytes into 16-byte vectors and gives each to the lane
/// that owns the granule (granule i is owned by lane i - base), replacing its `cur`.
SQUEEZE_DEVICE void patch_edges(const copy_plan& p, std::size_t base, std::uint32_t byte,
                                uint4& cur) {
  const auto [head, tail] = edges_in_wave(p, base);
  if (!head && !tail) return;  // warp-uniform
  const unsigned lane = core::arch::lane_id();
  // Lane 4j gathers the word made of slots 4j .. 4j+3.
  const std::uint32_t word = byte | (__shfl_down_sync(full_warp_mask, byte, 1) << 8) |
                             (__shfl_down_sync(full_warp_mask, byte, 2) << 16) |
                             (__shfl_down_sync(full_warp_mask, byte, 3) << 24);
  const bool owns_head = head && lane == 0;
  const int from = owns_head ? 0 : 16;
  const uint4 edge{
      __shfl_sync(full_warp_mask, word, from), __shfl_sync(full_warp_mask, word, from + 4),
      __shfl_sync(full_warp_mask, word, from + 8), __shfl_sync(full_warp_mask, word, from + 12)};
  if (owns_head || (tail && lane == p.count - 1 - base)) cur = edge;
}

/// Bytes [shift, shift + 16) of the 32 bytes lo:hi (lo at the lower address).
SQUEEZE_DEVICE uint4 funnel16(uint4 lo, uint4 hi, unsigned shift) {
  const unsigned r = (shift & 3u) * 8u;
  const auto f = [r](std::uint32_t a, std::uint32_t b) { return __funnelshift_r(a, b, r); };
  switch (shift >> 2) {  // warp-uniform: no divergence
    case 0: return {f(lo.x, lo.y), f(lo.y, lo.z), f(lo.z, lo.w), f(lo.w, hi.x)};
    case 1: return {f(lo.y, lo.z), f(lo.z, lo.w), f(lo.w, hi.x), f(hi.x, hi.y)};
    case 2: return {f(lo.z, lo.w), f(lo.w, hi.x), f(hi.x, hi.y), f(hi.y, hi.z)};
    default: return {f(lo.w, hi.x), f(hi.x, hi.y), f(hi.y, hi.z), f(hi.z, hi.w)};
  }
}

/// Stores bytes [first, last) of the 16-byte vector v to the aligned address base, in
/// naturally aligned pieces of 8, 4, 2 and 1 bytes.
SQUEEZE_DEVICE void store_partial(std::uintptr_t base, uint4 v, unsigned first, unsigned last) {
  const std::uint64_t lo = (std::uint64_t{v.y} << 32) | v.x;
  const std::uint64_t hi = (std::uint64_t{v.w} << 32) | v.z;
  for (unsigned i = first; i < last;) {
    const std::uint64_t half = i < 8 ? lo : hi;
    const std::uint64_t piece = half >> ((i & 7u) * 8u);
    if ((i & 7u) == 0 && i + 8 <= last) {
      *reinterpret_cast<std::uint64_t*>(base + i) = piece;
      i += 8;
    } else if ((i & 3u) == 0 && i + 4 <= last) {
      *reinterpret_cast<std::uint32_t*>(base + i) = static_cast<std::uint32_t>(piece);
      i += 4;
    } else if ((i & 1u) == 0 && i + 2 <= last) {
      *reinterpret_cast<std::uint16_t*>(base + i) = static_cast<std::uint16_t>(piece);
      i += 2;
    } else {
      *reinterpret_cast<std::uint8_t*>(base + i) = static_cast<std::uint8_t>(piece);
      i += 1;
    }
  }
}

/// Builds output vector o from granules o-1 (prev) and o (cur) and stores the part of it
/// that lies in the range.
SQUEEZE_DEVICE void emit(const copy_plan& p, std::size_t o, uint4 prev, uint4 cur) {
  const std::size_t vec_end = 16 * o + p.shift;  // the vector covers [vec_end - 16, vec_end)
  const std::size_t lo = vec_end > p.begin + granule ? vec_end - granule : p.begin;
  const std::size_t hi = vec_end < p.end ? vec_end : p.end;
  if (lo >= hi) return;
  const uint4 v = funnel16(prev, cur, p.shift);
  const std::uintptr_t base = p.out + 16 * o;
  // Offsets inside the vector: position x lands at byte x - (vec_end - 16).
  const unsigned first = static_cast<unsigned>(lo + granule - vec_end);
  const unsigned last = static_cast<unsigned>(hi + granule - vec_end);
  if (first == 0 && last == granule) {
    *reinterpret_cast<uint4*>(base) = v;
  } else {
    store_partial(base, v, first, last);
  }
}

/// Copies the plan: outputs 0 .. count, `Waves` waves of loads in flight per lane before
/// the first store. All 32 lanes.
template <int Waves>
SQUEEZE_DEVICE void copy_waves(const copy_plan& p) {
  const unsigned lane = core::arch::lane_id();
  uint4 carry{0, 0, 0, 0};  // the last granule of the previous wave
  for (std::size_t base = 0; base <= p.count; base += 32 * Waves) {
    uint4 cur[Waves];
    std::uint32_t edge[Waves];
#pragma unroll
    for (int w = 0; w < Waves; ++w) {
      cur[w] = load_granule(p, base + 32 * w + lane);
      edge[w] = load_edge_byte(p, base + 32 * w);
    }
#pragma unroll
    for (int w = 0; w < Waves; ++w) {
      patch_edges(p, base + 32 * w, edge[w], cur[w]);
      uint4 prev = core::arch::shfl_up(cur[w], 1);
      if (lane == 0) prev = carry;
      carry = core::arch::shfl(cur[w], 31);
      emit(p, base + 32 * w + lane, prev, cur[w]);
    }
  }
}

}  // namespace squeeze::xfer::detail
