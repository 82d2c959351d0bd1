// SPDX-License-Identifier: Apache-2.0
// FRSZ2 accessors on the host: the fp64 fast path equals the reference decoder on every
// kind of block, plain accessors convert on read and on write through their proxy, and both
// serve as the accessor policy of cuda::std::mdspan.
#include <squeeze/frsz2/accessor.hpp>

#include <gtest/gtest.h>
#include <cuda/std/mdspan>

#include <bit>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
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

// The accessors are AccessorPolicies of cuda::std::mdspan: a 2-D float matrix read and written
// as double through its proxy, and an FRSZ2 vector read through a layout with a stride.
TEST(Frsz2Accessor, WorksAsTheAccessorOfCudaStdMdspan) {
  namespace cstd = cuda::std;
  using plain = frsz2::accessor<float, double>;
  std::vector<float> f(3 * 4);
  cstd::mdspan<double, cstd::dextents<std::size_t, 2>, cstd::layout_right, plain> m{
      f.data(),
      cstd::layout_right::mapping<cstd::dextents<std::size_t, 2>>{
          cstd::dextents<std::size_t, 2>{3, 4}},
      plain{}};
  for (std::size_t i = 0; i < 3; ++i) {
    for (std::size_t j = 0; j < 4; ++j)
      m[cstd::array<std::size_t, 2>{i, j}] = 0.1 * double(i * 4 + j);
  }
  for (std::size_t k = 0; k < f.size(); ++k) EXPECT_EQ(f[k], static_cast<float>(0.1 * double(k)));
  EXPECT_EQ(static_cast<double>(m[cstd::array<std::size_t, 2>{2, 3}]), static_cast<double>(f[11]));
  // The proxy is assignable only as a temporary.
  static_assert(!std::is_assignable_v<const plain::reference&, double>);
  static_assert(std::is_assignable_v<plain::reference, double>);

  using F = frsz2::format<21>;
  const std::size_t n = 32 * 5 + 7;
  const auto x = squeeze::test::frsz2_values<double>(n, 11, /*specials=*/false);
  const auto v = frsz2::encode<F>(x, frsz2::rounding::nearest);
  const auto want = frsz2::decode(v);
  using ext = cstd::dextents<std::size_t, 1>;
  const std::size_t every = 3;
  const cstd::mdspan<const double, ext, cstd::layout_stride, frsz2::accessor<F, double>> s{
      frsz2::compressed_handle<F>{v.payload.data(), v.exponents.data(), 0},
      cstd::layout_stride::mapping<ext>{ext{(n + every - 1) / every},
                                        cstd::array<std::size_t, 1>{every}},
      frsz2::accessor<F, double>{}};
  for (std::size_t i = 0; i < s.extent(0); ++i) {
    ASSERT_EQ(std::bit_cast<std::uint64_t>(s[cstd::array<std::size_t, 1>{i}]),
              std::bit_cast<std::uint64_t>(want[i * every]))
        << i;
  }
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

namespace {

/// Every read of the accessor gives decode(v)'s bits: access() (and offset()), load_vector,
/// and tile_reader read by read and by decode_each (v.size a multiple of 128).
template <class F>
void expect_every_path_decodes_alike(const frsz2::host_vector<F>& v, const std::string& what) {
  using T = typename F::float_type;
  using B = typename F::bits_type;
  const auto want = frsz2::decode(v);
  const frsz2::compressed_handle<F> h{v.payload.data(), v.exponents.data(), 0};
  const frsz2::accessor<F, T> acc;
  for (std::size_t i = 0; i < v.size; ++i) {
    ASSERT_EQ(std::bit_cast<B>(acc.access(h, i)), std::bit_cast<B>(want[i]))
        << what << ", access, value " << i;
    ASSERT_EQ(std::bit_cast<B>(frsz2::decode_at(v, i)), std::bit_cast<B>(want[i]))
        << what << ", decode_at, value " << i;
  }
  for (std::size_t i = 0; i + 4 <= v.size; i += 4) {
    T got[frsz2::vector_values];
    acc.load_vector(h, i, got);
    for (std::size_t c = 0; c < 4; ++c) {
      ASSERT_EQ(std::bit_cast<B>(got[c]), std::bit_cast<B>(want[i + c]))
          << what << ", load_vector, value " << i + c;
    }
  }
  using reader_type = frsz2::tile_reader<F, T, 4>;
  for (unsigned lane = 0; lane < 32; ++lane) {
    const reader_type reader{h, lane};
    for (std::size_t t = 0; (t + 1) * reader_type::tile_values <= v.size; ++t) {
      const typename reader_type::vector_type raw[1] = {reader.read(t)};
      T got[4];
      reader.decode(raw[0], got);
      reader.decode_each(raw, [&](int, const T(&each)[4]) {
        for (std::size_t c = 0; c < 4; ++c) {
          const std::size_t i = t * reader_type::tile_values + 4 * lane + c;
          ASSERT_EQ(std::bit_cast<B>(got[c]), std::bit_cast<B>(want[i]))
              << what << ", tile_reader, value " << i;
          ASSERT_EQ(std::bit_cast<B>(each[c]), std::bit_cast<B>(want[i]))
              << what << ", tile_reader::decode_each, value " << i;
        }
      });
    }
  }
}

/// For exponent words of each flag and every Eb of 12 bits (the middle ones sampled), and
/// words with reserved bits, a vector of 4 blocks with that word and codes the rules allow
/// for it (specials, and codes kept below the clamp at the top exponent), and one whose
/// codes lie above the clamp. validate rejects exactly the words and codes the rules forbid;
/// every vector it accepts decodes alike on every path. (Before the rules, validate accepted
/// every word: Eb 2048 and up decoded to garbage, differently by decode_value and the
/// accessor, and so did codes above the clamp at Eb = 2047.)
template <class F>
void check_every_exponent_word() {
  using B = typename F::bits_type;
  constexpr std::size_t n = 128;
  constexpr std::uint32_t top = F::exponent_all_ones;
  std::mt19937_64 rng{static_cast<std::uint64_t>(F::bits)};
  std::vector<B> random_codes(n);
  for (auto& c : random_codes) c = static_cast<B>(rng() & ((F::sign_bit << 1) - 1));
  const B specials[] = {
      0, F::sign_bit,       F::q_max, F::sign_bit | F::q_max, F::q_top, F::sign_bit | F::q_top,
      1, B(F::sign_bit | 1)};
  std::vector<std::uint16_t> words;
  for (std::uint32_t w = 0; w < 0x1000; ++w) {
    // (middle exponents sampled: they take the same paths as their neighbours)
    if (w >= 40 && (w + 40 < top || w > top + 40) && w % 31 != 0) continue;
    words.push_back(static_cast<std::uint16_t>(w));
    words.push_back(static_cast<std::uint16_t>(w | F::nonfinite_flag));
  }
  for (std::uint32_t r = 1; r < 8; ++r) {
    for (const std::uint32_t w : {0u, 1u, 40u, top - 1, top, 0x8000u | 40u}) {
      words.push_back(static_cast<std::uint16_t>(w | r << 12));
    }
  }
  for (const std::uint16_t w : words) {
    const std::uint32_t eb = w & F::exponent_field;
    const bool flagged = (w & F::nonfinite_flag) != 0;
    const bool word_ok = (w & 0x7000) == 0 && eb <= top;
    for (const bool above_clamp : {false, true}) {
      frsz2::host_vector<F> v;
      v.size = n;
      v.payload.assign(F::payload_words(n), 0u);
      v.exponents.assign(F::blocks(n), w);
      bool codes_ok = true;  // rule 3
      for (std::size_t i = 0; i < n; ++i) {
        B code = i % 16 < std::size(specials) ? specials[i % 16] : random_codes[i];
        B q = code & F::q_max;
        if (above_clamp && i % 5 == 2) {
          q = F::q_top + 1 + (q % (F::q_max - F::q_top));  // in (q_top, q_max]
        } else if (eb == top && q > F::q_top && !(flagged && q == F::q_max)) {
          q &= F::q_top;
        }
        code = static_cast<B>((code & F::sign_bit) | q);
        if (eb == top && q > F::q_top && !(flagged && q == F::q_max)) codes_ok = false;
        frsz2::deposit_code<F>(v.payload.data() + i / F::block_size * F::words_per_block,
                               static_cast<std::uint32_t>(i % F::block_size), code);
      }
      const std::string what = std::string{frsz2::storage_traits<F>::name()} + " word " +
                               std::to_string(w) + (above_clamp ? " above the clamp" : "");
      bool accepted = true;
      try {
        frsz2::validate(v);
      } catch (const squeeze::format_error&) {
        accepted = false;
      }
      ASSERT_EQ(accepted, word_ok && codes_ok) << what;
      if (accepted) {
        expect_every_path_decodes_alike(v, what);
        if (::testing::Test::HasFatalFailure()) return;
      } else {
        EXPECT_THROW(frsz2::decode(v), squeeze::format_error) << what;
        EXPECT_THROW(frsz2::decode_at(v, 0), squeeze::format_error) << what;
      }
    }
  }
}

}  // namespace

TEST(Frsz2Accessor, EveryExponentWordValidateAcceptsDecodesAlike) {
  check_every_exponent_word<frsz2::format<2>>();
  check_every_exponent_word<frsz2::format<3>>();
  check_every_exponent_word<frsz2::format<8>>();
  check_every_exponent_word<frsz2::format<16>>();
  check_every_exponent_word<frsz2::format<21>>();
  check_every_exponent_word<frsz2::format<32>>();
  check_every_exponent_word<frsz2::format<40>>();
  check_every_exponent_word<frsz2::format<64>>();
  check_every_exponent_word<frsz2::format<8, float>>();
  check_every_exponent_word<frsz2::format<21, float>>();
  check_every_exponent_word<frsz2::format<32, float>>();
}

// At the top exponent every code the rules allow decodes alike (the fp64 per-code decoder
// scales in floating point; decode_value builds the IEEE bits), for every code of l = 8 and
// l = 16 and both flags: finite below 2^(l-2), the infinity code infinite, the NaN code the
// canonical NaN. The codes the rules forbid there decoded differently: q > 2^(l-2) gave +-inf
// from the accessor and a NaN from decode_value.
TEST(Frsz2Accessor, TopExponentCodesDecodeAlike) {
  auto check = [](auto format) {
    using F = decltype(format);
    for (const std::uint16_t w : {std::uint16_t{2047}, std::uint16_t{0x87ff}}) {
      const bool flagged = (w & F::nonfinite_flag) != 0;
      for (std::uint32_t code = 0; code < (1u << F::bits); ++code) {
        const std::uint32_t q = code & static_cast<std::uint32_t>(F::q_max);
        const bool allowed = q <= F::q_top || (flagged && q == F::q_max);
        const std::vector<std::uint32_t> block = [&] {
          std::vector<std::uint32_t> b(F::words_per_block, 0u);
          frsz2::deposit_code<F>(b.data(), 3, code);
          return b;
        }();
        ASSERT_EQ(frsz2::check_block<F>(w, block.data(), 32) == frsz2::block_fault::none, allowed)
            << code;
        if (!allowed) continue;
        const double want = frsz2::decode_value<F>(code, w);
        const double got = frsz2::detail::decode_code<F>(code, w);
        ASSERT_EQ(std::bit_cast<std::uint64_t>(got), std::bit_cast<std::uint64_t>(want))
            << "l = " << F::bits << ", word " << w << ", code " << code;
        if (flagged && q == F::q_max) {
          ASSERT_TRUE(std::isinf(want));
        } else if (flagged && q == 0 && code != 0) {
          ASSERT_EQ(std::bit_cast<std::uint64_t>(want), 0x7ff8000000000000ull);
        } else {
          ASSERT_TRUE(std::isfinite(want)) << code;
        }
      }
    }
  };
  check(frsz2::format<2>{});
  check(frsz2::format<8>{});
  check(frsz2::format<16>{});
}
