// squeeze/ibp/decode.cuh: the warp-level IBP decoder users call in their own kernels.
//
//   __shared__ ibp::warp_decoder<>::TempStorage ts[warps_per_block];
//   ibp::warp_decoder<> dec{ts[warp], codebook};         // codebook: ibp::codebook_ref
//   dec.load(src, stored_bytes, readable);              // asynchronous: cp.async into ts
//   xfer::async_commit();
//   ... issue another decoder's load, decode something else ...
//   xfer::warp_async_wait<0>();                          // (or <1> with one more in flight)
//   status st = dec.decode_loaded(dst, stored_bytes);    // dst: [tensor_bytes]
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
// Limits and guarantees: a stored row must fit the workspace (Policy::workspace_bytes;
// larger rows return status::invalid_argument without touching dst). Decoding reads only
// the row's stored bytes and writes only dst[0, tensor_bytes); a stream that ends early,
// has stray padding bits or is not shorter than a raw row returns status::truncated /
// status::corrupt, with dst left in an unspecified state (never beyond its bounds).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "squeeze/core/arch.cuh"
#include "squeeze/core/bits.hpp"
#include "squeeze/core/config.hpp"
#include "squeeze/core/status.hpp"
#include "squeeze/ibp/format.hpp"
#include "squeeze/xfer/async.cuh"
#include "squeeze/xfer/bounds.hpp"

namespace squeeze::ibp {

struct decode_policy {
  /// Largest stored row a decoder's workspace holds. 4 KiB rows at any savings.
  static constexpr std::uint32_t workspace_bytes = 4096;
  /// How load() fills the workspace: ordinary 16-byte loads (false) or cp.async (true).
  /// On an H200 gathering from mapped host memory, cp.async held the decoder to 0.50-0.55
  /// of the ideal rate at 9-50 % savings; ordinary loads reached 0.93-0.97
  /// (docs/RESULTS.md, ibp).
  static constexpr bool async_loads = false;
};

// (clang-format 14 mangles concept definitions)
// clang-format off
template <class P>
concept decode_policy_like = requires {
  { P::workspace_bytes } -> std::convertible_to<std::uint32_t>;
  { P::async_loads } -> std::convertible_to<bool>;
} && (P::workspace_bytes >= 16);
// clang-format on

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
/// `free_mask`, one contiguous run of set bits at a time.
SQUEEZE_DEVICE std::uint64_t deposit_runs(std::uint64_t bits, std::uint64_t free_mask) {
  std::uint64_t out = 0;
  while (free_mask != 0) {
    const int start = core::countr_zero(free_mask);
    const std::uint64_t shifted = free_mask >> start;
    const int run = shifted == ~std::uint64_t{0} ? 64 - start : core::countr_zero(~shifted);
    const std::uint64_t field = bits & core::low_mask<std::uint64_t>(static_cast<unsigned>(run));
    out |= field << start;
    bits = run >= 64 ? 0 : bits >> run;
    free_mask &= ~(core::low_mask<std::uint64_t>(static_cast<unsigned>(run)) << start);
  }
  return out;
}

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

}  // namespace detail

/// Decodes IBP rows, one warp per row, through a shared-memory workspace.
template <decode_policy_like Policy = decode_policy>
class warp_decoder {
 public:
  struct TempStorage {
    // The row's window, plus 16 bytes that bit-field reads may touch past its end.
    alignas(16) std::byte workspace[xfer::window_bytes(Policy::workspace_bytes) + 16];
  };

  SQUEEZE_DEVICE warp_decoder(TempStorage& storage, codebook_ref codebook)
      : storage_{storage}, cb_{codebook} {}

  /// Loads a stored row of `stored` bytes at src (any device-accessible memory; whole
  /// 16-byte granules inside `readable` may be read): synchronously, or, with
  /// Policy::async_loads, only starts it (the caller commits and waits). Rows larger
  /// than the workspace are not loaded (decode_loaded reports them).
  SQUEEZE_DEVICE void load(const std::byte* src, std::uint32_t stored,
                           xfer::readable_range readable) {
    offset_ = 0;
    if (stored == 0 || stored > Policy::workspace_bytes) return;
    if constexpr (Policy::async_loads) {
      offset_ = xfer::warp_load_async(storage_.workspace, src, stored, readable).offset;
    } else {
      offset_ = xfer::warp_load(storage_.workspace, src, stored, readable).offset;
    }
  }

  /// Decodes the row whose load completed (the caller waited) into dst[0, tensor_bytes).
  SQUEEZE_DEVICE status decode_loaded(std::byte* dst, std::uint32_t stored) const {
    if (stored > Policy::workspace_bytes || stored > cb_.tensor_bytes) {
      return status::invalid_argument;
    }
    if (stored == cb_.tensor_bytes) return copy_raw(dst, storage_.workspace + offset_);
    return decode_stream(dst, stored);
  }

  /// load + commit + wait + decode_loaded, for one row at a time.
  SQUEEZE_DEVICE status decode(std::byte* dst, const std::byte* src, std::uint32_t stored,
                               xfer::readable_range readable) {
    load(src, stored, readable);
    xfer::async_commit();
    xfer::warp_async_wait<0>();
    return decode_loaded(dst, stored);
  }

 private:
  SQUEEZE_DEVICE status copy_raw(std::byte* dst, const std::byte* in) const {
    for (std::uint32_t b = core::arch::lane_id(); b < cb_.tensor_bytes; b += warp_threads) {
      dst[b] = in[b];
    }
    return status::ok;
  }

