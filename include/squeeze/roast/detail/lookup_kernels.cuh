// SPDX-License-Identifier: Apache-2.0
// squeeze/roast/detail/lookup_kernels.cuh: the lookup and bag kernels (forward, bag
// backward), what they read and write, and their launch: lanes per output row, the choice
// of float4 or single values, the grid. Internal: roast/lookup.cuh's lookup_forward,
// bag_forward and bag_backward launch them.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "squeeze/core/bits.hpp"
#include "squeeze/core/config.hpp"
#include "squeeze/core/cuda_error.hpp"
#include "squeeze/core/error.hpp"
#include "squeeze/core/report.cuh"
#include "squeeze/core/status.hpp"
#include "squeeze/roast/lookup.hpp"

namespace squeeze::roast {

namespace detail {

inline constexpr int lookup_block_threads = 256;

/// What the lookup kernels read and write. Plain parameters, passed by value.
struct lookup_args {
  const float* memory = nullptr;          ///< [map.memory_size()] M (forward)
  lookup_mapping map{};                   ///< the table's view into M
  const std::int64_t* indices = nullptr;  ///< [count] rows of W
  std::uint64_t count = 0;                ///< indices
  const std::int64_t* offsets = nullptr;  ///< [rows_out + 1] bag bounds (bag kernels only)
  std::uint64_t rows_out = 0;             ///< output rows: count (lookup) or bags
  bag_mode mode = bag_mode::sum;
  const float* grad = nullptr;  ///< [rows_out, dim] dL/d out (backward)
  float* out = nullptr;         ///< [rows_out, dim] (forward)
  float* dmemory = nullptr;     ///< [map.memory_size()] dM (backward)
  status* status_out = nullptr;
  unsigned group_lanes = 32;  ///< lanes per output row: a power of two <= 32
};

/// `Width` consecutive floats at p (p aligned to Width floats).
template <int Width>
SQUEEZE_DEVICE void load_values(const float* p, float (&v)[Width]) {
  if constexpr (Width == 4) {
    const float4 q = __ldg(reinterpret_cast<const float4*>(p));
    v[0] = q.x;
    v[1] = q.y;
    v[2] = q.z;
    v[3] = q.w;
  } else {
    static_assert(Width == 1, "lookup kernels read 1 or 4 values at a time");
    v[0] = __ldg(p);
  }
}

template <int Width>
SQUEEZE_DEVICE void store_values(float* p, const float (&v)[Width]) {
  if constexpr (Width == 4) {
    *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
  } else {
    p[0] = v[0];
  }
}

/// Forward: output row g is W[indices[g]] (Bags == false) or the reduction of bag g.
template <int Width, bool Bags>
SQUEEZE_KERNEL(lookup_block_threads)
void lookup_forward_kernel(lookup_args a) {
  const std::uint32_t dim = a.map.dim();
  const std::uint32_t vectors = dim / Width;  // [dim / Width] runs per row
  const std::uint64_t thread = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  const std::uint64_t group_stride = std::uint64_t{gridDim.x} * blockDim.x / a.group_lanes;
  const auto lane = static_cast<std::uint32_t>(thread % a.group_lanes);
  for (std::uint64_t g = thread / a.group_lanes; g < a.rows_out; g += group_stride) {
    float* o = a.out + g * dim;
    if constexpr (!Bags) {
      const std::int64_t index = a.indices[g];
      const bool valid = a.map.has_row(index);
      if (!valid && lane == 0) core::report_status(a.status_out, status::out_of_bounds);
      const std::uint64_t row = valid ? static_cast<std::uint64_t>(index) : 0;
      for (std::uint32_t v = lane; v < vectors; v += a.group_lanes) {
        const std::uint32_t j = v * Width;
        float x[Width] = {};
        if (valid) {
          load_values<Width>(a.memory + a.map.element_offset(row, j), x);
          const float f = a.map.element_factor(row, j);
          SQUEEZE_UNROLL
          for (int e = 0; e < Width; ++e) x[e] = f * x[e];
        }
        store_values<Width>(o + j, x);
      }
    } else {
      std::uint64_t first = 0;
      std::uint64_t last = 0;
      if (!bag_range(a.offsets, g, a.count, first, last) && lane == 0) {
        core::report_status(a.status_out, status::out_of_bounds);
      }
      for (std::uint32_t v = lane; v < vectors; v += a.group_lanes) {
        const std::uint32_t j = v * Width;
        float acc[Width] = {};
        // In index order, one fma per value: the order reference_bag_forward uses.
#pragma unroll 4
        for (std::uint64_t k = first; k < last; ++k) {
          const std::int64_t index = a.indices[k];
          if (!a.map.has_row(index)) {
            if (v == 0) core::report_status(a.status_out, status::out_of_bounds);
            continue;
          }
          const auto row = static_cast<std::uint64_t>(index);
          float x[Width];
          load_values<Width>(a.memory + a.map.element_offset(row, j), x);
          const float f = a.map.element_factor(row, j);
          SQUEEZE_UNROLL
          for (int e = 0; e < Width; ++e) acc[e] = fmaf(f, x[e], acc[e]);
        }
        if (a.mode == bag_mode::mean && last > first) {
          const auto n = static_cast<float>(last - first);
          SQUEEZE_UNROLL
          for (int e = 0; e < Width; ++e) acc[e] = __fdiv_rn(acc[e], n);
        }
        store_values<Width>(o + j, acc);
      }
    }
  }
}

/// Backward: scatters bag g's gradient row into dM once per valid index of the bag.
template <int Width>
SQUEEZE_KERNEL(lookup_block_threads)
void bag_backward_kernel(lookup_args a) {
  const std::uint32_t dim = a.map.dim();
  const std::uint32_t vectors = dim / Width;
  const std::uint64_t thread = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  const std::uint64_t group_stride = std::uint64_t{gridDim.x} * blockDim.x / a.group_lanes;
  const auto lane = static_cast<std::uint32_t>(thread % a.group_lanes);
  for (std::uint64_t g = thread / a.group_lanes; g < a.rows_out; g += group_stride) {
    std::uint64_t first = 0;
    std::uint64_t last = 0;
    if (!bag_range(a.offsets, g, a.count, first, last)) {
      if (lane == 0) core::report_status(a.status_out, status::out_of_bounds);
      continue;
    }
    if (first == last) continue;
    const auto n = static_cast<float>(last - first);
    for (std::uint32_t v = lane; v < vectors; v += a.group_lanes) {
      const std::uint32_t j = v * Width;
      float grad[Width];
      load_values<Width>(a.grad + g * dim + j, grad);
      if (a.mode == bag_mode::mean) {
        SQUEEZE_UNROLL
        for (int e = 0; e < Width; ++e) grad[e] = __fdiv_rn(grad[e], n);
      }
      for (std::uint64_t k = first; k < last; ++k) {
        const std::int64_t index = a.indices[k];
        if (!a.map.has_row(index)) {
          if (v == 0) core::report_status(a.status_out, status::out_of_bounds);
          continue;
        }
        const auto row = static_cast<std::uint64_t>(index);
        float* d = a.dmemory + a.map.element_offset(row, j);
        const float f = a.map.element_factor(row, j);
        SQUEEZE_UNROLL
        for (int e = 0; e < Width; ++e) atomicAdd(d + e, f * grad[e]);
      }
    }
  }
}

/// Lanes per output row: enough for one pass over the row's runs, at most a warp.
inline unsigned lookup_group_lanes(std::uint32_t runs) {
  unsigned lanes = 1;
  while (lanes < runs && lanes < static_cast<unsigned>(warp_threads)) lanes *= 2;
  return lanes;
}

/// Whether rows can be moved as float4: chunk starts and row runs aligned to 4 values and
/// every pointer the kernel reads or writes by rows 16-byte aligned.
inline bool lookup_vectorizable(const lookup_mapping& map, const void* p, const void* q) {
  return map.alignment() == 4 && map.dim() % 4 == 0 && core::misalignment(p, 16) == 0 &&
         core::misalignment(q, 16) == 0;
}

/// Launches `kernel` (its Width given) over a.rows_out output rows.
template <class Policy, int Width, class Kernel>
void launch_lookup(Kernel kernel, lookup_args a, cudaStream_t stream) {
  a.group_lanes = lookup_group_lanes(a.map.dim() / Width);
  const std::uint64_t rows_per_block = lookup_block_threads / a.group_lanes;
  const std::uint64_t wanted = core::div_ceil(a.rows_out, rows_per_block);
  const std::uint64_t cap = Policy::max_blocks;
  const auto blocks = static_cast<unsigned>(wanted < cap ? wanted : cap);
  kernel<<<blocks, lookup_block_threads, 0, stream>>>(a);
  SQUEEZE_CHECK_LAUNCH();
}

inline void check_mapping(const lookup_mapping& map, const char* what) {
  SQUEEZE_EXPECTS(map.rows() > 0 && map.dim() > 0,
                  std::string(what) + ": the mapping is empty (default-constructed)");
}

}  // namespace detail

}  // namespace squeeze::roast
