// SPDX-License-Identifier: Apache-2.0
// Values the ibp wire-codec tests (host and GPU) send: four kinds from high to low entropy.
// Host-only.
#pragma once

#include <squeeze/ibp/wire_format.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace squeeze::test {

enum class wire_data { random_bits, gradient, constant, complementary, sparse_rows };

inline const char* name(wire_data k) {
  switch (k) {
    case wire_data::random_bits: return "random bits";
    case wire_data::gradient: return "N(0, 1e-3)";
    case wire_data::constant: return "one value";
    case wire_data::complementary: return "complementary rows";
    case wire_data::sparse_rows: return "N(0, 1e-3), 9 rows of 64 in 10 zero";
  }
  return "?";
}

inline constexpr wire_data all_wire_data[] = {wire_data::random_bits, wire_data::gradient,
                                              wire_data::constant, wire_data::complementary,
                                              wire_data::sparse_rows};

/// n values of T as bytes: random bits (NaNs and infinities included); gradient-like
/// N(0, 1e-3) (few distinct exponents); one value repeated (every bit invariant); random
/// rows of 512 B whose odd rows are the complement of the row before (each bit set in half
/// of the rows: none invariant); or the gradient-like values with 9 in 10 rows of 64 values
/// zero, chosen at random (an embedding table's gradients: rows compressed and rows raw).
template <class T>
std::vector<std::byte> wire_values(wire_data k, std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng{seed};
  std::vector<std::byte> v(n * sizeof(T));
  if (k == wire_data::gradient || k == wire_data::sparse_rows) {
    std::normal_distribution<double> normal{0.0, 1e-3};
    bool zero_row = false;
    for (std::size_t i = 0; i < n; ++i) {
      if (k == wire_data::sparse_rows && i % 64 == 0) zero_row = rng() % 10 != 0;
      const auto x = zero_row ? T{0} : static_cast<T>(normal(rng));
      std::memcpy(v.data() + i * sizeof(T), &x, sizeof(T));
    }
  } else if (k == wire_data::constant) {
    const auto x = static_cast<T>(-1.2345678901234);
    for (std::size_t i = 0; i < n; ++i) std::memcpy(v.data() + i * sizeof(T), &x, sizeof(T));
  } else {
    for (auto& b : v) b = static_cast<std::byte>(rng());
    if (k == wire_data::complementary) {
      constexpr std::size_t row = ibp::wire_max_row_bytes;
      for (std::size_t at = row; at < v.size(); ++at) {
        if ((at / row) % 2 == 1) v[at] = ~v[at - row];
      }
    }
  }
  return v;
}

}  // namespace squeeze::test
