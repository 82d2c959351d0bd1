// SPDX-License-Identifier: Apache-2.0
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
//
// The kernels, their arguments and their launch are in roast/detail/.
#pragma once

#include <cuda_runtime.h>

#include <concepts>
#include <cstdint>

#include "squeeze/core/error.hpp"
#include "squeeze/core/status.hpp"
#include "squeeze/roast/detail/lookup_kernels.cuh"
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
