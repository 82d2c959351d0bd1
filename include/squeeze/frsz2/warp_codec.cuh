// SPDX-License-Identifier: Apache-2.0
// squeeze/frsz2/warp_codec.cuh: the view of an FRSZ2-compressed vector in device memory
// (compressed_ref) and the warp-level codec on it: block compression (warp_compressor) and
// streaming decode (warp_decode), which frsz2/compress.cuh's bulk launchers run.
//
// A warp works on tiles of max(32, BS) values: 32 / BS whole blocks when BS <= 32 (lane j
// holds value j), or one block of BS values (lane j holds values j, j + 32, ...). The block
// maximum exponent comes from xor shuffles inside each block's lanes, the nonfinite flag
// and the rounding carry from ballots; codes are ORed into the tile's words in shared
// memory and the words leave in one coalesced store. Output is bit-identical to the host
// reference encoder (format.hpp), which the GPU tests check.
//
// Blocks of 32 fp64 values with codes of at most 32 bits whose largest exponent lies in
// [32, 2044] (every block of a Krylov vector) take a shorter path: q = |x| * 2^(l-2-(Eb-bias))
// is exact in fp64 (a power of two), truncation is a conversion toward zero, and round to
// nearest, ties away, is trunc(rz(|x| s + 0.5)), all equal to the reference's integer
// quantize. The rounding carry is a vote on q > q_max, after which the warp quantizes again
// with Eb + 1 (rare: a block whose largest value rounds up to the next power of two). fp32
// blocks with their largest exponent in [32, 253] do the same in float (every block of
// gradients; for coll's wire codec), and their decode converts q in double and cuts it to
// float toward zero, which is the reference decoder's truncation. A block of zeros, found on
// the general path, stores its signs alone with Eb = zero_block_exponent.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "squeeze/core/bits.hpp"
#include "squeeze/core/config.hpp"
#include "squeeze/frsz2/accessor.hpp"
#include "squeeze/frsz2/format.hpp"

namespace squeeze::frsz2 {

/// A compressed vector in device memory: the view compress() writes and warp_decode reads.
template <format_like F>
struct compressed_ref {
  std::uint32_t* payload = nullptr;    ///< [blocks(size), words_per_block]
  std::uint16_t* exponents = nullptr;  ///< [blocks(size)]
  std::size_t size = 0;                ///< values
  /// Value 0's data handle for accessor<F, T> (as array::data_handle()).
  [[nodiscard]] SQUEEZE_HOST_DEVICE compressed_handle<F> data_handle() const noexcept {
    return {payload, exponents, 0};
  }
};

/// Values per warp tile and the tile's payload words.
template <format_like F>
inline constexpr int tile_values = F::block_size > 32 ? F::block_size : 32;
/// Payload words of one warp tile.
template <format_like F>
inline constexpr int tile_words = (tile_values<F> / F::block_size) * F::words_per_block;

/// Warp-level compression of one tile at a time. TempStorage holds the tile's words (it
/// is unused, and may be empty, on the shuffle path: BS = 32 with codes of at most 32 bits).
template <format_like F>
class warp_compressor {
 public:
  using T = typename F::float_type;                     ///< the values' type
  using B = typename F::bits_type;                      ///< holds one code
  static constexpr int per_lane = tile_values<F> / 32;  ///< values each lane holds
  /// Whole words assembled from the lanes' codes by shuffles (lane j builds word j).
  static constexpr bool by_shuffles = F::block_size == 32 && F::bits <= 32;

  /// The shared memory a warp's compressor uses; the caller places it (one per warp).
  struct TempStorage {
    std::uint32_t words[by_shuffles ? 1 : tile_words<F>];  ///< the tile's payload words
  };
  static_assert(sizeof(TempStorage) <= 8192, "frsz2::warp_compressor: tile too large");

  /// A compressor working in `ts` (the warp's own).
  SQUEEZE_DEVICE explicit warp_compressor(TempStorage& ts) : ts_{ts} {}

  /// This lane's values of tile `tile` of x[0..n) (+0 past n).
  SQUEEZE_DEVICE static void load_tile(const T* x, std::size_t n, std::size_t tile,
                                       T (&v)[per_lane]) {
    const std::size_t first = tile * tile_values<F> + threadIdx.x % 32;
#pragma unroll
    for (int t = 0; t < per_lane; ++t) {
      const std::size_t i = first + 32u * t;
      v[t] = i < n ? x[i] : T{0};
    }
  }

