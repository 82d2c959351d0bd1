// SPDX-License-Identifier: Apache-2.0
// squeeze/bam/cache.cuh: bam's software cache in GPU memory (owner and device view), and
// the warp-level acquire that every cached access goes through.
//
//   bam::cache c{num_lines, {.line_bytes = 4096, .slots = 1 << 16}, stream};  // host owner
//   cache_ref r = c.ref();         // to kernels ordered after the constructor on `stream`
//
// The metadata is cache_state.hpp's (one 32-bit word per line of the backing, one 64-bit
// word per slot, a clock hand); the slots are `slots` x line_bytes bytes of GPU memory:
//
//   data  [slots][line_bytes]   slot s at data + s * line_bytes, 128-byte aligned
//
// warp_acquire() is how a warp gets a line: a leader lane takes it (one pin for the warp), a
// miss is filled by all the warp's active lanes together. Callers with lanes on different
// lines (array_ref) group them with __match_any_sync and take the lines one after another,
// so a warp never holds one line while it waits for another: no cycle of warps waiting for
// each other's lines can form, and a full cache only makes a warp wait until some other
// warp is done with a line.
//
// The flush kernel (every dirty line back to its source) is in bam/detail/; bam::array's
// flush launches it.
#pragma once

#include <cuda_runtime.h>
#include <cuda/atomic>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string>

#include "squeeze/bam/cache_state.hpp"
#include "squeeze/core/arch.cuh"
#include "squeeze/core/buffer.hpp"
#include "squeeze/core/config.hpp"
#include "squeeze/core/cuda_error.hpp"
#include "squeeze/core/error.hpp"
#include "squeeze/core/status.hpp"

namespace squeeze::bam {

/// The shape of a cache.
struct cache_options {
  std::uint32_t line_bytes = 4096;  ///< a power of two from 512 B to 64 KiB
  std::uint64_t slots = 1024;       ///< lines the cache holds at once
  /// Clock rounds before a sweep over every slot decides (cache_state.hpp).
  std::uint32_t eviction_rounds = cache_state_ref::default_eviction_rounds;
};

/// The device view of a cache: trivially copyable, passed by value.
struct cache_ref {
  cache_state_ref state;          ///< the metadata (cache_state.hpp)
  std::byte* data = nullptr;      ///< [slots][line_bytes]
  std::uint32_t line_shift = 12;  ///< log2(line_bytes)

  /// Bytes of a line.
  SQUEEZE_HOST_DEVICE std::uint32_t line_bytes() const { return 1u << line_shift; }
  /// Where slot `slot` keeps its line.
  SQUEEZE_HOST_DEVICE std::byte* slot_data(std::uint32_t slot) const {
    return data + (std::uint64_t{slot} << line_shift);
  }
};

/// The cache's memory in GPU memory, empty when built. Move-only.
class cache {
 public:
  /// A cache for a backing of `num_lines` lines, empty: its metadata is zeroed on `stream`
  /// (asynchronous), so kernels that use ref() must be ordered after it on `stream`. Throws
  /// invalid_argument for a line size that is not a power of two in [512 B, 64 KiB], no
  /// slots, or sizes the metadata cannot number.
  cache(std::uint64_t num_lines, const cache_options& options, cudaStream_t stream)
      : options_{options},
        layout_{cache_state_layout::of(num_lines, options.slots)},
        meta_{layout_.bytes},
        data_{checked_data_bytes(options)} {
    meta_.fill_bytes(0, stream);
    ref_.state = cache_state_ref{meta_.data(), num_lines, options.slots, options.eviction_rounds};
    ref_.data = data_.data();
    ref_.line_shift = static_cast<std::uint32_t>(__builtin_ctz(options.line_bytes));
  }

