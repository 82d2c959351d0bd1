// SPDX-License-Identifier: Apache-2.0
// FRSZ2 format: the host reference encoder and decoder against the bounds format.hpp states,
// for every l, both rounding modes, fp64 and fp32, and the special values it defines.
#include <squeeze/frsz2/format.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <string>
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

namespace {

/// Blocks of zeros (both signs) take Eb = zero_block_exponent, the smallest the accessor's
/// fast paths decode, and decode to zeros of their sign; a block with one subnormal, or with
/// an infinity among zeros, keeps the exponent of its values.
template <class F>
void check_zero_blocks() {
  using T = typename F::float_type;
  using B = typename F::bits_type;
  SCOPED_TRACE(F::bits);
  constexpr std::size_t bs = F::block_size;
  std::vector<T> x(4 * bs, T{0});
  for (std::size_t i = 0; i < bs; ++i) x[bs + i] = i % 3 == 1 ? T{-0.0} : T{0};  // block 1
  x[2 * bs + 1] = std::numeric_limits<T>::denorm_min();                          // block 2
  x[3 * bs + 2] = -std::numeric_limits<T>::infinity();                           // block 3
  for (const auto mode : {rounding::nearest, rounding::truncate}) {
    const auto v = frsz2::encode<F>(x, mode);
    EXPECT_EQ(v.exponents[0], F::zero_block_exponent);
    EXPECT_EQ(v.exponents[1], F::zero_block_exponent);
    EXPECT_EQ(v.exponents[2], 1u);  // a subnormal's exponent
    EXPECT_EQ(v.exponents[3], F::nonfinite_flag | 1u);
    const auto y = frsz2::decode(v);
    for (std::size_t i = 0; i < 2 * bs; ++i) {
      ASSERT_EQ(std::bit_cast<B>(y[i]), std::bit_cast<B>(x[i])) << "value " << i;
    }
    EXPECT_EQ(frsz2::decode(frsz2::encode<F>(y, mode)), y);  // values, compared as numbers
  }
}

}  // namespace

