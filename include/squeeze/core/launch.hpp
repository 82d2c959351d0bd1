// SPDX-License-Identifier: Apache-2.0
// squeeze/core/launch.hpp: how squeeze sizes its grids, in one place.
//
//   core::sm_count()                            SMs of the current device (cached per device)
//   core::grid_for(items, per_block, max)       ceil(items / per_block) blocks, in [1, max]
//   core::per_sm(k)                             max for "at most k blocks per SM"
//   core::balanced_grid(items, per_block, max)  as grid_for, then spread so that every block
//                                               runs the same number of rounds
//   core::resident_blocks<Kernel>(threads, smem)  blocks of Kernel that fit on the device at
//                                               once (occupancy x SMs), cached per device
//   core::persistent_grid<Kernel>(items, per_block, threads, smem)
//                                               grid_for capped at resident_blocks: a grid
//                                               whose blocks loop over the work
//
// Every query is a CUDA attribute or occupancy call the first time, then an atomic load: the
// launchers of kernels that run for a few microseconds (the IBP gather, the allreduce's
// reductions) can call them on every launch. Host code only; the kernels are the callers'.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "squeeze/core/cuda_error.hpp"
#include "squeeze/core/error.hpp"

namespace squeeze::core {

namespace detail {
/// Devices whose answers are cached; a process that sees more asks again each time.
inline constexpr int cached_devices = 64;

inline int current_device() {
  int device = 0;
  SQUEEZE_CUDA_TRY(cudaGetDevice(&device));
  return device;
}
}  // namespace detail

/// Streaming multiprocessors of the current device: one attribute query per device and
/// process, then a load.
inline int sm_count() {
  static std::array<std::atomic<int>, detail::cached_devices> cache{};
  const int device = detail::current_device();
  if (device < detail::cached_devices) {
    if (const int sms = cache[device].load(std::memory_order_relaxed); sms > 0) return sms;
  }
  int sms = 0;
  SQUEEZE_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  if (device < detail::cached_devices) cache[device].store(sms, std::memory_order_relaxed);
  return sms;
}

/// A non-negative number worked out by `compute(device)` the first time it is asked for on
/// the current device, then kept: one cache per `Compute` type (each lambda is its own
/// type, so each call site, and each instantiation of a template around it, has its own).
/// Two threads that ask first at once may both compute it; they store the same answer.
template <class Compute>
int once_per_device(Compute&& compute) {
  static std::array<std::atomic<int>, detail::cached_devices> cache{};  // answer + 1; 0: not yet
  const int device = detail::current_device();
  if (device < detail::cached_devices) {
    if (const int known = cache[device].load(std::memory_order_acquire); known > 0) {
      return known - 1;
    }
  }
  const int value = compute(device);
  SQUEEZE_EXPECTS(value >= 0, "core::once_per_device: the answer must be non-negative");
  if (device < detail::cached_devices) cache[device].store(value + 1, std::memory_order_release);
  return value;
}

/// The largest grid of "at most `blocks` blocks per SM" on the current device.
inline std::size_t per_sm(unsigned blocks) {
  return std::size_t{blocks} * static_cast<std::size_t>(sm_count());
}

/// Blocks for `items` work items at `per_block` a block: ceil(items / per_block), at least 1
/// (a launch of zero blocks is an error), at most `max_blocks` (a grid-stride loop does the
/// rest) and at most 2^31 - 1.
constexpr unsigned grid_for(std::size_t items, std::size_t per_block, std::size_t max_blocks) {
  const std::size_t wanted = items / per_block + (items % per_block != 0);
  const std::size_t cap = std::min<std::size_t>(std::max<std::size_t>(max_blocks, 1), 0x7fffffff);
  return static_cast<unsigned>(std::clamp<std::size_t>(wanted, 1, cap));
}

/// grid_for, then as few blocks as give every block the same number of rounds: 10 blocks'
/// work on a cap of 8 runs as 5 blocks of two rounds, not 8 blocks of which 2 run twice.
constexpr unsigned balanced_grid(std::size_t items, std::size_t per_block, std::size_t max_blocks) {
  const std::size_t wanted = items / per_block + (items % per_block != 0);
  const std::size_t cap = grid_for(items, per_block, max_blocks);
  const std::size_t rounds = std::max<std::size_t>(1, wanted / cap + (wanted % cap != 0));
  return grid_for(wanted, rounds, cap);
}

/// Blocks of `Kernel` (launched with `threads` threads and `smem` bytes of dynamic shared
/// memory) that are resident at once on the current device: the occupancy per SM (at least
/// 1) times the SMs. Queried once per device and (threads, smem), then cached.
template <auto Kernel>
std::size_t resident_blocks(int threads, std::size_t smem = 0) {
  // One word per device: threads (11 bits) and smem (21 bits) as the key, the answer below.
  static std::array<std::atomic<std::uint64_t>, detail::cached_devices> cache{};
  const int device = detail::current_device();
  const std::uint64_t key = (std::uint64_t(threads) & 0x7ff) << 21 | (smem & 0x1fffff);
  const bool cacheable = device < detail::cached_devices && threads <= 1024 && smem < (1u << 21);
  if (cacheable) {
    const std::uint64_t word = cache[device].load(std::memory_order_relaxed);
    if (word != 0 && word >> 32 == key) return word & 0xffffffffu;
  }
  int per_sm_blocks = 0;
  SQUEEZE_CUDA_TRY(
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm_blocks, Kernel, threads, smem));
  const std::size_t blocks = per_sm(static_cast<unsigned>(std::max(per_sm_blocks, 1)));
  if (cacheable && blocks <= 0xffffffffu) {
    cache[device].store(key << 32 | blocks, std::memory_order_relaxed);
  }
  return blocks;
}

/// A grid whose blocks loop over the work: grid_for(items, per_block, ...) capped at the
/// blocks of `Kernel` that fit at once, so each block (or warp) takes a sequence of items and
/// can keep the next one's loads in flight.
template <auto Kernel>
unsigned persistent_grid(std::size_t items, std::size_t per_block, int threads,
                         std::size_t smem = 0) {
  return grid_for(items, per_block, resident_blocks<Kernel>(threads, smem));
}

}  // namespace squeeze::core
