// SPDX-License-Identifier: Apache-2.0
// FRSZ2 on the GPU: the warp compressor is bit-identical to the host reference encoder, the
// warp decoder and the accessor are bit-identical to the reference decoder, random access
// equals block decode, and frsz2::array stores and loads every storage type.
#include <squeeze/frsz2/array.cuh>
#include <squeeze/frsz2/compress.cuh>

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <random>
#include <vector>

#include "common/frsz2_test.hpp"
#include "common/gpu_test.hpp"

namespace frsz2 = squeeze::frsz2;
namespace core = squeeze::core;

namespace frsz2_codec_test {

template <class F>
struct device_vector {
  core::device_buffer<std::uint32_t> payload;
  core::device_buffer<std::uint16_t> exponents;
  std::size_t n;
  explicit device_vector(std::size_t count)
      : payload{F::payload_words(count)}, exponents{F::blocks(count)}, n{count} {
    payload.fill_bytes(0xA5, nullptr);  // poison
    exponents.fill_bytes(0xA5, nullptr);
  }
  frsz2::compressed_ref<F> ref() { return {payload.data(), exponents.data(), n}; }
};

using squeeze::test::download;
using squeeze::test::upload;

template <class F, int Threads>
SQUEEZE_KERNEL(Threads)
void random_access_kernel(frsz2::compressed_handle<F> h, const std::uint32_t* index, std::size_t n,
                          typename F::float_type* out) {
  const std::size_t i = blockIdx.x * std::size_t{Threads} + threadIdx.x;
  if (i < n) out[i] = frsz2::accessor<F, typename F::float_type>{}.access(h, index[i]);
}

/// out[first + i .. + 3] = values first + i .. + 3 through accessor::load_vector, for every
/// group of four in [first, n4) (first and n4 multiples of 4).
template <class F, int Threads>
SQUEEZE_KERNEL(Threads)
void load_vector_kernel(frsz2::compressed_handle<F> h, std::size_t first, std::size_t n4,
                        typename F::float_type* out) {
  const frsz2::accessor<F, typename F::float_type> acc;
  const auto hf = acc.offset(h, first);
  const std::size_t i = 4 * (blockIdx.x * std::size_t{Threads} + threadIdx.x);
  if (first + i < n4) {
    typename F::float_type v[frsz2::vector_values];
    acc.load_vector(hf, i, v);
    for (int c = 0; c < 4; ++c) out[first + i + c] = v[c];
  }
}

/// Compress on the GPU, compare with the host encoder; decode both ways, compare bits.
template <class F>
void check_format(std::size_t n, std::uint64_t seed) {
  using T = typename F::float_type;
  using B = typename F::bits_type;
  SCOPED_TRACE(frsz2::storage_traits<F>::name());
  SCOPED_TRACE(F::block_size);
  const auto x = squeeze::test::frsz2_values<T>(n, seed, /*specials=*/true);
  const auto dx = upload(x);
  for (const auto mode : {frsz2::rounding::nearest, frsz2::rounding::truncate}) {
    const auto want = frsz2::encode<F>(x, mode);
    device_vector<F> v{n};
    frsz2::compress<F>(dx.data(), n, v.ref(), nullptr, mode);
    ASSERT_EQ(download(v.payload, want.payload.size()), want.payload);
    ASSERT_EQ(download(v.exponents, want.exponents.size()), want.exponents);

    const auto values = frsz2::decode(want);
    core::device_buffer<T> out{n};
    out.fill_bytes(0xA5, nullptr);
    frsz2::decompress<F>(v.ref(), 0, out.data(), n, nullptr);  // warp decoder for BS <= 32
    const auto got = download(out, n);
    for (std::size_t i = 0; i < n; ++i) {
      ASSERT_EQ(std::bit_cast<B>(got[i]), std::bit_cast<B>(values[i])) << "value " << i;
    }
    // From an offset that is not a tile boundary: the per-value accessor path.
    const std::size_t first = std::min<std::size_t>(37, n - 1);
    core::device_buffer<T> part{n - first};
    part.fill_bytes(0xA5, nullptr);
    frsz2::decompress<F>(v.ref(), first, part.data(), n - first, nullptr);
    const auto got_part = download(part, n - first);
    for (std::size_t i = 0; i < n - first; ++i) {
      ASSERT_EQ(std::bit_cast<B>(got_part[i]), std::bit_cast<B>(values[first + i])) << i;
    }
    // Vector reads (four values a thread) from offsets 0 and 36 equal the reference.
    const std::size_t n4 = n / 4 * 4;
    for (const std::size_t at : {std::size_t{0}, std::size_t{36}}) {
      if (at >= n4) continue;
      core::device_buffer<T> vec{n};
      vec.fill_bytes(0xA5, nullptr);
      const auto groups = static_cast<unsigned>((n4 - at) / 4);
      load_vector_kernel<F, 128>
          <<<core::div_ceil(groups, 128u), 128>>>(v.ref().data_handle(), at, n4, vec.data());
      SQUEEZE_CHECK_LAUNCH();
      const auto got_vec = download(vec, n);
      for (std::size_t i = at; i < n4; ++i) {
        ASSERT_EQ(std::bit_cast<B>(got_vec[i]), std::bit_cast<B>(values[i])) << "vector read " << i;
      }
    }
    // Random access in random order equals the block decode.
    std::vector<std::uint32_t> index(4096);
    std::mt19937_64 rng{seed + 1};
    for (auto& i : index) i = static_cast<std::uint32_t>(rng() % n);
    const auto dindex = upload(index);
    core::device_buffer<T> ra{index.size()};
    ra.fill_bytes(0xA5, nullptr);
    random_access_kernel<F, 256><<<core::div_ceil<unsigned>(4096, 256), 256>>>(
        v.ref().data_handle(), dindex.data(), index.size(), ra.data());
    SQUEEZE_CHECK_LAUNCH();
    const auto got_ra = download(ra, index.size());
    for (std::size_t j = 0; j < index.size(); ++j) {
      ASSERT_EQ(std::bit_cast<B>(got_ra[j]), std::bit_cast<B>(got[index[j]])) << index[j];
    }
  }
}

}  // namespace frsz2_codec_test

