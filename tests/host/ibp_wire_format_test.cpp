// SPDX-License-Identifier: Apache-2.0
// ibp/wire_format.hpp on the host: the layout arithmetic; the reference encoder and decoder
// round-trip floats and doubles of every length class and of low- and high-entropy kinds;
// low-entropy data shrinks and no message exceeds the raw values by more than its header;
// every flipped header bit, a truncated message and inconsistent sections are reported;
// random corruption is either reported or decodes without reading outside the message.
#include <squeeze/ibp/wire_format.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/ibp_wire_data.hpp"

namespace ibp = squeeze::ibp;
using ibp::wire_fault;

namespace {

using kind = squeeze::test::wire_data;
using squeeze::test::name;

template <class T>
std::vector<std::byte> values_of(kind k, std::size_t n, std::uint64_t seed) {
  return squeeze::test::wire_values<T>(k, n, seed);
}

ibp::wire_header header_of(const std::vector<std::byte>& m) {
  ibp::wire_header h;
  std::memcpy(&h, m.data(), sizeof h);
  return h;
}

void set_header(std::vector<std::byte>& m, const ibp::wire_header& h) {
  std::memcpy(m.data(), &h, sizeof h);
}

const std::size_t lengths[] = {0, 1, 7, 31, 32, 33, 127, 128, 129, 1000, 4096, 65536 + 5};

}  // namespace

// The layout is constexpr (the GPU codec's max_wire_bytes is).
static_assert(ibp::wire_max_bytes(1000, 4) == 5136);
static_assert(ibp::wire_layout_for(0, 8).rows == 0);

TEST(IbpWireFormat, Layout) {
  // No values: a raw header.
  EXPECT_EQ(ibp::wire_max_bytes(0, 4), 80u);  // the compressed layout's bases = {0}
  // One float: a row of 4 bytes.
  ibp::wire_layout w = ibp::wire_layout_for(1, 4);
  EXPECT_EQ(w.row_bytes, 4u);
  EXPECT_EQ(w.rows, 1u);
  EXPECT_EQ(w.last_row_bytes, 4u);
  EXPECT_EQ(w.payload, 144u);
  EXPECT_EQ(ibp::wire_max_bytes(1, 4), 148u);
  // The example of the file comment.
  w = ibp::wire_layout_for(1000, 4);
  EXPECT_EQ(w.row_bytes, 512u);
  EXPECT_EQ(w.rows, 8u);
  EXPECT_EQ(w.last_row_bytes, 416u);
  EXPECT_EQ(w.tiles, 1u);
  EXPECT_EQ(w.mask, 64u);
  EXPECT_EQ(w.bitval, 576u);
  EXPECT_EQ(w.bases, 1088u);
  EXPECT_EQ(w.raw, 1104u);
  EXPECT_EQ(w.sizes, 1120u);
  EXPECT_EQ(w.payload, 1136u);
  EXPECT_EQ(ibp::wire_max_bytes(1000, 4), 5136u);
  EXPECT_EQ(w.rows_with_byte(415), 8u);
  EXPECT_EQ(w.rows_with_byte(416), 7u);
  // 129 doubles: three rows, the last of 8 bytes; 33 rows need 2 tiles.
  w = ibp::wire_layout_for(129, 8);
  EXPECT_EQ(w.rows, 3u);
  EXPECT_EQ(w.last_row_bytes, 8u);
  w = ibp::wire_layout_for(33 * 128, 4);
  EXPECT_EQ(w.tiles, 2u);
  EXPECT_EQ(w.raw - w.bases, 32u);  // 3 bases padded to 4
  // Thresholds: 100 % means every row; small row counts never reach rows.
  EXPECT_EQ(ibp::wire_threshold(10, 100), 9u);
  EXPECT_EQ(ibp::wire_threshold(10, 70), 7u);
  EXPECT_EQ(ibp::wire_threshold(1, 70), 0u);
}

