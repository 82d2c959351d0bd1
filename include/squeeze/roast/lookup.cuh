// squeeze/roast/lookup.cuh: ROBE embedding lookups on the GPU, through the hash of
// lookup.hpp (which documents the layout and the bag semantics).
//
//   lookup_forward  out[i][j] = W[indices[i]][j]                          [count, dim]
//   bag_forward     out[b][j] = sum (or mean) over k in bag b of W[indices[k]][j]  [bags, dim]
//   bag_backward    dM[h(r, c) + j mod Z] += scale * g(r, c) * grad_out[b][j] (/ |bag|)
//                   for every index r = indices[k] of every bag b     (fp32 atomicAdd)
//
// One group of lanes (a power of two <= 32, sized to the row) produces one output row; each
// lane handles runs of 4 values of the row, read as one aligned float4 of M, when Z % 4 == 0,
// dim % 4 == 0 and the pointers are 16-byte aligned, and single values otherwise. A bag's
// values are added in index order with one fma each, so bag_forward equals
// reference_bag_forward bit for bit; bag_backward adds with atomics in no fixed order.
//
// M (`memory`, `dmemory`) must hold map.memory_size() fp32 values: the mapping never
// addresses past that, whatever the indices. Bad input is reported, never followed: an index
// outside [0, rows) or a bag whose offsets decrease or pass `count` writes
// status::out_of_bounds to `*status_out` (optional, device-accessible; the first error wins,
// and it is left untouched on success, so zero it, status::ok, before the launch); the
// affected output values are zeros (see lookup.hpp) and no memory outside the arguments is
// read or written. All launchers are asynchronous on `stream`: read the status after
// synchronizing it.
#pragma once

#include <cuda_runtime.h>

#include <concepts>
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

/// The tunables of the lookup and bag launches (lookup_forward, bag_forward, bag_backward
/// take it as their template argument; pass a struct with the same members to change it).
/// Being templates, those functions compile their kernels only where they are called.
struct lookup_policy {
  /// Grid cap of the lookup kernels (they loop over output rows beyond it).
  static constexpr std::uint64_t max_blocks = std::uint64_t{1} << 20;
};

/// A policy with lookup_policy's members.
template <class P>
concept lookup_policy_like = requires {
  { P::max_blocks } -> std::convertible_to<std::uint64_t>;
}
&&P::max_blocks > 0 && P::max_blocks <= 0x7fffffffu;

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

/// out[i] = W[indices[i]] for i < count: `out` is [count, dim] fp32 (device memory),
/// `memory` is M (map.memory_size() values), `indices` count device-accessible values.
/// An index outside [0, rows) gives a row of zeros and status::out_of_bounds in
/// `*status_out` (when given). Asynchronous on `stream`.
template <lookup_policy_like Policy = lookup_policy>
void lookup_forward(const float* memory, const lookup_mapping& map, const std::int64_t* indices,
                    std::uint64_t count, float* out, cudaStream_t stream,
                    status* status_out = nullptr) {
  detail::check_mapping(map, "roast::lookup_forward");
  if (count == 0) return;
  SQUEEZE_EXPECTS(memory != nullptr, "roast::lookup_forward: M (memory) is null");
  SQUEEZE_EXPECTS(indices != nullptr, "roast::lookup_forward: indices is null with count > 0");
  SQUEEZE_EXPECTS(out != nullptr, "roast::lookup_forward: out is null with count > 0");
  detail::lookup_args a;
  a.memory = memory;
  a.map = map;
  a.indices = indices;
  a.count = count;
  a.rows_out = count;
  a.out = out;
  a.status_out = status_out;
  if (detail::lookup_vectorizable(map, memory, out)) {
    detail::launch_lookup<Policy, 4>(detail::lookup_forward_kernel<4, false>, a, stream);
  } else {
    detail::launch_lookup<Policy, 1>(detail::lookup_forward_kernel<1, false>, a, stream);
  }
}

