// SPDX-License-Identifier: Apache-2.0
// squeeze/frsz2/detail/compress_kernels.cuh: the bulk compression and decode kernels (a
// warp per tile through warp_compressor and warp_decode, or a thread per value through the
// accessor), their grids, and the decode launch. Internal: frsz2/compress.cuh's compress,
// decompress and decompress_reduce launch them.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "squeeze/core/config.hpp"
#include "squeeze/core/cuda_error.hpp"
#include "squeeze/core/error.hpp"
#include "squeeze/core/launch.hpp"
#include "squeeze/core/reduce_op.hpp"
#include "squeeze/frsz2/accessor.hpp"
#include "squeeze/frsz2/detail/array_kernels.cuh"
#include "squeeze/frsz2/format.hpp"
#include "squeeze/frsz2/warp_codec.cuh"

namespace squeeze::frsz2 {

namespace detail {

/// Tiles each warp loads before it encodes them: 8 x 8 B per lane in flight, and on the
/// shuffle path the 8 exponent words leave in one 16-byte store. Vectors too short to give
/// every SM a block of such warps take one tile a warp instead (more warps, each done
/// sooner).
inline constexpr int compress_unroll = 8;

/// Compresses x[0..out.size) into `out`; with Normalized, x / norm_divisor(norm2) (a vector
/// normalized on its way into storage); with Decoded, also writes the values as stored (what
/// accessor<F> reads back, worked out from the codes in registers) to decoded[0..out.size).
/// (Normalized is a template parameter so that plain compression carries no division: its
/// code took 12 more registers a thread, and frsz2_16's compression 10 % longer; H200.)
template <format_like F, int BlockThreads, int Unroll, bool Decoded, bool Normalized>
SQUEEZE_KERNEL(BlockThreads)
void compress_kernel(const typename F::float_type* x, compressed_ref<F> out, rounding mode,
                     const double* norm2, typename F::float_type* decoded) {
  using compressor = warp_compressor<F>;
  using T = typename F::float_type;
  constexpr int warps = BlockThreads / 32;
  __shared__ typename compressor::TempStorage storage[warps];
  compressor c{storage[threadIdx.x / 32]};
  const unsigned lane = threadIdx.x % 32;
  const std::size_t n_tiles = tiles<F>(out.size);
  const std::size_t stride = std::size_t{gridDim.x} * warps * Unroll;
  const double divisor = Normalized ? norm_divisor(norm2) : 1.0;  // x / 1 is x
  for (std::size_t t0 = (blockIdx.x * std::size_t{warps} + threadIdx.x / 32) * Unroll; t0 < n_tiles;
       t0 += stride) {
    T v[Unroll][compressor::per_lane];
#pragma unroll
    for (int u = 0; u < Unroll; ++u) compressor::load_tile(x, out.size, t0 + u, v[u]);
    if constexpr (Normalized) {
#pragma unroll
      for (int u = 0; u < Unroll; ++u) {
#pragma unroll
        for (int k = 0; k < compressor::per_lane; ++k) v[u][k] = static_cast<T>(v[u][k] / divisor);
      }
    }
    std::uint16_t mine = 0;  // lane u keeps tile t0 + u's exponent word
#pragma unroll
    for (int u = 0; u < Unroll; ++u) {
      if (t0 + u < n_tiles) {
        std::uint16_t w;
        if constexpr (Decoded) {
          T stored[compressor::per_lane];
          w = c.compress_tile(v[u], t0 + u, out, mode, stored, !compressor::by_shuffles);
#pragma unroll
          for (int k = 0; k < compressor::per_lane; ++k) {
            const std::size_t i = (t0 + u) * tile_values<F> + lane + 32u * k;
            if (i < out.size) decoded[i] = stored[k];
          }
        } else {
          w = c.compress_tile(v[u], t0 + u, out, mode, !compressor::by_shuffles);
        }
        if (lane == static_cast<unsigned>(u)) mine = w;
      }
    }
    if constexpr (compressor::by_shuffles) {
      if (lane < Unroll && t0 + lane < n_tiles) out.exponents[t0 + lane] = mine;
    }
  }
}

/// out[i] = value first + i, or with Reduce out[i] = op(operand[i], value first + i)
/// (operand may be out).
template <format_like F, int BlockThreads, bool Reduce>
SQUEEZE_KERNEL(BlockThreads)
void decompress_kernel(compressed_ref<F> in, std::size_t first,
                       const typename F::float_type* operand, typename F::float_type* out,
                       std::size_t count, core::reduce_op op) {
  const auto put = [&](std::size_t i, typename F::float_type value) {
    if constexpr (Reduce) {
      out[i] = core::apply(op, operand[i], value);
    } else {
      out[i] = value;
    }
  };
  const std::size_t stride = std::size_t{gridDim.x} * BlockThreads;
  if constexpr (F::block_size <= 32) {
    if (first % 32 == 0) {  // whole tiles: the warp decoder
      const std::size_t t0 = first / 32, n_tiles = (count + 31) / 32;
      const std::size_t wstride = stride / 32;
      for (std::size_t t = (blockIdx.x * std::size_t{BlockThreads} + threadIdx.x) / 32; t < n_tiles;
           t += wstride) {
        const auto value = warp_decode<F>(in, t0 + t);
        const std::size_t i = t * 32 + threadIdx.x % 32;
        if (i < count) put(i, value);
      }
      return;
    }
  }
  const accessor<F, typename F::float_type> acc;
  const compressed_handle<F> h = in.data_handle();
  for (std::size_t i = blockIdx.x * std::size_t{BlockThreads} + threadIdx.x; i < count;
       i += stride) {
    put(i, acc.access(h, first + i));
  }
}

/// Grids of the codec's kernels: one item (a tile, a value) per warp or thread, at most 16
/// blocks of 256 threads per SM (a grid-stride loop does the rest).
inline unsigned grid_for(std::size_t items, std::size_t per_block) {
  return core::grid_for(items, per_block, core::per_sm(16));
}

/// compress_kernel over x[0..out.size) on `stream` (arguments checked by the caller).
template <format_like F>
void launch_compress(const typename F::float_type* x, compressed_ref<F> out, cudaStream_t stream,
                     rounding mode, const double* norm2,
                     typename F::float_type* decoded = nullptr) {
  constexpr int threads = 256;
  const std::size_t n_tiles = tiles<F>(out.size);
  const bool long_vector = n_tiles >= core::per_sm(threads / 32 * compress_unroll);
  const auto launch = [&]<bool Decoded, bool Normalized>() {
    const auto with = [&]<int Unroll>() {
      compress_kernel<F, threads, Unroll, Decoded, Normalized>
          <<<grid_for(n_tiles, threads / 32 * Unroll), threads, 0, stream>>>(x, out, mode, norm2,
                                                                             decoded);
    };
    long_vector ? with.template operator()<compress_unroll>() : with.template operator()<1>();
  };
  if (decoded != nullptr) {
    launch.template operator()<true, true>();  // (a null norm2 divides by 1)
  } else if (norm2 != nullptr) {
    launch.template operator()<false, true>();
  } else {
    launch.template operator()<false, false>();
  }
  SQUEEZE_CHECK_LAUNCH();
}

template <format_like F, bool Reduce>
void launch_decompress(compressed_ref<F> in, std::size_t first,
                       const typename F::float_type* operand, typename F::float_type* out,
                       std::size_t count, core::reduce_op op, cudaStream_t stream,
                       const char* who) {
  SQUEEZE_EXPECTS(first <= in.size && count <= in.size - first,
                  std::string{who} + ": values [" + std::to_string(first) + ", " +
                      std::to_string(first + count) + ") are outside the vector's " +
                      std::to_string(in.size));
  if (count == 0) return;
  SQUEEZE_EXPECTS(
      out != nullptr && operand != nullptr && in.payload != nullptr && in.exponents != nullptr,
      std::string{who} + ": null pointer");
  constexpr int threads = 256;
  decompress_kernel<F, threads, Reduce>
      <<<grid_for(count, threads), threads, 0, stream>>>(in, first, operand, out, count, op);
  SQUEEZE_CHECK_LAUNCH();
}

}  // namespace detail

}  // namespace squeeze::frsz2
