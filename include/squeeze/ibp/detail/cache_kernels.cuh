// SPDX-License-Identifier: Apache-2.0
// squeeze/ibp/detail/cache_kernels.cuh: the compressed cache's gather kernel and where it
// finds a row (the cache's slabs for a hit, the set for a miss). Internal:
// ibp/cache.cuh's gather_cached launches it.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "squeeze/core/arch.cuh"
#include "squeeze/core/config.hpp"
#include "squeeze/core/status.hpp"
#include "squeeze/ibp/cache_ref.cuh"
#include "squeeze/ibp/detail/gather_kernels.cuh"
#include "squeeze/ibp/gather_args.cuh"
#include "squeeze/xfer/bounds.hpp"

namespace squeeze::ibp {

namespace detail {

/// A gather through the cache: hits from the slabs, misses from the set `set` describes.
template <class Index>
struct cache_request {
  gather_args<Index> set;
  compressed_cache_ref cache;
  unsigned long long* hits;  ///< optional: counts the rows served from the cache
};

template <class Index>
SQUEEZE_DEVICE row_location locate(const cache_request<Index>& req, std::size_t i) {
  const Index idx = req.set.indices[i];
  std::uint64_t r = 0;
  row_location s = identify_row(req.set, idx, r);
  if (s.st != status::ok) return s;
  cache_handle h;
  if (!cache_find(req.cache, r, h)) return place_row(req.set, r, s);
  if (req.hits != nullptr && core::arch::lane_id() == 0) atomicAdd(req.hits, 1ULL);
  const std::uint32_t slab = h.slab();
  const std::uint32_t l = s.row.codebook.tensor_bytes;
  const std::uint32_t stored = h.stored();
  if (slab >= req.cache.slab_count || stored == 0 || stored > l || h.compressed() != (stored < l) ||
      h.offset() + stored > req.cache.slab_bytes[slab]) {
    s.st = status::corrupt;
    return s;
  }
  s.row.src = req.cache.slabs[slab] + h.offset();
  s.row.stored = stored;
  s.row.readable = xfer::readable_range::of(req.cache.slabs[slab], req.cache.slab_bytes[slab]);
  return s;
}

template <class Policy, bool Streaming, unsigned Chunk, class Index>
SQUEEZE_KERNEL_MIN_BLOCKS(Policy::block_threads, Policy::min_blocks_per_sm)
void cache_gather_kernel(cache_request<Index> req) {
  gather_loop<Policy, Streaming, Chunk>(req, req.set);
}

}  // namespace detail

}  // namespace squeeze::ibp
