// SPDX-License-Identifier: Apache-2.0
// squeeze/bam/backing.cuh: where the elements of a bam::array live. The bam::backing concept
// (a type of yours can satisfy it), the built-in backings, and the names that choose them.
//
// A bam::array<T, Backing> reads and writes its elements through a backing object, which is
// copied by value into the array_ref and so into every kernel. Backing is one of:
//   device_memory        device_memory_backing<T>: GPU memory, no cache (the baseline)
//   mapped_host_memory   mapped_memory_backing<T>: pinned, mapped host memory read and
//                        written in place over PCIe (zero-copy, EMOGI's access), no cache
//   cached_host_memory   mapped_memory_backing<T> behind the cache: a miss fetches the whole
//                        line with all of the warp's active lanes
//   cached_file          file_backing<T>: a file that an io_service serves (queue.hpp),
//                        behind the cache; written back on eviction and flush
//   B                    your type B, an element backing (bam::element_backing<B, T>), no cache
//   cached<B>            B behind the cache (bam::backing<B, T>; a built-in B works too)
//
// What a backing B of elements of T provides (bam::backing<B, T>):
//
//   B is trivially copyable: it travels to kernels by value. What it points to is the
//   caller's, and must outlive the kernels and the bam::array.
//
//   std::uint64_t size() const                    host: the number of elements (read once,
//                                                 when the bam::array is built)
//   at least one way to read (device functions):
//   status read(std::uint64_t i, T& out) const    element i into `out`. Element access: an
//                                                 array without a cache needs it.
//   status group_read(unsigned mask, std::uint64_t line, std::byte* dst,
//                     std::uint32_t line_bytes) const
//                                                 the lanes `mask` of one warp (all call it,
//                                                 with the same line) copy line `line` to
//                                                 dst and each returns the same status. Line
//                                                 access: used only behind a cache.
//   optionally (device functions):
//   status write(std::uint64_t i, const T& v) const             element i = v
//   status write_line(std::uint64_t line, const std::byte* src,
//                     std::uint32_t line_bytes) const            one thread writes a line back
//   status atomic_add(std::uint64_t i, const T& v, T& old) const
//                                                 element i += v atomically, old value to `old`
//
// Lines: line l is bytes [l * line_bytes, (l + 1) * line_bytes) of the elements laid end to
// end (element i at byte i * sizeof(T)); the last line may be short, and only its
// size() * sizeof(T) - l * line_bytes bytes are read or written (the rest of dst is left as
// it was). dst and src are 128-byte aligned; line_bytes is a power of two and a multiple of
// sizeof(T).
//
// Threads: any threads of any kernels call read, write and atomic_add at once, on any
// elements (two writes of one element race as they would in memory; atomic_add is atomic
// against every other atomic_add). Behind a cache, the cache orders each line's traffic: one
// warp fills a line at a time, a line is written back by one thread while nobody fills it,
// and different lines are read and written concurrently; write_line's bytes must be visible
// to a later group_read of the line by any thread when it returns. Without line access, the
// cache fills a line with read() of its elements, dealt over the warp's lanes; without
// write_line, it writes a line back with write() of each element.
//
// Statuses: a backing never throws or prints. Each call returns status::ok or the status to
// report (io_error for a failed transfer, corrupt for data that cannot be right, ...). The
// array records the first one in its status word, which array::check throws, and gives T{}
// for the read or drops the write. An index past size() never reaches the backing: the array
// reports out_of_bounds itself.
//
// What the array offers follows from the backing: array_ref::write needs write (no cache),
// or write or write_line (behind a cache, to write lines back); array_ref::atomic_add needs
// the backing's atomic_add without a cache, and is done in the cache behind one (given a way
// to write back).
#pragma once

#include <cuda_runtime.h>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "squeeze/bam/cache.cuh"
#include "squeeze/bam/queue.hpp"
#include "squeeze/core/arch.cuh"
#include "squeeze/core/config.hpp"
#include "squeeze/core/status.hpp"

