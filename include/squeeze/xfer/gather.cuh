// SPDX-License-Identifier: Apache-2.0
// squeeze/xfer/gather.cuh: gather rows selected by an index array, from mapped host
// memory (or any device-accessible memory) into device memory.
//
//   dst[i, :] = src[indices[i], :]      for i in [0, count)
//   // dst: [count, dst_stride B], src: [src_rows, src_stride B], rows of row_bytes B
//
// Rows may have any byte size and any alignment (row_bytes and strides need not be
// multiples of anything). Rows are read as 16-byte granules (xfer/copy.cuh), so warps issue
// 128-byte aligned segments; reads stay inside the table [src, src + (src_rows - 1) *
// src_stride + row_bytes) (a row's edge granules may take bytes of its neighbours, never
// bytes outside the table); a warp keeps several rows' reads in flight
// (gather_policy::rows_in_flight) so that small rows still fill the link.
//
// An index >= src_rows is not followed: its output row is left untouched and
// status::out_of_bounds is written to args.status_out (when given).
//
// The arguments, the policy and the warp primitive are in xfer/warp_gather.cuh, the kernel
// in xfer/detail/.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <type_traits>

#include "squeeze/core/bits.hpp"
#include "squeeze/core/config.hpp"
#include "squeeze/core/cuda_error.hpp"
#include "squeeze/xfer/detail/gather_kernels.cuh"
#include "squeeze/xfer/warp_gather.cuh"

namespace squeeze::xfer {

/// Checks a gather's arguments; throws squeeze::invalid_argument naming the bad one.
template <class Index>
void validate(const gather_args<Index>& a) {
  SQUEEZE_EXPECTS(a.row_bytes > 0 || a.count == 0, "gather_rows: row_bytes must be positive");
  if (a.count == 0) return;
  SQUEEZE_EXPECTS(a.dst != nullptr, "gather_rows: dst is null");
  SQUEEZE_EXPECTS(a.src != nullptr, "gather_rows: src is null");
  SQUEEZE_EXPECTS(a.indices != nullptr, "gather_rows: indices is null");
  SQUEEZE_EXPECTS(a.dst_stride >= a.row_bytes,
                  "gather_rows: dst_stride must be at least row_bytes (rows would overlap)");
  SQUEEZE_EXPECTS(a.src_rows == 0 || a.src_stride >= a.row_bytes,
                  "gather_rows: src_stride must be at least row_bytes");
}

/// Gathers a.count rows on `stream` (asynchronous; check a.status_out after synchronizing).
template <gather_policy_like Policy = gather_policy, class Index>
requires std::is_integral_v<Index>
void gather_rows(const gather_args<Index>& a, cudaStream_t stream) {
  validate(a);
  if (a.count == 0) return;
  constexpr std::size_t rows_per_block =
      std::size_t{Policy::rows_in_flight} * (Policy::block_threads / warp_threads);
  const std::size_t wanted = core::div_ceil(a.count, rows_per_block);
  const auto blocks = static_cast<unsigned>(wanted < (1u << 30) ? wanted : (1u << 30));
  detail::gather_rows_kernel<Policy, Index><<<blocks, Policy::block_threads, 0, stream>>>(a);
  SQUEEZE_CHECK_LAUNCH();
}

}  // namespace squeeze::xfer
