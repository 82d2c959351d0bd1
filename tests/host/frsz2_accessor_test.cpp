// FRSZ2 accessors on the host: the fp64 fast path equals the reference decoder on every
// kind of block, and plain accessors convert on read and on write through their proxy.
#include <squeeze/frsz2/accessor.hpp>

#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <vector>

#include "common/frsz2_test.hpp"

namespace frsz2 = squeeze::frsz2;

namespace {

template <class F>
void check_access_equals_reference(std::uint64_t seed) {
  using T = typename F::float_type;
  const std::size_t n = 32 * 300 + 11;
  const auto x = squeeze::test::frsz2_values<T>(n, seed, /*specials=*/true);
  for (const auto mode : {frsz2::rounding::nearest, frsz2::rounding::truncate}) {
    const auto v = frsz2::encode<F>(x, mode);
    const auto want = frsz2::decode(v);
    const frsz2::compressed_handle<F> h{v.payload.data(), v.exponents.data(), 0};
    const frsz2::accessor<F, T> acc;
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_EQ(std::bit_cast<typename F::bits_type>(acc.access(h, i)),
                std::bit_cast<typename F::bits_type>(want[i]))
          << frsz2::storage_traits<F>::name() << " value " << i << " of " << x[i];
    }
    // offset() names value 17 onwards.
    const auto h17 = acc.offset(h, 17);
    for (std::size_t i = 0; i + 17 < n; i += 7) {
      ASSERT_EQ(std::bit_cast<typename F::bits_type>(acc.access(h17, i)),
                std::bit_cast<typename F::bits_type>(want[i + 17]));
    }
  }
}

}  // namespace

TEST(Frsz2Accessor, AccessEqualsTheReferenceDecoder) {
  check_access_equals_reference<frsz2::format<2>>(1);
  check_access_equals_reference<frsz2::format<7>>(2);
  check_access_equals_reference<frsz2::format<16>>(3);
  check_access_equals_reference<frsz2::format<21>>(4);
  check_access_equals_reference<frsz2::format<31>>(5);
  check_access_equals_reference<frsz2::format<32>>(6);
  check_access_equals_reference<frsz2::format<33>>(7);
  check_access_equals_reference<frsz2::format<64>>(8);
  check_access_equals_reference<frsz2::format<21, double, 8>>(9);
  check_access_equals_reference<frsz2::format<16, float>>(10);
  check_access_equals_reference<frsz2::format<32, float, 64>>(11);
}

// The fast path's condition: a small block exponent takes the reference decoder (values may
// be subnormal); both give the same bits.
TEST(Frsz2Accessor, TinyBlocksDecodeExactly) {
  using F = frsz2::format<21>;
  std::vector<double> x(64);
  for (std::size_t i = 0; i < 64; ++i)
    x[i] = std::ldexp(1.0 + 0.01 * double(i), -1040 + int(i % 30));
  const auto v = frsz2::encode<F>(x, frsz2::rounding::nearest);
  const frsz2::compressed_handle<F> h{v.payload.data(), v.exponents.data(), 0};
  const frsz2::accessor<F> acc;
  for (std::size_t i = 0; i < 64; ++i) EXPECT_EQ(acc.access(h, i), frsz2::decode_at(v, i)) << i;
}

TEST(Frsz2Accessor, PlainStorageConvertsThroughTheProxy) {
  std::vector<float> f{1.5f, -2.25f, 3.0f};
  const frsz2::accessor<float, double> acc;
  EXPECT_EQ(static_cast<double>(acc.access(f.data(), 1)), -2.25);
  acc.access(f.data(), 2) = 0.1;  // rounds to float on the write
  EXPECT_EQ(f[2], 0.1f);
  EXPECT_EQ(acc.load(acc.offset(f.data(), 2), 0), static_cast<double>(0.1f));
  std::vector<__half> h(2);
  const frsz2::accessor<__half, double> hacc;
  hacc.access(h.data(), 0) = 1.0 / 3.0;
  EXPECT_NEAR(hacc.load(h.data(), 0), 1.0 / 3.0, 1e-3);
  EXPECT_NE(hacc.load(h.data(), 0), 1.0 / 3.0);
  std::vector<__nv_bfloat16> b(1);
  const frsz2::accessor<__nv_bfloat16, float> bacc;
  bacc.access(b.data(), 0) = 3.0f;
  EXPECT_EQ(bacc.load(b.data(), 0), 3.0f);
  EXPECT_STREQ(frsz2::storage_traits<__nv_bfloat16>::name(), "bfloat16");
  EXPECT_STREQ(frsz2::storage_traits<frsz2::format<21>>::name(), "frsz2_21");
  EXPECT_DOUBLE_EQ(frsz2::storage_traits<frsz2::format<32>>::bits_per_value, 32.5);
}
