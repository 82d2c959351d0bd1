// SPDX-License-Identifier: Apache-2.0
// squeeze/bam/array.cuh: bam::array<T, Backing>, an array that kernels index like memory
// while its data lives in GPU memory, in host memory, in a file, or in a backing of yours,
// read directly or through bam's software cache.
//
//   core::pinned_buffer<float> host{n, core::host_memory::mapped};      // the data, on the host
//   bam::array<float, bam::cached_host_memory> a{host, {.line_bytes = 4096, .slots = 4096},
//                                                stream};
//   kernel<<<grid, block, 0, stream>>>(a.ref());   // float v = arr.read(i); arr.write(i, v);
//   a.flush(stream);                   // dirty lines back to `host`
//   a.check(stream);                   // throws the first error a kernel reported
//
// Backings (bam/backing.cuh; the requirements for your own are there): device_memory,
// mapped_host_memory, cached_host_memory, cached_file, a type B of yours (no cache), or
// cached<B> (B behind the cache).
//
// Streams: every constructor takes the stream its device work is ordered on (the status
// word and the cache's metadata are zeroed there) and waits for nothing; launch the kernels
// that use ref() on that stream, or order theirs after it. flush, clear and check take the
// stream they are ordered on; check synchronizes that stream only.
//
// Accesses are per thread (any subset of a warp's lanes, each with its own index); lanes of
// one warp that arrive together (__activemask) and ask for the same line share one probe of
// the cache (CachePolicy::coalesce, __match_any_sync). An index past the end, a full cache or a
// failed backing access gives T{} (reads) or does nothing (writes) and records the first such
// status for check().
//
// Keep a line for repeated reads with warp_pin (the lanes named, all the warp's by default,
// ask for the same line, e.g. a warp that owns a line of an edge list): one probe, then plain
// loads; the same lanes unpin it.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>

#include "squeeze/bam/backing.cuh"
#include "squeeze/bam/cache.cuh"
#include "squeeze/bam/detail/cache_kernels.cuh"
#include "squeeze/bam/io_service.hpp"
#include "squeeze/core/arch.cuh"
#include "squeeze/core/buffer.hpp"
#include "squeeze/core/config.hpp"
#include "squeeze/core/cuda_error.hpp"
#include "squeeze/core/device_status.cuh"
#include "squeeze/core/error.hpp"
#include "squeeze/core/launch.hpp"
#include "squeeze/core/report.cuh"
#include "squeeze/core/status.hpp"

namespace squeeze::bam {

/// How cached accesses behave.
struct cache_policy {
  /// Lanes of a warp that ask for one line share one probe (__match_any_sync). Off: every
  /// lane probes for itself (the naive pattern, for comparison).
  static constexpr bool coalesce = true;
};
/// Every lane probes the cache alone (BaM's pattern; for comparison in benchmarks).
struct uncoalesced_policy {
  static constexpr bool coalesce = false;  ///< no shared probes
};

template <class P>
concept cache_policy_like = requires {
  { P::coalesce } -> std::convertible_to<bool>;
};

/// A line of a cached array kept pinned by warp_pin: `count` elements from index `first`.
template <class T>
struct pinned_line {
  const T* data = nullptr;  ///< null when the pin failed (see array::check)
  std::uint64_t first = 0;  ///< index of the line's first element
  std::uint32_t count = 0;  ///< elements in the line (fewer in the last line)
  std::uint64_t line = 0;   ///< the line's number
  unsigned lanes = 0;       ///< the lanes that pinned it, which unpin it together

  /// Element first + j (j < count), read from the cache.
  SQUEEZE_DEVICE const T& operator[](std::uint32_t j) const { return data[j]; }
};

/// The device view of a bam::array: trivially copyable, passed by value to kernels.
template <class T, class Backing, cache_policy_like Policy = cache_policy>
requires array_backing<Backing, T>
class array_ref {
 public:
  static_assert(std::is_trivially_copyable_v<T> && (sizeof(T) & (sizeof(T) - 1)) == 0 &&
                    sizeof(T) <= 16,
                "bam::array: T must be trivially copyable, of 1, 2, 4, 8 or 16 bytes");
  using value_type = T;  ///< the element type
  /// The backing object (bam/backing.cuh).
  using backing_type = typename backing_choice<Backing, T>::type;
  /// Whether bam's cache sits in front of the backing.
  static constexpr bool cached = backing_choice<Backing, T>::with_cache;
  /// Whether write is available: the backing writes elements (no cache), or lines or
  /// elements (behind the cache, which writes dirty lines back).
  static constexpr bool writable =
      cached ? line_writable_backing<backing_type> || element_writable_backing<backing_type, T>
             : element_writable_backing<backing_type, T>;
  /// Whether atomic_add is available: in the cache (with a way to write back), or the
  /// backing's own.
  static constexpr bool atomic = cached ? writable : atomic_backing<backing_type, T>;