TEST(IbpWireFormat, CheckWordSeesEveryField) {
  const ibp::wire_header h = ibp::make_wire_header(ibp::wire_layout_for(1000, 4), 90, 1234);
  EXPECT_EQ(h.check, ibp::wire_check_word(h));
  for (std::size_t byte = 0; byte < 56; ++byte) {
    for (unsigned bit = 0; bit < 8; ++bit) {
      ibp::wire_header g = h;
      auto* p = reinterpret_cast<unsigned char*>(&g);
      p[byte] = static_cast<unsigned char>(p[byte] ^ (1u << bit));
      EXPECT_NE(ibp::wire_check_word(g), h.check) << "byte " << byte << " bit " << bit;
    }
  }
}

template <class T>
void round_trips() {
  for (const kind k : squeeze::test::all_wire_data) {
    for (const std::size_t n : lengths) {
      SCOPED_TRACE(std::string{name(k)} + ", n = " + std::to_string(n));
      const std::vector<std::byte> data = values_of<T>(k, n, n * 7 + sizeof(T));
      const std::vector<std::byte> m = ibp::wire_encode(data, sizeof(T));
      ASSERT_LE(m.size(), ibp::wire_max_bytes(n, sizeof(T)));
      ASSERT_LE(m.size(), ibp::wire_header_bytes + data.size());
      const ibp::wire_header h = header_of(m);
      EXPECT_EQ(h.values, n);
      EXPECT_EQ(h.total_bytes, m.size());
      if (n == 0 || k == kind::random_bits || k == kind::complementary) {
        EXPECT_EQ(h.kind, ibp::wire_raw);  // nothing to gain
      }
      if (k == kind::constant && n >= 1000) {
        EXPECT_EQ(h.kind, ibp::wire_compressed);
        EXPECT_LT(m.size(), data.size() / 2);
      }
      if (k == kind::gradient && n >= 4096) {
        EXPECT_EQ(h.kind, ibp::wire_compressed);
        EXPECT_LT(m.size(), data.size());
      }
      std::vector<std::byte> out(data.size() + 16, std::byte{0xA5});
      ASSERT_EQ(ibp::wire_decode(m, n, sizeof(T), out), wire_fault::none);
      EXPECT_TRUE(std::equal(data.begin(), data.end(), out.begin()));
      EXPECT_TRUE(std::all_of(out.begin() + static_cast<std::ptrdiff_t>(data.size()), out.end(),
                              [](std::byte b) { return b == std::byte{0xA5}; }));
    }
  }
}

TEST(IbpWireFormat, RoundTripsFloats) {
  round_trips<float>();
}
TEST(IbpWireFormat, RoundTripsDoubles) {
  round_trips<double>();
}

TEST(IbpWireFormat, GradientsShrink) {
  // fp32 N(0, 1e-3): ~11 % smaller; fp64: ~10 %.
  const std::size_t n = std::size_t{1} << 18;
  const auto f = values_of<float>(kind::gradient, n, 1);
  const auto mf = ibp::wire_encode(f, 4);
  const auto d = values_of<double>(kind::gradient, n, 1);
  const auto md = ibp::wire_encode(d, 8);
  EXPECT_LT(static_cast<double>(mf.size()), 0.92 * static_cast<double>(f.size()));
  EXPECT_LT(static_cast<double>(md.size()), 0.93 * static_cast<double>(d.size()));
  RecordProperty("fp32_ratio",
                 std::to_string(static_cast<double>(mf.size()) / static_cast<double>(f.size())));
  RecordProperty("fp64_ratio",
                 std::to_string(static_cast<double>(md.size()) / static_cast<double>(d.size())));
}

TEST(IbpWireFormat, EveryHeaderBitFlipIsReported) {
  for (const std::size_t n : {std::size_t{0}, std::size_t{100}, std::size_t{5000}}) {
    const auto data = values_of<float>(kind::gradient, n, 3);
    const auto m = ibp::wire_encode(data, 4);
    std::vector<std::byte> out(data.size());
    for (std::size_t byte = 0; byte < ibp::wire_header_bytes; ++byte) {
      for (unsigned bit = 0; bit < 8; ++bit) {
        auto bad = m;
        bad[byte] ^= std::byte{static_cast<unsigned char>(1u << bit)};
        EXPECT_NE(ibp::wire_decode(bad, n, 4, out), wire_fault::none)
            << "n " << n << " byte " << byte << " bit " << bit;
      }
    }
  }
}