  /// Compresses tile `tile` of the vector x[0..out.size) into `out`. Every lane of the warp
  /// calls it with the same tile.
  SQUEEZE_DEVICE void compress_tile(const T* x, std::size_t tile, compressed_ref<F> out,
                                    rounding mode) {
    T v[per_lane];
    load_tile(x, out.size, tile, v);
    compress_tile(v, tile, out, mode);
  }

  /// Compresses a tile whose values the lanes hold (from load_tile) and returns its first
  /// block's exponent word. With `store_exponent` false the caller stores the exponent words
  /// (the bulk kernel gathers a warp's into one store; only on the shuffle path).
  SQUEEZE_DEVICE std::uint16_t compress_tile(const T (&v)[per_lane], std::size_t tile,
                                             compressed_ref<F> out, rounding mode,
                                             bool store_exponent = true) {
    return compress_impl<false>(v, tile, out, mode, store_exponent, nullptr);
  }

  /// compress_tile, which also puts this lane's values as stored (what every decoder reads
  /// back, bit for bit) in `stored`, worked out from the codes in registers.
  SQUEEZE_DEVICE std::uint16_t compress_tile(const T (&v)[per_lane], std::size_t tile,
                                             compressed_ref<F> out, rounding mode,
                                             T (&stored)[per_lane], bool store_exponent = true) {
    return compress_impl<true>(v, tile, out, mode, store_exponent, stored);
  }

 private:
  /// The value a code of a block of exponent word w decodes to (as access_value).
  SQUEEZE_DEVICE static T stored_value(B code, std::uint16_t w) {
    if constexpr (std::is_same_v<T, double> && F::bits <= 32) {
      return detail::decode_code<F>(static_cast<std::uint32_t>(code), w);
    } else {
      return decode_value<F>(code, w);
    }
  }

