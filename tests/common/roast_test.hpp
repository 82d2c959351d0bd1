// SPDX-License-Identifier: Apache-2.0
// tests/common/roast_test.hpp: host references for ROAST-MM (double accumulation, with the
// sum of absolute products each output's error bound is scaled by).
#pragma once

#include <squeeze/roast/mapping.hpp>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace squeeze::test {

/// C = A . B for row-major A (rows x depth, element (r, d) at a[r * lda + d]) and B given
/// by b(d, c); also |A| . |B| for error bounds.
struct reference_product {
  std::vector<double> value;
  std::vector<double> magnitude;
};

template <class A, class B>
reference_product multiply(std::uint64_t rows, std::uint64_t depth, std::uint64_t cols, A a, B b) {
  reference_product r{std::vector<double>(rows * cols, 0.0), std::vector<double>(rows * cols, 0.0)};
  std::vector<double> brow(cols);
  for (std::uint64_t d = 0; d < depth; ++d) {
    for (std::uint64_t c = 0; c < cols; ++c) brow[c] = b(d, c);
    for (std::uint64_t i = 0; i < rows; ++i) {
      const double av = a(i, d);
      if (av == 0.0) continue;
      double* v = &r.value[i * cols];
      double* m = &r.magnitude[i * cols];
      for (std::uint64_t c = 0; c < cols; ++c) {
        v[c] += av * brow[c];
        m[c] += std::fabs(av * brow[c]);
      }
    }
  }
  return r;
}

/// Uniform values in [-1, 1) rounded to T (never all zero).
template <class T, class FromFloat>
std::vector<T> random_values(std::size_t n, std::uint64_t seed, FromFloat from_float) {
  std::mt19937_64 rng{seed};
  std::uniform_real_distribution<float> u{-1.0f, 1.0f};
  std::vector<T> v(n);
  for (auto& e : v) e = from_float(u(rng));
  return v;
}

}  // namespace squeeze::test
