// SPDX-License-Identifier: Apache-2.0
// squeeze/xfer/mapped_memory.hpp: host memory that kernels read directly (zero-copy).
//
//   auto buf  = xfer::allocate_mapped<float>(n);          // new pinned + mapped memory
//   xfer::host_registration reg{ptr, bytes};              // pin and map existing memory
//   xfer::mapped_file file{"features.bin"};               // mmap a file, pin and map it
//   kernel<<<...>>>(buf.device_data(), reg.device_data(), file.device_data());
//
// Host-compilable (CUDA runtime API and POSIX, no nvcc). Owners are move-only RAII.
#pragma once

#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <string>
#include <utility>

#include "squeeze/core/buffer.hpp"
#include "squeeze/core/cuda_error.hpp"
#include "squeeze/core/error.hpp"

namespace squeeze::xfer {

/// `count` elements of new page-locked, mapped host memory; kernels use device_data().
template <class T>
core::pinned_buffer<T> allocate_mapped(std::size_t count, bool write_combined = false) {
  return core::pinned_buffer<T>{
      count, write_combined ? core::host_memory::mapped_write_combined : core::host_memory::mapped};
}

/// Pins and maps an existing host range [data, data + bytes) for zero-copy reads, and
/// unregisters it on destruction. The range must outlive the registration.
class host_registration {
 public:
  /// Whether kernels may write the range (read_only: cudaHostRegisterReadOnly).
  enum class access { read_write, read_only };

  host_registration() = default;
  /// Registers [data, data + bytes) (cudaHostRegister, mapped and portable); throws
  /// invalid_argument for a null range, cuda_error when the range cannot be registered.
  host_registration(void* data, std::size_t bytes, access mode = access::read_write) {
    SQUEEZE_EXPECTS(data != nullptr || bytes == 0, "host_registration: null range");
    if (bytes == 0) return;
    unsigned flags = cudaHostRegisterMapped | cudaHostRegisterPortable;
    if (mode == access::read_only) flags |= cudaHostRegisterReadOnly;
    SQUEEZE_CUDA_TRY(cudaHostRegister(data, bytes, flags));
    host_ = data;
    bytes_ = bytes;
    const cudaError_t mapped = cudaHostGetDevicePointer(&device_, data, 0);
    if (mapped != cudaSuccess) {
      release();
      SQUEEZE_CUDA_TRY(mapped);
    }
  }
  /// Takes other's registration; other is left empty.
  host_registration(host_registration&& other) noexcept { swap(other); }
  /// Unregisters this range and takes other's.
  host_registration& operator=(host_registration&& other) noexcept {
    host_registration{std::move(other)}.swap(*this);
    return *this;
  }
  host_registration(const host_registration&) = delete;
  host_registration& operator=(const host_registration&) = delete;
  ~host_registration() { release(); }

  /// The range's start, on the host.
  [[nodiscard]] void* host_data() const noexcept { return host_; }
  /// The address kernels use.
  [[nodiscard]] void* device_data() const noexcept { return device_; }
  /// Bytes registered.
  [[nodiscard]] std::size_t bytes() const noexcept { return bytes_; }

  /// Exchanges the two registrations.
  void swap(host_registration& other) noexcept {
    std::swap(host_, other.host_);
    std::swap(device_, other.device_);
    std::swap(bytes_, other.bytes_);
  }

 private:
  void release() noexcept {
    if (host_ != nullptr) static_cast<void>(cudaHostUnregister(host_));
    host_ = device_ = nullptr;
    bytes_ = 0;
  }
  void* host_{nullptr};
  void* device_{nullptr};
  std::size_t bytes_{0};
};

/// A whole file mapped read-only into memory (mmap) and registered for zero-copy reads:
/// kernels read the file's bytes at device_data(). An empty file maps to an empty range.
/// Throws squeeze::io_error when the file cannot be opened or mapped, cuda_error when it
/// cannot be registered.
class mapped_file {
 public:
  mapped_file() = default;
  /// Maps and registers the file at `path`.
  explicit mapped_file(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw io_error{"cannot open '" + path + "': " + std::strerror(errno)};
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      const int err = errno;
      ::close(fd);
      throw io_error{"cannot stat '" + path + "': " + std::strerror(err)};
    }
    if (!S_ISREG(st.st_mode)) {
      ::close(fd);
      throw io_error{"'" + path + "' is not a regular file"};
    }
    bytes_ = static_cast<std::size_t>(st.st_size);
    if (bytes_ > 0) {
      void* p = ::mmap(nullptr, bytes_, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, 0);
      if (p == MAP_FAILED) {
        const int err = errno;
        ::close(fd);
        throw io_error{"cannot mmap '" + path + "': " + std::strerror(err)};
      }
      host_ = p;
    }
    ::close(fd);
    if (bytes_ > 0) {
      try {
        registration_ = host_registration{host_, bytes_, host_registration::access::read_only};
      } catch (...) {
        ::munmap(host_, bytes_);
        throw;
      }
    }
  }
  /// Takes other's mapping; other is left empty.
  mapped_file(mapped_file&& other) noexcept { swap(other); }
  /// Unmaps this file and takes other's mapping.
  mapped_file& operator=(mapped_file&& other) noexcept {
    mapped_file{std::move(other)}.swap(*this);
    return *this;
  }
  mapped_file(const mapped_file&) = delete;
  mapped_file& operator=(const mapped_file&) = delete;
  ~mapped_file() {
    registration_ = host_registration{};  // unregister before unmapping
    if (host_ != nullptr) ::munmap(host_, bytes_);
  }

  /// The file's bytes, on the host.
  [[nodiscard]] const std::byte* host_data() const noexcept {
    return static_cast<const std::byte*>(host_);
  }
  /// The file's bytes, where kernels read them.
  [[nodiscard]] const std::byte* device_data() const noexcept {
    return static_cast<const std::byte*>(registration_.device_data());
  }
  /// The file's size.
  [[nodiscard]] std::size_t bytes() const noexcept { return bytes_; }

  /// Exchanges the two mappings.
  void swap(mapped_file& other) noexcept {
    std::swap(host_, other.host_);
    std::swap(bytes_, other.bytes_);
    registration_.swap(other.registration_);
  }

 private:
  void* host_{nullptr};
  std::size_t bytes_{0};
  host_registration registration_;
};

}  // namespace squeeze::xfer
