// SPDX-License-Identifier: Apache-2.0
// squeeze/ibp/decode.cuh: the warp-level IBP decoder users call in their own kernels.
//
//   __shared__ ibp::warp_decoder<>::TempStorage ts[warps_per_block];
//   ibp::warp_decoder<> dec{ts[warp], codebook};         // codebook: ibp::codebook_ref
//   dec.load(src, stored_bytes, readable);              // a condensed row (size known), or
//   dec.load_in_place(slot, is_raw, readable);          // an in-place row (size from its bits)
//   xfer::async_commit();
//   ... issue another decoder's load, decode something else ...
//   xfer::warp_async_wait<0>();                          // (or <1> with one more in flight)
//   status st = dec.decode_loaded(dst);                  // dst: [tensor_bytes]
//
// or, to keep a row's bytes on their way while the warp decodes the row before (what
// ibp::gather_rows does; ordinary loads, which read mapped host memory at the link rate):
//
//   ibp::warp_decoder<>::stage next;                     // registers
//   ibp::warp_decoder<>::prefetch(row_b, next);          // row_b: ibp::row_source
//   st = dec.decode_loaded(dst_a);                       // row a, landed before
//   __syncwarp();
//   dec.land(row_b, next);                               // into the workspace, and the rest
//   st = dec.decode_loaded(dst_b);
//
// A row of `stored_bytes` bytes is raw when stored_bytes == tensor_bytes, compressed
// (ibp/format.hpp) when smaller. The decoder pulls the stored bytes into its shared
// workspace through xfer's loads (16-byte granules, 128-byte segments; synchronous by
// default, cp.async with decode_policy::async_loads: see the policy for why),
// then each lane decodes 16 / C consecutive chunks (16 output bytes) of each group: it reads
// its participation bits, the warp exclusive-scans the lanes' payload lengths to find
// every chunk's bit offset, and the lane deposits its payload bits into the free
// positions of its chunks' masks, run by run, and stores its 16 bytes at once.
//
// An in-place row (ibp/dataset.hpp) carries no size: load_in_place reads its participation
// bits first, sums the lengths they imply, then reads the rest of the stream (two
// dependent reads; prefetch() starts the first, land() does the second). A row longer than the
// workspace is streamed: the decoder reads it group by group through two windows of the workspace
// (participation bits, payload), so rows of any length decode with the same TempStorage (policies
// with workspace_bytes >= 1024; smaller workspaces report such rows as status::invalid_argument).
//
// Guarantees: decoding reads only the row's stored bytes (plus whole 16-byte granules
// inside `readable`) and writes only dst[0, tensor_bytes); a stream that ends early, has
// stray padding bits or is not shorter than a raw row returns status::truncated /
// status::corrupt, with dst left in an unspecified state (never beyond its bounds).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "squeeze/core/arch.cuh"
#include "squeeze/core/arch_policy.hpp"
#include "squeeze/core/bits.hpp"
#include "squeeze/core/config.hpp"
#include "squeeze/core/status.hpp"
#include "squeeze/ibp/format.hpp"
#include "squeeze/xfer/async.cuh"
#include "squeeze/xfer/bounds.hpp"
#include "squeeze/xfer/copy.cuh"

