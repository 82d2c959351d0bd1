// SPDX-License-Identifier: Apache-2.0
// squeeze/frsz2/detail/array_kernels.cuh: the element-wise conversion kernel between fp64 or
// fp32 values and a plain storage (float64, float32, float16, bfloat16), and its launch.
// Internal: frsz2/array.cuh's array::store and array::load launch it.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>

#include "squeeze/core/bits.hpp"
#include "squeeze/core/config.hpp"
#include "squeeze/core/cuda_error.hpp"
#include "squeeze/frsz2/accessor.hpp"

namespace squeeze::frsz2 {

namespace detail {

template <class To, class From>
SQUEEZE_KERNEL(256)
void convert_kernel(To* dst, const From* src, std::size_t n) {
  const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
  for (std::size_t i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; i < n; i += stride) {
    dst[i] = convert<To>(src[i]);
  }
}

template <class To, class From>
void launch_convert(To* dst, const From* src, std::size_t n, cudaStream_t stream) {
  if (n == 0) return;
  const auto blocks =
      static_cast<unsigned>(std::min<std::size_t>(core::div_ceil<std::size_t>(n, 256), 65535 * 4));
  convert_kernel<To, From><<<blocks, 256, 0, stream>>>(dst, src, n);
  SQUEEZE_CHECK_LAUNCH();
}

}  // namespace detail

}  // namespace squeeze::frsz2
