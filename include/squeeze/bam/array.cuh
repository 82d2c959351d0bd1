// squeeze/bam/array.cuh: bam::array<T, Backing>, an array that kernels index like memory
// while its data lives in GPU memory, in host memory, or behind bam's software cache.
//
//   core::pinned_buffer<float> host{n, core::host_memory::mapped};      // the data, on the host
//   bam::array<float, bam::cached_host_memory> a{host, {.line_bytes = 4096, .slots = 4096}};
//   kernel<<<...>>>(a.ref());          // in the kernel: float v = arr.read(i); arr.write(i, v);
//   a.flush(stream);                   // dirty lines back to `host`
//   a.check();                         // throws the first error a kernel reported
//
// Backings (policies):
//   device_memory        the data in GPU memory; no cache (the baseline)
//   mapped_host_memory   pinned, mapped host memory read and written directly over PCIe
//                        (zero-copy, EMOGI's access); no cache, no atomics
//   cached_host_memory   pinned, mapped host memory behind the cache: a miss fetches the
//                        whole line with all of the warp's active lanes
//   cached_file          a file behind the cache: a miss is a read request that a host
//                        io_service serves (queue.hpp), written back on eviction and flush
//
// Accesses are per thread (any subset of a warp's lanes, each with its own index); lanes of
// one warp that arrive together (__activemask) and ask for the same line share one probe of
// the cache (CachePolicy::coalesce, __match_any_sync). An index past the end, a full cache or a
// failed fetch gives T{} (reads) or does nothing (writes) and records the first such status for
// check().
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

#include "squeeze/bam/cache.cuh"
#include "squeeze/bam/io_service.hpp"
#include "squeeze/bam/queue.hpp"
#include "squeeze/core/arch.cuh"
#include "squeeze/core/buffer.hpp"
#include "squeeze/core/config.hpp"
#include "squeeze/core/cuda_error.hpp"
#include "squeeze/core/device.hpp"
#include "squeeze/core/error.hpp"
#include "squeeze/core/report.cuh"
#include "squeeze/core/status.hpp"

namespace squeeze::bam {

struct device_memory {};
struct mapped_host_memory {};
struct cached_host_memory {};
struct cached_file {};

template <class B>
concept backing = std::same_as<B, device_memory> || std::same_as<B, mapped_host_memory> ||
    std::same_as<B, cached_host_memory> || std::same_as<B, cached_file>;

/// How cached accesses behave.
struct cache_policy {
  /// Lanes of a warp that ask for one line share one probe (__match_any_sync). Off: every
  /// lane probes for itself (the naive pattern, for comparison).
  static constexpr bool coalesce = true;
};
struct uncoalesced_policy {
  static constexpr bool coalesce = false;
};

template <class P>
concept cache_policy_like = requires {
  { P::coalesce } -> std::convertible_to<bool>;
};

namespace detail {

/// The bytes of line `line` inside data of `bytes` bytes (the last line may be short).
SQUEEZE_DEVICE std::uint32_t line_length(std::uint64_t line, std::uint32_t line_bytes,
                                         std::uint64_t bytes) {
  const std::uint64_t begin = line * line_bytes;
  return begin >= bytes ? 0u
                        : static_cast<std::uint32_t>(min(std::uint64_t{line_bytes}, bytes - begin));
}

}  // namespace detail

/// Pinned, mapped host memory as the source of cache lines: `bytes` bytes at `data` (the
/// device pointer of the mapping, 16-byte aligned). The last line may be short; the rest of
/// its slot is left as it was.
struct host_line_source {
  std::byte* data = nullptr;
  std::uint64_t bytes = 0;