namespace squeeze::ibp {

/// The decoder's tuning on Hopper (sm_90).
struct decode_policy_sm90 {
  /// The architecture this entry is for (core/arch_policy.hpp).
  static constexpr int arch = 90;
  /// Largest stored row a decoder's workspace holds. 4 KiB rows at any savings.
  static constexpr std::uint32_t workspace_bytes = 4096;
  /// How load() fills the workspace: ordinary 16-byte loads (false) or cp.async (true).
  /// On an H200 gathering from mapped host memory, cp.async held the decoder to 0.50-0.55
  /// of the ideal rate at 9-50 % savings; ordinary loads reached 0.93-0.97
  /// (docs/RESULTS.md, ibp).
  static constexpr bool async_loads = false;
  /// prefetch() carries the first prefetch_waves · 512 bytes of a row in registers
  /// (4 · prefetch_waves of them a lane) while the warp decodes the row before; the rest
  /// is loaded when it lands. 2 covers rows stored in up to ~1 KiB.
  static constexpr unsigned prefetch_waves = 2;
};

/// The decoder's tuning on Ampere (sm_80 .. sm_89). Not measured on such a GPU (the project
/// has none); derived from sm_90's:
/// - workspace_bytes: 4096, as it decides which rows decode at all: one value everywhere
///   (checked below). 4 KiB a warp fits an A100's 164 KiB of shared memory per SM at the
///   gather's 20 warps per SM (80 KiB).
/// - async_loads: false. cp.async lost from mapped host memory on Hopper because its
///   copies complete in order behind PCIe's latency; Ampere's cp.async is the same
///   mechanism, so nothing suggests the other choice there.
/// - prefetch_waves: 2. The rows it is sized for (stored in up to ~1 KiB) are the same, and
///   an A100 has the same registers per SM; its lower PCIe bandwidth (~25 GB/s) needs
///   fewer bytes in flight, not more.
struct decode_policy_sm80 : decode_policy_sm90 {
  /// The architecture this entry is for (core/arch_policy.hpp).
  static constexpr int arch = 80;
};

/// The default: by the architecture compiled for (core/arch_policy.hpp).
struct decode_policy : core::arch_policy<decode_policy_sm80, decode_policy_sm90> {};

static_assert(decode_policy_sm80::workspace_bytes == decode_policy_sm90::workspace_bytes,
              "ibp::decode_policy: which rows decode must not depend on the architecture");

// (clang-format 14 mangles concept definitions)
// clang-format off
template <class P>
concept decode_policy_like = requires {
  { P::workspace_bytes } -> std::convertible_to<std::uint32_t>;
  { P::async_loads } -> std::convertible_to<bool>;
  { P::prefetch_waves } -> std::convertible_to<unsigned>;
} && (P::workspace_bytes >= 16) && (P::prefetch_waves >= 1);
// clang-format on

/// A stored row as a decoder reads it: where it lies, how it is stored, its codebook.
struct row_source {
  const std::byte* src = nullptr;  ///< the stored row (or its in-place slot)
  std::uint32_t stored = 0;        ///< bytes; unused for an in-place row (found from its bits)
  bool in_place = false;           ///< in an in-place slot of tensor_bytes bytes
  bool raw = false;                ///< in place only: the set's raw-row bit
  xfer::readable_range readable;   ///< holds [src, src + stored) (in place: the slot)
  codebook_ref codebook;           ///< the row's mask and bit values
};

namespace detail {

/// Exclusive prefix sum of v over the warp; `total` receives the sum of all lanes.
SQUEEZE_DEVICE std::uint32_t warp_exclusive_sum(std::uint32_t v, std::uint32_t& total) {
  const unsigned lane = core::arch::lane_id();
  std::uint32_t inclusive = v;
#pragma unroll
  for (unsigned d = 1; d < warp_threads; d *= 2) {
    const std::uint32_t up = __shfl_up_sync(full_warp_mask, inclusive, d);
    if (lane >= d) inclusive += up;
  }
  total = __shfl_sync(full_warp_mask, inclusive, warp_threads - 1);
  return inclusive - v;
}

/// pdep by runs: deposits the low bits of `bits`, in order, into the set positions of
/// `free_mask`, one contiguous run of set bits at a time (W: 32- or 64-bit words).
template <class W>
SQUEEZE_DEVICE W deposit_runs(W bits, W free_mask) {
  constexpr int width = core::word_bits<W>;
  W out = 0;
  while (free_mask != 0) {
    const int start = core::countr_zero(free_mask);
    const W shifted = free_mask >> start;
    const int run = shifted == ~W{0} ? width - start : core::countr_zero(static_cast<W>(~shifted));
    const W field = bits & core::low_mask<W>(static_cast<unsigned>(run));
    out |= field << start;
    bits = run >= width ? W{0} : bits >> run;
    free_mask &= ~(core::low_mask<W>(static_cast<unsigned>(run)) << start);
  }
  return out;
}

/// pext by runs: the bits of `x` at the set positions of `mask`, packed into the low bits in
/// order, one contiguous run of set bits at a time (deposit_runs' inverse).
template <class W>
SQUEEZE_DEVICE W extract_runs(W x, W mask) {
  constexpr int width = core::word_bits<W>;
  W out = 0;
  int at = 0;
  while (mask != 0) {
    const int start = core::countr_zero(mask);
    const W shifted = mask >> start;
    const int run = shifted == ~W{0} ? width - start : core::countr_zero(static_cast<W>(~shifted));
    const W field = (x >> start) & core::low_mask<W>(static_cast<unsigned>(run));
    out |= field << at;  // at < width: bits of mask remain
    at += run;
    mask &= ~(core::low_mask<W>(static_cast<unsigned>(run)) << start);
  }
  return out;
}

/// The word a chunk's bits are handled in: 32 bits for chunks of up to 4 bytes (half the
/// shifts, masks and bit counts of 64-bit words), 64 for 8-byte chunks.
template <unsigned C>
using chunk_word = std::conditional_t<(C <= 4), std::uint32_t, std::uint64_t>;

/// Chunk i of a codebook array in global memory: one aligned load of chunk_bytes when the
/// chunk is whole and aligned (the usual case), else byte by byte.
SQUEEZE_DEVICE std::uint64_t load_codebook_chunk(const std::byte* base, std::uint32_t i,
                                                 unsigned chunk_bytes, unsigned len) {
  const std::byte* p = base + std::size_t{i} * chunk_bytes;
  if (len == chunk_bytes && reinterpret_cast<std::uintptr_t>(p) % chunk_bytes == 0) {
    switch (chunk_bytes) {
      case 1: return __ldg(reinterpret_cast<const unsigned char*>(p));
      case 2: return __ldg(reinterpret_cast<const unsigned short*>(p));
      case 4: return __ldg(reinterpret_cast<const unsigned int*>(p));
      default: return __ldg(reinterpret_cast<const unsigned long long*>(p));
    }
  }
  return load_chunk(p, len);
}

/// Stores the low len bytes of x at p: one store when len is a power of two and p is
/// aligned to it, else byte by byte.
SQUEEZE_DEVICE void store_output_chunk(std::byte* p, unsigned len, std::uint64_t x) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  if (len == 8 && a % 8 == 0)
    *reinterpret_cast<std::uint64_t*>(p) = x;
  else if (len == 4 && a % 4 == 0)
    *reinterpret_cast<std::uint32_t*>(p) = static_cast<std::uint32_t>(x);
  else if (len == 2 && a % 2 == 0)
    *reinterpret_cast<std::uint16_t*>(p) = static_cast<std::uint16_t>(x);
  else
    store_chunk(p, len, x);
}

/// Bits [bit, bit + n) (n <= 64) of the byte stream that starts `offset` bytes into the
/// 16-byte aligned shared workspace `ws`: three aligned 32-bit reads and funnel shifts.
/// May read up to 11 bytes past the field (the workspace carries that padding).
SQUEEZE_DEVICE std::uint64_t read_workspace_bits(const std::byte* ws, unsigned offset,
                                                 std::uint64_t bit, unsigned n) {
  const std::uint64_t at = 8 * std::uint64_t{offset} + bit;
  const auto* words = reinterpret_cast<const std::uint32_t*>(ws) + at / 32;
  const unsigned shift = static_cast<unsigned>(at % 32);
  const std::uint64_t low = (std::uint64_t{words[1]} << 32) | words[0];
  std::uint64_t v = low >> shift;
  if (shift != 0) v |= std::uint64_t{words[2]} << (64 - shift);
  return v & core::low_mask<std::uint64_t>(n);
}

/// n <= 32 bits from bit `bit` of the workspace at byte `offset` (at most 2^32 bits in):
/// two word loads and a funnel shift. Reads the word after the one holding `bit`, which
/// read_workspace_bits may read too.
SQUEEZE_DEVICE std::uint32_t read_workspace_word(const std::byte* ws, unsigned offset,
                                                 std::uint32_t bit, unsigned n) {
  const std::uint32_t at = 8 * offset + bit;
  const auto* words = reinterpret_cast<const std::uint32_t*>(ws) + at / 32;
  return __funnelshift_r(words[0], words[1], at % 32) & core::low_mask<std::uint32_t>(n);
}

/// Where the decoder reads a stream that lies whole in the workspace, at byte `offset`.
struct resident_bits {
  const std::byte* ws;
  unsigned offset;