  /// The device view (by value in kernels).
  [[nodiscard]] cache_ref ref() const noexcept { return ref_; }
  /// The shape it was built with.
  [[nodiscard]] const cache_options& options() const noexcept { return options_; }
  /// Lines of the backing it caches.
  [[nodiscard]] std::uint64_t num_lines() const noexcept { return layout_.num_lines; }
  /// GPU memory held: slots plus metadata.
  [[nodiscard]] std::uint64_t bytes() const noexcept { return data_.size() + meta_.size(); }
  /// Forgets every line (their data is dropped: flush first). Asynchronous on `stream`.
  void clear(cudaStream_t stream) { meta_.fill_bytes(0, stream); }

 private:
  static std::uint64_t checked_data_bytes(const cache_options& o) {
    const std::uint32_t b = o.line_bytes;
    SQUEEZE_EXPECTS(b >= 512 && b <= 65536 && (b & (b - 1)) == 0,
                    "bam::cache: line_bytes must be a power of two from 512 to 65536, not " +
                        std::to_string(b));
    SQUEEZE_EXPECTS(o.slots >= 1, "bam::cache: the cache needs at least one slot");
    return o.slots * b;
  }

  cache_options options_;
  cache_state_layout layout_;
  core::device_buffer<std::byte> meta_;
  core::device_buffer<std::byte> data_;
  cache_ref ref_{};
};

namespace detail {

/// The rank of this lane among the lanes of `mask`, and their count.
SQUEEZE_DEVICE unsigned rank_in(unsigned mask) {
  return static_cast<unsigned>(__popc(mask & ((1u << core::arch::lane_id()) - 1u)));
}

/// Lanes `mask` copy `bytes` bytes from src to dst (both 16-byte aligned): 16-byte chunks
/// dealt round-robin, eight loads in flight per lane before their stores, then the last
/// bytes one at a time.
SQUEEZE_DEVICE void group_copy(unsigned mask, std::byte* dst, const std::byte* src,
                               std::uint32_t bytes) {
  const unsigned n = static_cast<unsigned>(__popc(mask));
  const unsigned me = rank_in(mask);
  const std::uint32_t chunks = bytes / 16;
  constexpr unsigned batch = 8;
  for (std::uint32_t c0 = 0; c0 < chunks; c0 += batch * n) {
    uint4 v[batch];
    SQUEEZE_UNROLL
    for (unsigned b = 0; b < batch; ++b) {
      const std::uint32_t c = c0 + b * n + me;
      if (c < chunks) v[b] = reinterpret_cast<const uint4*>(src)[c];
    }
    SQUEEZE_UNROLL
    for (unsigned b = 0; b < batch; ++b) {
      const std::uint32_t c = c0 + b * n + me;
      if (c < chunks) reinterpret_cast<uint4*>(dst)[c] = v[b];
    }
  }
  for (std::uint32_t i = chunks * 16 + me; i < bytes; i += n) dst[i] = src[i];
}

}  // namespace detail

/// What warp_acquire gives the lanes: the line's bytes in the cache, or a status.
struct held_line {
  std::byte* data = nullptr;  ///< the slot holding the line (null on error)
  status st = status::ok;     ///< ok, or why the line could not be had
};

/// Where a cached line comes from and goes back to (device functions). A Source provides
///   status group_read(unsigned mask, std::uint64_t line, std::byte* dst, std::uint32_t
///                     line_bytes) const   // lanes `mask` fill dst (same status in each)
///   status write_line(std::uint64_t line, const std::byte* src, std::uint32_t line_bytes)
///                     const              // one thread writes a line back, visible to
///                                        // other threads' group_read when it returns
/// bam::array builds its source from its backing (bam/backing.cuh).
template <class S>
concept line_source = requires(const S& s, unsigned mask, std::uint64_t line, std::byte* dst,
                               const std::byte* src, std::uint32_t bytes) {
  { s.group_read(mask, line, dst, bytes) } -> std::same_as<status>;
  { s.write_line(line, src, bytes) } -> std::same_as<status>;
};

/// How long a warp keeps asking for a slot while every slot stays pinned by the same
/// holders, before it reports status::cache_full. cache_state_ref::try_acquire says
/// cache_full only when its sweep saw every slot pinned (slots in transition, being filled,
/// evicted or written back, are waited for inside it), and each such answer carries a digest
/// of the pins it saw. A warp cannot tell pins that other warps release within microseconds
/// (more warps than slots is the normal case) from pins that nobody will release (a warp that
/// holds a warp_pin and reads another line while every other slot is pinned, or several warps
/// doing that to each other), but it can see progress: a digest that changes means that
/// pins come and go, and the clock starts again. Only pins that stay exactly as they are for
/// this long become a status instead of a hang, so a slow GPU (time-sliced, oversubscribed,
/// or under compute-sanitizer) is never mistaken for a stuck one. Not tuned by measurement.
inline constexpr std::uint64_t cache_full_timeout_ns = 100'000'000;

/// The lanes `active` (all of them call it, all with the same `line`) get that line:
/// `leader` takes the pin for them, a miss is filled by all active lanes together (a dirty
/// victim is written back by the leader first). The line stays pinned until warp_release.
/// The warp must not hold another fetch while it waits here (pins are fine).
template <line_source Source>
SQUEEZE_DEVICE held_line warp_acquire(const cache_ref& cache, const Source& source, unsigned active,
                                      std::uint64_t line, unsigned leader) {
  acquire_result r;
  if (core::arch::lane_id() == leader) {
    core::backoff wait;
    bool full = false;             // the state machine has said cache_full to this warp
    std::uint64_t full_since = 0;  // when it first did with the pins it saw last
    std::uint64_t digest = 0;      // those pins
    for (;;) {
      r = cache.state.try_acquire(line);
      if (r.st == status::cache_full) {
        const std::uint64_t now = core::arch::global_timer_ns();
        if (!full || r.pinned_digest != digest) {
          full = true;
          full_since = now;
          digest = r.pinned_digest;
        } else if (now - full_since >= cache_full_timeout_ns) {
          break;  // every slot pinned, by the same pins, for this long
        }
      } else if (!r.busy) {
        break;
      }
      wait.pause();
    }
    if (r.st == status::ok && r.must_fill && r.writeback_line != no_line) {
      const status w =
          source.write_line(r.writeback_line, cache.slot_data(r.slot), cache.line_bytes());
      if (w == status::ok) {
        cache.state.finish_eviction(r.writeback_line);
      } else {
        cache.state.abandon_eviction(line, r.slot, r.writeback_line);
        r.st = w;
      }
    }
  }
  held_line h;
  h.st = static_cast<status>(__shfl_sync(active, static_cast<unsigned>(r.st), leader));
  const bool fill = __shfl_sync(active, r.must_fill, leader);
  const std::uint32_t slot = __shfl_sync(active, r.slot, leader);
  if (h.st != status::ok) return h;
  if (fill) {
    h.st = source.group_read(active, line, cache.slot_data(slot), cache.line_bytes());
    __threadfence();  // the fill's stores before the publish that releases them
    __syncwarp(active);
    if (core::arch::lane_id() == leader) {
      if (h.st == status::ok) {
        cache.state.publish(line, slot);
      } else {
        cache.state.abandon(line, slot);
      }
    }
    __syncwarp(active);
    if (h.st != status::ok) return h;
  }
  cuda::atomic_thread_fence(cuda::std::memory_order_acquire, cuda::thread_scope_device);
  h.data = cache.slot_data(slot);
  return h;
}

/// Ends warp_acquire (the same lanes, after a successful acquire): when `dirty`, every
/// lane's writes are made visible and the line marked dirty before the leader drops the pin.
SQUEEZE_DEVICE void warp_release(const cache_ref& cache, unsigned active, std::uint64_t line,
                                 unsigned leader, bool dirty) {
  if (dirty) __threadfence();
  __syncwarp(active);
  if (core::arch::lane_id() == leader) {
    if (dirty) cache.state.mark_dirty(line);
    cache.state.release(line);
  }
}

}  // namespace squeeze::bam