namespace squeeze::bam {

/// Trivially copyable, with a host-side element count: what every backing is.
template <class B>
concept sized_backing = std::is_trivially_copyable_v<B> && requires(const B& b) {
  { b.size() } -> std::convertible_to<std::uint64_t>;
};

/// A backing read an element at a time: enough for an array with or without a cache.
template <class B, class T>
concept element_backing = sized_backing<B> && requires(const B& b, std::uint64_t i, T& out) {
  { b.read(i, out) } -> std::same_as<status>;
};

/// A backing read a line at a time by a warp's lanes: enough for an array behind a cache.
template <class B>
concept line_backing = sized_backing<B> && requires(const B& b, unsigned mask, std::uint64_t line,
                                                    std::byte* dst, std::uint32_t line_bytes) {
  { b.group_read(mask, line, dst, line_bytes) } -> std::same_as<status>;
};

/// Where the elements of a bam::array<T, ...> live (the requirements are at the top of this
/// header): element access, line access, or both.
template <class B, class T>
concept backing = element_backing<B, T> || line_backing<B>;

/// A backing with element writes.
template <class B, class T>
concept element_writable_backing = requires(const B& b, std::uint64_t i, const T& v) {
  { b.write(i, v) } -> std::same_as<status>;
};

/// A backing with line write-backs.
template <class B>
concept line_writable_backing = requires(const B& b, std::uint64_t line, const std::byte* src,
                                         std::uint32_t line_bytes) {
  { b.write_line(line, src, line_bytes) } -> std::same_as<status>;
};

/// A backing with atomic adds of its own (an array without a cache needs them for atomic_add).
template <class B, class T>
concept atomic_backing = requires(const B& b, std::uint64_t i, const T& v, T& old) {
  { b.atomic_add(i, v, old) } -> std::same_as<status>;
};

namespace detail {

/// The bytes of line `line` inside data of `bytes` bytes (the last line may be short).
SQUEEZE_HOST_DEVICE std::uint32_t line_length(std::uint64_t line, std::uint32_t line_bytes,
                                              std::uint64_t bytes) {
  const std::uint64_t begin = line * line_bytes;
  const std::uint64_t left = begin >= bytes ? 0 : bytes - begin;
  return static_cast<std::uint32_t>(left < line_bytes ? left : line_bytes);
}

}  // namespace detail

/// GPU memory: `count` elements at `data`, a device pointer (device_memory's backing).
template <class T>
struct device_memory_backing {
  T* data = nullptr;        ///< [count], device memory
  std::uint64_t count = 0;  ///< elements

  /// The number of elements.
  SQUEEZE_HOST_DEVICE std::uint64_t size() const { return count; }
  /// out = element i.
  SQUEEZE_DEVICE status read(std::uint64_t i, T& out) const {
    out = data[i];
    return status::ok;
  }
  /// Element i = v.
  SQUEEZE_DEVICE status write(std::uint64_t i, const T& v) const {
    data[i] = v;
    return status::ok;
  }
  /// Element i += v (atomicAdd); old = its value before.
  SQUEEZE_DEVICE status atomic_add(std::uint64_t i, const T& v, T& old) const {
    old = atomicAdd(data + i, v);
    return status::ok;
  }
};

/// Pinned, mapped host memory: `count` elements at `data`, the device pointer of the mapping
/// (16-byte aligned). mapped_host_memory's backing (elements read and written in place over
/// PCIe) and cached_host_memory's (whole lines copied by the warp's lanes). No atomic_add:
/// PCIe does not make GPU atomics atomic for the host.
template <class T>
struct mapped_memory_backing {
  T* data = nullptr;        ///< [count], the device pointer of pinned, mapped host memory
  std::uint64_t count = 0;  ///< elements

  /// The number of elements.
  SQUEEZE_HOST_DEVICE std::uint64_t size() const { return count; }
  /// out = element i, read over PCIe.
  SQUEEZE_DEVICE status read(std::uint64_t i, T& out) const {
    out = data[i];
    return status::ok;
  }
  /// Element i = v, written over PCIe.
  SQUEEZE_DEVICE status write(std::uint64_t i, const T& v) const {
    data[i] = v;
    return status::ok;
  }
  /// The lanes `mask` copy line `line` to dst together (bam::line_backing).
  SQUEEZE_DEVICE status group_read(unsigned mask, std::uint64_t line, std::byte* dst,
                                   std::uint32_t line_bytes) const {
    detail::group_copy(mask, dst, bytes() + line * line_bytes, length(line, line_bytes));
    return status::ok;
  }
  /// One thread writes line `line` back from src, then fences so the host sees it.
  SQUEEZE_DEVICE status write_line(std::uint64_t line, const std::byte* src,
                                   std::uint32_t line_bytes) const {
    detail::group_copy(1u << core::arch::lane_id(), bytes() + line * line_bytes, src,
                       length(line, line_bytes));
    __threadfence_system();  // the host memory holds the line before anyone refetches it
    return status::ok;
  }

 private:
  SQUEEZE_DEVICE std::byte* bytes() const { return reinterpret_cast<std::byte*>(data); }
  SQUEEZE_DEVICE std::uint32_t length(std::uint64_t line, std::uint32_t line_bytes) const {
    return detail::line_length(line, line_bytes, count * sizeof(T));
  }
};

/// A file served by an io_service: `count` elements stored from byte `base` of the file
/// (cached_file's backing; line access only). The leader lane of a fill submits one read to
/// a queue (the SM's: warps of one SM share it) and waits for it; then the lanes copy the
/// line out of the entry's staging buffer in pinned host memory. A write-back copies the line
/// into staging, submits a write and waits. A failed or short request gives status::io_error.
template <class T>
struct file_backing {
  queue_set_ref queues{};   ///< the io_service's queues (io_service::queues())
  std::uint64_t base = 0;   ///< the file offset of element 0, in bytes
  std::uint64_t count = 0;  ///< elements