  SQUEEZE_DEVICE void participation(std::uint64_t, std::uint64_t) const {}
  SQUEEZE_DEVICE void payload(std::uint64_t, std::uint64_t) const {}
  SQUEEZE_DEVICE std::uint64_t read_payload(std::uint64_t bit, unsigned n) const {
    return read_workspace_bits(ws, offset, bit, n);
  }
  /// n <= 32 bits (the stream lies in the workspace, so its bit offsets fit 32 bits).
  SQUEEZE_DEVICE std::uint32_t read_participation_word(std::uint64_t bit, unsigned n) const {
    return read_workspace_word(ws, offset, static_cast<std::uint32_t>(bit), n);
  }
  SQUEEZE_DEVICE std::uint32_t read_payload_word(std::uint64_t bit, unsigned n) const {
    return read_workspace_word(ws, offset, static_cast<std::uint32_t>(bit), n);
  }
};

/// Where the decoder reads a stream longer than the workspace: two windows of it, one over
/// the participation bits and one over the payload, each refilled (warp-uniformly) when a
/// group needs bits outside it. Reads stay inside [src, src + stored) and `readable`.
struct streamed_bits {
  struct window {
    std::byte* at;           ///< 16-byte aligned shared memory
    std::uint32_t capacity;  ///< bytes one refill may load
    std::uint64_t first = 0;
    std::uint32_t bytes = 0;
    unsigned offset = 0;
  };
  const std::byte* src;
  std::uint64_t stored;
  xfer::readable_range readable;
  window p;
  window d;

