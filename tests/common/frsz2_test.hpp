// SPDX-License-Identifier: Apache-2.0
// tests/common/frsz2_test.hpp: inputs the FRSZ2 tests share (host and GPU).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace squeeze::test {

/// Krylov-like values: normally distributed, a scale that changes from block to block,
/// every fifth block spread over ~40 binades. With `specials`, some blocks also hold
/// zeros of both signs, subnormals, infinities and NaN.
template <class T>
std::vector<T> frsz2_values(std::size_t n, std::uint64_t seed, bool specials = false) {
  std::mt19937_64 rng{seed};
  std::normal_distribution<double> normal{0.0, 1.0};
  std::vector<T> x(n);
  for (std::size_t first = 0; first < n; first += 32) {
    const int s = static_cast<int>(rng() % 121) - 60;
    const bool spread = (first / 32) % 5 == 0;
    for (std::size_t i = first; i < std::min(n, first + 32); ++i) {
      const int extra = spread ? static_cast<int>(rng() % 40) - 20 : 0;
      x[i] = static_cast<T>(std::ldexp(normal(rng), s + extra));
    }
  }
  if (specials) {
    for (std::size_t i = 0; i < n; ++i) {
      switch (rng() % 97) {
        case 0: x[i] = T{0}; break;
        case 1: x[i] = -T{0}; break;
        case 2:
          x[i] = std::numeric_limits<T>::denorm_min() * static_cast<T>(rng() % 1000 + 1);
          break;
        case 3: x[i] = std::numeric_limits<T>::infinity(); break;
        case 4: x[i] = -std::numeric_limits<T>::infinity(); break;
        case 5: x[i] = std::numeric_limits<T>::quiet_NaN(); break;
        case 6: x[i] = std::numeric_limits<T>::max(); break;
        default: break;
      }
    }
  }
  return x;
}

}  // namespace squeeze::test