  template <bool Keep>
  SQUEEZE_DEVICE std::uint16_t compress_impl(const T (&v)[per_lane], std::size_t tile,
                                             compressed_ref<F> out, rounding mode,
                                             bool store_exponent, T* stored) {
    const unsigned lane = threadIdx.x % 32;
    if constexpr (by_shuffles) {
      // The exact fast path (file comment): the sign and biased exponent are in the high
      // word of the value; Eb and Eb + 1 must lie in the exact range of the type (for fp32
      // with l = 2 also Eb + 1 <= l + 251).
      constexpr bool fp64 = std::is_same_v<T, double>;
      constexpr unsigned exponent_shift = fp64 ? 20 : 23;
      constexpr std::uint32_t exponent_mask = fp64 ? 0x7ffu : 0xffu;
      constexpr std::uint32_t top = fp64 ? 2044u : (F::bits + 250 < 253 ? F::bits + 250 : 253u);
      const std::uint32_t hi = fp64 ? static_cast<std::uint32_t>(__double2hiint(v[0]))
                                    : __float_as_uint(static_cast<float>(v[0]));
      const std::uint32_t emax =
          __reduce_max_sync(full_warp_mask, (hi >> exponent_shift) & exponent_mask);
      if (emax - 32u <= top - 32u) {
        std::uint32_t eb = emax;
        std::uint32_t q = quantize_exact(v[0], eb, mode);
        if (__any_sync(full_warp_mask, q > static_cast<std::uint32_t>(F::q_max))) {
          q = quantize_exact(v[0], ++eb, mode);
        }
        const std::uint32_t code = ((hi & 0x80000000u) >> (32 - F::bits)) | q;
        const auto w = static_cast<std::uint16_t>(eb);
        if constexpr (Keep) stored[0] = stored_value(code, w);
        store_block(code, w, tile, out, store_exponent);
        return w;
      }
    }
    std::uint32_t emax = 0;
    bool nonfinite = false;
#pragma unroll
    for (int t = 0; t < per_lane; ++t) {
      const std::uint32_t e = value_exponent(v[t]);
      nonfinite = nonfinite || e == F::exponent_all_ones;
      if (e != F::exponent_all_ones) emax = e > emax ? e : emax;
    }
    // Reduce over the lanes of one block: all 32 (BS >= 32) or groups of BS.
    constexpr int group = F::block_size < 32 ? F::block_size : 32;
    if constexpr (group == 32) {
      emax = __reduce_max_sync(full_warp_mask, emax);
    } else {
#pragma unroll
      for (int d = 1; d < group; d *= 2) {
        const std::uint32_t other = __shfl_xor_sync(full_warp_mask, emax, d);
        emax = other > emax ? other : emax;
      }
    }
    const unsigned group_mask =
        group == 32 ? full_warp_mask : (((1u << group) - 1u) << (lane / group * group));
    const bool block_nonfinite = (__ballot_sync(full_warp_mask, nonfinite) & group_mask) != 0;
    if constexpr (by_shuffles) {
      if (emax == 0 && !block_nonfinite) {  // a block of zeros: each code is its sign alone
        const auto code = static_cast<std::uint32_t>(
            (core::bit_cast<B>(v[0]) >> (8 * sizeof(B) - 1)) << (F::bits - 1));
        constexpr std::uint16_t w = F::zero_block_exponent;
        if constexpr (Keep) stored[0] = stored_value(code, w);
        store_block(code, w, tile, out, store_exponent);
        return w;
      }
    }
    bool carry = false;
    if (mode == rounding::nearest) {
#pragma unroll
      for (int t = 0; t < per_lane; ++t) {
        carry = carry || (!block_nonfinite && value_exponent(v[t]) != F::exponent_all_ones &&
                          quantize<F>(v[t], emax, mode) > F::q_max);
      }
    }
    const bool block_carries = (__ballot_sync(full_warp_mask, carry) & group_mask) != 0;
    const std::uint16_t w = exponent_word<F>(emax, block_nonfinite, block_carries);

    if constexpr (by_shuffles) {
      const auto code = static_cast<std::uint32_t>(encode_in_block<F>(v[0], w, mode));
      if constexpr (Keep) stored[0] = stored_value(code, w);
      store_block(code, w, tile, out, store_exponent);
    } else {
      const std::size_t first_block = tile * (tile_values<F> / F::block_size);
      const std::size_t blocks_left = F::blocks(out.size) - first_block;
      std::uint32_t* dst = out.payload + first_block * F::words_per_block;
      for (int i = static_cast<int>(lane); i < tile_words<F>; i += 32) ts_.words[i] = 0;
      __syncwarp();
#pragma unroll
      for (int t = 0; t < per_lane; ++t) {
        const unsigned value = lane + 32u * t;  // within the tile
        const unsigned block = value / F::block_size, k = value % F::block_size;
        B code = encode_in_block<F>(v[t], w, mode);
        if constexpr (Keep) stored[t] = stored_value(code, w);
        // Or the code into bit k * l of its block, in 32-bit pieces (at most three).
        const std::uint32_t bit = block * (F::words_per_block * 32u) + k * F::bits;
        std::uint32_t word = bit / 32, shift = bit % 32;
        for (int done = 0;; ++word) {
          atomicOr(&ts_.words[word], static_cast<std::uint32_t>(code << shift));
          const int taken = 32 - static_cast<int>(shift);
          if (taken >= F::bits - done) break;
          done += taken;
          code >>= taken;
          shift = 0;
        }
      }
      __syncwarp();
      // Store the tile's words and exponents, stopping at the vector's last block.
      const std::size_t words_left = blocks_left * F::words_per_block;
      for (int i = static_cast<int>(lane); i < tile_words<F>; i += 32) {
        if (static_cast<std::size_t>(i) < words_left) dst[i] = ts_.words[i];
      }
      if (lane % group == 0 && lane / group < blocks_left) {
        out.exponents[first_block + lane / group] = w;
      }
      __syncwarp();  // ts_ is reused by the next tile
    }
    return w;
  }

  /// q of finite x in a block of exponent eb in [32, 2045]: |x| times 2^(l-2-(eb-bias)) is
  /// exact (a normal power of two), then cut by `mode` (see the file comment).
  SQUEEZE_DEVICE static std::uint32_t quantize_exact(double x, std::uint32_t eb, rounding mode) {
    const double s = __hiloint2double(static_cast<int>((2044u + F::bits - eb) << 20), 0);
    const double y = fabs(x) * s;
    return __double2uint_rz(mode == rounding::nearest ? __dadd_rz(y, 0.5) : y);
  }

  /// q of finite float x in a block of exponent eb in [32, min(254, l + 251)]: |x| times the
  /// power of two 2^(l-2-(eb-127)) (a normal float: its biased exponent l + 252 - eb lies in
  /// [1, 254]) is exact, or below 2^-126 and then below half a unit; truncation is a
  /// conversion toward zero and round to nearest, ties away, is trunc(rz(|x| s + 0.5)) (the
  /// float twin of the double one): both equal the reference's integer quantize.
  SQUEEZE_DEVICE static std::uint32_t quantize_exact(float x, std::uint32_t eb, rounding mode) {
    const float s = __uint_as_float((252u + F::bits - eb) << 23);
    const float y = fabsf(x) * s;
    return __float2uint_rz(mode == rounding::nearest ? __fadd_rz(y, 0.5f) : y);
  }