  /// Makes stream bits [lo, hi) readable through w (hi <= 8 · stored; the span of one
  /// group fits any capacity a decoder sets up).
  SQUEEZE_DEVICE void ensure(window& w, std::uint64_t lo, std::uint64_t hi) const {
    const std::uint64_t first = lo / 8;
    const std::uint64_t end = (hi + 7) / 8;
    if (w.bytes != 0 && first >= w.first && end <= w.first + w.bytes) return;
    __syncwarp();  // every lane is done with the old window
    const std::uint64_t left = stored - first;
    w.first = first;
    w.bytes = static_cast<std::uint32_t>(left < w.capacity ? left : w.capacity);
    w.offset = xfer::warp_load(w.at, src + first, w.bytes, readable).offset;
  }
  SQUEEZE_DEVICE void participation(std::uint64_t lo, std::uint64_t hi) { ensure(p, lo, hi); }
  SQUEEZE_DEVICE void payload(std::uint64_t lo, std::uint64_t hi) { ensure(d, lo, hi); }
  SQUEEZE_DEVICE std::uint64_t read_payload(std::uint64_t bit, unsigned n) const {
    return read_workspace_bits(d.at, d.offset, bit - 8 * d.first, n);
  }
  /// n <= 32 bits (offsets inside a window fit 32 bits).
  SQUEEZE_DEVICE std::uint32_t read_participation_word(std::uint64_t bit, unsigned n) const {
    return read_workspace_word(p.at, p.offset, static_cast<std::uint32_t>(bit - 8 * p.first), n);
  }
  SQUEEZE_DEVICE std::uint32_t read_payload_word(std::uint64_t bit, unsigned n) const {
    return read_workspace_word(d.at, d.offset, static_cast<std::uint32_t>(bit - 8 * d.first), n);
  }
};

/// The 16 bytes of a codebook array (mask or bitval) at chunk `first` as two little-endian
/// words: one 16-byte load when the lane's chunks are whole and aligned (the usual case),
/// else chunk by chunk, zero past the lane's `mine` chunks.
template <unsigned C>
SQUEEZE_DEVICE void load_codebook_lane(const std::byte* base, const codebook_ref& cb,
                                       std::uint32_t first, unsigned mine,
                                       std::uint64_t (&out)[2]) {
  constexpr unsigned per_lane = 16 / C;
  const std::byte* p = base + std::size_t{first} * C;
  const std::uint32_t whole = cb.tensor_bytes / C;  // the last chunk may be partial
  if (mine == per_lane && first + per_lane <= whole &&
      reinterpret_cast<std::uintptr_t>(p) % 16 == 0) {
    const uint4 v = __ldg(reinterpret_cast<const uint4*>(p));
    out[0] = (std::uint64_t{v.y} << 32) | v.x;
    out[1] = (std::uint64_t{v.w} << 32) | v.z;
    return;
  }
  out[0] = out[1] = 0;
#pragma unroll
  for (unsigned u = 0; u < per_lane; ++u) {
    const std::uint32_t i = first + u;
    if (u < mine) {
      const std::uint64_t x = load_codebook_chunk(base, i, C, i < whole ? C : cb.chunk_len(i));
      if constexpr (C == 8) {
        out[u] = x;
      } else {
        out[(u * C) / 8] |= x << (8 * ((u * C) % 8));
      }
    }
  }
}

/// Chunk u's C bytes of 16 bytes held as two little-endian words.
template <unsigned C>
SQUEEZE_DEVICE std::uint64_t lane_chunk(const std::uint64_t (&w)[2], unsigned u) {
  if constexpr (C == 8) {
    return w[u];
  } else {
    return (w[(u * C) / 8] >> (8 * ((u * C) % 8))) & core::low_mask<std::uint64_t>(8 * C);
  }
}

/// This lane's share of one group of a compressed row: 16 / C consecutive chunks from
/// `first`, their free-bit masks (the complement of the lane's 16 mask bytes, zero past
/// the row) and payload lengths as the participation bits say. Four registers of masks
/// whatever C, so the decoder's registers do not grow with the chunk count.
template <unsigned C>
struct lane_group {
  static constexpr unsigned per_lane = 16 / C;
  static constexpr std::uint32_t per_group = warp_threads * per_lane;
  std::uint32_t first = 0;
  unsigned mine = 0;      ///< chunks of the row this lane has in the group
  unsigned last_len = C;  ///< bytes of the lane's last chunk (the row's last may be short)
  std::uint32_t pbits = 0;
  std::uint32_t bits = 0;  ///< payload bits of the lane's chunks
  std::uint64_t free[2];   ///< chunk u's free bits at bit 8 · C · u

  /// Bits must make participation bits [group, group + per_group) readable first.
  template <class Bits>
  SQUEEZE_DEVICE lane_group(const codebook_ref& cb, std::uint32_t group, const Bits& stream) {
    const std::uint32_t k = cb.chunks();
    first = group + core::arch::lane_id() * per_lane;
    mine = first >= k ? 0u : (k - first < per_lane ? k - first : per_lane);
    pbits = mine == 0 ? 0u : stream.read_participation_word(first, mine);  // mine <= 16
    load_codebook_lane<C>(cb.mask, cb, first, mine, free);
    if (mine != 0) last_len = cb.chunk_len(first + mine - 1);
    const unsigned bytes = mine == 0 ? 0u : (mine - 1) * C + last_len;  // the row's, of 16
    free[0] = ~free[0] & core::low_mask<std::uint64_t>(bytes >= 8 ? 64u : 8 * bytes);
    free[1] = ~free[1] & core::low_mask<std::uint64_t>(bytes > 8 ? 8 * (bytes - 8) : 0u);
#pragma unroll
    for (unsigned u = 0; u < per_lane; ++u) bits += n(u);
  }