  SQUEEZE_DEVICE std::uint32_t length(std::uint64_t line, std::uint32_t line_bytes) const {
    return detail::line_length(line, line_bytes, bytes);
  }
  SQUEEZE_DEVICE status group_read(unsigned mask, std::uint64_t line, std::byte* dst,
                                   std::uint32_t line_bytes) const {
    detail::group_copy(mask, dst, data + line * line_bytes, length(line, line_bytes));
    return status::ok;
  }
  SQUEEZE_DEVICE status write(std::uint64_t line, const std::byte* src,
                              std::uint32_t line_bytes) const {
    detail::group_copy(1u << core::arch::lane_id(), data + line * line_bytes, src,
                       length(line, line_bytes));
    __threadfence_system();  // the host memory holds the line before anyone refetches it
    return status::ok;
  }
};

/// A file served by an io_service as the source of cache lines: `bytes` bytes from byte
/// `base` of the file. The leader lane of a fill submits one read to a queue (the SM's:
/// warps of one SM share it) and waits for it; then the lanes copy the line out of the
/// entry's staging buffer in pinned host memory. A write-back copies the line into staging,
/// submits a write and waits. A failed or short request gives status::io_error.
struct file_line_source {
  queue_set_ref queues{};
  std::uint64_t base = 0;
  std::uint64_t bytes = 0;

  SQUEEZE_DEVICE std::uint32_t length(std::uint64_t line, std::uint32_t line_bytes) const {
    return detail::line_length(line, line_bytes, bytes);
  }
  SQUEEZE_DEVICE queue_ref queue() const { return queues[core::arch::sm_id() % queues.size()]; }
  SQUEEZE_DEVICE status group_read(unsigned mask, std::uint64_t line, std::byte* dst,
                                   std::uint32_t line_bytes) const {
    const auto leader = static_cast<unsigned>(__ffs(mask) - 1);
    const std::uint32_t len = length(line, line_bytes);
    const queue_ref q = queue();
    std::uint64_t ticket = 0;
    io_completion done{};
    if (core::arch::lane_id() == leader) {
      ticket = q.submit(io_request{io_op::read, len, base + line * line_bytes, line});
      done = q.wait(ticket);
    }
    ticket = __shfl_sync(mask, ticket, leader);
    const bool ok = __shfl_sync(mask, done.ok() && done.bytes == len, leader);
    if (ok) detail::group_copy(mask, dst, q.staging(ticket), len);
    __syncwarp(mask);
    if (core::arch::lane_id() == leader) q.release(ticket);
    return ok ? status::ok : status::io_error;
  }
  SQUEEZE_DEVICE status write(std::uint64_t line, const std::byte* src,
                              std::uint32_t line_bytes) const {
    const std::uint32_t len = length(line, line_bytes);
    const queue_ref q = queue();
    const std::uint64_t ticket = q.reserve();
    detail::group_copy(1u << core::arch::lane_id(), q.staging(ticket), src, len);
    __threadfence_system();  // the staged line before the request that the host serves
    q.submit(ticket, io_request{io_op::write, len, base + line * line_bytes, line});
    const io_completion done = q.wait(ticket);
    q.release(ticket);
    return done.ok() && done.bytes == len ? status::ok : status::io_error;
  }
};

/// A line of a cached array kept pinned by warp_pin: `count` elements from index `first`.
template <class T>
struct pinned_line {
  const T* data = nullptr;  ///< null when the pin failed (see array_ref::check)
  std::uint64_t first = 0;
  std::uint32_t count = 0;
  std::uint64_t line = 0;
  unsigned lanes = 0;  ///< the lanes that pinned it, which unpin it together

  SQUEEZE_DEVICE const T& operator[](std::uint32_t j) const { return data[j]; }
};

/// The device view of a bam::array: trivially copyable, passed by value to kernels.
template <class T, backing Backing, cache_policy_like Policy = cache_policy>
class array_ref {
 public:
  static_assert(std::is_trivially_copyable_v<T> && (sizeof(T) & (sizeof(T) - 1)) == 0 &&
                    sizeof(T) <= 16,
                "bam::array: T must be trivially copyable, of 1, 2, 4, 8 or 16 bytes");
  using value_type = T;
  static constexpr bool cached =
      std::same_as<Backing, cached_host_memory> || std::same_as<Backing, cached_file>;
  /// Where cache lines come from.
  using source_type =
      std::conditional_t<std::same_as<Backing, cached_file>, file_line_source, host_line_source>;

  array_ref() = default;
  array_ref(T* data, std::uint64_t size, status* status_out, const cache_ref& cache = {},
            const source_type& source = {})
      : data_{data}, size_{size}, status_{status_out}, cache_{cache}, source_{source} {}