  array_ref() = default;
  /// The view of `backing` (its first `size` elements) reporting to `status_out`, behind
  /// `cache` when cached. bam::array builds it.
  array_ref(const backing_type& backing, std::uint64_t size, status* status_out,
            const cache_ref& cache = {})
      : source_{backing, size}, size_{size}, status_{status_out}, cache_{cache} {}

  /// Elements.
  SQUEEZE_HOST_DEVICE std::uint64_t size() const { return size_; }
  /// Elements per cache line (cached backings).
  SQUEEZE_HOST_DEVICE std::uint32_t line_elements() const {
    return cache_.line_bytes() / static_cast<std::uint32_t>(sizeof(T));
  }
  /// The backing object.
  SQUEEZE_HOST_DEVICE const backing_type& backing() const { return source_.backing; }

  /// The element at i (T{} and a recorded status when i >= size or the element or its line
  /// cannot be had).
  SQUEEZE_DEVICE T read(std::uint64_t i) const {
    T v{};
    if constexpr (!cached) {
      if (i >= size_) {
        core::report_status(status_, status::out_of_bounds);
      } else if (const status s = source_.backing.read(i, v); s != status::ok) {
        core::report_status(status_, s);
        v = T{};
      }
    } else {
      access(i, false, [&](T* p) { v = *p; });
    }
    return v;
  }
  /// Element i = v.
  SQUEEZE_DEVICE void write(std::uint64_t i, T v) const requires(writable) {
    if constexpr (!cached) {
      if (i >= size_) {
        core::report_status(status_, status::out_of_bounds);
      } else {
        core::report_status(status_, source_.backing.write(i, v));
      }
    } else {
      access(i, true, [&](T* p) { *p = v; });
    }
  }
  /// Element i += v atomically against every other GPU access; returns the old value. In
  /// the cache for cached backings; without one, the backing's own atomic_add (GPU memory
  /// has it, mapped host memory has not: PCIe does not make GPU atomics atomic for the host).
  SQUEEZE_DEVICE T atomic_add(std::uint64_t i, T v) const requires(atomic) {
    T old{};
    if constexpr (!cached) {
      if (i >= size_) {
        core::report_status(status_, status::out_of_bounds);
      } else if (const status s = source_.backing.atomic_add(i, v, old); s != status::ok) {
        core::report_status(status_, s);
        old = T{};
      }
    } else {
      access(i, true, [&](T* p) { old = atomicAdd(p, v); });
    }
    return old;
  }

  /// The lanes `lanes` (each calls it, all with the same i) pin the line holding element i
  /// (cached backings). Read it with operator[], then warp_unpin in the same lanes.
  SQUEEZE_DEVICE pinned_line<T> warp_pin(std::uint64_t i, unsigned lanes = full_warp_mask) const
      requires(cached) {
    const unsigned active = lanes;
    pinned_line<T> p;
    p.lanes = lanes;
    if (i >= size_) {
      core::report_status(status_, status::out_of_bounds);
      return p;
    }
    const std::uint32_t per_line = line_elements();
    p.line = i / per_line;
    p.first = p.line * per_line;
    p.count = static_cast<std::uint32_t>(min(std::uint64_t{per_line}, size_ - p.first));
    const held_line h =
        warp_acquire(cache_, source_, active, p.line, static_cast<unsigned>(__ffs(active) - 1));
    if (h.st != status::ok) {
      core::report_status(status_, h.st);
      return p;
    }
    p.data = reinterpret_cast<const T*>(h.data);
    return p;
  }
  /// The lanes that pinned `p` release it together (nothing when the pin failed).
  SQUEEZE_DEVICE void warp_unpin(const pinned_line<T>& p) const requires(cached) {
    if (p.data == nullptr) return;
    warp_release(cache_, p.lanes, p.line, static_cast<unsigned>(__ffs(p.lanes) - 1), false);
  }

