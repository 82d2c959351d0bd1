// SPDX-License-Identifier: Apache-2.0
// squeeze/coll/detail/allreduce_kernels.cuh: the allreducer's reduction of a received chunk
// into the local one (dst[i] = op(dst[i], src[i])) and its launch. Internal:
// coll/allreduce.cuh's allreducer launches it.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "squeeze/core/config.hpp"
#include "squeeze/core/cuda_error.hpp"
#include "squeeze/core/launch.hpp"
#include "squeeze/core/reduce_op.hpp"

namespace squeeze::coll {

namespace detail {

/// dst[i] = op(dst[i], src[i]), 16-byte accesses where the chunk allows.
template <class T, int BlockThreads>
SQUEEZE_KERNEL(BlockThreads)
void reduce_kernel(T* dst, const T* src, std::size_t n, core::reduce_op op) {
  const std::size_t stride = std::size_t{gridDim.x} * BlockThreads;
  const std::size_t tid = blockIdx.x * std::size_t{BlockThreads} + threadIdx.x;
  constexpr int per = 16 / sizeof(T);
  using vec = std::conditional_t<sizeof(T) == 4, float4, double2>;
  const bool aligned =
      (reinterpret_cast<std::uintptr_t>(dst) | reinterpret_cast<std::uintptr_t>(src)) % 16 == 0;
  std::size_t done = 0;
  if (aligned) {
    const std::size_t vectors = n / per;
    for (std::size_t v = tid; v < vectors; v += stride) {
      vec a = reinterpret_cast<const vec*>(dst)[v];
      const vec b = reinterpret_cast<const vec*>(src)[v];
      T* pa = reinterpret_cast<T*>(&a);
      const T* pb = reinterpret_cast<const T*>(&b);
#pragma unroll
      for (int k = 0; k < per; ++k) pa[k] = core::apply(op, pa[k], pb[k]);
      reinterpret_cast<vec*>(dst)[v] = a;
    }
    done = vectors * per;
  }
  for (std::size_t i = done + tid; i < n; i += stride) dst[i] = core::apply(op, dst[i], src[i]);
}

template <class T>
void launch_reduce(T* dst, const T* src, std::size_t n, core::reduce_op op, cudaStream_t s) {
  if (n == 0) return;
  constexpr int threads = 256;
  const unsigned blocks = core::grid_for(n, 4 * threads, core::per_sm(8));
  reduce_kernel<T, threads><<<blocks, threads, 0, s>>>(dst, src, n, op);
  SQUEEZE_CHECK_LAUNCH();
}

}  // namespace detail

}  // namespace squeeze::coll