  SQUEEZE_HOST_DEVICE std::uint64_t size() const { return size_; }
  /// Elements per cache line (cached backings).
  SQUEEZE_HOST_DEVICE std::uint32_t line_elements() const {
    return cache_.line_bytes() / static_cast<std::uint32_t>(sizeof(T));
  }

  /// The element at i (T{} and a recorded status when i >= size or the line cannot be had).
  SQUEEZE_DEVICE T read(std::uint64_t i) const {
    T v{};
    access(i, false, [&](T* p) { v = *p; });
    return v;
  }
  /// data[i] = v.
  SQUEEZE_DEVICE void write(std::uint64_t i, T v) const {
    access(i, true, [&](T* p) { *p = v; });
  }
  /// data[i] += v atomically against every other GPU access; returns the old value. GPU
  /// memory and cached backings only (PCIe does not make GPU atomics atomic for the host).
  SQUEEZE_DEVICE T atomic_add(std::uint64_t i, T v) const
      requires(!std::same_as<Backing, mapped_host_memory>) {
    T old{};
    access(i, true, [&](T* p) { old = atomicAdd(p, v); });
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
        warp_acquire(cache_, source(), active, p.line, static_cast<unsigned>(__ffs(active) - 1));
    if (h.st != status::ok) {
      core::report_status(status_, h.st);
      return p;
    }
    p.data = reinterpret_cast<const T*>(h.data);
    return p;
  }
  SQUEEZE_DEVICE void warp_unpin(const pinned_line<T>& p) const requires(cached) {
    if (p.data == nullptr) return;
    warp_release(cache_, p.lanes, p.line, static_cast<unsigned>(__ffs(p.lanes) - 1), false);
  }

 private:
  SQUEEZE_DEVICE const source_type& source() const { return source_; }

  template <class Op>
  SQUEEZE_DEVICE void access(std::uint64_t i, bool dirty, Op&& op) const {
    if constexpr (!cached) {
      if (i < size_) {
        op(data_ + i);
      } else {
        core::report_status(status_, status::out_of_bounds);
      }
    } else {
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
        const held_line h = warp_acquire(cache_, source(), active, l, leader);
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
  }

  T* data_ = nullptr;  ///< GPU memory, or the device pointer of mapped host memory
  std::uint64_t size_ = 0;
  status* status_ = nullptr;
  cache_ref cache_{};
  source_type source_{};
};

/// The host owner: holds the device-side status (and the cache, for cached backings); the
/// data itself is the caller's (a device_buffer, or pinned mapped host memory), which must
/// outlive the array. Move-only.
template <class T, backing Backing, cache_policy_like Policy = cache_policy>
class array {
 public:
  using ref_type = array_ref<T, Backing, Policy>;

  /// GPU memory: `data` is a device pointer to `size` elements.
  array(T* data, std::uint64_t size) requires(std::same_as<Backing, device_memory>)
      : size_{size}, status_{1} {
    SQUEEZE_EXPECTS(data != nullptr || size == 0, "bam::array: null data");
    init(data);
  }
  /// Host memory read in place: `host` is pinned and mapped (cudaHostAlloc with
  /// cudaHostAllocMapped, core::pinned_buffer with a mapped kind, or a registration).
  array(const core::pinned_buffer<T>& host) requires(std::same_as<Backing, mapped_host_memory>)
      : size_{host.size()}, status_{1} {
    init(mapped(host));
  }
  /// Host memory behind a cache of `options.slots` lines of `options.line_bytes`.
  array(const core::pinned_buffer<T>& host,
        const cache_options& options) requires(std::same_as<Backing, cached_host_memory>)
      : size_{host.size()}, status_{1}, cache_{make_cache(host.size(), options)} {
    source_ = {reinterpret_cast<std::byte*>(mapped(host)), size_ * sizeof(T)};
    init(mapped(host));
  }
  /// `count` elements stored from byte `file_offset` of the file `service` serves, behind a
  /// cache; the service's line_bytes must be the cache's. The service must outlive the
  /// array (and be opened read-write for writes to reach the file).
  array(const io_service& service, std::uint64_t file_offset, std::uint64_t count,
        const cache_options& options) requires(std::same_as<Backing, cached_file>)
      : size_{count}, status_{1}, cache_{make_cache(count, options)} {
    SQUEEZE_EXPECTS(service.layout().line_bytes == options.line_bytes,
                    "bam::array: the io_service's line_bytes (" +
                        std::to_string(service.layout().line_bytes) + ") must equal the cache's (" +
                        std::to_string(options.line_bytes) + ")");
    SQUEEZE_EXPECTS(file_offset <= service.file_bytes() &&
                        count * sizeof(T) <= service.file_bytes() - file_offset,
                    "bam::array: " + std::to_string(count) + " elements from byte " +
                        std::to_string(file_offset) + " pass the end of " + service.path() + " (" +
                        std::to_string(service.file_bytes()) + " bytes)");
    source_ = {service.queues(), file_offset, count * sizeof(T)};
    init(nullptr);
  }