using namespace frsz2_codec_test;

TEST(Frsz2Gpu, CompressAndDecodeMatchTheHostDouble) {
  SQUEEZE_REQUIRE_GPU();
  const std::size_t n = 32 * 1000 + 13;  // a partial last block and tile
  check_format<frsz2::format<2>>(n, 1);
  check_format<frsz2::format<3>>(n, 2);
  check_format<frsz2::format<8>>(n, 3);
  check_format<frsz2::format<16>>(n, 4);
  check_format<frsz2::format<21>>(n, 5);
  check_format<frsz2::format<27>>(n, 6);
  check_format<frsz2::format<32>>(n, 7);
  check_format<frsz2::format<33>>(n, 8);
  check_format<frsz2::format<48>>(n, 9);
  check_format<frsz2::format<64>>(n, 10);
}

namespace frsz2_codec_test {

/// Blocks of 32 values whose largest biased exponent is each of `exponents`, with and
/// without a rounding carry (a block maximum of 2 - epsilon rounds up to the next power of
/// two at every l the fast paths take), both signs, zeros and subnormals in the blocks; an
/// exponent of 0 gives blocks of zeros of both signs (stored with zero_block_exponent).
template <class T>
std::vector<T> edge_blocks(std::initializer_list<int> exponents, std::uint64_t seed) {
  constexpr int bias = std::is_same_v<T, double> ? 1023 : 127;
  std::vector<T> x;
  std::mt19937_64 rng{seed};
  std::uniform_real_distribution<T> mantissa{T{1}, T{2}};
  for (const int eb : exponents) {
    for (const bool carry : {false, true}) {
      for (int k = 0; k < 32; ++k) {
        const T m = k == 5 && carry ? T{2} - std::numeric_limits<T>::epsilon() : mantissa(rng);
        const int e = k == 5 ? eb : eb - static_cast<int>(rng() % 40);
        // e < 1: a subnormal (2^-1035 in fp64, 2^-139 in fp32)
        T v = std::ldexp(m, e >= 1 ? e - bias : 1 - bias - 13);
        if (eb == 0) v = T{0};
        if (k % 3 == 1) v = -v;
        if (k == 7) v = carry ? T{-0.0} : T{0};
        x.push_back(v);
      }
    }
  }
  return x;
}

/// Compression and the warp decoder on `x`, both bit-identical to the host reference.
template <class F>
void check_edges(const std::vector<typename F::float_type>& x) {
  using T = typename F::float_type;
  using B = typename F::bits_type;
  SCOPED_TRACE(frsz2::storage_traits<F>::name());
  const auto dx = upload(x);
  for (const auto mode : {frsz2::rounding::nearest, frsz2::rounding::truncate}) {
    const auto want = frsz2::encode<F>(x, mode);
    device_vector<F> v{x.size()};
    frsz2::compress<F>(dx.data(), x.size(), v.ref(), nullptr, mode);
    ASSERT_EQ(download(v.payload, want.payload.size()), want.payload);
    ASSERT_EQ(download(v.exponents, want.exponents.size()), want.exponents);
    const auto values = frsz2::decode(want);
    core::device_buffer<T> out{x.size()};
    out.fill_bytes(0xA5, nullptr);
    frsz2::decompress<F>(v.ref(), 0, out.data(), x.size(), nullptr);
    const auto got = download(out, x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
      ASSERT_EQ(std::bit_cast<B>(got[i]), std::bit_cast<B>(values[i]))
          << "value " << i << " of block exponent word " << want.exponents[i / 32];
    }
  }
}

}  // namespace frsz2_codec_test

