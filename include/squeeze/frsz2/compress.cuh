// SPDX-License-Identifier: Apache-2.0
// squeeze/frsz2/compress.cuh: warp-level FRSZ2 block compression and streaming decode, and
// the bulk launchers built on them.
//
// The compressed vector's view and the warp-level codec (how it works is described there)
// are in frsz2/warp_codec.cuh, the bulk kernels in frsz2/detail/.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <string>

#include "squeeze/core/cuda_error.hpp"
#include "squeeze/core/error.hpp"
#include "squeeze/core/reduce_op.hpp"
#include "squeeze/frsz2/detail/compress_kernels.cuh"
#include "squeeze/frsz2/format.hpp"
#include "squeeze/frsz2/warp_codec.cuh"

namespace squeeze::frsz2 {

/// Compresses x[0..out.size) (device memory) into `out`, ordered on `stream`.
template <format_like F>
void compress(const typename F::float_type* x, std::size_t n, compressed_ref<F> out,
              cudaStream_t stream, rounding mode = rounding::nearest) {
  SQUEEZE_EXPECTS(out.size == n, "frsz2::compress: out describes " + std::to_string(out.size) +
                                     " values, x has " + std::to_string(n));
  if (n == 0) return;
  SQUEEZE_EXPECTS(x != nullptr && out.payload != nullptr && out.exponents != nullptr,
                  "frsz2::compress: null pointer");
  detail::launch_compress(x, out, stream, mode, nullptr);
}

/// Decodes values [first, first + count) of `in` to out[0..count) (device memory).
template <format_like F>
void decompress(compressed_ref<F> in, std::size_t first, typename F::float_type* out,
                std::size_t count, cudaStream_t stream) {
  detail::launch_decompress<F, false>(in, first, out, out, count, core::reduce_op::sum, stream,
                                      "frsz2::decompress");
}

/// out[i] = op(out[i], value first + i) for i < count: decoding and a reduction in one pass
/// (what a collective does with a received message).
template <format_like F>
void decompress_reduce(compressed_ref<F> in, std::size_t first, typename F::float_type* out,
                       std::size_t count, core::reduce_op op, cudaStream_t stream) {
  detail::launch_decompress<F, true>(in, first, out, out, count, op, stream,
                                     "frsz2::decompress_reduce");
}

/// out[i] = op(operand[i], value first + i) for i < count: the same pass with the other
/// operand read from elsewhere (a collective's first reduction into a buffer that does not
/// yet hold the caller's values). operand may equal out; other overlaps are not allowed.
template <format_like F>
void decompress_reduce(compressed_ref<F> in, std::size_t first,
                       const typename F::float_type* operand, typename F::float_type* out,
                       std::size_t count, core::reduce_op op, cudaStream_t stream) {
  detail::launch_decompress<F, true>(in, first, operand, out, count, op, stream,
                                     "frsz2::decompress_reduce");
}

}  // namespace squeeze::frsz2
