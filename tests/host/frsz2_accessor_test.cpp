// FRSZ2 accessors on the host: the fp64 fast path equals the reference decoder on every
// kind of block, and plain accessors convert on read and on write through their proxy.
#include <squeeze/frsz2/accessor.hpp>

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
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

namespace {

/// load_vector returns the reference decoder's bits for every aligned group of four, from
/// handles whose first index is a multiple of 4 (so groups need not start a block).
template <class F>
void check_vector_equals_reference(std::uint64_t seed) {
  using T = typename F::float_type;
  const std::size_t n = 32 * 257;  // whole blocks of every block size tested
  const auto x = squeeze::test::frsz2_values<T>(n, seed, /*specials=*/true);
  for (const auto mode : {frsz2::rounding::nearest, frsz2::rounding::truncate}) {
    const auto v = frsz2::encode<F>(x, mode);
    const auto want = frsz2::decode(v);
    const frsz2::accessor<F, T> acc;
    for (const std::size_t first : {std::size_t{0}, std::size_t{4}, std::size_t{36}}) {
      const auto h =
          acc.offset(frsz2::compressed_handle<F>{v.payload.data(), v.exponents.data(), 0}, first);
      for (std::size_t i = 0; i + first + 4 <= n; i += 4) {
        T got[frsz2::vector_values];
        acc.load_vector(h, i, got);
        for (int c = 0; c < 4; ++c) {
          ASSERT_EQ(std::bit_cast<typename F::bits_type>(got[c]),
                    std::bit_cast<typename F::bits_type>(want[first + i + c]))
              << frsz2::storage_traits<F>::name() << " BS " << F::block_size << " value "
              << first + i + c << " of " << x[first + i + c];
        }
      }
    }
  }
}

}  // namespace

// Every code length takes its own path (8/16/32: one aligned load; others: a window of words
// with codes straddling them), plus the per-value fallbacks (l > 32, fp32, BS < 4).
TEST(Frsz2Accessor, LoadVectorEqualsTheReferenceDecoder) {
  check_vector_equals_reference<frsz2::format<2>>(21);
  check_vector_equals_reference<frsz2::format<3>>(22);
  check_vector_equals_reference<frsz2::format<7>>(23);
  check_vector_equals_reference<frsz2::format<8>>(24);
  check_vector_equals_reference<frsz2::format<11>>(25);
  check_vector_equals_reference<frsz2::format<16>>(26);
  check_vector_equals_reference<frsz2::format<21>>(27);
  check_vector_equals_reference<frsz2::format<24>>(28);
  check_vector_equals_reference<frsz2::format<29>>(29);
  check_vector_equals_reference<frsz2::format<31>>(30);
  check_vector_equals_reference<frsz2::format<32>>(31);
  check_vector_equals_reference<frsz2::format<33>>(32);
  check_vector_equals_reference<frsz2::format<64>>(33);
  check_vector_equals_reference<frsz2::format<21, double, 4>>(34);
  check_vector_equals_reference<frsz2::format<13, double, 8>>(35);
  check_vector_equals_reference<frsz2::format<32, double, 256>>(36);
  check_vector_equals_reference<frsz2::format<21, double, 2>>(37);
  check_vector_equals_reference<frsz2::format<16, float>>(38);
}

namespace {
/// Blocks of 32 values around 2^e for e from the subnormals to the top of the range, then
/// a block of the largest double and -0s.
std::vector<double> tiny_and_huge_blocks() {
  std::vector<double> x;
  for (int e : {-1074, -1060, -1040, -1023, -1000, -990, -989, 0, 1000, 1016}) {
    for (int k = 0; k < 32; ++k)
      x.push_back(std::ldexp((k % 2 ? -1.0 : 1.0) * (1.0 + k / 33.0), e + k % 7));
  }
  x.push_back(std::numeric_limits<double>::max());
  x.resize(x.size() + 31, -0.0);
  return x;
}
}  // namespace

// Tiny blocks (Eb < 32) and blocks at the top of the range take decode_code; the rest the
// fast path; both give the reference's bits, for every rounding of the last value.
TEST(Frsz2Accessor, LoadVectorHandlesTinyAndHugeBlocks) {
  using F = frsz2::format<21>;
  const auto x = tiny_and_huge_blocks();
  const auto v = frsz2::encode<F>(x, frsz2::rounding::nearest);
  const auto want = frsz2::decode(v);
  const frsz2::compressed_handle<F> h{v.payload.data(), v.exponents.data(), 0};
  for (std::size_t i = 0; i < x.size(); i += 4) {
    double got[4];
    frsz2::accessor<F>{}.load_vector(h, i, got);
    for (int c = 0; c < 4; ++c) {
      ASSERT_EQ(std::bit_cast<std::uint64_t>(got[c]), std::bit_cast<std::uint64_t>(want[i + c]))
          << "value " << i + c << " = " << x[i + c];
    }
  }
}

