// FRSZ2 format: the host reference encoder and decoder against the bounds format.hpp states,
// for every l, both rounding modes, fp64 and fp32, and the special values it defines.
#include <squeeze/frsz2/format.hpp>

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <utility>
#include <vector>

namespace frsz2 = squeeze::frsz2;
using frsz2::rounding;

namespace {

/// Blocks of normally distributed values whose scale changes from block to block, with
/// some blocks spread over many binades.
template <class T>
std::vector<T> krylov_like(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng{seed};
  std::normal_distribution<double> normal{0.0, 1.0};
  std::uniform_int_distribution<int> scale{-60, 60};
  std::vector<T> x(n);
  for (std::size_t first = 0; first < n; first += 32) {
    const int s = scale(rng);
    const bool spread = (first / 32) % 5 == 0;
    for (std::size_t i = first; i < std::min(n, first + 32); ++i) {
      const int extra = spread ? static_cast<int>(rng() % 40) - 20 : 0;
      x[i] = static_cast<T>(std::ldexp(normal(rng), s + extra));
    }
  }
  return x;
}

/// The block's ulp, 2^(Eb - bias - (l - 2)), from its exponent word.
template <class F>
long double block_ulp(std::uint16_t w) {
  const int eb = w & F::exponent_field;
  return std::ldexp(1.0L, eb - F::bias - (F::bits - 2));
}

template <class F>
void check_bounds(rounding mode, std::uint64_t seed) {
  using T = typename F::float_type;
  const std::size_t n = 32 * 40 + 7;  // a partial last block
  const auto x = krylov_like<T>(n, seed);
  const auto v = frsz2::encode<F>(x, mode);
  const auto y = frsz2::decode(v);
  ASSERT_EQ(y.size(), n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t b = i / F::block_size;
    const std::uint16_t w = v.exponents[b];
    ASSERT_EQ(w & F::nonfinite_flag, 0);
    long double m = 0;  // the block's largest magnitude
    for (std::size_t k = b * F::block_size; k < std::min(n, (b + 1) * F::block_size); ++k) {
      m = std::max(m, std::fabs(static_cast<long double>(x[k])));
    }
    const long double err = std::fabs(static_cast<long double>(y[i]) - x[i]);
    const long double ulp = block_ulp<F>(w);
    if (mode == rounding::nearest) {
      ASSERT_LE(err, ulp / 2) << "l=" << F::bits << " i=" << i << " x=" << x[i] << " y=" << y[i];
      ASSERT_LE(err, std::ldexp(m, 2 - F::bits)) << "l=" << F::bits << " i=" << i;
    } else {
      ASSERT_LT(err, ulp) << "l=" << F::bits << " i=" << i << " x=" << x[i] << " y=" << y[i];
      ASSERT_LT(err, std::ldexp(m, 2 - F::bits)) << "l=" << F::bits << " i=" << i;
      ASSERT_LE(std::fabs(y[i]), std::fabs(x[i])) << "truncation moved away from zero";
    }
    ASSERT_EQ(std::signbit(y[i]), std::signbit(x[i])) << "l=" << F::bits << " i=" << i;
    // The stored exponent is the block maximum, or one above it after a rounding carry.
    const int emax = std::ilogb(static_cast<double>(m)) + F::bias;
    const int eb = w & F::exponent_field;
    ASSERT_TRUE(eb == emax || (mode == rounding::nearest && eb == emax + 1))
        << "l=" << F::bits << " block " << b << " eb=" << eb << " emax=" << emax;
  }
}

template <class T, int... L>
void check_every_l(std::integer_sequence<int, L...>) {
  (check_bounds<frsz2::format<L + 2, T>>(rounding::nearest, 100 + L), ...);
  (check_bounds<frsz2::format<L + 2, T>>(rounding::truncate, 200 + L), ...);
}

}  // namespace

TEST(Frsz2Format, EveryLengthMeetsItsBoundDouble) {
  check_every_l<double>(std::make_integer_sequence<int, 63>{});  // l = 2 .. 64
}

TEST(Frsz2Format, EveryLengthMeetsItsBoundFloat) {
  check_every_l<float>(std::make_integer_sequence<int, 31>{});  // l = 2 .. 32
}

TEST(Frsz2Format, OtherBlockSizes) {
  check_bounds<frsz2::format<21, double, 1>>(rounding::nearest, 1);
  check_bounds<frsz2::format<21, double, 8>>(rounding::nearest, 2);
  check_bounds<frsz2::format<13, double, 64>>(rounding::truncate, 3);
  check_bounds<frsz2::format<32, float, 128>>(rounding::nearest, 4);
  check_bounds<frsz2::format<48, double, 256>>(rounding::nearest, 5);
}