  /// Free-bit mask of chunk u.
  SQUEEZE_DEVICE chunk_word<C> free_mask(unsigned u) const {
    return static_cast<chunk_word<C>>(lane_chunk<C>(free, u));
  }

  /// Payload bits of chunk u: its free bits when it participates, all its bits if not.
  SQUEEZE_DEVICE std::uint32_t n(unsigned u) const {
    if (u >= mine) return 0;
    if (((pbits >> u) & 1u) != 0) return static_cast<std::uint32_t>(core::popcount(free_mask(u)));
    return 8 * (u + 1 < mine ? C : last_len);
  }
};

/// Bits of a compressed row's stream (participation bits + payload, before padding), as
/// its participation bits say (read through `stream`).
template <unsigned C, class Bits>
SQUEEZE_DEVICE std::uint64_t stream_bits(const codebook_ref& cb, Bits& stream) {
  const std::uint32_t k = cb.chunks();
  std::uint64_t total = k;
  for (std::uint32_t group = 0; group < k; group += lane_group<C>::per_group) {
    const std::uint32_t end =
        k - group < lane_group<C>::per_group ? k : group + lane_group<C>::per_group;
    stream.participation(group, end);
    total += __reduce_add_sync(full_warp_mask, lane_group<C>{cb, group, stream}.bits);
  }
  return total;
}

/// Decodes a compressed stream of `stored` bytes read through `stream` into dst.
template <unsigned C, class Bits>
SQUEEZE_DEVICE status decode_groups(const codebook_ref& cb, std::byte* dst, std::uint32_t stored,
                                    Bits& stream) {
  using lanes = lane_group<C>;
  constexpr unsigned per_lane = lanes::per_lane;
  const std::uint32_t k = cb.chunks();
  const std::uint64_t have = 8 * std::uint64_t{stored};
  if (have < k) return status::truncated;
  const std::uint32_t whole = cb.tensor_bytes / C;
  std::uint64_t cursor = k;  // bit offset of the next group's payload
  for (std::uint32_t group = 0; group < k; group += lanes::per_group) {
    stream.participation(group, k - group < lanes::per_group ? k : group + lanes::per_group);
    const lanes lg{cb, group, stream};
    std::uint32_t group_bits = 0;
    std::uint64_t at = cursor + warp_exclusive_sum(lg.bits, group_bits);
    if (cursor + group_bits > have) return status::truncated;  // warp-uniform
    stream.payload(cursor, cursor + group_bits);
    std::uint64_t bitval[2];  // the lane's 16 bitval bytes
    load_codebook_lane<C>(cb.bitval, cb, lg.first, lg.mine, bitval);
    std::uint64_t out[2] = {0, 0};  // this lane's 16 output bytes
#pragma unroll
    for (unsigned u = 0; u < per_lane; ++u) {
      using word = chunk_word<C>;
      const bool p = ((lg.pbits >> u) & 1u) != 0;
      const std::uint32_t n = lg.n(u);
      word payload;
      if constexpr (C <= 4) {
        payload = stream.read_payload_word(at, n);
      } else {
        payload = stream.read_payload(at, n);
      }
      at += n;
      word x = payload;  // a chunk that does not participate is stored whole
      if (u >= lg.mine) {
        x = 0;
      } else if (p) {
        x = static_cast<word>(lane_chunk<C>(bitval, u)) |
            deposit_runs<word>(payload, lg.free_mask(u));
      }
      if constexpr (C == 8) {
        out[u] = x;
      } else {
        out[(u * C) / 8] |= std::uint64_t{x} << (8 * ((u * C) % 8));
      }
    }
    std::byte* row_out = dst + std::size_t{lg.first} * C;
    const bool whole_lane = lg.mine == per_lane && lg.first + per_lane <= whole;
    if (whole_lane && reinterpret_cast<std::uintptr_t>(row_out) % 16 == 0) {
      *reinterpret_cast<uint4*>(row_out) =
          uint4{static_cast<std::uint32_t>(out[0]), static_cast<std::uint32_t>(out[0] >> 32),
                static_cast<std::uint32_t>(out[1]), static_cast<std::uint32_t>(out[1] >> 32)};
    } else {
#pragma unroll
      for (unsigned u = 0; u < per_lane; ++u) {
        if (u >= lg.mine) break;
        const std::uint32_t i = lg.first + u;
        const unsigned len = i < whole ? C : cb.chunk_len(i);
        const std::uint64_t x =
            (out[(u * C) / 8] >> (8 * ((u * C) % 8))) & core::low_mask<std::uint64_t>(8 * C);
        store_output_chunk(row_out + u * C, len, x);
      }
    }
    cursor += group_bits;
  }
  // The stream must end in this row's last byte, padded with zero bits.
  if ((cursor + 7) / 8 != stored) return status::corrupt;
  const auto pad = static_cast<unsigned>((8 - cursor % 8) % 8);
  if (pad != 0) {
    stream.payload(cursor, cursor + pad);
    if (stream.read_payload(cursor, pad) != 0) return status::corrupt;
  }
  return status::ok;
}

/// Calls f(std::integral_constant<unsigned, C>) for the codebook's chunk size C. Only != 0
/// compiles the call for C == Only alone (other sizes: status::invalid_argument).
template <unsigned Only = 0, class F>
SQUEEZE_DEVICE status with_chunk(std::uint32_t chunk_bytes, F&& f) {
  if constexpr (Only != 0) {
    return chunk_bytes == Only ? f(std::integral_constant<unsigned, Only>{})
                               : status::invalid_argument;
  } else {
    switch (chunk_bytes) {
      case 1: return f(std::integral_constant<unsigned, 1>{});
      case 2: return f(std::integral_constant<unsigned, 2>{});
      case 4: return f(std::integral_constant<unsigned, 4>{});
      case 8: return f(std::integral_constant<unsigned, 8>{});
      default: return status::invalid_argument;
    }
  }
}

}  // namespace detail