TEST(Frsz2Format, BlocksOfZerosTakeAnOrdinaryExponent) {
  static_assert(frsz2::format<16>::zero_block_exponent == 32);
  check_zero_blocks<frsz2::format<2>>();
  check_zero_blocks<frsz2::format<16>>();
  check_zero_blocks<frsz2::format<21>>();
  check_zero_blocks<frsz2::format<32>>();
  check_zero_blocks<frsz2::format<64>>();
  check_zero_blocks<frsz2::format<21, double, 8>>();
  check_zero_blocks<frsz2::format<8, float>>();
  check_zero_blocks<frsz2::format<32, float>>();
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

// Sizes near 2^64: the block count does not wrap to a few blocks (it did: a vector of
// 2^64 - 1 values "needed" 0 words, so validate passed empty arrays, decode threw
// std::length_error and decode_at read past them). validate refuses every size whose arrays
// cannot exist, decode and decode_at refuse it with a format_error, and checked_payload_words
// / checked_bytes report counts that do not fit.
TEST(Frsz2Format, SizesNearTwoToThe64AreRefused) {
  using F = frsz2::format<21>;
  constexpr std::size_t most = std::numeric_limits<std::size_t>::max();
  EXPECT_EQ(F::exact_blocks(most), most / 32 + 1);
  EXPECT_EQ(F::exact_blocks(most - 30), most / 32 + 1);
  EXPECT_EQ(F::exact_blocks(most - 31), most / 32);
  EXPECT_EQ(F::exact_blocks(F::max_size), F::blocks(F::max_size));
  EXPECT_EQ(F::checked_payload_words(most), std::optional<std::size_t>{(most / 32 + 1) * 21});
  EXPECT_FALSE(F::checked_bytes(most).has_value());  // 2^59 blocks of 86 bytes
  EXPECT_FALSE(frsz2::format<64>::checked_payload_words(most).has_value());
  EXPECT_EQ(F::checked_payload_words(33), std::optional<std::size_t>{42});
  EXPECT_EQ(F::checked_bytes(64), std::optional<std::size_t>{F::bytes(64)});
  EXPECT_EQ(F::max_size, static_cast<std::size_t>(PTRDIFF_MAX) / 8);
  EXPECT_EQ(F::checked_bytes(F::max_size), std::optional<std::size_t>{F::bytes(F::max_size)});
  for (const std::size_t n : {most, most - 1, most - 30, most - 31, most - 32, std::size_t{1} << 63,
                              F::max_size + 1}) {
    // Empty arrays, and arrays as large as the sizes were when the counts wrapped.
    const std::size_t wrapped_blocks = (n + 31) / 32;
    for (const std::size_t blocks : {std::size_t{0}, std::min<std::size_t>(wrapped_blocks, 4)}) {
      frsz2::host_vector<F> v;
      v.size = n;
      v.exponents.assign(blocks, 0);
      v.payload.assign(blocks * F::words_per_block, 0u);
      try {
        frsz2::validate(v);
        ADD_FAILURE() << "validate accepted a vector of " << n << " values";
      } catch (const squeeze::format_error& e) {
        EXPECT_NE(e.message().find("cannot exist"), std::string::npos) << e.message();
      }
      EXPECT_THROW(frsz2::decode(v), squeeze::format_error) << n;
      for (const std::size_t i : {std::size_t{0}, std::size_t{40}, n / 2, n - 1}) {
        EXPECT_THROW(frsz2::decode_at(v, i), squeeze::format_error) << n << " " << i;
      }
    }
  }
  // The most values a format allows: the counts are exact, the arrays are what is missing.
  frsz2::host_vector<F> v;
  v.size = F::max_size;
  try {
    frsz2::validate(v);
    ADD_FAILURE() << "validate accepted empty arrays for max_size values";
  } catch (const squeeze::format_error& e) {
    EXPECT_NE(e.message().find(std::to_string(F::payload_words(F::max_size))), std::string::npos)
        << e.message();
  }
  // Other formats: the unchecked counts of max_size values fit (static_assert) and equal the
  // checked ones.
  using G = frsz2::format<32, float, 1>;  // 6 bytes a value: more than the values themselves
  EXPECT_EQ(G::checked_bytes(G::max_size), std::optional<std::size_t>{G::bytes(G::max_size)});
  using H = frsz2::format<64, double, 1>;
  EXPECT_EQ(H::checked_bytes(H::max_size), std::optional<std::size_t>{H::bytes(H::max_size)});
  EXPECT_FALSE(H::checked_bytes(H::max_size * 2).has_value());
}

// decode_at reads only what value i needs, and only after checking it is there.
TEST(Frsz2Format, DecodeAtNeverReadsPastTheArrays) {
  using F = frsz2::format<21>;
  const auto x = krylov_like<double>(40, 5);
  auto v = frsz2::encode<F>(x, rounding::nearest);
  for (std::size_t i = 0; i < 40; ++i) EXPECT_EQ(frsz2::decode_at(v, i), frsz2::decode(v)[i]);
  // Past the values (inside the last block's words, and far past them).
  EXPECT_THROW(frsz2::decode_at(v, 40), squeeze::invalid_argument);
  EXPECT_THROW(frsz2::decode_at(v, 63), squeeze::invalid_argument);
  EXPECT_THROW(frsz2::decode_at(v, 1u << 20), squeeze::invalid_argument);
  // Arrays shorter than the size says.
  auto short_payload = v;
  short_payload.payload.resize(F::words_per_block + 3);
  EXPECT_THROW(frsz2::decode_at(short_payload, 39), squeeze::format_error);
  auto short_exponents = v;
  short_exponents.exponents.pop_back();
  EXPECT_THROW(frsz2::decode_at(short_exponents, 39), squeeze::format_error);
  auto bigger = v;
  bigger.size = 100;
  EXPECT_THROW(frsz2::decode_at(bigger, 70), squeeze::format_error);
}

namespace {

/// A vector of 64 values whose second block's exponent word is w (its codes kept).
template <class F>
frsz2::host_vector<F> with_second_exponent(std::uint16_t w) {
  const auto x = krylov_like<typename F::float_type>(64, 9);
  auto v = frsz2::encode<F>(x, rounding::nearest);
  v.exponents[1] = w;
  return v;
}

/// validate, decode and decode_at of block 1 refuse v with a format_error naming `what`;
/// block 0 still decodes through decode_at.
template <class F>
void expect_block_refused(const frsz2::host_vector<F>& v, const std::string& what) {
  try {
    frsz2::validate(v);
    ADD_FAILURE() << "validate accepted " << what;
  } catch (const squeeze::format_error& e) {
    EXPECT_NE(e.message().find("block 1"), std::string::npos) << e.message();
  }
  EXPECT_THROW(frsz2::decode(v), squeeze::format_error) << what;
  EXPECT_THROW(frsz2::decode_at(v, 32), squeeze::format_error) << what;
  EXPECT_THROW(frsz2::decode_at(v, 63), squeeze::format_error) << what;
  EXPECT_NO_THROW(frsz2::decode_at(v, 0)) << what;
}

}  // namespace

// Exponent words the encoder never writes, on which the decoders disagree (decode_value
// built values with an exponent past the IEEE field, the accessor's scale overflowed into
// the sign): Eb above the top exponent, and the reserved bits 12..14. Rejected.
TEST(Frsz2Format, ExponentWordsOutsideTheRulesAreRejected) {
  using F = frsz2::format<21>;
  for (const int word : {0x0800, 0x0801, 0x0c00, 0x0fff, 0x8800, 0x8fff}) {
    const auto w = static_cast<std::uint16_t>(word);
    expect_block_refused(with_second_exponent<F>(w), "Eb " + std::to_string(w & 0xfff));
    EXPECT_EQ(frsz2::check_block<F>(w, nullptr, 32), frsz2::block_fault::exponent_range);
  }
  for (const int word : {0x1000, 0x2000, 0x4000, 0x13ff, 0x7000 | 1023, 0xf3ff}) {
    const auto w = static_cast<std::uint16_t>(word);
    expect_block_refused(with_second_exponent<F>(w), "reserved bits");
    EXPECT_EQ(frsz2::check_block<F>(w, nullptr, 32), frsz2::block_fault::reserved_bits);
  }
  using G = frsz2::format<16, float>;
  for (const int word : {0x0100, 0x0101, 0x07ff, 0x0800, 0x8100}) {
    const auto w = static_cast<std::uint16_t>(word);
    expect_block_refused(with_second_exponent<G>(w), "fp32 Eb " + std::to_string(w & 0xfff));
    EXPECT_EQ(frsz2::check_block<G>(w, nullptr, 32), frsz2::block_fault::exponent_range);
  }
  // The largest exponents the formats allow are accepted (the encoder writes them).
  const std::vector<std::uint32_t> zeros(F::words_per_block, 0u);
  for (const int word : {0x07ff, 0x87ff, 0x0000, 0x8001}) {
    const auto w = static_cast<std::uint16_t>(word);
    EXPECT_EQ(frsz2::check_block<F>(w, zeros.data(), 32), frsz2::block_fault::none) << w;
  }
  EXPECT_EQ(frsz2::check_block<G>(0x80ff, zeros.data(), 32), frsz2::block_fault::none);
}

namespace {

/// At the top exponent a finite code must stay below 2^(l-2) (the encoder's clamp): codes
/// from 2^(l-2) up are rejected, but for the infinity code of a nonfinite block. The
/// decoders disagreed on them: decode_value gave a NaN (or +-inf), the accessor +-inf.
template <class F>
void check_top_codes() {
  using T = typename F::float_type;
  using B = typename F::bits_type;
  constexpr T inf = std::numeric_limits<T>::infinity();
  // The encoder's blocks at the top exponent validate (a carry, or an infinity beside the
  // largest values).
  std::vector<T> x(64, std::numeric_limits<T>::max());
  x[5] = -x[5];
  for (const auto mode : {rounding::nearest, rounding::truncate}) {
    EXPECT_NO_THROW(frsz2::validate(frsz2::encode<F>(x, mode)));
    x[40] = inf;
    EXPECT_NO_THROW(frsz2::validate(frsz2::encode<F>(x, mode)));
    x[40] = x[41];
  }
  constexpr B top = (B{1} << (F::bits - 2)) - 1;
  for (const bool nonfinite : {false, true}) {
    // Block 1 at the top exponent: the largest finite codes, and with the flag an infinity.
    frsz2::host_vector<F> v;
    v.size = 64;
    v.payload.assign(F::payload_words(64), 0u);
    v.exponents = {static_cast<std::uint16_t>(F::bias),
                   static_cast<std::uint16_t>(F::exponent_all_ones |
                                              (nonfinite ? F::nonfinite_flag : 0))};
    std::uint32_t* words = v.payload.data() + F::words_per_block;
    for (std::uint32_t k = 0; k < 32; ++k) {
      // (odd codes negative; not at l = 2, where "sign 1, q 0" is a NaN in a flagged block)
      frsz2::deposit_code<F>(words, k, (k % 2 != 0 && top != 0 ? F::sign_bit : B{0}) | top);
    }
    if (nonfinite) frsz2::deposit_code<F>(words, 1, F::q_max);  // -inf: sign and q_max
    ASSERT_NO_THROW(frsz2::validate(v));
    const auto y = frsz2::decode(v);
    for (std::size_t i = 32; i < 64; ++i) {
      if (nonfinite && i == 33) {
        EXPECT_TRUE(std::isinf(y[i]));
      } else {
        EXPECT_TRUE(std::isfinite(y[i])) << i;
      }
    }
    for (const B q : {B(top + 1), B(top + 2), B(F::q_max - 1), F::q_max}) {
      if (q <= top || q > F::q_max) continue;  // (l = 2 has only q = 1 above the clamp)
      for (const B sign : {B{0}, F::sign_bit}) {
        auto bad = v;  // code 40 (block 1, value 8) becomes sign | q
        std::uint32_t* bad_words = bad.payload.data() + F::words_per_block;
        std::fill(bad_words, bad_words + F::words_per_block, 0u);
        for (std::uint32_t k = 0; k < 32; ++k) {
          frsz2::deposit_code<F>(bad_words, k, k == 8 ? (sign | q) : frsz2::read_code<F>(words, k));
        }
        if (nonfinite && q == F::q_max) {  // the infinity code
          EXPECT_NO_THROW(frsz2::validate(bad));
          EXPECT_EQ(frsz2::decode_at(bad, 40), sign != 0 ? -inf : inf);
          continue;
        }
        expect_block_refused(bad, "l=" + std::to_string(F::bits) + " q=" + std::to_string(q));
        EXPECT_EQ(frsz2::check_block<F>(bad.exponents[1], bad_words, 32),
                  frsz2::block_fault::top_code);
        // Only the values the vector holds count: code 40 past the size is not checked.
        auto shorter = bad;
        shorter.size = 40;
        EXPECT_NO_THROW(frsz2::validate(shorter));
      }
    }
  }
}

}  // namespace

TEST(Frsz2Format, TopExponentCodesPastTheClampAreRejected) {
  check_top_codes<frsz2::format<2>>();
  check_top_codes<frsz2::format<3>>();
  check_top_codes<frsz2::format<8>>();
  check_top_codes<frsz2::format<16>>();
  check_top_codes<frsz2::format<21>>();
  check_top_codes<frsz2::format<32>>();
  check_top_codes<frsz2::format<64>>();
  check_top_codes<frsz2::format<8, float>>();
  check_top_codes<frsz2::format<21, float>>();
  check_top_codes<frsz2::format<32, float>>();
}

// NaN has one encoding and one decoding: every NaN input, whatever its sign and payload,
// decodes to the quiet NaN with a clear sign and the top fraction bit alone.
TEST(Frsz2Format, NanDecodesToTheCanonicalBits) {
  std::vector<double> x(32, 1.0);
  x[1] = -std::numeric_limits<double>::quiet_NaN();
  x[2] = std::bit_cast<double>(0x7ff0000000000001ull);  // a signaling NaN, payload 1
  x[3] = std::bit_cast<double>(0xfff8dead00000000ull);
  for (const double y : {frsz2::decode(frsz2::encode<frsz2::format<16>>(x))[1],
                         frsz2::decode(frsz2::encode<frsz2::format<64>>(x))[2],
                         frsz2::decode(frsz2::encode<frsz2::format<2>>(x))[3]}) {
    EXPECT_EQ(std::bit_cast<std::uint64_t>(y), 0x7ff8000000000000ull);
  }
  std::vector<float> xf(32, 1.0f);
  xf[7] = std::bit_cast<float>(0xffc00123u);
  const float yf = frsz2::decode(frsz2::encode<frsz2::format<21, float>>(xf))[7];
  EXPECT_EQ(std::bit_cast<std::uint32_t>(yf), 0x7fc00000u);
}

namespace {

/// Decoded values re-encode exactly (format.hpp) in blocks without the nonfinite flag and
/// Eb >= 1, and in nonfinite blocks with Eb >= 2 whose finite codes lie below 2^(l-2).
template <class F>
void check_reencoding(std::uint64_t seed) {
  using T = typename F::float_type;
  const auto x = krylov_like<T>(32 * 50 + 9, seed);
  for (const auto mode : {rounding::nearest, rounding::truncate}) {
    const auto v = frsz2::encode<F>(x, mode);
    const auto y = frsz2::decode(v);
    for (const auto again : {rounding::nearest, rounding::truncate}) {
      const auto z = frsz2::decode(frsz2::encode<F>(y, again));
      for (std::size_t i = 0; i < y.size(); ++i) {
        ASSERT_EQ(std::bit_cast<typename F::bits_type>(z[i]),
                  std::bit_cast<typename F::bits_type>(y[i]))
            << "l=" << F::bits << " value " << i;
      }
    }
  }
}

}  // namespace

TEST(Frsz2Format, DecodedValuesReencodeExactly) {
  check_reencoding<frsz2::format<2>>(1);
  check_reencoding<frsz2::format<8>>(2);
  check_reencoding<frsz2::format<16>>(3);
  check_reencoding<frsz2::format<21>>(4);
  check_reencoding<frsz2::format<64>>(5);
  check_reencoding<frsz2::format<8, float>>(6);
  check_reencoding<frsz2::format<32, float>>(7);
}
