// SPDX-License-Identifier: Apache-2.0
// squeeze/bam/detail/cache_kernels.cuh: the cache's flush kernel (every dirty line written
// back to its source, a warp per slot). Internal: bam/array.cuh's array::flush launches it.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "squeeze/bam/cache.cuh"
#include "squeeze/bam/cache_state.hpp"
#include "squeeze/core/arch.cuh"
#include "squeeze/core/config.hpp"
#include "squeeze/core/report.cuh"
#include "squeeze/core/status.hpp"

namespace squeeze::bam::detail {

/// Writes every dirty line back to `source` (one warp per slot; launch after the kernels
/// that use the cache have finished). Lines that cannot be written keep their dirty bit and
/// the first error goes to *status_out.
template <line_source Source>
SQUEEZE_KERNEL(256)
void flush_kernel(cache_ref cache, Source source, status* status_out) {
  const unsigned lane = core::arch::lane_id();
  const std::uint64_t warps = std::uint64_t{gridDim.x} * (blockDim.x / 32);
  for (std::uint64_t s = (blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x) / 32;
       s < cache.state.num_slots(); s += warps) {
    std::uint64_t owner = no_line;
    bool taken = false;
    if (lane == 0) {
      owner = cache.state.slot(static_cast<std::uint32_t>(s)).owner;
      taken = owner != no_line && cache.state.begin_writeback(owner);
    }
    owner = __shfl_sync(full_warp_mask, owner, 0);
    if (!__shfl_sync(full_warp_mask, taken, 0)) continue;
    const std::byte* src = cache.slot_data(cache.state.slot_of(owner));
    status st = status::ok;
    if (lane == 0) st = source.write_line(owner, src, cache.line_bytes());
    if (lane == 0) {
      if (st == status::ok) {
        cache.state.end_writeback(owner);
      } else {
        cache.state.cancel_writeback(owner);
        core::report_status(status_out, st);
      }
    }
  }
}

}  // namespace squeeze::bam::detail