 private:
  // Cached accesses: the warp's lanes grouped by line, each line acquired, used, released.
  template <class Op>
  SQUEEZE_DEVICE void access(std::uint64_t i, bool dirty, Op&& op) const {
    const unsigned active = __activemask();
    const unsigned lane = core::arch::lane_id();
    if (i >= size_) core::report_status(status_, status::out_of_bounds);
    // Lanes on one line share it (coalesce); the warp takes its lines one at a time.
    const std::uint64_t line = i < size_ ? i * sizeof(T) >> cache_.line_shift : ~0ull;
    const unsigned group = Policy::coalesce ? __match_any_sync(active, line) : 1u << lane;
    const bool leads = lane == static_cast<unsigned>(__ffs(group) - 1) && i < size_;
    for (unsigned todo = __ballot_sync(active, leads); todo != 0; todo &= todo - 1) {
      const auto leader = static_cast<unsigned>(__ffs(todo) - 1);
      const std::uint64_t l = __shfl_sync(active, line, leader);
      const bool mine = Policy::coalesce ? line == l : lane == leader;
      const held_line h = warp_acquire(cache_, source_, active, l, leader);
      if (h.st != status::ok) {
        if (mine) core::report_status(status_, h.st);
        continue;
      }
      if (mine) {
        op(reinterpret_cast<T*>(h.data + ((i * sizeof(T)) & (cache_.line_bytes() - 1))));
      }
      warp_release(cache_, active, l, leader, dirty);
    }
  }

  detail::backing_lines<T, backing_type> source_{};  ///< the backing (and its line source)
  std::uint64_t size_ = 0;
  status* status_ = nullptr;
  cache_ref cache_{};
};

/// The host owner: holds the device-side status word (and the cache, for cached backings);
/// the data itself is the caller's (a device_buffer, pinned mapped host memory, a file an
/// io_service serves, whatever a backing of yours refers to), which must outlive the array.
/// Move-only.
template <class T, class Backing, cache_policy_like Policy = cache_policy>
requires array_backing<Backing, T>
class array {
 public:
  using ref_type = array_ref<T, Backing, Policy>;        ///< the device view
  using backing_type = typename ref_type::backing_type;  ///< the backing object's type

  /// GPU memory: `data` is a device pointer to `size` elements. The status word is zeroed on
  /// `stream`.
  array(T* data, std::uint64_t size,
        cudaStream_t stream) requires(std::same_as<Backing, device_memory>)
      : array{device_backing(data, size), stream} {}
  /// Host memory read in place: `host` is pinned and mapped (cudaHostAlloc with
  /// cudaHostAllocMapped, core::pinned_buffer with a mapped kind, or a registration). The
  /// status word is zeroed on `stream`.
  array(const core::pinned_buffer<T>& host,
        cudaStream_t stream) requires(std::same_as<Backing, mapped_host_memory>)
      : array{mapped_backing(host), stream} {}
  /// Host memory behind a cache of `options.slots` lines of `options.line_bytes`. The
  /// status word and the cache's metadata are zeroed on `stream`.
  array(const core::pinned_buffer<T>& host, const cache_options& options,
        cudaStream_t stream) requires(std::same_as<Backing, cached_host_memory>)
      : array{mapped_backing(host), options, stream} {}
  /// `count` elements stored from byte `file_offset` of the file `service` serves, behind a
  /// cache; the service's line_bytes must be the cache's. The service must outlive the
  /// array (and be opened read-write for writes to reach the file). The status word and the
  /// cache's metadata are zeroed on `stream`.
  array(const io_service& service, std::uint64_t file_offset, std::uint64_t count,
        const cache_options& options,
        cudaStream_t stream) requires(std::same_as<Backing, cached_file>)
      : array{file_backing_of(service, file_offset, count, options), options, stream} {}
  /// Any backing without a cache (a type of yours, or a built-in one): the status word is
  /// zeroed on `stream`.
  array(const backing_type& backing, cudaStream_t stream) requires(!ref_type::cached)
      : size_{backing.size()}, status_{stream}, ref_{backing, size_, status_.data()} {}
  /// Any backing behind a cache of `options.slots` lines of `options.line_bytes` (a
  /// multiple of sizeof(T)). The status word and the cache's metadata are zeroed on `stream`.
  array(const backing_type& backing, const cache_options& options,
        cudaStream_t stream) requires(ref_type::cached)
      : size_{backing.size()},
        status_{stream},
        cache_{make_cache(size_, options, stream)},
        ref_{backing, size_, status_.data(), cache_->ref()} {}