// Block exponents at the edges of the compressor's exact fp64 path ([32, 2044]) and just
// outside it, and blocks of zeros.
TEST(Frsz2Gpu, CompressionExponentEdgesAndCarries) {
  SQUEEZE_REQUIRE_GPU();
  const auto x = edge_blocks<double>(
      {0, 1, 2, 30, 31, 32, 33, 34, 63, 1023, 2042, 2043, 2044, 2045, 2046}, 99);
  check_edges<frsz2::format<2>>(x);
  check_edges<frsz2::format<8>>(x);
  check_edges<frsz2::format<16>>(x);
  check_edges<frsz2::format<21>>(x);
  check_edges<frsz2::format<31>>(x);
  check_edges<frsz2::format<32>>(x);
}

// The fp32 twin: the edges of the exact float path ([32, 253], and Eb + 1 <= l + 251 for
// l = 2) and just outside.
TEST(Frsz2Gpu, FloatExponentEdgesAndCarries) {
  SQUEEZE_REQUIRE_GPU();
  const auto x =
      edge_blocks<float>({0, 1, 2, 30, 31, 32, 33, 34, 127, 200, 251, 252, 253, 254}, 98);
  check_edges<frsz2::format<2, float>>(x);
  check_edges<frsz2::format<3, float>>(x);
  check_edges<frsz2::format<8, float>>(x);
  check_edges<frsz2::format<16, float>>(x);
  check_edges<frsz2::format<21, float>>(x);
  check_edges<frsz2::format<24, float>>(x);
  check_edges<frsz2::format<25, float>>(x);
  check_edges<frsz2::format<31, float>>(x);
  check_edges<frsz2::format<32, float>>(x);
}

