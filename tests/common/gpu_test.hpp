// tests/common/gpu_test.hpp: what every GPU test shares.
#pragma once

#include <squeeze/core/buffer.hpp>
#include <squeeze/core/device.hpp>

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

/// Skips the current test (reported as skipped, never passed) when no CUDA device is there.
#define SQUEEZE_REQUIRE_GPU()                                                                    \
  do {                                                                                           \
    static const auto squeeze_presence_ = ::squeeze::core::detect_devices();                     \
    if (!squeeze_presence_.present()) GTEST_SKIP() << "no CUDA device: " << squeeze_presence_.reason; \
  } while (false)

namespace squeeze::test {

/// Random bytes (never all zero, so unwritten outputs and wrong offsets show).
inline std::vector<std::byte> random_bytes(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng{seed};
  std::vector<std::byte> v(n);
  for (auto& b : v) b = static_cast<std::byte>(rng() & 0xff);
  return v;
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

}  // namespace squeeze::test