  /// The number of elements.
  SQUEEZE_HOST_DEVICE std::uint64_t size() const { return count; }
  /// The lanes `mask` read line `line` into dst: one read request by the leader lane.
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
  /// One thread writes line `line` back from src: one write request, waited for.
  SQUEEZE_DEVICE status write_line(std::uint64_t line, const std::byte* src,
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

 private:
  SQUEEZE_DEVICE queue_ref queue() const { return queues[core::arch::sm_id() % queues.size()]; }
  SQUEEZE_DEVICE std::uint32_t length(std::uint64_t line, std::uint32_t line_bytes) const {
    return detail::line_length(line, line_bytes, count * sizeof(T));
  }
};

// The names that choose a built-in backing (bam::array<float, bam::cached_host_memory>).
struct device_memory {};
struct mapped_host_memory {};
struct cached_host_memory {};
struct cached_file {};

/// The backing B behind bam's cache: bam::array<T, bam::cached<B>>.
template <class B>
struct cached {};

/// What a bam::array's Backing argument stands for: the backing object's type, and whether
/// the cache sits in front of it. A type of yours stands for itself, without a cache.
template <class Backing, class T>
struct backing_choice {
  using type = Backing;                      ///< the backing object's type
  static constexpr bool with_cache = false;  ///< whether bam's cache sits in front of it
};
/// device_memory: device_memory_backing, no cache.
template <class T>
struct backing_choice<device_memory, T> {
  using type = device_memory_backing<T>;     ///< the backing object's type
  static constexpr bool with_cache = false;  ///< whether the cache sits in front
};
/// mapped_host_memory: mapped_memory_backing, no cache.
template <class T>
struct backing_choice<mapped_host_memory, T> {
  using type = mapped_memory_backing<T>;     ///< the backing object's type
  static constexpr bool with_cache = false;  ///< whether the cache sits in front
};
/// cached_host_memory: mapped_memory_backing behind the cache.
template <class T>
struct backing_choice<cached_host_memory, T> {
  using type = mapped_memory_backing<T>;    ///< the backing object's type
  static constexpr bool with_cache = true;  ///< whether the cache sits in front
};
/// cached_file: file_backing behind the cache.
template <class T>
struct backing_choice<cached_file, T> {
  using type = file_backing<T>;             ///< the backing object's type
  static constexpr bool with_cache = true;  ///< whether the cache sits in front
};
/// `cached<B>`: your B behind the cache.
template <class B, class T>
struct backing_choice<cached<B>, T> {
  using type = B;                           ///< the backing object's type
  static constexpr bool with_cache = true;  ///< whether the cache sits in front
};

/// A valid Backing argument of bam::array<T, Backing>: behind the cache, any backing; without
/// one, a backing with element access.
template <class Backing, class T>
concept array_backing = (backing_choice<Backing, T>::with_cache &&
                         backing<typename backing_choice<Backing, T>::type, T>) ||
                        (!backing_choice<Backing, T>::with_cache &&
                         element_backing<typename backing_choice<Backing, T>::type, T>);

namespace detail {

/// The cache's line source over the backing B of T: B's line access where it has it, else
/// its elements, dealt over the lanes (a line's elements in one pass of the warp).
template <class T, class B>
struct backing_lines {
  B backing;
  std::uint64_t count = 0;

  SQUEEZE_DEVICE status group_read(unsigned mask, std::uint64_t line, std::byte* dst,
                                   std::uint32_t line_bytes) const {
    if constexpr (line_backing<B>) {
      return backing.group_read(mask, line, dst, line_bytes);
    } else {
      const std::uint64_t first = line * (line_bytes / sizeof(T));
      const std::uint32_t n = line_length(line, line_bytes, count * sizeof(T)) / sizeof(T);
      const auto lanes = static_cast<unsigned>(__popc(mask));
      status st = status::ok;
      for (std::uint32_t k = rank_in(mask); k < n; k += lanes) {
        T v{};
        const status s = backing.read(first + k, v);
        if (s == status::ok) {
          reinterpret_cast<T*>(dst)[k] = v;
        } else if (st == status::ok) {
          st = s;
        }
      }
      // Every lane returns the same status: the first failing lane's.
      const unsigned failed = __ballot_sync(mask, st != status::ok);
      if (failed == 0) return status::ok;
      return static_cast<status>(
          __shfl_sync(mask, static_cast<unsigned>(st), static_cast<int>(__ffs(failed) - 1)));
    }
  }

  SQUEEZE_DEVICE status write_line(std::uint64_t line, const std::byte* src,
                                   std::uint32_t line_bytes) const {
    if constexpr (line_writable_backing<B>) {
      return backing.write_line(line, src, line_bytes);
    } else if constexpr (element_writable_backing<B, T>) {
      const std::uint64_t first = line * (line_bytes / sizeof(T));
      const std::uint32_t n = line_length(line, line_bytes, count * sizeof(T)) / sizeof(T);
      status st = status::ok;
      for (std::uint32_t k = 0; k < n; ++k) {
        const status s = backing.write(first + k, reinterpret_cast<const T*>(src)[k]);
        if (st == status::ok) st = s;
      }
      return st;
    } else {
      // Never called: an array over a read-only backing has no write, so no line is dirty.
      (void)line;
      (void)src;
      (void)line_bytes;
      return status::invalid_argument;
    }
  }
};

}  // namespace detail

}  // namespace squeeze::bam
