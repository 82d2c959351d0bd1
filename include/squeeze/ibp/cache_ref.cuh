// SPDX-License-Identifier: Apache-2.0
// squeeze/ibp/cache_ref.cuh: the device side of ibp's compressed cache (ibp/cache.cuh): the
// handle of a cached row, the cache's view (compressed_cache_ref, by value in kernels), the
// map's hash, and the warp-cooperative lookup of a row id (cache_find).
//
// A hash map from row id to a 64-bit handle finds the cached rows:
//
//   bit 63          44 43  42   40 39                                    0
//   | stored bytes (20) | c | slab (3) |          offset in the slab (40)     |
//     c = 1: compressed (decode), 0: raw (copy); stored bytes: the row's stored length
//     (the spare bits of Kamath et al., EuroSys 2026), so a hit needs no other lookup
//
// Up to 8 slabs (one per GPU of a node, or several on one GPU), 1 TiB each, rows up to
// 1 MiB - 1 bytes. The map is open addressing with linear probing, at most half full;
// a warp probes 32 slots per step.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "squeeze/core/arch.cuh"
#include "squeeze/core/config.hpp"

namespace squeeze::ibp {

/// The 64-bit handle of a cached row (layout at the top of this file).
struct cache_handle {
  static constexpr unsigned offset_bits = 40;
  static constexpr unsigned slab_bits = 3;
  static constexpr unsigned size_bits = 20;
  static constexpr std::uint64_t max_offset = (std::uint64_t{1} << offset_bits) - 1;
  static constexpr std::uint32_t max_slabs = 1u << slab_bits;
  static constexpr std::uint32_t max_stored = (1u << size_bits) - 1;

  std::uint64_t bits = 0;

  SQUEEZE_HOST_DEVICE static constexpr cache_handle make(std::uint32_t slab, std::uint64_t offset,
                                                         bool compressed,
                                                         std::uint32_t stored) noexcept {
    return {offset | (std::uint64_t{slab} << offset_bits) |
            (std::uint64_t{compressed ? 1u : 0u} << (offset_bits + slab_bits)) |
            (std::uint64_t{stored} << (offset_bits + slab_bits + 1))};
  }
  SQUEEZE_HOST_DEVICE constexpr std::uint64_t offset() const noexcept { return bits & max_offset; }
  SQUEEZE_HOST_DEVICE constexpr std::uint32_t slab() const noexcept {
    return static_cast<std::uint32_t>((bits >> offset_bits) & (max_slabs - 1));
  }
  SQUEEZE_HOST_DEVICE constexpr bool compressed() const noexcept {
    return ((bits >> (offset_bits + slab_bits)) & 1u) != 0;
  }
  SQUEEZE_HOST_DEVICE constexpr std::uint32_t stored() const noexcept {
    return static_cast<std::uint32_t>(bits >> (offset_bits + slab_bits + 1));
  }
};

/// The device view of a compressed cache (trivially copyable; kernels get it by value).
struct compressed_cache_ref {
  static constexpr std::uint64_t empty_key = ~std::uint64_t{0};

  const std::uint64_t* keys = nullptr;     ///< [capacity] row ids, empty_key where free
  const std::uint64_t* handles = nullptr;  ///< [capacity] cache_handle bits
  std::uint64_t capacity = 0;              ///< a power of two (0: an empty cache)
  const std::byte* slabs[cache_handle::max_slabs] = {};
  std::uint64_t slab_bytes[cache_handle::max_slabs] = {};
  std::uint32_t slab_count = 0;
};

/// The map's hash of a row id (a 64-bit finalizer: neighbouring ids spread apart).
SQUEEZE_HOST_DEVICE constexpr std::uint64_t cache_hash(std::uint64_t key) noexcept {
  key ^= key >> 33;
  key *= 0xff51afd7ed558ccdULL;
  key ^= key >> 33;
  key *= 0xc4ceb9fe1a85ec53ULL;
  key ^= key >> 33;
  return key;
}

/// Warp-cooperative lookup of row id `key`: its handle in `handle` and true, or false.
/// Every lane of the warp calls it with the same key; the result is warp-uniform.
SQUEEZE_DEVICE bool cache_find(const compressed_cache_ref& c, std::uint64_t key,
                               cache_handle& handle) {
  if (c.capacity == 0) return false;
  const unsigned lane = core::arch::lane_id();
  const std::uint64_t mask = c.capacity - 1;
  const std::uint64_t home = cache_hash(key) & mask;
  for (std::uint64_t probed = 0; probed < c.capacity; probed += warp_threads) {
    const std::uint64_t slot = (home + probed + lane) & mask;
    const std::uint64_t k =
        probed + lane < c.capacity ? c.keys[slot] : compressed_cache_ref::empty_key;
    const unsigned hit = __ballot_sync(full_warp_mask, k == key);
    const unsigned free = __ballot_sync(full_warp_mask, k == compressed_cache_ref::empty_key);
    // Linear probing put the key before the first free slot of its run, if at all.
    if (hit != 0 && (free == 0 || __ffs(hit) < __ffs(free))) {
      const int from = __ffs(hit) - 1;
      const std::uint64_t h = lane == static_cast<unsigned>(from) ? c.handles[slot] : 0;
      handle.bits = __shfl_sync(full_warp_mask, h, from);
      return true;
    }
    if (free != 0) return false;
  }
  return false;
}

}  // namespace squeeze::ibp