  [[nodiscard]] ref_type ref() const noexcept { return ref_; }
  [[nodiscard]] std::uint64_t size() const noexcept { return size_; }
  /// The cache, for cached backings (null otherwise).
  [[nodiscard]] const cache* cache_used() const noexcept { return cache_.get(); }

  /// Writes every dirty line back to the host memory (cached backings; a no-op otherwise).
  /// Asynchronous on `stream`; launch after the kernels that write.
  void flush(cudaStream_t stream) {
    if constexpr (ref_type::cached) {
      const cache_ref c = cache_->ref();
      const std::uint64_t warps = c.state.num_slots();
      const auto blocks = static_cast<unsigned>(std::min<std::uint64_t>(
          (warps + 7) / 8,
          std::uint64_t{8} * static_cast<std::uint64_t>(core::current_sm_count())));
      flush_kernel<<<blocks, 256, 0, stream>>>(c, source_, status_.data());
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

  /// Throws the first status a kernel recorded (and clears it). Synchronizes the device.
  void check() {
    status s = status::ok;
    SQUEEZE_CUDA_TRY(cudaDeviceSynchronize());
    SQUEEZE_CUDA_TRY(cudaMemcpy(&s, status_.data(), sizeof(s), cudaMemcpyDeviceToHost));
    if (s == status::ok) return;
    status_.fill_bytes(0, nullptr);
    SQUEEZE_CUDA_TRY(cudaStreamSynchronize(nullptr));
    const std::string what = std::string{"bam::array: a kernel reported "} + to_string(s);
    if (s == status::out_of_bounds) throw invalid_argument{what + " (an index past the end)"};
    if (s == status::io_error) throw io_error{what};
    throw squeeze::error{what};
  }

 private:
  static T* mapped(const core::pinned_buffer<T>& host) {
    SQUEEZE_EXPECTS(host.device_data() != nullptr || host.size() == 0,
                    "bam::array: the host memory must be pinned and mapped");
    SQUEEZE_EXPECTS(reinterpret_cast<std::uintptr_t>(host.device_data()) % 16 == 0,
                    "bam::array: the host memory must be 16-byte aligned");
    return host.device_data();
  }
  static std::unique_ptr<cache> make_cache(std::uint64_t count, const cache_options& options) {
    SQUEEZE_EXPECTS(options.line_bytes % sizeof(T) == 0,
                    "bam::array: line_bytes must be a multiple of sizeof(T)");
    const std::uint64_t bytes = count * sizeof(T);
    return std::make_unique<cache>(std::max<std::uint64_t>(1, (bytes + options.line_bytes - 1) /
                                                                  std::max(1u, options.line_bytes)),
                                   options);
  }
  void init(T* data) {
    status_.fill_bytes(0, nullptr);
    SQUEEZE_CUDA_TRY(cudaStreamSynchronize(nullptr));
    ref_ = ref_type{data, size_, status_.data(), cache_ ? cache_->ref() : cache_ref{}, source_};
  }

  std::uint64_t size_ = 0;
  core::device_buffer<status> status_;
  std::unique_ptr<cache> cache_;
  typename ref_type::source_type source_{};
  ref_type ref_{};
};

}  // namespace squeeze::bam