namespace frsz2_codec_test {

constexpr int tile_batch = 3;  // reads a warp decodes together in tile_batch_kernel

/// How tile_batch_kernel decodes a batch of reads.
enum class tile_decode : int { each, single, scaled };
const char* name_of(tile_decode d) {
  return d == tile_decode::each     ? "decode_each"
         : d == tile_decode::single ? "decode"
                                    : "decode_each_scaled";
}

/// Warp w reads tiles tile_batch w .. + tile_batch - 1 of `h` by frsz2::tile_reader (V values
/// a lane) and decodes them together by decode_each, one by one by decode(), or together by
/// decode_each_scaled (each value its q times its scale), writing value i to out[i]; warps
/// past the last whole batch write nothing.
template <class F, int V, int Threads>
SQUEEZE_KERNEL(Threads)
void tile_batch_kernel(frsz2::compressed_handle<F> h, std::size_t tiles, tile_decode how,
                       double* out) {
  using reader_type = frsz2::tile_reader<F, double, V>;
  const unsigned lane = threadIdx.x % 32;
  const reader_type reader{h, lane};
  const std::size_t t0 = tile_batch * ((blockIdx.x * std::size_t{Threads} + threadIdx.x) / 32);
  if (t0 + tile_batch > tiles) return;
  typename reader_type::vector_type raw[tile_batch];
  for (int k = 0; k < tile_batch; ++k) raw[k] = reader.read(t0 + k);
  auto put = [&](int k, const double(&v)[V]) {
    for (int c = 0; c < V; ++c) out[(t0 + k) * reader_type::tile_values + V * lane + c] = v[c];
  };
  if (how == tile_decode::single) {
    for (int k = 0; k < tile_batch; ++k) {
      double v[V];
      reader.decode(raw[k], v);
      put(k, v);
    }
  } else if (how == tile_decode::each) {
    reader.decode_each(raw, put);
  } else {
    reader.decode_each_scaled(raw, [&](int k, const double(&q)[V], double scale) {
      double v[V];
      // a scale of 1 (rare blocks) is not applied, so NaN keep their payload bits
      for (int c = 0; c < V; ++c) v[c] = scale == 1.0 ? q[c] : q[c] * scale;
      put(k, v);
    });
  }
}

/// tile_reader's decode, decode_each and decode_each_scaled on the GPU give the host
/// reference's bits for x, encoded both ways.
template <class F, int V>
void check_tile_reads(const std::vector<double>& x) {
  SCOPED_TRACE(frsz2::storage_traits<F>::name());
  SCOPED_TRACE(V);
  constexpr std::size_t tile = 32 * V;
  const std::size_t tiles = x.size() / tile / tile_batch * tile_batch;
  ASSERT_GT(tiles, 0u);
  const std::size_t covered = tiles * tile;
  const auto dx = upload(x);
  for (const auto mode : {frsz2::rounding::nearest, frsz2::rounding::truncate}) {
    const auto want = frsz2::encode<F>(x, mode);
    const auto values = frsz2::decode(want);
    device_vector<F> v{x.size()};
    frsz2::compress<F>(dx.data(), x.size(), v.ref(), nullptr, mode);
    for (const auto how : {tile_decode::each, tile_decode::single, tile_decode::scaled}) {
      core::device_buffer<double> out{covered};
      out.fill_bytes(0xA5, nullptr);
      const auto warps = static_cast<unsigned>(tiles / tile_batch);
      tile_batch_kernel<F, V, 128><<<core::div_ceil(warps * 32u, 128u), 128>>>(
          v.ref().data_handle(), tiles, how, out.data());
      SQUEEZE_CHECK_LAUNCH();
      const auto got = download(out, covered);
      for (std::size_t i = 0; i < covered; ++i) {
        ASSERT_EQ(std::bit_cast<std::uint64_t>(got[i]), std::bit_cast<std::uint64_t>(values[i]))
            << name_of(how) << ", value " << i << " of block exponent word "
            << want.exponents[i / F::block_size];
      }
    }
  }
}

}  // namespace frsz2_codec_test