TEST(IbpWireFormat, ReportsBadMessages) {
  const std::size_t n = 5000;
  const auto data = values_of<float>(kind::gradient, n, 5);
  const auto m = ibp::wire_encode(data, 4);
  const ibp::wire_header h = header_of(m);
  ASSERT_EQ(h.kind, ibp::wire_compressed);
  const ibp::wire_layout w = ibp::wire_layout_for(n, 4);
  std::vector<std::byte> out(data.size() * 2);
  const auto decode_as = [&](const std::vector<std::byte>& msg, std::size_t bytes,
                             std::size_t values, std::uint32_t value_bytes) {
    return ibp::wire_decode(std::span<const std::byte>{msg.data(), bytes}, values, value_bytes,
                            out);
  };
  const auto decode = [&](const std::vector<std::byte>& msg, std::size_t bytes) {
    return decode_as(msg, bytes, n, 4);
  };
  EXPECT_EQ(decode(m, m.size()), wire_fault::none);
  // Truncated: shorter than a header, or than the header says.
  EXPECT_EQ(decode(m, 0), wire_fault::short_message);
  EXPECT_EQ(decode(m, 63), wire_fault::short_message);
  EXPECT_EQ(decode(m, m.size() - 1), wire_fault::total_bytes);
  EXPECT_EQ(decode(m, 64), wire_fault::total_bytes);
  // Not what the caller expects.
  EXPECT_EQ(decode_as(m, m.size(), n - 1, 4), wire_fault::values);
  EXPECT_EQ(decode_as(m, m.size(), n / 2, 8), wire_fault::value_bytes);
  // A header whose fields contradict each other (check word recomputed).
  {
    auto bad = m;
    ibp::wire_header g = h;
    g.row_bytes = 256;  // valid on its own; the row count no longer matches
    g.check = ibp::wire_check_word(g);
    set_header(bad, g);
    EXPECT_EQ(decode(bad, bad.size()), wire_fault::rows);
    g = h;
    g.total_bytes += 1;
    g.check = ibp::wire_check_word(g);
    set_header(bad, g);
    EXPECT_EQ(decode(bad, bad.size()), wire_fault::total_bytes);
    g = h;
    g.payload_bytes -= 1;
    g.check = ibp::wire_check_word(g);
    set_header(bad, g);
    EXPECT_EQ(decode(bad, bad.size()), wire_fault::payload_bytes);
    g = h;
    g.kind = 7;
    g.check = ibp::wire_check_word(g);
    set_header(bad, g);
    EXPECT_EQ(decode(bad, bad.size()), wire_fault::kind);
  }
  // Sections that contradict each other.
  {
    auto bad = m;
    bad[w.sizes] ^= std::byte{1};  // row 0's size
    EXPECT_EQ(decode(bad, bad.size()), wire_fault::bases);
    bad = m;
    bad[w.bases + 8] ^= std::byte{1};  // bases[1], the offset of row 32
    EXPECT_EQ(decode(bad, bad.size()), wire_fault::bases);
    bad = m;
    bad[w.raw] ^= std::byte{1};  // row 0's raw bit
    EXPECT_EQ(decode(bad, bad.size()), wire_fault::raw_flag);
    bad = m;
    bad[w.raw + 5] ^= std::byte{0x80};  // tile 1's bit 15: past the last of its 8 rows
    EXPECT_EQ(decode(bad, bad.size()), wire_fault::raw_flag);
    // Move a byte from row 0's size to row 1's: sums hold, row 0's stream does not.
    bad = m;
    std::uint16_t s0 = 0;
    std::uint16_t s1 = 0;
    std::memcpy(&s0, bad.data() + w.sizes, 2);
    std::memcpy(&s1, bad.data() + w.sizes + 2, 2);
    s0 = static_cast<std::uint16_t>(s0 - 1);
    s1 = static_cast<std::uint16_t>(s1 + 1);
    std::memcpy(bad.data() + w.sizes, &s0, 2);
    std::memcpy(bad.data() + w.sizes + 2, &s1, 2);
    squeeze::status st = squeeze::status::ok;
    EXPECT_EQ(ibp::wire_decode(bad, n, 4, out, &st), wire_fault::row_stream);
    EXPECT_NE(st, squeeze::status::ok);
  }
  // A raw message whose length disagrees with n.
  {
    const auto small = values_of<float>(kind::random_bits, 10, 1);
    const auto r = ibp::wire_encode(small, 4);
    ASSERT_EQ(header_of(r).kind, ibp::wire_raw);
    EXPECT_EQ(ibp::wire_decode(r, 10, 4, out), wire_fault::none);
    EXPECT_EQ(ibp::wire_decode(std::span<const std::byte>{r.data(), r.size() - 4}, 10, 4, out),
              wire_fault::total_bytes);
  }
}

