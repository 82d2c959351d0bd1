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
// workspace through xfer's asynchronous loads (16-byte granules, 128-byte segments),
// then each lane decodes one chunk of each group of 32: it reads its participation bit,
// the warp exclusive-scans the payload lengths to find every chunk's bit offset, and the
// lane deposits its payload bits into the free positions of its chunk's mask, run by run.
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
};

template <class P>
concept decode_policy_like = requires {
  { P::workspace_bytes } -> std::convertible_to<std::uint32_t>;
}
&&(P::workspace_bytes >= 16);

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

}  // namespace detail

/// Decodes IBP rows, one warp per row, through a shared-memory workspace.
template <decode_policy_like Policy = decode_policy>
class warp_decoder {
 public:
  struct TempStorage {
    alignas(16) std::byte workspace[xfer::window_bytes(Policy::workspace_bytes)];
  };

  SQUEEZE_DEVICE warp_decoder(TempStorage& storage, codebook_ref codebook)
      : storage_{storage}, cb_{codebook} {}

  /// Starts loading a stored row of `stored` bytes at src (any device-accessible memory;
  /// whole 16-byte granules inside `readable` may be read). Does not commit or wait.
  /// Rows larger than the workspace are not loaded (decode_loaded reports them).
  SQUEEZE_DEVICE void load(const std::byte* src, std::uint32_t stored,
                           xfer::readable_range readable) {
    offset_ = 0;
    if (stored == 0 || stored > Policy::workspace_bytes) return;
    offset_ = xfer::warp_load_async(storage_.workspace, src, stored, readable).offset;
  }

  /// Decodes the row whose load completed (the caller waited) into dst[0, tensor_bytes).
  SQUEEZE_DEVICE status decode_loaded(std::byte* dst, std::uint32_t stored) const {
    if (stored > Policy::workspace_bytes || stored > cb_.tensor_bytes) {
      return status::invalid_argument;
    }
    const std::byte* in = storage_.workspace + offset_;
    if (stored == cb_.tensor_bytes) return copy_raw(dst, in);
    return decode_stream(dst, in, stored);
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

  SQUEEZE_DEVICE status decode_stream(std::byte* dst, const std::byte* in,
                                      std::uint32_t stored) const {
    const unsigned lane = core::arch::lane_id();
    const std::uint32_t k = cb_.chunks();
    const std::uint64_t have = 8 * std::uint64_t{stored};
    if (have < k) return status::truncated;
    std::uint64_t cursor = k;  // bit offset of the next group's payload
    for (std::uint32_t group = 0; group < k; group += warp_threads) {
      const std::uint32_t i = group + lane;
      const bool active = i < k;
      const unsigned group_chunks = k - group < warp_threads ? k - group : warp_threads;
      const auto participation =
          static_cast<std::uint32_t>(core::read_bits(in, group, group_chunks));
      const bool p = active && ((participation >> lane) & 1u) != 0;
      const unsigned len = active ? cb_.chunk_len(i) : 0;
      const std::uint64_t mask = active ? cb_.chunk_mask(i) : 0;
      const std::uint64_t free_mask = ~mask & core::low_mask<std::uint64_t>(8 * len);
      const std::uint32_t n =
          !active ? 0u : (p ? static_cast<std::uint32_t>(core::popcount(free_mask)) : 8 * len);
      std::uint32_t group_bits = 0;
      const std::uint64_t at = cursor + detail::warp_exclusive_sum(n, group_bits);
      if (cursor + group_bits > have) return status::truncated;  // warp-uniform
      if (active) {
        const std::uint64_t payload = core::read_bits(in, at, n);
        const std::uint64_t x =
            p ? cb_.chunk_bitval(i) | detail::deposit_runs(payload, free_mask) : payload;
        store_chunk(dst + std::size_t{i} * cb_.chunk_bytes, len, x);
      }
      cursor += group_bits;
    }
    // The stream must end in this row's last byte, padded with zero bits.
    if ((cursor + 7) / 8 != stored) return status::corrupt;
    if (cursor % 8 != 0 &&
        core::read_bits(in, cursor, 8 - static_cast<unsigned>(cursor % 8)) != 0) {
      return status::corrupt;
    }
    return status::ok;
  }

  TempStorage& storage_;
  codebook_ref cb_;
  unsigned offset_ = 0;
};

}  // namespace squeeze::ibp