// tile_reader on the GPU, 4 and 8 values a lane, decoded read by read and in batches: random
// blocks with infinities, NaN, zeros and subnormals, and blocks at the exponent edges (tiny
// blocks, Eb < 32, leave the common path; batches with one such block take decode()).
TEST(Frsz2Gpu, TileReadsMatchTheHost) {
  SQUEEZE_REQUIRE_GPU();
  const auto random = squeeze::test::frsz2_values<double>(32 * 1000 + 13, 51, /*specials=*/true);
  const auto plain = squeeze::test::frsz2_values<double>(32 * 1000, 52);
  std::vector<double> edges;
  while (edges.size() < 6 * 256) {
    const auto part =
        edge_blocks<double>({0, 1, 2, 30, 31, 32, 33, 1023, 2045, 2046}, 53 + edges.size());
    edges.insert(edges.end(), part.begin(), part.end());
  }
  const std::vector<double>* const sets[] = {&random, &plain, &edges};
  for (const auto* x : sets) {
    check_tile_reads<frsz2::format<16>, 8>(*x);
    check_tile_reads<frsz2::format<16>, 4>(*x);
    check_tile_reads<frsz2::format<21>, 8>(*x);
    check_tile_reads<frsz2::format<32>, 8>(*x);
    check_tile_reads<frsz2::format<8>, 8>(*x);
    check_tile_reads<frsz2::format<16, double, 8>, 8>(*x);
  }
}

TEST(Frsz2Gpu, CompressAndDecodeMatchTheHostFloat) {
  SQUEEZE_REQUIRE_GPU();
  const std::size_t n = 32 * 700 + 5;
  check_format<frsz2::format<2, float>>(n, 11);
  check_format<frsz2::format<12, float>>(n, 12);
  check_format<frsz2::format<16, float>>(n, 13);
  check_format<frsz2::format<21, float>>(n, 14);
  check_format<frsz2::format<32, float>>(n, 15);
}

TEST(Frsz2Gpu, OtherBlockSizes) {
  SQUEEZE_REQUIRE_GPU();
  const std::size_t n = 64 * 300 + 29;
  check_format<frsz2::format<21, double, 1>>(n, 21);
  check_format<frsz2::format<21, double, 8>>(n, 22);
  check_format<frsz2::format<13, double, 16>>(n, 23);
  check_format<frsz2::format<21, double, 64>>(n, 24);
  check_format<frsz2::format<40, double, 128>>(n, 25);
  check_format<frsz2::format<16, float, 256>>(n, 26);
}

TEST(Frsz2Gpu, TinyVectors) {
  SQUEEZE_REQUIRE_GPU();
  for (const std::size_t n : {1u, 2u, 31u, 32u, 33u}) {
    check_format<frsz2::format<21>>(n, 30 + n);
    check_format<frsz2::format<21, double, 8>>(n, 40 + n);
  }
}

/// x as storage S holds it, by the host's codec (plain storages: converted like the host
/// converts).
template <class S>
std::vector<double> stored_on_host(const std::vector<double>& x) {
  if constexpr (frsz2::format_like<S>) {
    return frsz2::decode(frsz2::encode<S>(x));
  } else {
    const frsz2::accessor<S, double> acc;
    std::vector<S> stored(x.size());
    std::vector<double> back(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) acc.access(stored.data(), i) = x[i];
    for (std::size_t i = 0; i < x.size(); ++i) back[i] = acc.load(stored.data(), i);
    return back;
  }
}