  /// Stores a block of 32 codes, lane j holding code j: word j holds bits [32j, 32j + 32),
  /// the codes of values floor(32j / l) ... floor((32j + 31) / l), taken from their lanes.
  SQUEEZE_DEVICE static void store_block(std::uint32_t code, std::uint16_t w, std::size_t tile,
                                         compressed_ref<F> out,
                                         bool store_exponent) requires by_shuffles {
    const unsigned lane = threadIdx.x % 32;
    std::uint32_t word = code;
    if constexpr (F::bits < 32) {
      constexpr int touching = 32 % F::bits == 0 ? 32 / F::bits : 31 / F::bits + 2;
      const unsigned v0 = 32u * lane / F::bits;
      word = 0;
#pragma unroll
      for (int r = 0; r < touching; ++r) {
        const unsigned value = v0 + r;
        const std::uint32_t c = __shfl_sync(full_warp_mask, code, static_cast<int>(value & 31));
        const int offset = static_cast<int>(value * F::bits) - static_cast<int>(32 * lane);
        if (value < 32 && offset < 32) word |= offset >= 0 ? c << offset : c >> -offset;
      }
    }
    if (lane < static_cast<unsigned>(F::words_per_block)) {
      out.payload[tile * F::words_per_block + lane] = word;
    }
    if (store_exponent && lane == 0) out.exponents[tile] = w;
  }

  TempStorage& ts_;
};

/// Tiles of a vector of n values.
template <format_like F>
SQUEEZE_HOST_DEVICE constexpr std::size_t tiles(std::size_t n) noexcept {
  return (n + tile_values<F> - 1) / tile_values<F>;
}

/// The value of this lane in tile `tile` (< tiles<F>(v.size)) of the compressed vector
/// `v`: value tile * 32 + lane (BS <= 32). For fp64 codes of at most 32 bits: codes of 8,
/// 16 or 32 bits are loaded by their own lanes (one coalesced load); other lengths load
/// the tile's words (lane j word j, one coalesced load) and take each code from two lanes
/// by shuffles. With BS = 32 a tile is one whole block, so nothing is conditional and a
/// loop of calls keeps all its loads in flight. Values past v.size read as +0 (the
/// padding of the last block) without touching memory past the vector.
template <format_like F>
requires(F::block_size <= 32) SQUEEZE_DEVICE typename F::float_type
    warp_decode(const compressed_ref<F>& v, std::size_t tile) {
  const unsigned lane = threadIdx.x % 32;
  if constexpr (F::bits <= 32 && F::block_size == 32) {
    const std::uint32_t* words = v.payload + tile * F::words_per_block;
    const std::uint16_t w = v.exponents[tile];
    std::uint32_t code;
    if constexpr (F::bits == 32) {
      code = words[lane];
    } else if constexpr (F::bits == 16) {
      code = reinterpret_cast<const std::uint16_t*>(words)[lane];
    } else if constexpr (F::bits == 8) {
      code = reinterpret_cast<const std::uint8_t*>(words)[lane];
    } else {
      // Lanes past the block's words reload its last word (same sector: no traffic).
      const std::uint32_t mine = words[lane < F::words_per_block ? lane : F::words_per_block - 1];
      const std::uint32_t bit = lane * F::bits;
      const std::uint32_t lo = __shfl_sync(full_warp_mask, mine, static_cast<int>(bit >> 5));
      const std::uint32_t hi =
          __shfl_sync(full_warp_mask, mine, static_cast<int>(((bit >> 5) + 1) & 31));
      code = core::funnel_shift_right(lo, hi, bit & 31) & core::low_mask<std::uint32_t>(F::bits);
    }
    if constexpr (std::is_same_v<typename F::float_type, double>) {
      return detail::decode_code<F>(code, w);
    } else {
      // (w <= 254: no nonfinite flag, and Eb below the top, where codes are clamped)
      return w <= 254 ? detail::decode_code_finite<F>(code, w) : decode_value<F>(code, w);
    }
  } else {
    const std::size_t first_block = tile * (32 / F::block_size);
    const std::size_t total = F::blocks(v.size);
    const std::size_t blocks_left = first_block < total ? total - first_block : 0;
    const unsigned block = lane / F::block_size;
    if (block >= blocks_left) return typename F::float_type{0};
    return detail::access_value<F>(v.data_handle(), tile * 32 + lane);
  }
}

}  // namespace squeeze::frsz2