/// Decodes IBP rows, one warp per row, through a shared-memory workspace. `Streaming`
/// false leaves out the path for rows longer than the workspace (they are reported):
/// a kernel whose rows all fit saves the registers that path needs. `ChunkBytes` 0
/// decodes every chunk size (chosen per row at run time); 1, 2, 4 or 8 compiles that
/// size's decoder alone (rows of other sizes are reported as status::invalid_argument),
/// which saves registers too: a kernel with all four spilled its prefetched rows.
template <decode_policy_like Policy = decode_policy,
          bool Streaming = (Policy::workspace_bytes >= 1024), unsigned ChunkBytes = 0>
class warp_decoder {
  static_assert(ChunkBytes == 0 || valid_chunk_bytes(ChunkBytes),
                "warp_decoder: ChunkBytes must be 0 (any), 1, 2, 4 or 8");
  static constexpr std::size_t storage_bytes = xfer::window_bytes(Policy::workspace_bytes) + 16;

 public:
  /// Whether rows longer than the workspace are streamed through it (else reported).
  static constexpr bool streams = Streaming && Policy::workspace_bytes >= 1024;

  /// The decoder's shared memory, placed by the caller (CUB's idiom): one per warp.
  struct TempStorage {
    /// The row's window, plus 16 bytes that bit-field reads may touch past its end.
    alignas(16) std::byte workspace[storage_bytes];
  };

  /// A decoder of rows under `codebook` (a row_source may name its own), over `storage`.
  SQUEEZE_DEVICE warp_decoder(TempStorage& storage, codebook_ref codebook)
      : storage_{storage}, cb_{codebook} {}

  /// Decodes the next rows with another codebook (clustered sets: ibp/cluster.hpp).
  SQUEEZE_DEVICE void rebind(codebook_ref codebook) { cb_ = codebook; }

  /// Stored bytes of the row last loaded (found from its bits by load_in_place).
  SQUEEZE_DEVICE std::uint32_t stored_bytes() const { return stored_; }

  /// Loads a stored row of `stored` bytes at src (any device-accessible memory; whole
  /// 16-byte granules inside `readable` may be read): synchronously, or, with
  /// Policy::async_loads, only starts it (the caller commits and waits). A row longer
  /// than the workspace is not loaded here: decode_loaded streams it.
  SQUEEZE_DEVICE void load(const std::byte* src, std::uint32_t stored,
                           xfer::readable_range readable) {
    begin(src, stored);
    if (stored == 0 || stored > Policy::workspace_bytes) return;
    if constexpr (Policy::async_loads) {
      offset_ = xfer::warp_load_async(storage_.workspace, src, stored, readable).offset;
    } else {
      offset_ = xfer::warp_load(storage_.workspace, src, stored, readable).offset;
    }
  }

  /// Loads the row in the in-place slot at src (tensor_bytes long; `raw` from the set's
  /// raw-row bitmask), synchronously: its participation bits, then the rest of the stream
  /// they describe. A stream that cannot fit its slot is reported by decode_loaded.
  SQUEEZE_DEVICE void load_in_place(const std::byte* src, bool raw, xfer::readable_range readable) {
    if (raw) return load(src, cb_.tensor_bytes, readable);
    load_in_place_compressed(src, readable);
  }

  /// Registers that carry a prefetched row's first Policy::prefetch_waves · 512 bytes
  /// (a local of the caller, so they stay in registers).
  using stage = xfer::warp_staged_load<Policy::prefetch_waves>;