/// EmbeddingBag forward: out[b] ([bags, dim] fp32) = sum or mean of W[indices[k]] over
/// k in [offsets[b], offsets[b+1]); `offsets` holds bags + 1 device-accessible values,
/// `indices` count. An empty bag gives zeros. Bad indices and offsets: see lookup.hpp
/// (reported through `*status_out` when given). Asynchronous on `stream`.
template <lookup_policy_like Policy = lookup_policy>
void bag_forward(const float* memory, const lookup_mapping& map, const std::int64_t* indices,
                 std::uint64_t count, const std::int64_t* offsets, std::uint64_t bags,
                 bag_mode mode, float* out, cudaStream_t stream, status* status_out = nullptr) {
  detail::check_mapping(map, "roast::bag_forward");
  SQUEEZE_EXPECTS(mode == bag_mode::sum || mode == bag_mode::mean,
                  "roast::bag_forward: mode must be bag_mode::sum or bag_mode::mean");
  if (bags == 0) return;
  SQUEEZE_EXPECTS(memory != nullptr, "roast::bag_forward: M (memory) is null");
  SQUEEZE_EXPECTS(indices != nullptr || count == 0,
                  "roast::bag_forward: indices is null with count > 0");
  SQUEEZE_EXPECTS(offsets != nullptr,
                  "roast::bag_forward: offsets is null (it needs bags + 1 entries)");
  SQUEEZE_EXPECTS(out != nullptr, "roast::bag_forward: out is null with bags > 0");
  detail::lookup_args a;
  a.memory = memory;
  a.map = map;
  a.indices = indices;
  a.count = count;
  a.offsets = offsets;
  a.rows_out = bags;
  a.mode = mode;
  a.out = out;
  a.status_out = status_out;
  if (detail::lookup_vectorizable(map, memory, out)) {
    detail::launch_lookup<Policy, 4>(detail::lookup_forward_kernel<4, true>, a, stream);
  } else {
    detail::launch_lookup<Policy, 1>(detail::lookup_forward_kernel<1, true>, a, stream);
  }
}

/// EmbeddingBag backward into M: for every valid index r = indices[k] of bag b,
/// dM[element_offset(r, j)] += element_factor(r, j) * grad_out[b][j] (divided by the bag's
/// size for a mean), fp32 atomicAdd into `dmemory` (map.memory_size() values, accumulated,
/// not cleared). `grad_out` is [bags, dim] fp32. Results vary with the order of the atomics
/// by fp32 rounding. Bad indices and offsets are skipped and reported as in bag_forward.
template <lookup_policy_like Policy = lookup_policy>
void bag_backward(const lookup_mapping& map, const std::int64_t* indices, std::uint64_t count,
                  const std::int64_t* offsets, std::uint64_t bags, bag_mode mode,
                  const float* grad_out, float* dmemory, cudaStream_t stream,
                  status* status_out = nullptr) {
  detail::check_mapping(map, "roast::bag_backward");
  SQUEEZE_EXPECTS(mode == bag_mode::sum || mode == bag_mode::mean,
                  "roast::bag_backward: mode must be bag_mode::sum or bag_mode::mean");
  if (bags == 0) return;
  SQUEEZE_EXPECTS(indices != nullptr || count == 0,
                  "roast::bag_backward: indices is null with count > 0");
  SQUEEZE_EXPECTS(offsets != nullptr,
                  "roast::bag_backward: offsets is null (it needs bags + 1 entries)");
  SQUEEZE_EXPECTS(grad_out != nullptr, "roast::bag_backward: grad_out is null with bags > 0");
  SQUEEZE_EXPECTS(dmemory != nullptr, "roast::bag_backward: dM (dmemory) is null");
  detail::lookup_args a;
  a.map = map;
  a.indices = indices;
  a.count = count;
  a.offsets = offsets;
  a.rows_out = bags;
  a.mode = mode;
  a.grad = grad_out;
  a.dmemory = dmemory;
  a.status_out = status_out;
  if (detail::lookup_vectorizable(map, grad_out, dmemory)) {
    detail::launch_lookup<Policy, 4>(detail::bag_backward_kernel<4>, a, stream);
  } else {
    detail::launch_lookup<Policy, 1>(detail::bag_backward_kernel<1>, a, stream);
  }
}

}  // namespace squeeze::roast