// frsz2::array: every storage stores and loads (plain: converted like the host converts).
template <class S>
void check_array(std::size_t n, std::uint64_t seed) {
  SCOPED_TRACE(frsz2::storage_traits<S>::name());
  const auto x = squeeze::test::frsz2_values<double>(n, seed);
  const auto dx = upload(x);
  frsz2::array<S> a{n, nullptr};
  a.store(0, dx.data(), n, nullptr);
  core::device_buffer<double> out{n};
  out.fill_bytes(0xA5, nullptr);
  a.load(0, out.data(), n, nullptr);
  const auto got = download(out, n);
  const std::vector<double> want = stored_on_host<S>(x);
  for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(got[i], want[i]) << i;
  // A second vector at a block-aligned offset leaves the first one alone.
  if (n >= 64) {
    const std::size_t half = n / 2 / 32 * 32;
    a.store(half, dx.data(), n - half, nullptr);
    a.load(0, out.data(), n, nullptr);
    const auto again = download(out, n);
    for (std::size_t i = 0; i < half; ++i) ASSERT_EQ(again[i], want[i]) << i;
  }
}

/// What store_normalized(0, dx, n, norm2, decoded) leaves in a fresh array<S>: the values
/// load() reads back and the decoded copy, both written over poisoned buffers.
template <class T>
struct normalized_store {
  std::vector<T> loaded;
  std::vector<T> decoded;
};
template <class S, class T>
normalized_store<T> store_normalized_and_load(const core::device_buffer<T>& dx, std::size_t n,
                                              const double* norm2) {
  frsz2::array<S> a{n, nullptr};
  core::device_buffer<T> decoded{n};
  decoded.fill_bytes(0xA5, nullptr);
  a.store_normalized(0, dx.data(), n, norm2, nullptr, frsz2::rounding::nearest, decoded.data());
  core::device_buffer<T> out{n};
  out.fill_bytes(0x5A, nullptr);
  a.load(0, out.data(), n, nullptr);
  return {download(out, n), download(decoded, n)};
}

// array::store_normalized: x / sqrt(*norm2), divided as the host divides (IEEE sqrt and
// division), and x as it is where *norm2 is 0, negative or not finite; the decoded copy it
// writes on the way equals what load() returns.
template <class S>
void check_normalized(std::size_t n, std::uint64_t seed) {
  SCOPED_TRACE(frsz2::storage_traits<S>::name());
  const auto x = squeeze::test::frsz2_values<double>(n, seed);
  double squares = 0.0;
  for (const double v : x) squares += v * v;
  ASSERT_TRUE(squares > 0.0 && std::isfinite(squares));
  const auto dx = upload(x);
  for (const double norm2 : {squares, 0.25, 0.0, -1.0, std::numeric_limits<double>::quiet_NaN(),
                             std::numeric_limits<double>::infinity()}) {
    SCOPED_TRACE(norm2);
    const auto dnorm2 = upload(std::vector<double>{norm2});
    const auto [got, got_decoded] = store_normalized_and_load<S>(dx, n, dnorm2.data());
    std::vector<double> scaled = x;
    if (norm2 > 0.0 && std::isfinite(norm2)) {
      for (double& v : scaled) v = v / std::sqrt(norm2);
    }
    const std::vector<double> want = stored_on_host<S>(scaled);
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(got[i], want[i]) << i;
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(got_decoded[i], want[i]) << "decoded " << i;
  }
}