  /// Dispatches on the chunk size so the per-lane work below is fully unrolled.
  SQUEEZE_DEVICE status decode_stream(std::byte* dst, std::uint32_t stored) const {
    switch (cb_.chunk_bytes) {
      case 1: return decode_stream<1>(dst, stored);
      case 2: return decode_stream<2>(dst, stored);
      case 4: return decode_stream<4>(dst, stored);
      case 8: return decode_stream<8>(dst, stored);
      default: return status::invalid_argument;
    }
  }

  /// Each lane decodes 16 / C consecutive chunks (16 output bytes) of each group of
  /// 32 x 16 / C chunks: its participation bits in one read, one warp scan of the lanes'
  /// payload lengths per group, then its chunks' payloads in order and one 16-byte store.
  template <unsigned C>
  SQUEEZE_DEVICE status decode_stream(std::byte* dst, std::uint32_t stored) const {
    constexpr unsigned per_lane = 16 / C;
    constexpr std::uint32_t per_group = warp_threads * per_lane;
    const unsigned lane = core::arch::lane_id();
    const std::byte* ws = storage_.workspace;
    const std::uint32_t k = cb_.chunks();
    const std::uint64_t have = 8 * std::uint64_t{stored};
    if (have < k) return status::truncated;
    // Whole chunks only up to here: the last chunk is partial when C does not divide L.
    const std::uint32_t whole = cb_.tensor_bytes / C;
    std::uint64_t cursor = k;  // bit offset of the next group's payload
    for (std::uint32_t group = 0; group < k; group += per_group) {
      const std::uint32_t first = group + lane * per_lane;  // this lane's first chunk
      const unsigned mine = first >= k ? 0u : (k - first < per_lane ? k - first : per_lane);
      const auto pbits = static_cast<std::uint32_t>(
          mine == 0 ? 0 : detail::read_workspace_bits(ws, offset_, first, mine));
      std::uint64_t mask[per_lane];
      std::uint64_t free_mask[per_lane];
      std::uint32_t n[per_lane];
      std::uint32_t lane_bits = 0;
#pragma unroll
      for (unsigned u = 0; u < per_lane; ++u) {
        const std::uint32_t i = first + u;
        const unsigned len = u < mine ? (i < whole ? C : cb_.chunk_len(i)) : 0;
        mask[u] = len == 0 ? 0 : detail::load_codebook_chunk(cb_.mask, i, C, len);
        free_mask[u] = ~mask[u] & core::low_mask<std::uint64_t>(8 * len);
        const bool p = ((pbits >> u) & 1u) != 0;
        n[u] = len == 0 ? 0u
                        : (p ? static_cast<std::uint32_t>(core::popcount(free_mask[u])) : 8 * len);
        lane_bits += n[u];
      }
      std::uint32_t group_bits = 0;
      std::uint64_t at = cursor + detail::warp_exclusive_sum(lane_bits, group_bits);
      if (cursor + group_bits > have) return status::truncated;  // warp-uniform
      std::uint64_t out[2] = {0, 0};                             // this lane's 16 output bytes
#pragma unroll
      for (unsigned u = 0; u < per_lane; ++u) {
        const std::uint32_t i = first + u;
        const bool p = ((pbits >> u) & 1u) != 0;
        const std::uint64_t payload = detail::read_workspace_bits(ws, offset_, at, n[u]);
        at += n[u];
        const std::uint64_t x =
            u >= mine ? 0
            : p ? detail::load_codebook_chunk(cb_.bitval, i, C, i < whole ? C : cb_.chunk_len(i)) |
                      detail::deposit_runs(payload, free_mask[u])
                : payload;
        if constexpr (C == 8) {
          out[u] = x;
        } else {
          out[(u * C) / 8] |= x << (8 * ((u * C) % 8));
        }
      }
      std::byte* row_out = dst + std::size_t{first} * C;
      const bool whole_lane = mine == per_lane && first + per_lane <= whole;
      if (whole_lane && reinterpret_cast<std::uintptr_t>(row_out) % 16 == 0) {
        *reinterpret_cast<uint4*>(row_out) =
            uint4{static_cast<std::uint32_t>(out[0]), static_cast<std::uint32_t>(out[0] >> 32),
                  static_cast<std::uint32_t>(out[1]), static_cast<std::uint32_t>(out[1] >> 32)};
      } else {
#pragma unroll
        for (unsigned u = 0; u < per_lane; ++u) {
          if (u >= mine) break;
          const std::uint32_t i = first + u;
          const unsigned len = i < whole ? C : cb_.chunk_len(i);
          const std::uint64_t x =
              (out[(u * C) / 8] >> (8 * ((u * C) % 8))) & core::low_mask<std::uint64_t>(8 * C);
          detail::store_output_chunk(row_out + u * C, len, x);
        }
      }
      cursor += group_bits;
    }
    // The stream must end in this row's last byte, padded with zero bits.
    if ((cursor + 7) / 8 != stored) return status::corrupt;
    const auto pad = static_cast<unsigned>((8 - cursor % 8) % 8);
    if (pad != 0 && detail::read_workspace_bits(ws, offset_, cursor, pad) != 0) {
      return status::corrupt;
    }
    return status::ok;
  }

  TempStorage& storage_;
  codebook_ref cb_;
  unsigned offset_ = 0;
};

}  // namespace squeeze::ibp
