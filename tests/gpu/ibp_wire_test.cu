// SPDX-License-Identifier: Apache-2.0
// ibp::wire_codec on the GPU: for floats and doubles of every length class and five kinds of
// data (and from a source that is not 16-byte aligned), the message is bit for bit the host
// reference's (ibp::wire_encode), its size is read back from device (and mapped) memory and
// stays within max_wire_bytes and the raw values plus a header, low-entropy data shrinks,
// decode is bit-identical to the input and decode_reduce equals the host's core::apply for
// sum, min and max (outputs poisoned first); truncated, inconsistent and corrupted messages
// make check() throw format_error exactly when the host reference decoder finds a fault, and
// otherwise decode as it does. Every message, input and output lies in its own exact-size
// allocation, so compute-sanitizer sees any access outside it.
#include <squeeze/coll/codec.hpp>
#include <squeeze/core/buffer.hpp>
#include <squeeze/core/cuda_error.hpp>
#include <squeeze/core/error.hpp>
#include <squeeze/core/reduce_op.hpp>
#include <squeeze/ibp/wire.cuh>
#include <squeeze/ibp/wire_format.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/gpu_test.hpp"
#include "common/ibp_wire_data.hpp"

namespace core = squeeze::core;
namespace ibp = squeeze::ibp;
using squeeze::test::wire_data;