  /// Starts loading `row` into `s` without touching any workspace, so the row loaded
  /// before can still be decoded: the first Policy::prefetch_waves · 512 bytes of its
  /// stored bytes (an in-place compressed row: of its participation bits) travel in
  /// registers until land(row, s). Ordinary loads, whatever Policy::async_loads says.
  SQUEEZE_DEVICE static void prefetch(const row_source& row, stage& s) {
    const std::uint32_t n = staged_bytes(row);
    if (n != 0) s.issue(row.src, n, row.readable);
  }

  /// Lands the row prefetch(row, s) started in the workspace and loads the rest of it,
  /// once every lane is done with the row before (call __syncwarp() first). The row is
  /// then the loaded one, decoded with row.codebook by decode_loaded.
  SQUEEZE_DEVICE void land(const row_source& row, const stage& s) {
    cb_ = row.codebook;
    const std::uint32_t n = staged_bytes(row);
    if (row.in_place && !row.raw) {
      if (n == 0) return load_in_place_compressed(row.src, row.readable);
      begin(row.src, 0);
      offset_ = s.land(storage_.workspace, row.src, n, row.readable).offset;
      return finish_in_place(row.src, row.readable);
    }
    begin(row.src, row.in_place ? cb_.tensor_bytes : row.stored);
    if (n != 0) offset_ = s.land(storage_.workspace, row.src, n, row.readable).offset;
  }

  /// Decodes the row whose load completed (the caller waited) into dst[0, tensor_bytes).
  SQUEEZE_DEVICE status decode_loaded(std::byte* dst) const {
    if (load_status_ != status::ok) return load_status_;
    if (stored_ == 0 || stored_ > cb_.tensor_bytes) return status::invalid_argument;
    const bool raw = stored_ == cb_.tensor_bytes;
    if (stored_ > Policy::workspace_bytes) {
      if constexpr (streams) {
        return decode_streamed(dst);
      } else {
        return status::invalid_argument;  // (no call: it would cost the caller registers)
      }
    }
    if (raw) return copy_raw(dst);
    detail::resident_bits stream{storage_.workspace, offset_};
    return detail::with_chunk<ChunkBytes>(cb_.chunk_bytes, [&](auto c) {
      return detail::decode_groups<decltype(c)::value>(cb_, dst, stored_, stream);
    });
  }

  /// load + commit + wait + decode_loaded, for one row at a time.
  SQUEEZE_DEVICE status decode(std::byte* dst, const std::byte* src, std::uint32_t stored,
                               xfer::readable_range readable) {
    load(src, stored, readable);
    xfer::async_commit();
    xfer::warp_async_wait<0>();
    return decode_loaded(dst);
  }

 private:
  // The streamed path stays out of line, so its registers do not weigh on the common one
  // (the gather's occupancy depends on it). The in-place paths are inlined: a call makes
  // the caller save what is live across it, a prefetched row included, on the stack.

  /// Decodes a row longer than the workspace, streaming it (or reports it).
  __device__ __noinline__ status decode_streamed(std::byte* dst) const {
    if constexpr (streams) {
      if (stored_ == cb_.tensor_bytes) {
        xfer::warp_copy(dst, src_, stored_);
        return status::ok;
      }
      detail::streamed_bits stream = streamed(stored_);
      return detail::with_chunk<ChunkBytes>(cb_.chunk_bytes, [&](auto c) {
        return detail::decode_groups<decltype(c)::value>(cb_, dst, stored_, stream);
      });
    } else {
      return status::invalid_argument;
    }
  }

  /// load_in_place's work for a compressed row.
  __device__ __forceinline__ void load_in_place_compressed(const std::byte* src,
                                                           xfer::readable_range readable) {
    begin(src, 0);
    const std::uint32_t prefix = (cb_.chunks() + 7) / 8;
    if (prefix >= cb_.tensor_bytes) {  // a row this short cannot be stored compressed
      load_status_ = status::corrupt;
      return;
    }
    if (prefix <= Policy::workspace_bytes) {
      offset_ = xfer::warp_load(storage_.workspace, src, prefix, readable).offset;
    }
    finish_in_place(src, readable);
  }

