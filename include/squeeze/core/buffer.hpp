// SPDX-License-Identifier: Apache-2.0
// squeeze/core/buffer.hpp: owning RAII buffers for device memory and page-locked host
// memory, and an owning CUDA stream.
//
// Host-compilable (CUDA runtime API, no nvcc). Buffers are move-only; a moved-from
// buffer is empty. Destructors never throw: a failed free is ignored, as it can only
// follow an earlier, already-reported error (a sticky context fault).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <utility>

#include "squeeze/core/cuda_error.hpp"

namespace squeeze::core {

/// An owned cudaStream_t (non-blocking with respect to the legacy default stream).
class stream {
 public:
  stream() { SQUEEZE_CUDA_TRY(cudaStreamCreateWithFlags(&handle_, cudaStreamNonBlocking)); }
  /// A stream of the given priority (lower numbers run first; see greatest_priority()).
  explicit stream(int priority) {
    SQUEEZE_CUDA_TRY(cudaStreamCreateWithPriority(&handle_, cudaStreamNonBlocking, priority));
  }
  /// The current device's highest stream priority: blocks of kernels on such a stream are
  /// scheduled before waiting blocks of kernels on streams of lower priority.
  [[nodiscard]] static int greatest_priority() {
    int least = 0, greatest = 0;
    SQUEEZE_CUDA_TRY(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    return greatest;
  }
  /// Takes other's stream; other is left empty.
  stream(stream&& other) noexcept : handle_{std::exchange(other.handle_, nullptr)} {}
  /// Swaps the two streams (the one given up is destroyed with `other`).
  stream& operator=(stream&& other) noexcept {
    std::swap(handle_, other.handle_);
    return *this;
  }
  stream(const stream&) = delete;
  stream& operator=(const stream&) = delete;
  ~stream() {
    if (handle_ != nullptr) static_cast<void>(cudaStreamDestroy(handle_));
  }

  /// The handle.
  [[nodiscard]] cudaStream_t get() const noexcept { return handle_; }
  /// The handle, where a cudaStream_t is asked for.
  operator cudaStream_t() const noexcept { return handle_; }  // NOLINT: a stream is a handle
  /// Waits for the work on the stream (cudaStreamSynchronize); throws cuda_error.
  void synchronize() const { SQUEEZE_CUDA_TRY(cudaStreamSynchronize(handle_)); }

 private:
  cudaStream_t handle_{nullptr};
};

/// `count` elements of T in device memory. Allocated with cudaMalloc, or stream-ordered
/// (cudaMallocAsync, then cudaFreeAsync on the same stream at destruction) when
/// constructed with a stream: that stream must outlive the buffer.
template <class T>
requires std::is_trivially_copyable_v<T>
class device_buffer {
 public:
  device_buffer() = default;
  /// `count` elements, cudaMalloc'ed (uninitialized).
  explicit device_buffer(std::size_t count) : size_{count} {
    if (count > 0) SQUEEZE_CUDA_TRY(cudaMalloc(reinterpret_cast<void**>(&data_), bytes()));
  }
  /// `count` elements allocated on `stream` (cudaMallocAsync; uninitialized), freed there.
  device_buffer(std::size_t count, cudaStream_t stream)
      : size_{count}, stream_{stream}, stream_ordered_{true} {
    if (count > 0) {
      SQUEEZE_CUDA_TRY(cudaMallocAsync(reinterpret_cast<void**>(&data_), bytes(), stream));
    }
  }
  /// Takes other's memory; other is left empty.
  device_buffer(device_buffer&& other) noexcept { swap(other); }
  /// Frees this buffer's memory and takes other's.
  device_buffer& operator=(device_buffer&& other) noexcept {
    device_buffer{std::move(other)}.swap(*this);
    return *this;
  }
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
  ~device_buffer() { release(); }

  /// The device pointer (null when empty).
  [[nodiscard]] T* data() const noexcept { return data_; }
  /// Elements.
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  /// size() * sizeof(T).
  [[nodiscard]] std::size_t bytes() const noexcept { return size_ * sizeof(T); }
  /// Whether it holds no element.
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }

  /// Copies host data into the buffer's first `host.size()` elements, ordered on `stream`.
  void copy_from(std::span<const T> host, cudaStream_t stream) {
    SQUEEZE_EXPECTS(host.size() <= size_,
                    "device_buffer::copy_from: source is larger than the buffer");
    SQUEEZE_CUDA_TRY(
        cudaMemcpyAsync(data_, host.data(), host.size_bytes(), cudaMemcpyDefault, stream));
  }
  /// Copies the buffer's first `host.size()` elements to host memory, ordered on `stream`.
  void copy_to(std::span<T> host, cudaStream_t stream) const {
    SQUEEZE_EXPECTS(host.size() <= size_,
                    "device_buffer::copy_to: destination is larger than the buffer");
    SQUEEZE_CUDA_TRY(
        cudaMemcpyAsync(host.data(), data_, host.size_bytes(), cudaMemcpyDefault, stream));
  }
  /// Sets every byte to `byte`, ordered on `stream` (poisoning outputs in tests).
  void fill_bytes(int byte, cudaStream_t stream) {
    SQUEEZE_CUDA_TRY(cudaMemsetAsync(data_, byte, bytes(), stream));
  }

  /// Exchanges the two buffers' memory.
  void swap(device_buffer& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
    std::swap(stream_, other.stream_);
    std::swap(stream_ordered_, other.stream_ordered_);
  }

 private:
  void release() noexcept {
    if (data_ == nullptr) return;
    if (stream_ordered_)
      static_cast<void>(cudaFreeAsync(data_, stream_));
    else
      static_cast<void>(cudaFree(data_));
    data_ = nullptr;
  }

  T* data_{nullptr};
  std::size_t size_{0};
  cudaStream_t stream_{nullptr};
  bool stream_ordered_{false};
};

/// How page-locked host memory is allocated.
enum class host_memory {
  pinned,                 ///< page-locked: fast cudaMemcpyAsync, not addressable by kernels
  mapped,                 ///< page-locked and mapped: kernels read it directly (zero-copy)
  mapped_write_combined,  ///< mapped, write-combined: fast host writes and GPU reads, slow host
                          ///< reads
};

/// `count` elements of T in page-locked host memory (cudaHostAlloc). For mapped kinds,
/// device_data() is the pointer kernels use.
template <class T>
requires std::is_trivially_copyable_v<T>
class pinned_buffer {
 public:
  pinned_buffer() = default;
  /// `count` elements of page-locked host memory of the given kind (uninitialized).
  explicit pinned_buffer(std::size_t count, host_memory kind = host_memory::pinned)
      : size_{count}, kind_{kind} {
    if (count == 0) return;
    unsigned flags = cudaHostAllocPortable;
    if (kind != host_memory::pinned) flags |= cudaHostAllocMapped;
    if (kind == host_memory::mapped_write_combined) flags |= cudaHostAllocWriteCombined;
    SQUEEZE_CUDA_TRY(cudaHostAlloc(reinterpret_cast<void**>(&data_), bytes(), flags));
    if (kind != host_memory::pinned) {
      const cudaError_t mapped =
          cudaHostGetDevicePointer(reinterpret_cast<void**>(&device_data_), data_, 0);
      if (mapped != cudaSuccess) {
        static_cast<void>(cudaFreeHost(data_));
        data_ = nullptr;
        SQUEEZE_CUDA_TRY(mapped);
      }
    }
  }
  /// Takes other's memory; other is left empty.
  pinned_buffer(pinned_buffer&& other) noexcept { swap(other); }
  /// Frees this buffer's memory and takes other's.
  pinned_buffer& operator=(pinned_buffer&& other) noexcept {
    pinned_buffer{std::move(other)}.swap(*this);
    return *this;
  }
  pinned_buffer(const pinned_buffer&) = delete;
  pinned_buffer& operator=(const pinned_buffer&) = delete;
  ~pinned_buffer() {
    if (data_ != nullptr) static_cast<void>(cudaFreeHost(data_));
  }

  /// The host pointer (null when empty).
  [[nodiscard]] T* data() const noexcept { return data_; }
  /// The address kernels use; null unless the memory is mapped.
  [[nodiscard]] T* device_data() const noexcept { return device_data_; }
  /// Elements.
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  /// size() * sizeof(T).
  [[nodiscard]] std::size_t bytes() const noexcept { return size_ * sizeof(T); }
  /// How the memory was allocated.
  [[nodiscard]] host_memory kind() const noexcept { return kind_; }
  /// The elements, on the host.
  [[nodiscard]] std::span<T> span() const noexcept { return {data_, size_}; }
  /// Element i, on the host.
  T& operator[](std::size_t i) const noexcept { return data_[i]; }

  /// Exchanges the two buffers' memory.
  void swap(pinned_buffer& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(device_data_, other.device_data_);
    std::swap(size_, other.size_);
    std::swap(kind_, other.kind_);
  }

 private:
  T* data_{nullptr};
  T* device_data_{nullptr};
  std::size_t size_{0};
  host_memory kind_{host_memory::pinned};
};

}  // namespace squeeze::core