namespace ibp_wire_test {

// The codec meets the collectives' concept by shape (ibp includes nothing from coll::).
static_assert(squeeze::coll::wire_codec_for<ibp::wire_codec, float>);
static_assert(squeeze::coll::wire_codec_for<ibp::wire_codec, double>);
static_assert(!squeeze::coll::is_identity_codec<ibp::wire_codec>);
static_assert(ibp::wire_codec::max_wire_bytes<float>(1000) == 5136);

const std::size_t lengths[] = {0, 1, 7, 31, 32, 33, 1000, 65536 + 5, std::size_t{1} << 20};

/// `host` in its own device allocation of exactly host.size() bytes (16 when empty, so the
/// pointer is valid), copied in order on s.
core::device_buffer<std::byte> exact_copy(const std::vector<std::byte>& host, cudaStream_t s) {
  core::device_buffer<std::byte> d{host.empty() ? 16 : host.size()};
  if (!host.empty()) {
    SQUEEZE_CUDA_TRY(
        cudaMemcpyAsync(d.data(), host.data(), host.size(), cudaMemcpyHostToDevice, s));
  }
  return d;
}

/// bytes at d, once the work on s is done.
std::vector<std::byte> download(const std::byte* d, std::size_t bytes, cudaStream_t s) {
  std::vector<std::byte> h(bytes);
  if (bytes != 0) {
    SQUEEZE_CUDA_TRY(cudaMemcpyAsync(h.data(), d, bytes, cudaMemcpyDeviceToHost, s));
  }
  SQUEEZE_CUDA_TRY(cudaStreamSynchronize(s));
  return h;
}

/// Encodes the values on the GPU (from an exact-size allocation, into a poisoned buffer of
/// max_wire_bytes) and returns the message's bytes.
template <class T>
std::vector<std::byte> encode_on_gpu(ibp::wire_codec& codec, const std::vector<std::byte>& data,
                                     cudaStream_t s) {
  const std::size_t n = data.size() / sizeof(T);
  const core::device_buffer<std::byte> src = exact_copy(data, s);
  const std::size_t cap = ibp::wire_codec::max_wire_bytes<T>(n);
  core::device_buffer<std::byte> wire{cap};
  wire.fill_bytes(static_cast<int>(squeeze::test::poison), s);
  core::device_buffer<std::uint64_t> size{1};
  size.fill_bytes(0xA5, s);
  codec.encode(reinterpret_cast<const T*>(src.data()), n, wire.data(), size.data(), s);
  std::uint64_t bytes = 0;
  SQUEEZE_CUDA_TRY(cudaMemcpyAsync(&bytes, size.data(), sizeof bytes, cudaMemcpyDeviceToHost, s));
  SQUEEZE_CUDA_TRY(cudaStreamSynchronize(s));
  EXPECT_LE(bytes, cap);
  if (bytes > cap) return {};
  return download(wire.data(), bytes, s);
}

/// Decodes `message` (in an exact-size allocation, `bytes` of it passed) into a poisoned
/// exact-size output; returns the output, and whether check() threw format_error.
template <class T>
std::vector<std::byte> decode_on_gpu(ibp::wire_codec& codec, const std::vector<std::byte>& message,
                                     std::size_t bytes, std::size_t n, cudaStream_t s,
                                     bool& threw) {
  const core::device_buffer<std::byte> wire = exact_copy(message, s);
  core::device_buffer<std::byte> dst{n * sizeof(T)};
  dst.fill_bytes(static_cast<int>(squeeze::test::poison), s);
  codec.decode(wire.data(), bytes, n, reinterpret_cast<T*>(dst.data()), s);
  threw = false;
  try {
    codec.check(s);
  } catch (const squeeze::format_error&) {
    threw = true;
  }
  return download(dst.data(), dst.bytes(), s);
}

/// Bit-equal, or both NaN (NaN payloads of a sum are not portable).
template <class T>
bool same_value(T a, T b) {
  if (std::isnan(a) && std::isnan(b)) return true;
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

template <class T>
void round_trips() {
  core::stream s;
  ibp::wire_codec codec;  // one codec for every size: the workspace grows and is reused
  for (const wire_data k : squeeze::test::all_wire_data) {
    for (const std::size_t n : lengths) {
      SCOPED_TRACE(std::string{squeeze::test::name(k)} + ", n = " + std::to_string(n));
      const std::vector<std::byte> data = squeeze::test::wire_values<T>(k, n, n * 13 + sizeof(T));
      const std::vector<std::byte> m = encode_on_gpu<T>(codec, data, s);
      ASSERT_FALSE(m.empty());

      // Bit for bit the host reference.
      const std::vector<std::byte> want = ibp::wire_encode(data, sizeof(T));
      ASSERT_EQ(m.size(), want.size());
      const long long bad = squeeze::test::first_mismatch(m.data(), want.data(), m.size());
      ASSERT_EQ(bad, -1) << "message byte " << bad;
      EXPECT_LE(m.size(), ibp::wire_header_bytes + data.size());
      if ((k == wire_data::gradient || k == wire_data::constant) && n >= 65536) {
        EXPECT_LT(m.size(), data.size());  // a real saving
      }

      // decode: bit-identical.
      bool threw = false;
      const std::vector<std::byte> got = decode_on_gpu<T>(codec, m, m.size(), n, s, threw);
      EXPECT_FALSE(threw);
      const long long wrong = squeeze::test::first_mismatch(got.data(), data.data(), data.size());
      ASSERT_EQ(wrong, -1) << "decoded byte " << wrong;

      // decode_reduce: dst[i] = op(dst[i], value i), as the host computes it.
      if (n == 0) continue;
      const core::device_buffer<std::byte> wire = exact_copy(m, s);
      const std::vector<std::byte> operands =
          squeeze::test::wire_values<T>(wire_data::gradient, n, n + 99);
      std::vector<T> x(n);
      std::vector<T> v(n);
      std::memcpy(x.data(), operands.data(), operands.size());
      std::memcpy(v.data(), data.data(), data.size());
      for (const core::reduce_op op :
           {core::reduce_op::sum, core::reduce_op::min, core::reduce_op::max}) {
        SCOPED_TRACE(core::to_string(op));
        const core::device_buffer<std::byte> dst = exact_copy(operands, s);
        codec.decode_reduce(wire.data(), m.size(), n, reinterpret_cast<T*>(dst.data()), op, s);
        EXPECT_NO_THROW(codec.check(s));
        const std::vector<std::byte> out = download(dst.data(), dst.bytes(), s);
        std::vector<T> r(n);
        std::memcpy(r.data(), out.data(), out.size());
        for (std::size_t i = 0; i < n; ++i) {
          const T expect = core::apply(op, x[i], v[i]);
          ASSERT_TRUE(same_value(r[i], expect))
              << "value " << i << ": got " << r[i] << ", want " << expect;
        }
      }
    }
  }
}

/// A compressed message to corrupt: gradient-like values.
template <class T>
std::vector<std::byte> gradient_message(ibp::wire_codec& codec, std::size_t n, cudaStream_t s,
                                        std::vector<std::byte>& data) {
  data = squeeze::test::wire_values<T>(wire_data::gradient, n, 77);
  std::vector<std::byte> m = encode_on_gpu<T>(codec, data, s);
  ibp::wire_header h;
  std::memcpy(&h, m.data(), sizeof h);
  EXPECT_EQ(h.kind, ibp::wire_compressed);
  return m;
}

/// Expects decode and decode_reduce of message[0, bytes) as n values of T to be reported by
/// check() (and a good message after that not to be).
template <class T>
void expect_reported(ibp::wire_codec& codec, const std::vector<std::byte>& message,
                     std::size_t bytes, std::size_t n, cudaStream_t s, const std::string& what) {
  SCOPED_TRACE(what);
  bool threw = false;
  decode_on_gpu<T>(codec, message, bytes, n, s, threw);
  EXPECT_TRUE(threw) << "decode";
  const core::device_buffer<std::byte> wire = exact_copy(message, s);
  core::device_buffer<std::byte> dst{n * sizeof(T)};
  dst.fill_bytes(0, s);
  codec.decode_reduce(wire.data(), bytes, n, reinterpret_cast<T*>(dst.data()), core::reduce_op::sum,
                      s);
  EXPECT_THROW(codec.check(s), squeeze::format_error) << "decode_reduce";
  EXPECT_NO_THROW(codec.check(s));  // the record was cleared
}

}  // namespace ibp_wire_test

using namespace ibp_wire_test;

TEST(IbpWireTest, RoundTripsFloats) {
  SQUEEZE_REQUIRE_GPU();
  round_trips<float>();
}
TEST(IbpWireTest, RoundTripsDoubles) {
  SQUEEZE_REQUIRE_GPU();
  round_trips<double>();
}

TEST(IbpWireTest, SizeInMappedMemoryAndCodecReuse) {
  SQUEEZE_REQUIRE_GPU();
  // The size in mapped pinned memory; one codec alternating types, lengths and streams.
  core::pinned_buffer<std::uint64_t> size{1, core::host_memory::mapped};
  core::stream a;
  core::stream b;
  ibp::wire_codec codec;
  codec.reserve<double>(std::size_t{1} << 16, a);
  for (int round = 0; round < 3; ++round) {
    for (const std::size_t n : {std::size_t{1} << 16, std::size_t{333}, std::size_t{70000}}) {
      cudaStream_t s = (round % 2 == 0) ? a.get() : b.get();
      const auto data = squeeze::test::wire_values<float>(wire_data::gradient, n, n + round);
      const core::device_buffer<std::byte> src = exact_copy(data, s);
      core::device_buffer<std::byte> wire{ibp::wire_codec::max_wire_bytes<float>(n)};
      size[0] = 0;
      codec.encode(reinterpret_cast<const float*>(src.data()), n, wire.data(), size.device_data(),
                   s);
      SQUEEZE_CUDA_TRY(cudaStreamSynchronize(s));
      const auto want = ibp::wire_encode(data, 4);
      ASSERT_EQ(size[0], want.size());
      const auto m = download(wire.data(), want.size(), s);
      ASSERT_EQ(squeeze::test::first_mismatch(m.data(), want.data(), m.size()), -1);

      const auto ddata = squeeze::test::wire_values<double>(wire_data::constant, n, 1);
      const auto dm = encode_on_gpu<double>(codec, ddata, s);
      ASSERT_EQ(dm, ibp::wire_encode(ddata, 8));
    }
  }
}

/// Values one value past a 16-byte boundary (the encoder's per-row vector path then falls
/// back to staged rows): the message is still the host reference's.
template <class T>
void encodes_unaligned_source() {
  core::stream s;
  ibp::wire_codec codec;
  for (const wire_data k : {wire_data::gradient, wire_data::sparse_rows, wire_data::random_bits}) {
    for (const std::size_t n : {std::size_t{1000}, std::size_t{65536 + 5}}) {
      SCOPED_TRACE(std::string{squeeze::test::name(k)} + ", n = " + std::to_string(n));
      const auto data = squeeze::test::wire_values<T>(k, n, n + 5);
      // (presized and copied: an insert after the first value trips g++ 12's -Warray-bounds
      // at -O3)
      std::vector<std::byte> shifted(sizeof(T) + data.size(), std::byte{0x5A});
      std::copy(data.begin(), data.end(), shifted.begin() + sizeof(T));
      const core::device_buffer<std::byte> src = exact_copy(shifted, s);
      const T* values = reinterpret_cast<const T*>(src.data()) + 1;
      ASSERT_NE(reinterpret_cast<std::uintptr_t>(values) % 16, 0u);
      core::device_buffer<std::byte> wire{ibp::wire_codec::max_wire_bytes<T>(n)};
      wire.fill_bytes(static_cast<int>(squeeze::test::poison), s);
      core::device_buffer<std::uint64_t> size{1};
      codec.encode(values, n, wire.data(), size.data(), s);
      std::uint64_t bytes = 0;
      SQUEEZE_CUDA_TRY(
          cudaMemcpyAsync(&bytes, size.data(), sizeof bytes, cudaMemcpyDeviceToHost, s));
      SQUEEZE_CUDA_TRY(cudaStreamSynchronize(s));
      const auto want = ibp::wire_encode(data, sizeof(T));
      ASSERT_EQ(bytes, want.size());
      const auto m = download(wire.data(), want.size(), s);
      ASSERT_EQ(squeeze::test::first_mismatch(m.data(), want.data(), m.size()), -1);
    }
  }
}

TEST(IbpWireTest, UnalignedSourceFloats) {
  SQUEEZE_REQUIRE_GPU();
  encodes_unaligned_source<float>();
}
TEST(IbpWireTest, UnalignedSourceDoubles) {
  SQUEEZE_REQUIRE_GPU();
  encodes_unaligned_source<double>();
}

TEST(IbpWireTest, TruncatedMessagesAreReported) {
  SQUEEZE_REQUIRE_GPU();
  core::stream s;
  ibp::wire_codec codec;
  std::vector<std::byte> data;
  const std::size_t n = 65536 + 5;
  const auto m = gradient_message<float>(codec, n, s, data);
  const auto prefix = [&](std::size_t bytes) {
    return std::vector<std::byte>(m.begin(), m.begin() + static_cast<std::ptrdiff_t>(bytes));
  };
  expect_reported<float>(codec, prefix(0), 0, n, s, "no bytes");
  expect_reported<float>(codec, prefix(10), 10, n, s, "10 bytes");
  expect_reported<float>(codec, prefix(63), 63, n, s, "63 bytes");
  expect_reported<float>(codec, prefix(64), 64, n, s, "the header alone");
  expect_reported<float>(codec, prefix(m.size() / 2), m.size() / 2, n, s, "half");
  expect_reported<float>(codec, prefix(m.size() - 1), m.size() - 1, n, s, "all but a byte");
  // A raw message one byte short.
  const auto small = squeeze::test::wire_values<double>(wire_data::random_bits, 10, 3);
  const auto r = encode_on_gpu<double>(codec, small, s);
  ASSERT_EQ(r.size(), 64u + small.size());
  expect_reported<double>(codec, std::vector<std::byte>(r.begin(), r.end() - 1), r.size() - 1, 10,
                          s, "raw, all but a byte");
  // And a longer buffer than the message is fine.
  auto longer = m;
  longer.resize(m.size() + 100, std::byte{0x5A});
  bool threw = false;
  const auto got = decode_on_gpu<float>(codec, longer, longer.size(), n, s, threw);
  EXPECT_FALSE(threw);
  EXPECT_EQ(squeeze::test::first_mismatch(got.data(), data.data(), data.size()), -1);
}

TEST(IbpWireTest, BadHeadersAreReported) {
  SQUEEZE_REQUIRE_GPU();
  core::stream s;
  ibp::wire_codec codec;
  std::vector<std::byte> data;
  const std::size_t n = 5000;
  const auto m = gradient_message<double>(codec, n, s, data);
  ibp::wire_header h;
  std::memcpy(&h, m.data(), sizeof h);
  // Every header byte, one bit flipped.
  for (std::size_t byte = 0; byte < ibp::wire_header_bytes; ++byte) {
    auto bad = m;
    bad[byte] ^= std::byte{static_cast<unsigned char>(1u << (byte % 8))};
    expect_reported<double>(codec, bad, bad.size(), n, s, "header byte " + std::to_string(byte));
  }
  // Fields that contradict each other, under a valid check word.
  const auto with = [&](auto change) {
    ibp::wire_header g = h;
    change(g);
    g.check = ibp::wire_check_word(g);
    auto bad = m;
    std::memcpy(bad.data(), &g, sizeof g);
    return bad;
  };
  expect_reported<double>(codec, with([](ibp::wire_header& g) { g.row_bytes = 256; }), m.size(), n,
                          s, "row bytes");
  expect_reported<double>(codec, with([](ibp::wire_header& g) { g.row_bytes = 8; }), m.size(), n, s,
                          "tiny rows");
  expect_reported<double>(codec, with([](ibp::wire_header& g) { g.rows += 1; }), m.size(), n, s,
                          "rows");
  expect_reported<double>(codec, with([](ibp::wire_header& g) { g.total_bytes += 1; }), m.size(), n,
                          s, "total");
  expect_reported<double>(codec, with([](ibp::wire_header& g) { g.payload_bytes -= 1; }), m.size(),
                          n, s, "payload");
  expect_reported<double>(codec, with([](ibp::wire_header& g) { g.kind = ibp::wire_raw; }),
                          m.size(), n, s, "kind");
  expect_reported<double>(codec, with([](ibp::wire_header& g) { g.values = 1u << 30; }), m.size(),
                          n, s, "values");
  // Not what the caller expects.
  expect_reported<double>(codec, m, m.size(), n - 1, s, "one value fewer");
  expect_reported<float>(codec, m, m.size(), 2 * n, s, "read as floats");
}

TEST(IbpWireTest, InconsistentSectionsAreReported) {
  SQUEEZE_REQUIRE_GPU();
  core::stream s;
  ibp::wire_codec codec;
  std::vector<std::byte> data;
  const std::size_t n = 65536 + 5;  // 513 rows, 17 tiles
  const auto m = gradient_message<float>(codec, n, s, data);
  const ibp::wire_layout w = ibp::wire_layout_for(n, 4);
  ASSERT_EQ(w.tiles, 17u);
  const auto flipped = [&](std::uint64_t at, unsigned char bits) {
    auto bad = m;
    bad[at] ^= std::byte{bits};
    return bad;
  };
  expect_reported<float>(codec, flipped(w.sizes, 1), m.size(), n, s, "row 0's size");
  expect_reported<float>(codec, flipped(w.sizes + 2 * 512, 4), m.size(), n, s, "last row's size");
  expect_reported<float>(codec, flipped(w.bases + 8 * 5, 1), m.size(), n, s, "a base");
  expect_reported<float>(codec, flipped(w.bases + 8 * 17 + 7, 0x80), m.size(), n, s,
                         "the last base's top bit");
  expect_reported<float>(codec, flipped(w.raw + 4 * 3, 2), m.size(), n, s, "a raw bit");
  expect_reported<float>(codec, flipped(w.raw + 4 * 16, 2), m.size(), n, s,
                         "a raw bit past the last row");
  // A byte moved from row 7's size to row 8's: the sums hold, row 7's stream does not.
  auto moved = m;
  std::uint16_t s7 = 0;
  std::uint16_t s8 = 0;
  std::memcpy(&s7, moved.data() + w.sizes + 14, 2);
  std::memcpy(&s8, moved.data() + w.sizes + 16, 2);
  s7 = static_cast<std::uint16_t>(s7 - 1);
  s8 = static_cast<std::uint16_t>(s8 + 1);
  std::memcpy(moved.data() + w.sizes + 14, &s7, 2);
  std::memcpy(moved.data() + w.sizes + 16, &s8, 2);
  expect_reported<float>(codec, moved, m.size(), n, s, "row 7 one byte short");
}

TEST(IbpWireTest, CorruptionIsReportedExactlyWhenTheHostFindsIt) {
  SQUEEZE_REQUIRE_GPU();
  core::stream s;
  ibp::wire_codec codec;
  std::vector<std::byte> data;
  const std::size_t n = 5000;
  const auto m = gradient_message<float>(codec, n, s, data);
  std::mt19937_64 rng{5};
  int reported = 0;
  for (int trial = 0; trial < 300; ++trial) {
    SCOPED_TRACE("trial " + std::to_string(trial));
    auto bad = m;
    for (int flips = 1 + static_cast<int>(rng() % 3); flips > 0; --flips) {
      bad[rng() % bad.size()] ^= static_cast<std::byte>(1u << (rng() % 8));
    }
    std::vector<std::byte> want(data.size(), squeeze::test::poison);
    const ibp::wire_fault f = ibp::wire_decode(bad, n, 4, want);
    bool threw = false;
    const auto got = decode_on_gpu<float>(codec, bad, bad.size(), n, s, threw);
    ASSERT_EQ(threw, f != ibp::wire_fault::none) << ibp::to_string(f);
    if (threw) {
      ++reported;
    } else {
      ASSERT_EQ(squeeze::test::first_mismatch(got.data(), want.data(), want.size()), -1);
    }
  }
  EXPECT_GT(reported, 0);
}