  /// The device view, for kernels (by value).
  [[nodiscard]] ref_type ref() const noexcept { return ref_; }
  /// Elements.
  [[nodiscard]] std::uint64_t size() const noexcept { return size_; }
  /// The cache, for cached backings (null otherwise).
  [[nodiscard]] const cache* cache_used() const noexcept { return cache_.get(); }

  /// Writes every dirty line back to the backing (cached, writable backings; a no-op
  /// otherwise). Asynchronous on `stream`; order it after the kernels that write.
  void flush(cudaStream_t stream) {
    if constexpr (ref_type::cached && ref_type::writable) {
      const cache_ref c = cache_->ref();
      const std::uint64_t warps = c.state.num_slots();
      const unsigned blocks = core::grid_for(warps, 8, core::per_sm(8));
      detail::flush_kernel<<<blocks, 256, 0, stream>>>(
          c, detail::backing_lines<T, backing_type>{ref_.backing(), size_}, status_.data());
      SQUEEZE_CHECK_LAUNCH();
    } else {
      (void)stream;
    }
  }

  /// Forgets every cached line, dirty ones included (flush first to keep them). Asynchronous
  /// on `stream`; a no-op without a cache.
  void clear(cudaStream_t stream) {
    if (cache_) cache_->clear(stream);
  }

  /// The first status a kernel ordered before this call on `stream` recorded, without
  /// clearing it. Synchronizes `stream`.
  [[nodiscard]] status peek(cudaStream_t stream) const { return status_.peek(stream); }

  /// Throws the first status a kernel ordered before this call on `stream` recorded, and
  /// clears it: invalid_argument for an index past the end, io_error for a failed transfer,
  /// squeeze::error for a full cache (core::device_status::check). Synchronizes `stream`
  /// only.
  void check(cudaStream_t stream, const source_location& where = source_location::current()) {
    status_.check(stream, "bam::array", where);
  }

 private:
  static backing_type device_backing(T* data, std::uint64_t size) {
    SQUEEZE_EXPECTS(data != nullptr || size == 0, "bam::array: null data");
    return {data, size};
  }
  static backing_type mapped_backing(const core::pinned_buffer<T>& host) {
    SQUEEZE_EXPECTS(host.device_data() != nullptr || host.size() == 0,
                    "bam::array: the host memory must be pinned and mapped");
    SQUEEZE_EXPECTS(reinterpret_cast<std::uintptr_t>(host.device_data()) % 16 == 0,
                    "bam::array: the host memory must be 16-byte aligned");
    return {host.device_data(), host.size()};
  }
  static backing_type file_backing_of(const io_service& service, std::uint64_t file_offset,
                                      std::uint64_t count, const cache_options& options) {
    SQUEEZE_EXPECTS(service.layout().line_bytes == options.line_bytes,
                    "bam::array: the io_service's line_bytes (" +
                        std::to_string(service.layout().line_bytes) + ") must equal the cache's (" +
                        std::to_string(options.line_bytes) + ")");
    SQUEEZE_EXPECTS(file_offset <= service.file_bytes() &&
                        count * sizeof(T) <= service.file_bytes() - file_offset,
                    "bam::array: " + std::to_string(count) + " elements from byte " +
                        std::to_string(file_offset) + " pass the end of " + service.path() + " (" +
                        std::to_string(service.file_bytes()) + " bytes)");
    return {service.queues(), file_offset, count};
  }
  static std::unique_ptr<cache> make_cache(std::uint64_t count, const cache_options& options,
                                           cudaStream_t stream) {
    SQUEEZE_EXPECTS(options.line_bytes % sizeof(T) == 0,
                    "bam::array: line_bytes must be a multiple of sizeof(T)");
    const std::uint64_t bytes = count * sizeof(T);
    return std::make_unique<cache>(std::max<std::uint64_t>(1, (bytes + options.line_bytes - 1) /
                                                                  std::max(1u, options.line_bytes)),
                                   options, stream);
  }

  std::uint64_t size_ = 0;
  core::device_status status_;
  std::unique_ptr<cache> cache_;
  ref_type ref_;
};

}  // namespace squeeze::bam