  /// The rest of an in-place compressed row's load, once its participation bits are in
  /// the workspace at offset_ (when they fit it; else they are streamed): the stream's
  /// length from them, then the rest of the stream.
  __device__ __forceinline__ void finish_in_place(const std::byte* src,
                                                  xfer::readable_range readable) {
    const std::uint32_t slot = cb_.tensor_bytes;
    const std::uint32_t prefix = (cb_.chunks() + 7) / 8;
    std::uint64_t bits = 0;
    if (prefix <= Policy::workspace_bytes) {
      detail::resident_bits stream{storage_.workspace, offset_};
      load_status_ = detail::with_chunk<ChunkBytes>(cb_.chunk_bytes, [&](auto c) {
        bits = detail::stream_bits<decltype(c)::value>(cb_, stream);
        return status::ok;
      });
    } else if constexpr (streams) {
      detail::streamed_bits stream = streamed(slot);
      load_status_ = detail::with_chunk<ChunkBytes>(cb_.chunk_bytes, [&](auto c) {
        bits = detail::stream_bits<decltype(c)::value>(cb_, stream);
        return status::ok;
      });
    } else {
      load_status_ = status::invalid_argument;
    }
    if (load_status_ != status::ok) return;
    if ((bits + 7) / 8 >= slot) {
      load_status_ = status::corrupt;  // not shorter than a raw row: cannot be in the slot
      return;
    }
    stored_ = static_cast<std::uint32_t>((bits + 7) / 8);
    if (stored_ > Policy::workspace_bytes) return;  // streamed by decode_loaded
    // The rest, from the granule that holds the prefix's end (the workspace keeps the
    // layout of one load: row byte j at offset_ + j). That granule is stored again, with
    // the same bytes, so every lane must be done reading the prefix first.
    __syncwarp();
    if (prefix > Policy::workspace_bytes) {
      offset_ = xfer::warp_load(storage_.workspace, src, stored_, readable).offset;
      return;
    }
    const auto at = reinterpret_cast<std::uintptr_t>(src);
    const std::uintptr_t resume = core::align_down<std::uintptr_t>(at + prefix, 16);
    if (resume <= at) {
      offset_ = xfer::warp_load(storage_.workspace, src, stored_, readable).offset;
    } else {
      const auto done = static_cast<std::uint32_t>(resume - at);
      xfer::warp_load(storage_.workspace + offset_ + done, src + done, stored_ - done, readable);
    }
  }

  /// Bytes prefetch() stages of `row`: all of a row the workspace holds, an in-place
  /// compressed row's participation bits; 0 when land() must load it another way.
  SQUEEZE_DEVICE static std::uint32_t staged_bytes(const row_source& row) {
    const std::uint32_t slot = row.codebook.tensor_bytes;
    if (row.in_place && !row.raw) {
      const std::uint32_t prefix = (row.codebook.chunks() + 7) / 8;
      return prefix < slot && prefix <= Policy::workspace_bytes ? prefix : 0;
    }
    const std::uint32_t stored = row.in_place ? slot : row.stored;
    return stored <= Policy::workspace_bytes ? stored : 0;
  }

  SQUEEZE_DEVICE void begin(const std::byte* src, std::uint32_t stored) {
    src_ = src;
    stored_ = stored;
    offset_ = 0;
    load_status_ = status::ok;
  }

  /// The two windows a streamed row is read through: a quarter of the workspace for the
  /// participation bits, the rest for the payload. Each keeps 32 bytes for the alignment
  /// offset and the bit reads' overrun; a group spans at most 65 and 513 bytes of them.
  SQUEEZE_DEVICE detail::streamed_bits streamed(std::uint64_t stored) const {
    constexpr std::uint32_t p_bytes = Policy::workspace_bytes / 4;
    constexpr std::uint32_t d_bytes = storage_bytes - p_bytes;
    static_assert(!streams || (p_bytes - 32 >= 65 && d_bytes - 32 >= 513));
    return {src_,
            stored,
            xfer::readable_range::of(src_, stored),
            {storage_.workspace, p_bytes - 32},
            {storage_.workspace + p_bytes, d_bytes - 32}};
  }

  /// Copies a raw row from the workspace (byte j at offset_ + j) to dst: 16 bytes per
  /// lane and step, realigned from aligned 32-bit workspace reads, when dst is 16-byte
  /// aligned; the tail (and any other dst) byte by byte.
  SQUEEZE_DEVICE status copy_raw(std::byte* dst) const {
    const unsigned lane = core::arch::lane_id();
    const std::uint32_t l = cb_.tensor_bytes;
    std::uint32_t done = 0;
    if (reinterpret_cast<std::uintptr_t>(dst) % 16 == 0) {
      done = l / 16 * 16;
      const auto* words = reinterpret_cast<const std::uint32_t*>(storage_.workspace);
      const unsigned shift = 8 * (offset_ % 4);
      for (std::uint32_t at = 16 * lane; at < done; at += 16 * warp_threads) {
        const std::uint32_t* w = words + (offset_ + at) / 4;
        std::uint32_t v[4];
#pragma unroll
        for (int k = 0; k < 4; ++k) v[k] = __funnelshift_r(w[k], w[k + 1], shift);
        *reinterpret_cast<uint4*>(dst + at) = uint4{v[0], v[1], v[2], v[3]};
      }
    }
    const std::byte* in = storage_.workspace + offset_;
    for (std::uint32_t b = done + lane; b < l; b += warp_threads) dst[b] = in[b];
    return status::ok;
  }

  TempStorage& storage_;
  codebook_ref cb_;
  const std::byte* src_ = nullptr;
  std::uint32_t stored_ = 0;
  unsigned offset_ = 0;
  status load_status_ = status::ok;
};

}  // namespace squeeze::ibp