TEST(Frsz2Accessor, LoadVectorOfPlainStorageConverts) {
  std::vector<float> f(12);
  for (std::size_t i = 0; i < f.size(); ++i) f[i] = 0.1f * static_cast<float>(i) - 0.3f;
  double got[4];
  frsz2::accessor<float, double>{}.load_vector(f.data(), 8, got);
  for (int c = 0; c < 4; ++c) EXPECT_EQ(got[c], static_cast<double>(f[8 + c]));
  std::vector<__half> h(4);
  for (int c = 0; c < 4; ++c) h[c] = __double2half(0.25 * c - 0.7);
  frsz2::accessor<__half, double>{}.load_vector(h.data(), 0, got);
  for (int c = 0; c < 4; ++c) EXPECT_EQ(got[c], static_cast<double>(__half2float(h[c])));
}

namespace {

/// tile_reader gives lane j of tile t the reference's values t T + j V .. + V - 1 (V values
/// a thread, tiles of T = 32 V), from handles whose first index is a multiple of T.
template <class F, int V = 4>
void check_tile_reader_equals_reference(std::uint64_t seed) {
  using T = typename F::float_type;
  using reader_type = frsz2::tile_reader<F, T, V>;
  constexpr std::size_t tile = reader_type::tile_values;
  const std::size_t n = 256 * 20;
  for (const bool specials : {true, false})
    for (const auto mode : {frsz2::rounding::nearest, frsz2::rounding::truncate}) {
      const auto x = squeeze::test::frsz2_values<T>(n, seed, specials);
      const auto v = frsz2::encode<F>(x, mode);
      const auto want = frsz2::decode(v);
      for (const std::size_t first : {std::size_t{0}, tile, 5 * tile}) {
        const frsz2::compressed_handle<F> h{v.payload.data(), v.exponents.data(), first};
        for (unsigned lane = 0; lane < 32; ++lane) {
          const reader_type reader{h, lane};
          auto check = [&](std::size_t t, const T(&got)[V]) {
            for (int c = 0; c < V; ++c) {
              const std::size_t i = first + tile * t + V * lane + c;
              ASSERT_EQ(std::bit_cast<typename F::bits_type>(got[c]),
                        std::bit_cast<typename F::bits_type>(want[i]))
                  << frsz2::storage_traits<F>::name() << " BS " << F::block_size << ", " << V
                  << " a thread, value " << i << " of " << x[i] << " (lane " << lane << ", tile "
                  << t << ")";
            }
          };
          for (std::size_t t = 0; tile * (t + 1) + first <= n; ++t) {
            T got[V];
            reader.decode(reader.read(t), got);
            check(t, got);
          }
          // Three reads decoded together (one test for rare blocks for the batch).
          for (std::size_t t = 0; tile * (t + 3) + first <= n; t += 3) {
            const typename reader_type::vector_type raw[3] = {reader.read(t), reader.read(t + 1),
                                                              reader.read(t + 2)};
            int calls = 0;
            reader.decode_each(raw, [&](int k, const T(&got)[V]) {
              EXPECT_EQ(k, calls++);
              check(t + static_cast<std::size_t>(k), got);
            });
            ASSERT_EQ(calls, 3);
          }
        }
      }
    }
}

}  // namespace

TEST(Frsz2Accessor, TileReaderEqualsTheReferenceDecoder) {
  check_tile_reader_equals_reference<frsz2::format<2>>(41);
  check_tile_reader_equals_reference<frsz2::format<3>>(42);
  check_tile_reader_equals_reference<frsz2::format<7>>(43);
  check_tile_reader_equals_reference<frsz2::format<8>>(44);
  check_tile_reader_equals_reference<frsz2::format<11>>(45);
  check_tile_reader_equals_reference<frsz2::format<16>>(46);
  check_tile_reader_equals_reference<frsz2::format<21>>(47);
  check_tile_reader_equals_reference<frsz2::format<24>>(48);
  check_tile_reader_equals_reference<frsz2::format<31>>(49);
  check_tile_reader_equals_reference<frsz2::format<32>>(50);
  check_tile_reader_equals_reference<frsz2::format<33>>(51);  // fallback: l > 32
  check_tile_reader_equals_reference<frsz2::format<21, double, 4>>(52);
  check_tile_reader_equals_reference<frsz2::format<13, double, 8>>(53);
  check_tile_reader_equals_reference<frsz2::format<16, double, 64>>(54);
  check_tile_reader_equals_reference<frsz2::format<21, double, 128>>(55);
  check_tile_reader_equals_reference<frsz2::format<21, double, 256>>(56);  // fallback: BS > 128
  check_tile_reader_equals_reference<frsz2::format<21, double, 2>>(57);    // fallback: BS < 4
  check_tile_reader_equals_reference<frsz2::format<16, float>>(58);        // fallback: fp32
}

