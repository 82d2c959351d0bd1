// SPDX-License-Identifier: Apache-2.0
// core/checked.hpp on the host: checked_add, checked_mul and checked_product against 128-bit
// arithmetic on every edge of 8-, 32- and 64-bit types, signed and unsigned, and on random
// values.
#include <squeeze/core/checked.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace core = squeeze::core;

namespace {

template <class T>
std::vector<T> edges() {
  using L = std::numeric_limits<T>;
  std::vector<T> v{T{0}, T{1}, T{2}, T{3}, L::max(), static_cast<T>(L::max() - 1),
                   static_cast<T>(L::max() / 2), static_cast<T>(L::max() / 2 + 1),
                   static_cast<T>(L::max() / 3)};
  if constexpr (std::is_signed_v<T>) {
    for (T x : {L::min(), static_cast<T>(L::min() + 1), static_cast<T>(-1), static_cast<T>(-2),
                static_cast<T>(L::min() / 2), static_cast<T>(L::min() / 2 - 1)}) {
      v.push_back(x);
    }
  }
  return v;
}

template <class T>
void check(T a, T b) {
  __extension__ typedef __int128 W;  // wide enough for every product of two 64-bit values
  const W sum = W{a} + W{b};
  const W product = W{a} * W{b};
  const bool sum_fits = sum >= W{std::numeric_limits<T>::min()} && sum <= W{std::numeric_limits<T>::max()};
  const bool product_fits =
      product >= W{std::numeric_limits<T>::min()} && product <= W{std::numeric_limits<T>::max()};
  const auto s = core::checked_add<T>(a, b);
  const auto p = core::checked_mul<T>(a, b);
  ASSERT_EQ(s.has_value(), sum_fits) << +a << " + " << +b;
  ASSERT_EQ(p.has_value(), product_fits) << +a << " * " << +b;
  if (s) {
    ASSERT_EQ(W{*s}, sum);
  }
  if (p) {
    ASSERT_EQ(W{*p}, product);
  }
}

template <class T>
void check_type() {
  const auto e = edges<T>();
  for (T a : e)
    for (T b : e) check<T>(a, b);
  std::mt19937_64 rng{sizeof(T) * 7 + std::is_signed_v<T>};
  for (int i = 0; i < 20000; ++i) {
    const int shift_a = static_cast<int>(rng() % (8 * sizeof(T)));
    const int shift_b = static_cast<int>(rng() % (8 * sizeof(T)));
    const auto a = static_cast<T>(rng() >> (64 - 8 * sizeof(T)) >> shift_a);
    const auto b = static_cast<T>(rng() >> (64 - 8 * sizeof(T)) >> shift_b);
    check<T>(a, b);
  }
}

}  // namespace

TEST(Checked, AddAndMulAgreeWithWideArithmetic) {
  check_type<std::uint8_t>();
  check_type<std::int8_t>();
  check_type<std::uint32_t>();
  check_type<std::int32_t>();
  check_type<std::uint64_t>();
  check_type<std::int64_t>();
}

TEST(Checked, Product) {
  using U = std::uint64_t;
  EXPECT_EQ(core::checked_product<U>(2, 3, 7), U{42});
  EXPECT_FALSE(core::checked_product<U>(U{1} << 31, U{1} << 31, U{4}).has_value());
  EXPECT_EQ(core::checked_product<U>(U{1} << 31, U{1} << 31, U{3}), U{3} << 62);
  EXPECT_EQ(core::checked_product<U>(0, U{1} << 63, U{1} << 63), U{0});
  static_assert(core::checked_mul<std::uint32_t>(65536u, 65536u) == std::nullopt);
  static_assert(core::checked_add<std::int64_t>(std::numeric_limits<std::int64_t>::max(), 1) ==
                std::nullopt);
}
