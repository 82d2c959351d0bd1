// SPDX-License-Identifier: Apache-2.0
// squeeze/xfer/detail/gather_kernels.cuh: the row gather's kernel (a grid-stride loop of
// warp_gather_rows). Internal: xfer/gather.cuh's gather_rows launches it.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "squeeze/core/config.hpp"
#include "squeeze/xfer/warp_gather.cuh"

namespace squeeze::xfer {

namespace detail {

template <class Policy, class Index>
SQUEEZE_KERNEL_MIN_BLOCKS(Policy::block_threads, Policy::min_blocks_per_sm)
void gather_rows_kernel(gather_args<Index> a) {
  constexpr int R = Policy::rows_in_flight;
  constexpr int warps_per_block = Policy::block_threads / warp_threads;
  const std::size_t warp = std::size_t{blockIdx.x} * warps_per_block + threadIdx.x / warp_threads;
  const std::size_t warps = std::size_t{gridDim.x} * warps_per_block;
  for (std::size_t first = warp * R; first < a.count; first += warps * R) {
    const std::size_t left = a.count - first;
    warp_gather_rows<Policy>(a, first, left < R ? static_cast<int>(left) : R);
  }
}

}  // namespace detail

}  // namespace squeeze::xfer