// Rounding to nearest halves the worst error of truncation (measured over many blocks).
TEST(Frsz2Format, NearestHalvesTheTruncationError) {
  using F = frsz2::format<16>;
  std::mt19937_64 rng{7};
  std::normal_distribution<double> normal{0.0, 1.0};
  std::vector<double> x(32 * 2000);
  for (auto& v : x) v = normal(rng);
  const auto rn = frsz2::decode(frsz2::encode<F>(x, rounding::nearest));
  const auto tr = frsz2::decode(frsz2::encode<F>(x, rounding::truncate));
  double sum_rn = 0, sum_tr = 0, max_rn = 0, max_tr = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    sum_rn += std::fabs(rn[i] - x[i]);
    sum_tr += std::fabs(tr[i] - x[i]);
    max_rn = std::max(max_rn, std::fabs(rn[i] - x[i]));
    max_tr = std::max(max_tr, std::fabs(tr[i] - x[i]));
  }
  EXPECT_LT(sum_rn, 0.6 * sum_tr);
  EXPECT_GT(sum_rn, 0.4 * sum_tr);
  EXPECT_LT(max_rn, 0.6 * max_tr);
}

// Codes straddle words: every code sits at bit k*l of its block, LSB-first.
TEST(Frsz2Format, CodesSitAtBitKTimesL) {
  using F = frsz2::format<21>;
  const auto x = krylov_like<double>(64, 11);
  const auto v = frsz2::encode<F>(x, rounding::nearest);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const std::size_t b = i / 32;
    const std::uint64_t bit0 = b * F::words_per_block * 32ull + (i % 32) * 21;
    std::uint64_t code = 0;
    for (int j = 0; j < 21; ++j) {  // bit by bit, nothing clever
      const std::uint64_t bit = bit0 + j;
      code |= std::uint64_t{(v.payload[bit / 32] >> (bit % 32)) & 1u} << j;
    }
    const auto want = frsz2::encode_value<F>(x[i], v.exponents[b] & F::exponent_field,
                                             rounding::nearest, F::q_max);
    ASSERT_EQ(code, want) << "value " << i;
  }
  EXPECT_EQ(F::words_per_block, 21);
  EXPECT_EQ(v.payload.size(), 2u * 21u);
}

TEST(Frsz2Format, WideCodesAreExactWithinTenBinades) {
  using F = frsz2::format<64>;
  std::mt19937_64 rng{3};
  std::vector<double> x(32 * 20);
  for (auto& v : x) {
    v = std::ldexp(std::uniform_real_distribution<double>{1.0, 2.0}(rng),
                   -static_cast<int>(rng() % 10));
    if (rng() % 2) v = -v;
  }
  const auto y = frsz2::decode(frsz2::encode<F>(x, rounding::nearest));
  for (std::size_t i = 0; i < x.size(); ++i) ASSERT_EQ(y[i], x[i]) << i;
  using G = frsz2::format<32, float>;
  std::vector<float> xf(32 * 10);
  for (auto& v : xf) v = std::ldexp(static_cast<float>(rng() % (1u << 24)), -30);
  xf[0] = std::ldexp(float((1u << 24) - 1), -30);  // a block max of full precision
  const auto v32 = frsz2::encode<G>(xf, rounding::truncate);
  const auto yf = frsz2::decode(v32);
  for (std::size_t i = 0; i < 32; ++i) {
    // l - 2 = 30 bits: values within 7 binades of the block max are exact.
    if (std::ilogb(xf[i]) >= std::ilogb(xf[0]) - 7) {
      ASSERT_EQ(yf[i], xf[i]) << i;
    }
  }
}

TEST(Frsz2Format, ZerosRoundTripWithTheirSign) {
  using F = frsz2::format<16>;
  std::vector<double> x(32, 0.0);
  x[3] = -0.0;
  x[5] = 1.5;
  x[6] = -1e-200;  // far below the block's scale: a zero of its sign
  const auto y = frsz2::decode(frsz2::encode<F>(x, rounding::nearest));
  for (std::size_t i = 0; i < 32; ++i) {
    if (i == 5) continue;
    EXPECT_EQ(y[i], 0.0) << i;
    EXPECT_EQ(std::signbit(y[i]), std::signbit(x[i])) << i;
  }
  EXPECT_EQ(y[5], 1.5);
  const auto all_zero = frsz2::encode<F>(std::vector<double>(40, 0.0), rounding::truncate);
  for (const double v : frsz2::decode(all_zero)) EXPECT_EQ(std::bit_cast<std::uint64_t>(v), 0u);
}