// Every storage: store and load, and store_normalized with its decoded copy.
TEST(Frsz2Gpu, ArrayStoresEveryStorage) {
  SQUEEZE_REQUIRE_GPU();
  const auto both = [&]<class S>(std::uint64_t seed) {
    check_array<S>(10'000, seed);
    check_normalized<S>(5'000, seed + 10);
  };
  both.template operator()<double>(1);
  both.template operator()<float>(2);
  both.template operator()<__half>(3);
  both.template operator()<__nv_bfloat16>(4);
  both.template operator()<frsz2::format<16>>(5);
  both.template operator()<frsz2::format<21>>(6);
  both.template operator()<frsz2::format<32>>(7);
}

// The decoded copy store_normalized writes comes from the codes in registers, never read
// back: bit for bit what load() and the host decoder give, on values with infinities, NaN,
// signed zeros, blocks of zeros and tiny blocks, in vectors long enough for the unrolled
// kernel (8 tiles a warp) and short ones, for blocks built by shuffles and blocks built in
// shared memory.
template <class F>
void check_decoded_copy(std::size_t n, std::uint64_t seed) {
  using T = typename F::float_type;
  SCOPED_TRACE(frsz2::storage_traits<F>::name() + (" n " + std::to_string(n)));
  auto x = squeeze::test::frsz2_values<T>(n, seed, /*specials=*/true);
  for (std::size_t i = 0; i < n; ++i) {
    if (i / 32 % 7 == 3) x[i] = i % 3 == 1 ? T{-0.0} : T{0};  // every 7th run of 32: zeros
  }
  const auto dx = upload(x);
  const auto one = upload(std::vector<double>{1.0});  // x / 1 is x, NaN and infinities too
  const auto [loaded, copy] = store_normalized_and_load<F>(dx, n, one.data());
  const std::vector<T> want = frsz2::decode(frsz2::encode<F>(x));
  ASSERT_EQ(want.size(), n);
  std::size_t bad_load = 0, bad_copy = 0;
  for (std::size_t i = 0; i < n; ++i) {
    bad_load += std::memcmp(&loaded[i], &want[i], sizeof(T)) != 0 ? 1 : 0;
    if (std::memcmp(&copy[i], &want[i], sizeof(T)) != 0 && bad_copy++ < 5) {
      ADD_FAILURE() << "decoded copy, value " << i << ": " << copy[i] << ", stored " << want[i];
    }
  }
  EXPECT_EQ(bad_load, 0u);
  EXPECT_EQ(bad_copy, 0u);
}

TEST(Frsz2Gpu, StoreNormalizedDecodedCopyIsBitExact) {
  SQUEEZE_REQUIRE_GPU();
  const std::size_t long_n =
      static_cast<std::size_t>(core::sm_count()) * 64 * 32 + 77;  // unrolled kernel
  std::uint64_t seed = 80;
  const auto both = [&]<class F>() {
    check_decoded_copy<F>(long_n, seed++);
    check_decoded_copy<F>(32 * 40 + 9, seed++);
  };
  both.template operator()<frsz2::format<16>>();
  both.template operator()<frsz2::format<21>>();
  both.template operator()<frsz2::format<32>>();
  both.template operator()<frsz2::format<13, double, 16>>();
  both.template operator()<frsz2::format<40, double, 128>>();
  both.template operator()<frsz2::format<12, float>>();
  both.template operator()<frsz2::format<16, float, 256>>();
}

TEST(Frsz2Gpu, ArrayRejectsBadRanges) {
  SQUEEZE_REQUIRE_GPU();
  frsz2::array<frsz2::format<21>> a{100, nullptr};
  core::device_buffer<double> x{100};
  EXPECT_THROW(a.store(5, x.data(), 10, nullptr), squeeze::invalid_argument);   // not a block start
  EXPECT_THROW(a.store(64, x.data(), 64, nullptr), squeeze::invalid_argument);  // past the end
  EXPECT_THROW(a.load(90, x.data(), 11, nullptr), squeeze::invalid_argument);
  EXPECT_THROW(a.store(0, static_cast<const double*>(nullptr), 3, nullptr),
               squeeze::invalid_argument);
  EXPECT_THROW(a.store_normalized(0, x.data(), 32, nullptr, nullptr), squeeze::invalid_argument);
  EXPECT_THROW(a.store_normalized(5, x.data(), 10, x.data(), nullptr), squeeze::invalid_argument);
  device_vector<frsz2::format<21>> v{10};
  EXPECT_THROW(frsz2::compress<frsz2::format<21>>(x.data(), 11, v.ref(), nullptr),
               squeeze::invalid_argument);
}
