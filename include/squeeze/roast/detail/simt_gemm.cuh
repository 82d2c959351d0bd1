// SPDX-License-Identifier: Apache-2.0
// squeeze/roast/detail/simt_gemm.cuh: the portable ROAST-MM path, an fp32 SIMT GEMM whose
// operands are functors: exact fp32, GPUs without wgmma, operands wgmma cannot take.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "squeeze/core/config.hpp"
#include "squeeze/core/cuda_error.hpp"
#include "squeeze/roast/detail/operand.cuh"
#include "squeeze/roast/mapping.hpp"

namespace squeeze::roast::detail {

// One 64 x 64 output tile per 256-thread block. A Problem supplies a(row, r) and b(r, col)
// as floats (0 outside the shape) and store(row, col, value).
inline constexpr int simt_tile = 64;
inline constexpr int simt_depth = 16;

template <class Problem>
SQUEEZE_KERNEL(256)
void simt_gemm_kernel(Problem p) {
  __shared__ float as[simt_depth][simt_tile + 4];
  __shared__ float bs[simt_depth][simt_tile + 4];
  const int tx = static_cast<int>(threadIdx.x % 16);
  const int ty = static_cast<int>(threadIdx.x / 16);
  const std::uint64_t row0 = std::uint64_t{blockIdx.y} * simt_tile;
  const std::uint64_t col0 = std::uint64_t{blockIdx.x} * simt_tile;
  float acc[4][4] = {};
  for (std::uint64_t r0 = 0; r0 < p.depth(); r0 += simt_depth) {
    for (int e = static_cast<int>(threadIdx.x); e < simt_depth * simt_tile; e += 256) {
      const int d = e / simt_tile;
      const int i = e % simt_tile;
      const std::uint64_t r = r0 + d;
      const bool in_depth = r < p.depth();
      as[d][i] = in_depth && row0 + i < p.rows() ? p.a(row0 + i, r) : 0.0f;
      bs[d][i] = in_depth && col0 + i < p.cols() ? p.b(r, col0 + i) : 0.0f;
    }
    __syncthreads();
    SQUEEZE_UNROLL
    for (int d = 0; d < simt_depth; ++d) {
      float av[4];
      float bv[4];
      SQUEEZE_UNROLL
      for (int i = 0; i < 4; ++i) {
        av[i] = as[d][ty + 16 * i];
        bv[i] = bs[d][tx + 16 * i];
      }
      SQUEEZE_UNROLL
      for (int i = 0; i < 4; ++i) {
        SQUEEZE_UNROLL
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
      }
    }
    __syncthreads();
  }
  SQUEEZE_UNROLL
  for (int i = 0; i < 4; ++i) {
    SQUEEZE_UNROLL
    for (int j = 0; j < 4; ++j) {
      const std::uint64_t row = row0 + ty + 16 * i;
      const std::uint64_t col = col0 + tx + 16 * j;
      if (row < p.rows() && col < p.cols()) p.store(row, col, acc[i][j]);
    }
  }
}

template <class Problem>
void launch_simt(const Problem& p, cudaStream_t stream) {
  const auto tiles = [](std::uint64_t n) {
    return static_cast<unsigned>((n + simt_tile - 1) / simt_tile);
  };
  if (p.rows() == 0 || p.cols() == 0) return;
  simt_gemm_kernel<<<dim3(tiles(p.cols()), tiles(p.rows())), 256, 0, stream>>>(p);
  SQUEEZE_CHECK_LAUNCH();
}

/// W[k][n] as a float: scale * g * M[offset].
template <class T>
SQUEEZE_DEVICE float weight(const mapping& map, const T* memory, std::uint64_t k, std::uint64_t n) {
  return map.element_factor(k, n) * to_float(memory[map.element_offset(k, n)]);
}

template <class T, class Out>
struct simt_forward {
  const T* x;
  std::uint64_t ldx;
  const T* memory;
  mapping map;
  Out* y;
  std::uint64_t ldy;
  std::uint64_t batch;
  SQUEEZE_HOST_DEVICE std::uint64_t rows() const { return batch; }
  SQUEEZE_HOST_DEVICE std::uint64_t cols() const { return map.cols(); }
  SQUEEZE_HOST_DEVICE std::uint64_t depth() const { return map.rows(); }
  SQUEEZE_DEVICE float a(std::uint64_t m, std::uint64_t k) const {
    return to_float(x[m * ldx + k]);
  }
  SQUEEZE_DEVICE float b(std::uint64_t k, std::uint64_t n) const {
    return weight(map, memory, k, n);
  }
  SQUEEZE_DEVICE void store(std::uint64_t m, std::uint64_t n, float v) const {
    y[m * ldy + n] = from_float<Out>(v);
  }
};

template <class T, class Out>
struct simt_backward_input {
  const T* dy;
  std::uint64_t lddy;
  const T* memory;
  mapping map;
  Out* dx;
  std::uint64_t lddx;
  std::uint64_t batch;
  SQUEEZE_HOST_DEVICE std::uint64_t rows() const { return batch; }
  SQUEEZE_HOST_DEVICE std::uint64_t cols() const { return map.rows(); }
  SQUEEZE_HOST_DEVICE std::uint64_t depth() const { return map.cols(); }
  SQUEEZE_DEVICE float a(std::uint64_t m, std::uint64_t n) const {
    return to_float(dy[m * lddy + n]);
  }
  SQUEEZE_DEVICE float b(std::uint64_t n, std::uint64_t k) const {
    return weight(map, memory, k, n);
  }
  SQUEEZE_DEVICE void store(std::uint64_t m, std::uint64_t k, float v) const {
    dx[m * lddx + k] = from_float<Out>(v);
  }
};

/// (X^T . dY)[k][n] for k in [k_begin, k_end), folded into dM with atomics or stored to a
/// gradient_fold's workspace (at mapping::workspace_offset minus workspace_base).
template <class T>
struct simt_backward_memory {
  const T* x;
  std::uint64_t ldx;
  const T* dy;
  std::uint64_t lddy;
  mapping map;
  float* dmemory;
  std::uint64_t batch;
  std::uint64_t k_begin = 0;
  std::uint64_t k_end = 0;
  float* workspace = nullptr;
  std::uint64_t workspace_base = 0;
  SQUEEZE_HOST_DEVICE std::uint64_t rows() const { return k_end - k_begin; }
  SQUEEZE_HOST_DEVICE std::uint64_t cols() const { return map.cols(); }
  SQUEEZE_HOST_DEVICE std::uint64_t depth() const { return batch; }
  SQUEEZE_DEVICE float a(std::uint64_t i, std::uint64_t m) const {
    return to_float(x[m * ldx + k_begin + i]);
  }
  SQUEEZE_DEVICE float b(std::uint64_t m, std::uint64_t n) const {
    return to_float(dy[m * lddy + n]);
  }
  SQUEEZE_DEVICE void store(std::uint64_t i, std::uint64_t n, float v) const {
    const std::uint64_t k = k_begin + i;
    if (workspace != nullptr) {
      workspace[map.workspace_offset(k, n) - workspace_base] = map.element_factor(k, n) * v;
    } else {
      atomicAdd(dmemory + map.element_offset(k, n), map.element_factor(k, n) * v);
    }
  }
};

}  // namespace squeeze::roast::detail