TEST(IbpWireFormat, RandomCorruptionIsReportedOrDecodes) {
  // Payload flips may decode to other values (no checksum); nothing may read past the
  // message (the span is exact; a sanitizer build would see it) or write past out.
  const std::size_t n = 3000;
  const auto data = values_of<double>(kind::gradient, n, 9);
  const auto m = ibp::wire_encode(data, 8);
  ASSERT_EQ(header_of(m).kind, ibp::wire_compressed);
  std::mt19937_64 rng{11};
  int reported = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    auto bad = m;
    const std::size_t at = rng() % bad.size();
    bad[at] ^= static_cast<std::byte>(1u << (rng() % 8));
    std::vector<std::byte> out(data.size() + 8, std::byte{0xA5});
    const wire_fault f = ibp::wire_decode(std::span<const std::byte>{bad}, n, 8,
                                          std::span<std::byte>{out.data(), data.size()});
    if (f != wire_fault::none) ++reported;
    for (std::size_t i = data.size(); i < out.size(); ++i) ASSERT_EQ(out[i], std::byte{0xA5});
  }
  EXPECT_GT(reported, 0);
}

// ---- robustness: sizes from a header never wrap; the throwing decoder ----------------------

TEST(IbpWireFormat, HeadersWhoseSizesWrapAreRefused) {
  // A raw header claiming 2^62 floats: n x 4 wraps to 0, so payload 0 and total 64 "matched".
  {
    const std::uint64_t n = std::uint64_t{1} << 62;
    const ibp::wire_header h = ibp::make_raw_wire_header(n, 4);
    ASSERT_EQ(h.payload_bytes, 0u);
    ASSERT_EQ(h.total_bytes, 64u);
    ibp::wire_layout w;
    EXPECT_EQ(ibp::check_wire_header(h, 64, n, 4, w), wire_fault::values);
    std::vector<std::byte> m(64);
    set_header(m, h);
    std::vector<std::byte> out(16);
    EXPECT_THROW((void)ibp::wire_decode(m, n, 4, out), squeeze::invalid_argument);
    EXPECT_THROW((void)ibp::wire_decode_values<float>(m, n), squeeze::format_error);
  }
  // A compressed header whose payload offset + payload_bytes wraps to a total of 4096:
  // n = 2^62 - 1 floats in rows of 4 bytes put the sizes past 2^63.
  {
    const std::uint64_t n = (std::uint64_t{1} << 62) - 1;
    const ibp::wire_layout w = ibp::wire_layout::of(n, 4, 4);
    ASSERT_GT(w.payload, std::uint64_t{1} << 63);
    ibp::wire_header h = ibp::make_wire_header(w, 90, 0 - w.payload + 4096);
    h.total_bytes = 4096;
    h.check = ibp::wire_check_word(h);
    ibp::wire_layout got;
    EXPECT_EQ(ibp::check_wire_header(h, 4096, n, 4, got), wire_fault::payload_bytes);
  }
  // A raw header whose 64 + n x V wraps: n x 8 = 2^64 - 8 fits, + 64 does not.
  {
    const std::uint64_t n = (std::uint64_t{1} << 61) - 1;
    ibp::wire_header h = ibp::make_raw_wire_header(n, 8);
    EXPECT_EQ(h.total_bytes, 56u);  // what the wrapped sum gives
    ibp::wire_layout w;
    EXPECT_EQ(ibp::check_wire_header(h, 4096, n, 8, w), wire_fault::payload_bytes);
  }
  // Value sizes the format does not have are refused, not divided by.
  {
    ibp::wire_header h = ibp::make_wire_header(ibp::wire_layout_for(10, 4), 90, 10);
    h.value_bytes = h.chunk_bytes = 0;
    h.check = ibp::wire_check_word(h);
    ibp::wire_layout w;
    EXPECT_EQ(ibp::check_wire_header(h, 4096, 10, 0, w), wire_fault::value_bytes);
  }
}