TEST(Frsz2Format, SubnormalsRoundTrip) {
  using F = frsz2::format<64>;
  const double tiny = std::numeric_limits<double>::denorm_min();
  std::vector<double> x(32);
  for (std::size_t i = 0; i < 32; ++i)
    x[i] = tiny * static_cast<double>(1 + 37 * i) * (i % 2 ? -1 : 1);
  x[31] = std::numeric_limits<double>::min();  // the smallest normal, in the same block
  const auto y = frsz2::decode(frsz2::encode<F>(x, rounding::nearest));
  for (std::size_t i = 0; i < 32; ++i) EXPECT_EQ(y[i], x[i]) << i;
  // A short code keeps the subnormals within its bound.
  using G = frsz2::format<8, float>;
  std::vector<float> xf(32);
  for (std::size_t i = 0; i < 32; ++i)
    xf[i] = std::numeric_limits<float>::denorm_min() * float(i * 1000 + 1);
  const auto v = frsz2::encode<G>(xf, rounding::nearest);
  const auto yf = frsz2::decode(v);
  const long double ulp = block_ulp<G>(v.exponents[0]);
  for (std::size_t i = 0; i < 32; ++i)
    EXPECT_LE(std::fabs((long double)yf[i] - xf[i]), ulp / 2) << i;
}

TEST(Frsz2Format, InfinitiesAndNanAreKept) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> x(32);
  for (std::size_t i = 0; i < 32; ++i) x[i] = 0.25 * static_cast<double>(i) - 3.0;
  x[1] = inf;
  x[2] = -inf;
  x[3] = nan;
  x[4] = -0.0;
  auto check = [&](auto format_tag) {
    using F = decltype(format_tag);
    const auto v = frsz2::encode<F>(x, rounding::nearest);
    EXPECT_NE(v.exponents[0] & F::nonfinite_flag, 0);
    const auto y = frsz2::decode(v);
    EXPECT_EQ(y[1], inf);
    EXPECT_EQ(y[2], -inf);
    EXPECT_TRUE(std::isnan(y[3]));
    EXPECT_EQ(y[4], 0.0);
    for (std::size_t i = 5; i < 32; ++i) {
      ASSERT_TRUE(std::isfinite(y[i])) << i;
      if (F::bits > 2) {
        ASSERT_LE(std::fabs(y[i] - x[i]), block_ulp<F>(v.exponents[0]) / 2) << i;
      } else {
        ASSERT_EQ(y[i], 0.0);
      }
    }
  };
  check(frsz2::format<2>{});
  check(frsz2::format<3>{});
  check(frsz2::format<21>{});
  check(frsz2::format<64>{});
}

TEST(Frsz2Format, TheTopOfTheRangeStaysFinite) {
  const double big = std::numeric_limits<double>::max();
  std::vector<double> x(32, big);
  x[1] = -big;
  x[2] = 1.0;
  x[3] = std::numeric_limits<double>::infinity();
  for (const auto mode : {rounding::nearest, rounding::truncate}) {
    const auto v = frsz2::encode<frsz2::format<16>>(std::span{x.data() + 0, 3}, mode);
    const auto y = frsz2::decode(v);
    EXPECT_TRUE(std::isfinite(y[0]));
    EXPECT_TRUE(std::isfinite(y[1]));
    EXPECT_GT(y[0], 0.99 * big);
    EXPECT_LT(y[1], -0.99 * big);
    const auto w = frsz2::encode<frsz2::format<16>>(x, mode);  // with an infinity
    const auto z = frsz2::decode(w);
    EXPECT_TRUE(std::isfinite(z[0]));
    EXPECT_GT(z[0], 0.99 * big);
    EXPECT_EQ(z[3], std::numeric_limits<double>::infinity());
  }
}

TEST(Frsz2Format, SizesAndValidation) {
  using F = frsz2::format<21>;
  EXPECT_EQ(F::blocks(0), 0u);
  EXPECT_EQ(F::blocks(33), 2u);
  EXPECT_EQ(F::payload_words(33), 42u);
  EXPECT_EQ(F::bytes(64), 2u * 21u * 4u + 4u);
  EXPECT_EQ((frsz2::format<3, double, 8>::words_per_block), 1);
  auto v = frsz2::encode<F>(krylov_like<double>(100, 1), rounding::nearest);
  v.payload.pop_back();
  EXPECT_THROW(frsz2::decode(v), squeeze::format_error);
}
