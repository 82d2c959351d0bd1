// SPDX-License-Identifier: Apache-2.0
// tests/common/gpu_test.hpp: what every GPU test shares.
#pragma once

#include <squeeze/core/buffer.hpp>
#include <squeeze/core/cuda_error.hpp>
#include <squeeze/core/device.hpp>
#include <squeeze/xfer/mapped_memory.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <ostream>
#include <random>
#include <span>
#include <utility>
#include <vector>

/// Skips the current test (reported as skipped, never passed) when no CUDA device is there.
#define SQUEEZE_REQUIRE_GPU()                                                      \
  do {                                                                             \
    static const auto squeeze_presence_ = ::squeeze::core::detect_devices();       \
    if (!squeeze_presence_.present()) GTEST_SKIP() << squeeze_presence_.message(); \
  } while (false)

namespace squeeze::test {

/// Whether the tests run under compute-sanitizer (tools/sanitize.sh exports
/// SQUEEZE_SANITIZER=<tool>): its instrumentation slows kernels by orders of magnitude, so
/// upper bounds on time are not checked there, and deadlines that catch hangs are longer.
inline bool under_sanitizer() {
  const char* tool = std::getenv("SQUEEZE_SANITIZER");
  return tool != nullptr && *tool != '\0';
}
/// A deadline for work that takes `normal` without a sanitizer (20x that under one).
inline std::chrono::seconds hang_limit(std::chrono::seconds normal) {
  return under_sanitizer() ? 20 * normal : normal;
}

/// Random bytes (never all zero, so unwritten outputs and wrong offsets show).
inline std::vector<std::byte> random_bytes(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng{seed};
  std::vector<std::byte> v(n);
  for (auto& b : v) b = static_cast<std::byte>(rng() & 0xff);
  return v;
}

/// A device copy of host values, complete on return: tests launch on non-blocking streams,
/// which do not wait for the legacy stream's copies (a pageable copy may still be in flight
/// when cudaMemcpy returns).
template <class T>
core::device_buffer<T> upload(const std::vector<T>& h) {
  core::device_buffer<T> d{h.size()};
  if (!h.empty()) d.copy_from(std::span<const T>{h}, nullptr);
  SQUEEZE_CUDA_TRY(cudaDeviceSynchronize());
  return d;
}

/// n values of device memory, once every stream's work is done.
template <class T>
std::vector<T> download(const T* d, std::size_t n) {
  std::vector<T> h(n);
  SQUEEZE_CUDA_TRY(cudaDeviceSynchronize());
  if (n > 0) SQUEEZE_CUDA_TRY(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
  return h;
}
template <class T>
std::vector<T> download(const core::device_buffer<T>& d, std::size_t n) {
  return download(d.data(), n);
}
template <class T>
std::vector<T> download(const core::device_buffer<T>& d) {
  return download(d.data(), d.size());
}

/// The byte every test writes into outputs before a kernel runs.
inline constexpr std::byte poison{0xA5};

/// Index of the first byte where a and b differ, or -1.
inline long long first_mismatch(const std::byte* a, const std::byte* b, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    if (a[i] != b[i]) return static_cast<long long>(i);
  }
  return -1;
}

/// Where the bytes a kernel reads live.
enum class source_kind { device, mapped_host };

inline const char* name(source_kind k) {
  return k == source_kind::device ? "DeviceMemory" : "MappedHost";
}
inline void PrintTo(source_kind k, std::ostream* os) {
  *os << name(k);
}  // readable test names

/// `bytes` random bytes in device memory or in mapped host memory, allocated to exactly
/// that size (so compute-sanitizer sees any read past it), with the host copy that
/// results are compared against. data() is the address kernels read.
class source_bytes {
 public:
  source_bytes() = default;
  source_bytes(source_kind kind, std::size_t bytes, std::uint64_t seed)
      : source_bytes{kind, random_bytes(bytes, seed)} {}
  /// The given bytes, placed likewise.
  source_bytes(source_kind kind, std::vector<std::byte> bytes) : host_{std::move(bytes)} {
    const std::size_t n = host_.size();
    if (kind == source_kind::device) {
      device_ = core::device_buffer<std::byte>{n};
      SQUEEZE_CUDA_TRY(cudaMemcpy(device_.data(), host_.data(), n, cudaMemcpyHostToDevice));
      // A copy from pageable memory may still be in flight when cudaMemcpy returns, and the
      // non-blocking streams tests launch on do not wait for the legacy stream.
      SQUEEZE_CUDA_TRY(cudaDeviceSynchronize());
      data_ = device_.data();
    } else {
      mapped_ = xfer::allocate_mapped<std::byte>(n);
      std::copy(host_.begin(), host_.end(), mapped_.data());
      data_ = mapped_.device_data();
    }
  }
  [[nodiscard]] const std::byte* data() const noexcept { return data_; }
  [[nodiscard]] const std::vector<std::byte>& host() const noexcept { return host_; }

 private:
  std::vector<std::byte> host_;
  core::device_buffer<std::byte> device_;
  core::pinned_buffer<std::byte> mapped_;
  const std::byte* data_ = nullptr;
};

}  // namespace squeeze::test
