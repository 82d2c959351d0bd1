// SPDX-License-Identifier: Apache-2.0
// squeeze/frsz2/detail/array_kernels.cuh: the element-wise conversion kernel between fp64 or
// fp32 values and a plain storage (float64, float32, float16, bfloat16), and its launch;
// norm_divisor, with which stores normalize a vector on the way in. Internal: frsz2/array.cuh's
// array::store, store_normalized and load launch it.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <type_traits>

#include "squeeze/core/bits.hpp"
#include "squeeze/core/config.hpp"
#include "squeeze/core/cuda_error.hpp"
#include "squeeze/frsz2/accessor.hpp"

namespace squeeze::frsz2 {

namespace detail {

/// What normalizes a vector whose squared norm *norm2 the GPU computed: its square root, or
/// 1 (values stored as they are) when there is no norm (norm2 null) or it is 0, negative or
/// not finite.
SQUEEZE_DEVICE double norm_divisor(const double* norm2) {
  if (norm2 == nullptr) return 1.0;
  const double nn = *norm2;
  return nn > 0.0 && isfinite(nn) ? sqrt(nn) : 1.0;
}

/// dst[i] = src[i] (converted), or, for fp64 or fp32 sources, src[i] / norm_divisor(norm2)
/// when norm2 is not null; then, with `decoded` not null, decoded[i] = dst[i] converted back.
template <class To, class From>
SQUEEZE_KERNEL(256)
void convert_kernel(To* dst, const From* src, std::size_t n, const double* norm2, From* decoded) {
  const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
  const std::size_t first = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if constexpr (std::is_floating_point_v<From>) {
    if (norm2 != nullptr) {
      const double divisor = norm_divisor(norm2);
      for (std::size_t i = first; i < n; i += stride) {
        const To stored = convert<To>(static_cast<From>(src[i] / divisor));
        dst[i] = stored;
        if (decoded != nullptr) decoded[i] = convert<From>(stored);
      }
      return;
    }
  }
  for (std::size_t i = first; i < n; i += stride) {
    const To stored = convert<To>(src[i]);
    dst[i] = stored;
    if (decoded != nullptr) decoded[i] = convert<From>(stored);
  }
}

template <class To, class From>
void launch_convert(To* dst, const From* src, std::size_t n, cudaStream_t stream,
                    const double* norm2 = nullptr, From* decoded = nullptr) {
  if (n == 0) return;
  const auto blocks =
      static_cast<unsigned>(std::min<std::size_t>(core::div_ceil<std::size_t>(n, 256), 65535 * 4));
  convert_kernel<To, From><<<blocks, 256, 0, stream>>>(dst, src, n, norm2, decoded);
  SQUEEZE_CHECK_LAUNCH();
}

}  // namespace detail

}  // namespace squeeze::frsz2