TEST(IbpWireFormat, LayoutSizesDoNotWrap) {
  // The largest message of n values: 2^64 - 1 (no buffer holds it) when it does not fit.
  constexpr std::uint64_t none = ~std::uint64_t{0};
  EXPECT_EQ(ibp::wire_max_bytes(std::uint64_t{1} << 62, 4), none);        // n x V wraps
  EXPECT_EQ(ibp::wire_max_bytes((std::uint64_t{1} << 62) - 1, 4), none);  // + sections wrap
  EXPECT_EQ(ibp::wire_max_bytes(none, 8), none);
  const std::uint64_t big = std::uint64_t{1} << 58;  // 2^60 bytes of floats: fits
  EXPECT_GT(ibp::wire_max_bytes(big, 4), big * 4);
  EXPECT_FALSE(ibp::wire_data_bytes_fit(std::uint64_t{1} << 62, 4));
  EXPECT_TRUE(ibp::wire_data_bytes_fit((std::uint64_t{1} << 62) - 1, 4));
  // The row count of the longest data: rows = ceil(n x V / L) without n x V + L - 1.
  const ibp::wire_layout w = ibp::wire_layout::of((std::uint64_t{1} << 62) - 1, 4, 512);
  EXPECT_EQ(w.rows, (std::uint64_t{1} << 55));
  EXPECT_EQ(w.last_row_bytes, 508u);
  // Thresholds of huge row counts: rows x percent would wrap.
  EXPECT_EQ(ibp::wire_threshold(std::uint64_t{1} << 62, 90),
            (std::uint64_t{1} << 62) / 100 * 90 + (std::uint64_t{1} << 62) % 100 * 90 / 100);
  EXPECT_LT(ibp::wire_threshold(none, 100), none);
}

TEST(IbpWireFormat, DecodeValuesThrowsFormatErrorsNamingTheFault) {
  const std::size_t n = 2000;
  const auto data = values_of<float>(kind::gradient, n, 21);
  const auto m = ibp::wire_encode(data, 4);
  const std::vector<float> got = ibp::wire_decode_values<float>(m, n);
  ASSERT_EQ(got.size(), n);
  EXPECT_EQ(std::memcmp(got.data(), data.data(), data.size()), 0);
  const auto expect_error = [&](std::span<const std::byte> msg, std::uint64_t values,
                                const std::string& needle) {
    try {
      (void)ibp::wire_decode_values<float>(msg, values);
      FAIL() << "accepted, expected: " << needle;
    } catch (const squeeze::format_error& e) {
      EXPECT_NE(std::string{e.what()}.find(needle), std::string::npos) << e.what();
    }
  };
  expect_error(std::span<const std::byte>{m}.first(10), n, "shorter than its 64-byte header");
  expect_error(std::span<const std::byte>{m}.first(m.size() - 1), n, "more bytes than");
  expect_error(m, n + 1, "another number of values");
  // A header claiming far more values than the message holds costs no allocation.
  expect_error(m, std::uint64_t{1} << 60, "another number of values");
  EXPECT_THROW((void)ibp::wire_decode_values<double>(m, n / 2), squeeze::format_error);
  if (header_of(m).kind == ibp::wire_compressed) {
    auto bad = m;
    bad[ibp::wire_layout_for(n, 4).raw] ^= std::byte{1};  // row 0's raw bit
    expect_error(bad, n, "raw-row bit");
  }
}