TEST(Frsz2Accessor, TileReaderOfEightValuesEqualsTheReferenceDecoder) {
  check_tile_reader_equals_reference<frsz2::format<8>, 8>(61);
  check_tile_reader_equals_reference<frsz2::format<16>, 8>(62);
  check_tile_reader_equals_reference<frsz2::format<21>, 8>(63);
  check_tile_reader_equals_reference<frsz2::format<32>, 8>(64);
  check_tile_reader_equals_reference<frsz2::format<5>, 8>(65);
  check_tile_reader_equals_reference<frsz2::format<31>, 8>(66);
  check_tile_reader_equals_reference<frsz2::format<16, double, 8>>(67);
  check_tile_reader_equals_reference<frsz2::format<16, double, 8>, 8>(68);
  check_tile_reader_equals_reference<frsz2::format<21, double, 256>, 8>(69);  // BS > tile
  check_tile_reader_equals_reference<frsz2::format<21, double, 4>, 8>(70);    // BS < values
  check_tile_reader_equals_reference<frsz2::format<40>, 8>(71);               // l > 32
}

// The same blocks through tile_reader, 8 values of l = 16 a lane (decode_halves on the common
// path), read by read and three reads at a time: batches with a tiny block take decode().
TEST(Frsz2Accessor, TileReaderHandlesTinyAndHugeBlocks) {
  using F = frsz2::format<16>;
  using reader_type = frsz2::tile_reader<F, double, 8>;
  auto x = tiny_and_huge_blocks();
  for (std::size_t k = 0; x.size() < 3 * reader_type::tile_values; ++k) x.push_back(x[k]);
  for (const auto mode : {frsz2::rounding::nearest, frsz2::rounding::truncate}) {
    const auto v = frsz2::encode<F>(x, mode);
    const auto want = frsz2::decode(v);
    const frsz2::compressed_handle<F> h{v.payload.data(), v.exponents.data(), 0};
    for (unsigned lane = 0; lane < 32; ++lane) {
      const reader_type reader{h, lane};
      const reader_type::vector_type raw[3] = {reader.read(0), reader.read(1), reader.read(2)};
      auto check = [&](int t, const double(&got)[8], const char* how) {
        for (int c = 0; c < 8; ++c) {
          const std::size_t i = reader_type::tile_values * t + 8 * lane + c;
          ASSERT_EQ(std::bit_cast<std::uint64_t>(got[c]), std::bit_cast<std::uint64_t>(want[i]))
              << how << ", value " << i << " = " << x[i];
        }
      };
      for (int t = 0; t < 3; ++t) {
        double got[8];
        reader.decode(raw[t], got);
        check(t, got, "decode");
      }
      reader.decode_each(raw, [&](int t, const double(&got)[8]) { check(t, got, "decode_each"); });
    }
  }
}

TEST(Frsz2Accessor, TileReaderOfPlainStorage) {
  std::vector<float> f(768);
  for (std::size_t i = 0; i < f.size(); ++i) f[i] = 0.01f * static_cast<float>(i) - 1.0f;
  for (unsigned lane = 0; lane < 32; ++lane) {
    const frsz2::tile_reader<float> reader{f.data() + 128, lane};
    double got[4];
    reader.decode(reader.read(1), got);
    for (int c = 0; c < 4; ++c) EXPECT_EQ(got[c], static_cast<double>(f[256 + 4 * lane + c]));
    const frsz2::tile_reader<float, double, 8> reader8{f.data() + 256, lane};
    double got8[8];
    reader8.decode(reader8.read(1), got8);
    for (int c = 0; c < 8; ++c) EXPECT_EQ(got8[c], static_cast<double>(f[512 + 8 * lane + c]));
    // decode_each: tiles 0 and 1 from f[128], in order.
    const decltype(reader.read(0)) raw[2] = {reader.read(0), reader.read(1)};
    int calls = 0;
    reader.decode_each(raw, [&](int k, const double(&v)[4]) {
      EXPECT_EQ(k, calls++);
      for (int c = 0; c < 4; ++c) {
        EXPECT_EQ(v[c], static_cast<double>(f[128 + 128 * k + 4 * lane + c]));
      }
    });
    EXPECT_EQ(calls, 2);
  }
}

// The fp32 decode the warp decoder uses for ordinary blocks equals the reference decoder for
// every code of a format and every block exponent below the top (subnormal results, exact
// and truncated significands included).
TEST(Frsz2Accessor, FloatFiniteDecodeEqualsTheReferenceDecoder) {
  auto check = [](auto format, std::uint32_t code_step) {
    using F = decltype(format);
    for (std::uint32_t eb = 0; eb <= 254; ++eb) {
      const auto w = static_cast<std::uint16_t>(eb);
      for (std::uint64_t code = 0; code < (std::uint64_t{1} << F::bits); code += code_step) {
        const auto c = static_cast<std::uint32_t>(code);
        const float want = frsz2::decode_value<F>(c, w);
        const float got = frsz2::detail::decode_code_finite<F>(c, w);
        ASSERT_EQ(std::bit_cast<std::uint32_t>(got), std::bit_cast<std::uint32_t>(want))
            << "l = " << F::bits << ", Eb = " << eb << ", code " << c;
      }
    }
  };
  check(frsz2::format<2, float>{}, 1);
  check(frsz2::format<8, float>{}, 1);
  check(frsz2::format<16, float>{}, 7);
  check(frsz2::format<25, float>{}, 4099);
  check(frsz2::format<32, float>{}, 1048573);  // q wider than a float's significand too
}
