// SPDX-License-Identifier: Apache-2.0
// ibp/format.hpp and ibp/dataset.hpp on the host: round trips over data of every common
// dtype, every chunk size, row lengths from 1 B to 64 KiB and swept thresholds; the
// adversarial codebooks; and every kind of malformed input.
#include <squeeze/ibp/dataset.hpp>
#include <squeeze/ibp/format.hpp>

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace ibp = squeeze::ibp;
using squeeze::status;

namespace {

// ---- data generators: rows of `row_bytes` bytes, never all zero ---------------------

using generator = std::function<std::vector<std::byte>(std::size_t rows, std::size_t row_bytes,
                                                       std::mt19937_64&)>;

template <class T>
void put(std::vector<std::byte>& v, std::size_t at, T x) {
  std::memcpy(v.data() + at, &x, std::min(sizeof(T), v.size() - at));
}

// Dense float32 features: N(0, 1), like the paper's dense GNN features.
std::vector<std::byte> float32_normal(std::size_t rows, std::size_t row_bytes,
                                      std::mt19937_64& rng) {
  std::normal_distribution<float> normal{0.0f, 1.0f};
  std::vector<std::byte> v(rows * row_bytes);
  for (std::size_t at = 0; at < v.size(); at += 4) put(v, at, normal(rng));
  return v;
}

// bfloat16: the top half of a float32 in [0.5, 2).
std::vector<std::byte> bfloat16_uniform(std::size_t rows, std::size_t row_bytes,
                                        std::mt19937_64& rng) {
  std::uniform_real_distribution<float> u{0.5f, 2.0f};
  std::vector<std::byte> v(rows * row_bytes);
  for (std::size_t at = 0; at < v.size(); at += 2) {
    std::uint32_t bits = 0;
    const float f = u(rng);
    std::memcpy(&bits, &f, 4);
    put(v, at, static_cast<std::uint16_t>(bits >> 16));
  }
  return v;
}

// Small non-negative int32 (ids, counts): high bytes mostly zero.
std::vector<std::byte> int32_small(std::size_t rows, std::size_t row_bytes, std::mt19937_64& rng) {
  std::vector<std::byte> v(rows * row_bytes);
  for (std::size_t at = 0; at < v.size(); at += 4)
    put(v, at, static_cast<std::int32_t>(rng() % 5000));
  return v;
}

// Sparse bitmask features (~5 % of bits set), like bag-of-words GNN inputs.
std::vector<std::byte> sparse_bits(std::size_t rows, std::size_t row_bytes, std::mt19937_64& rng) {
  std::vector<std::byte> v(rows * row_bytes);
  for (auto& b : v) {
    unsigned x = 0;
    for (unsigned bit = 0; bit < 8; ++bit) x |= (rng() % 20 == 0 ? 1u : 0u) << bit;
    b = static_cast<std::byte>(x);
  }
  v[0] = std::byte{1};
  return v;
}

// Uniform random bytes: nothing is invariant.
std::vector<std::byte> random_bytes(std::size_t rows, std::size_t row_bytes, std::mt19937_64& rng) {
  std::vector<std::byte> v(rows * row_bytes);
  for (auto& b : v) b = static_cast<std::byte>(rng());
  return v;
}

struct named_generator {
  const char* name;
  generator make;
};

const std::array<named_generator, 5> generators{{{"float32", float32_normal},
                                                 {"bfloat16", bfloat16_uniform},
                                                 {"int32", int32_small},
                                                 {"bitmask", sparse_bits},
                                                 {"bytes", random_bytes}}};

void expect_round_trip(const std::vector<std::byte>& data, std::size_t rows,
                       const ibp::codebook& cb, const std::string& what) {
  for (const ibp::layout kind : {ibp::layout::in_place, ibp::layout::condensed}) {
    const ibp::compressed_set set = ibp::compress(data, rows, cb, kind);
    std::vector<std::byte> back(rows * cb.tensor_bytes, std::byte{0xA5});
    ibp::decompress(set, cb, back);
    ASSERT_EQ(back, data) << what << (kind == ibp::layout::in_place ? " in place" : " condensed");
    if (kind == ibp::layout::condensed) {
      // Never larger than the input; raw rows exactly L, compressed rows at least 1 B less.
      ASSERT_LE(set.data.size(), data.size()) << what;
      for (std::uint64_t r = 0; r < rows; ++r) {
        const std::uint64_t s = set.offsets[r + 1] - set.offsets[r];
        ASSERT_EQ(set.is_raw(r), s == cb.tensor_bytes) << what << " row " << r;
        ASSERT_LE(s, cb.tensor_bytes) << what << " row " << r;
      }
    }
  }
}

}  // namespace

TEST(IbpFormat, TheDiagramsExample) {
  // format.hpp: L = 3, C = 2, mask 0xFF00 / 0xF0, bitval 0xAB00 / 0xC0, row 12 AB C7.
  const std::array<std::byte, 3> mask{std::byte{0x00}, std::byte{0xFF}, std::byte{0xF0}};
  const std::array<std::byte, 3> bitval{std::byte{0x00}, std::byte{0xAB}, std::byte{0xC0}};
  const std::array<std::byte, 3> row{std::byte{0x12}, std::byte{0xAB}, std::byte{0xC7}};
  const ibp::codebook_ref cb{mask.data(), bitval.data(), 3, 2};
  EXPECT_EQ(cb.chunks(), 2u);
  EXPECT_EQ(ibp::compressed_bits(row.data(), cb), 14u);
  EXPECT_EQ(ibp::stored_bytes(row.data(), cb), 2u);
  std::array<std::byte, 2> out{};
  ibp::encode_row(row.data(), cb, out.data());
  // bits: p0 = 1, p1 = 1, then 0x12 (8 bits), then 0x7 (4 bits), then 2 zero pad bits.
  const std::uint32_t stream = 0b11u | (0x12u << 2) | (0x7u << 10);
  EXPECT_EQ(static_cast<unsigned>(out[0]), stream & 0xFFu);
  EXPECT_EQ(static_cast<unsigned>(out[1]), stream >> 8);
  std::array<std::byte, 3> back{};
  EXPECT_EQ(ibp::decode_row(out.data(), out.size(), cb, back.data()), status::ok);
  EXPECT_EQ(back, row);
}

TEST(IbpFormat, RoundTripsEveryDtypeChunkSizeAndLength) {
  std::mt19937_64 rng{0x1B9};
  const std::size_t lengths[] = {1, 2, 3, 5, 7, 8, 9, 13, 31, 64, 100, 257, 1023, 4096};
  for (const auto& gen : generators) {
    for (const std::uint32_t chunk : {1u, 2u, 4u, 8u}) {
      for (const std::size_t l : lengths) {
        const std::size_t rows = l >= 1024 ? 40 : 200;
        const auto data = gen.make(rows, l, rng);
        const auto counts = ibp::count_set_bits(data, rows, static_cast<std::uint32_t>(l));
        const auto swept = ibp::sweep_threshold(data, rows, counts, chunk, 6);
        ibp::validate(swept.best);
        EXPECT_EQ(swept.stored_bytes, ibp::stored_total(data, rows, swept.best));
        expect_round_trip(
            data, rows, swept.best,
            std::string{gen.name} + " C=" + std::to_string(chunk) + " L=" + std::to_string(l));
      }
    }
  }
}

TEST(IbpFormat, RoundTripsSixtyFourKibRows) {
  std::mt19937_64 rng{0x64};
  const std::size_t l = 64 * 1024, rows = 6;
  const auto data = float32_normal(rows, l, rng);
  const auto counts = ibp::count_set_bits(data, rows, l);
  for (const std::uint32_t chunk : {1u, 8u}) {
    expect_round_trip(data, rows, ibp::make_codebook(counts, rows, 5, chunk),
                      "64 KiB C=" + std::to_string(chunk));
  }
}

TEST(IbpFormat, EveryThresholdRoundTrips) {
  std::mt19937_64 rng{0x7E};
  const std::size_t l = 48, rows = 20;
  const auto data = float32_normal(rows, l, rng);
  const auto counts = ibp::count_set_bits(data, rows, l);
  for (std::uint64_t t = 0; t <= rows; ++t) {
    expect_round_trip(data, rows, ibp::make_codebook(counts, rows, t, 4), "T=" + std::to_string(t));
  }
}

TEST(IbpFormat, DenseFloatFeaturesSaveSpaceAndTheSweepFindsTheBest) {
  std::mt19937_64 rng{0xF1};
  const std::size_t l = 512, rows = 2000;
  const auto data = float32_normal(rows, l, rng);
  const auto counts = ibp::count_set_bits(data, rows, l);
  const auto swept = ibp::sweep_threshold(data, rows, counts, 4, 10);
  // Exponent bits of N(0,1) floats are largely shared: a real, if modest, saving.
  EXPECT_LT(swept.stored_bytes, rows * l * 95 / 100);
  // No threshold on the sweep's grid does better than the one it kept.
  const auto lo = static_cast<std::uint64_t>(0.70 * rows);
  for (int s = 0; s <= 10; ++s) {
    const std::uint64_t t = lo + (rows - lo) * static_cast<std::uint64_t>(s) / 10;
    EXPECT_GE(ibp::stored_total(data, rows, ibp::make_codebook(counts, rows, t, 4)),
              swept.stored_bytes);
  }
}

TEST(IbpFormat, AdversarialCodebooks) {
  std::mt19937_64 rng{0xAD};
  const std::size_t l = 37, rows = 50;  // 37: not a multiple of any chunk size but 1
  // All rows identical: every bit invariant, rows shrink to their participation bits.
  std::vector<std::byte> same(rows * l);
  const auto one = random_bytes(1, l, rng);
  for (std::size_t r = 0; r < rows; ++r)
    std::copy(one.begin(), one.end(), same.begin() + static_cast<std::ptrdiff_t>(r * l));
  for (const std::uint32_t chunk : {1u, 2u, 4u, 8u}) {
    const auto cb = ibp::make_codebook(ibp::count_set_bits(same, rows, l), rows, rows - 1, chunk);
    const auto k = static_cast<std::uint32_t>((l + chunk - 1) / chunk);
    for (std::size_t r = 0; r < rows; ++r)
      EXPECT_EQ(ibp::stored_bytes(same.data() + r * l, cb.ref()), (k + 7) / 8);
    expect_round_trip(same, rows, cb, "identical rows C=" + std::to_string(chunk));
  }
  // Nothing invariant: every row is stored raw.
  const auto noise = random_bytes(rows, l, rng);
  ibp::codebook none{std::vector<std::byte>(l), std::vector<std::byte>(l),
                     static_cast<std::uint32_t>(l), 4};
  const auto set = ibp::compress(noise, rows, none, ibp::layout::condensed);
  for (std::size_t r = 0; r < rows; ++r) EXPECT_TRUE(set.is_raw(r));
  expect_round_trip(noise, rows, none, "nothing invariant");
  // Everything "invariant" but no row matches Bitval: participation bits only cost, raw.
  ibp::codebook all{std::vector<std::byte>(l, std::byte{0xFF}),
                    std::vector<std::byte>(l, std::byte{0x00}), static_cast<std::uint32_t>(l), 2};
  std::vector<std::byte> ones(rows * l, std::byte{0x80});
  for (std::size_t r = 0; r < rows; ++r)
    EXPECT_EQ(ibp::stored_bytes(ones.data() + r * l, all.ref()), l);
  expect_round_trip(ones, rows, all, "rows mismatching bitval");
  // Half the rows match, half do not.
  std::vector<std::byte> mixed(rows * l, std::byte{0x00});
  for (std::size_t r = 0; r < rows; r += 2) mixed[r * l + r % l] = std::byte{0x01};
  expect_round_trip(mixed, rows, all, "mixed rows");
}

TEST(IbpFormat, DecoderReportsTruncationAndCorruption) {
  std::mt19937_64 rng{0xBAD};
  const std::size_t l = 256, rows = 64;
  const auto data = int32_small(rows, l, rng);
  const auto cb = ibp::make_codebook(ibp::count_set_bits(data, rows, l), rows, rows * 9 / 10, 4);
  const auto ref = cb.ref();
  std::vector<std::byte> stream(l), out(l, std::byte{0xA5});
  const std::uint32_t s = ibp::stored_bytes(data.data(), ref);
  ASSERT_LT(s, l);
  ibp::encode_row(data.data(), ref, stream.data());
  // Every shorter length is reported as truncated, and the output is left untouched.
  for (std::size_t have = 0; have < s; ++have) {
    EXPECT_EQ(ibp::decode_row(stream.data(), have, ref, out.data()), status::truncated) << have;
    EXPECT_EQ(out, std::vector<std::byte>(l, std::byte{0xA5}));
  }
  EXPECT_EQ(ibp::decode_row(stream.data(), s, ref, out.data()), status::ok);
  // A set padding bit is corruption (when the stream has padding).
  const std::uint64_t bits = ibp::compressed_bits(data.data(), ref);
  if (bits % 8 != 0) {
    auto bad = stream;
    bad[s - 1] |= std::byte{0x80};
    EXPECT_EQ(ibp::decode_row(bad.data(), s, ref, out.data()), status::corrupt);
  }
  // Participation bits cleared make the stream need more bytes than the slot has.
  std::vector<std::byte> wiped(s, std::byte{0});
  EXPECT_NE(ibp::decode_row(wiped.data(), wiped.size(), ref, out.data()), status::ok);
}

TEST(IbpFormat, MalformedSetsAndCodebooksThrowWithTheReason) {
  std::mt19937_64 rng{0xE1};
  const std::size_t l = 64, rows = 10;
  const auto data = int32_small(rows, l, rng);
  const auto cb = ibp::make_codebook(ibp::count_set_bits(data, rows, l), rows, rows - 1, 4);
  std::vector<std::byte> out(rows * l);
  const auto expect_format_error = [&](const ibp::compressed_set& set, const ibp::codebook& book,
                                       const std::string& needle) {
    try {
      ibp::decompress(set, book, out);
      FAIL() << "no exception, expected: " << needle;
    } catch (const squeeze::format_error& e) {
      EXPECT_NE(std::string{e.what()}.find(needle), std::string::npos) << e.what();
    }
  };
  const auto good = ibp::compress(data, rows, cb, ibp::layout::condensed);
  auto bad = good;
  bad.offsets[3] = bad.data.size() + 10;
  expect_format_error(bad, cb, "offsets of row 2");
  bad = good;
  bad.offsets.pop_back();
  expect_format_error(bad, cb, "needs 11 offsets");
  bad = good;
  bad.raw.clear();
  expect_format_error(bad, cb, "raw-row bitmask");
  bad = good;
  bad.data.resize(bad.offsets[5]);  // rows 5.. now point past the data
  bad.offsets.back() = bad.data.size() + 1;
  expect_format_error(bad, cb, "outside the");
  bad = good;
  bad.raw[0] ^= 1u << 4;  // row 4 claims to be raw but holds fewer than L bytes
  if (!good.is_raw(4)) expect_format_error(bad, cb, "raw row 4");
  auto bad_cb = cb;
  bad_cb.bitval[7] = bad_cb.mask[7] ^ std::byte{0xFF};
  if ((bad_cb.bitval[7] & ~bad_cb.mask[7]) != std::byte{0})
    expect_format_error(good, bad_cb, "outside the mask at byte 7");
  bad_cb = cb;
  bad_cb.mask.pop_back();
  expect_format_error(good, bad_cb, "must hold tensor_bytes");
  bad_cb = cb;
  bad_cb.chunk_bytes = 3;
  EXPECT_THROW(ibp::decompress(good, bad_cb, out), squeeze::invalid_argument);
  std::vector<std::byte> small(out.size() - 1);
  EXPECT_THROW(ibp::decompress(good, cb, small), squeeze::invalid_argument);
  EXPECT_THROW(ibp::compress(data, rows + 1, cb, ibp::layout::in_place), squeeze::invalid_argument);
}

TEST(IbpFormat, CodebookRuleMatchesThePaper) {
  // Five 1-byte rows, T = 4 (the paper's Figure 2): a bit set in all 5 rows (> 4) is
  // invariant 1, a bit set in none (< 1) is invariant 0, anything else is free.
  const std::vector<std::byte> rows{std::byte{0b1000'0001}, std::byte{0b1000'0011},
                                    std::byte{0b1000'0101}, std::byte{0b1000'1001},
                                    std::byte{0b1001'0001}};
  const auto counts = ibp::count_set_bits(rows, 5, 1);
  EXPECT_EQ(counts[0], 5u);
  EXPECT_EQ(counts[7], 5u);
  const auto cb = ibp::make_codebook(counts, 5, 4, 1);
  EXPECT_EQ(static_cast<unsigned>(cb.mask[0]), 0b1110'0001u);  // bits 0, 5, 6, 7
  EXPECT_EQ(static_cast<unsigned>(cb.bitval[0]), 0b1000'0001u);
  EXPECT_THROW(ibp::make_codebook(counts, 5, 6, 1), squeeze::invalid_argument);
}

// ---- robustness: accessors check what they read; sizes from a set's fields never wrap ----

TEST(IbpFormat, CodebookViewChunksPastTheLastAreEmpty) {
  // L = 5, C = 4: chunks of 4 and 1 bytes; chunk 2 and beyond read nothing.
  const std::array<std::byte, 5> mask{std::byte{0xFF}, std::byte{0xFF}, std::byte{0xFF},
                                      std::byte{0xFF}, std::byte{0x0F}};
  const std::array<std::byte, 5> bitval{};
  const ibp::codebook_ref cb{mask.data(), bitval.data(), 5, 4};
  EXPECT_EQ(cb.chunks(), 2u);
  EXPECT_EQ(cb.chunk_len(1), 1u);
  for (const std::uint32_t i : {2u, 3u, 0x4000'0000u, 0xFFFF'FFFFu}) {
    EXPECT_EQ(cb.chunk_len(i), 0u) << i;
    EXPECT_EQ(cb.chunk_mask(i), 0u) << i;
    EXPECT_EQ(cb.chunk_bitval(i), 0u) << i;
    EXPECT_EQ(cb.free_bits(i), 0u) << i;
  }
  // K for the longest rows does not wrap in 32 bits.
  const ibp::codebook_ref longest{nullptr, nullptr, 0xFFFF'FFFFu, 8};
  EXPECT_EQ(longest.chunks(), 0x2000'0000u);
}

TEST(IbpFormat, AccessorsCheckTheRowIndexAndTheSetsShape) {
  std::mt19937_64 rng{0xACC};
  const std::size_t l = 24, rows = 40;
  const auto data = int32_small(rows, l, rng);
  const auto cb = ibp::make_codebook(ibp::count_set_bits(data, rows, l), rows, rows - 1, 4);
  for (const ibp::layout kind : {ibp::layout::in_place, ibp::layout::condensed}) {
    SCOPED_TRACE(kind == ibp::layout::in_place ? "in place" : "condensed");
    const auto good = ibp::compress(data, rows, cb, kind);
    // In range: what they always did.
    EXPECT_NO_THROW((void)good.is_raw(rows - 1));
    EXPECT_LE(ibp::stored_row(good, cb, rows - 1).size(), l);
    // A row index past the end: invalid_argument, never a read past the arrays.
    for (const std::uint64_t r :
         {std::uint64_t{rows}, std::uint64_t{rows} + 31, ~std::uint64_t{0}}) {
      EXPECT_THROW((void)good.is_raw(r), squeeze::invalid_argument) << r;
      EXPECT_THROW((void)ibp::stored_row(good, cb, r), squeeze::invalid_argument) << r;
    }
    // A malformed shape: format_error from the accessors, whatever the row.
    auto bad = good;
    bad.raw.pop_back();  // rows 32..39 lose their raw bits
    EXPECT_THROW((void)bad.is_raw(35), squeeze::format_error);
    EXPECT_THROW((void)bad.is_raw(0), squeeze::format_error);
    EXPECT_THROW((void)ibp::stored_row(bad, cb, 0), squeeze::format_error);
    bad = good;
    bad.rows = rows + 1;  // one more row than the arrays hold
    EXPECT_THROW((void)ibp::stored_row(bad, cb, rows), squeeze::format_error);
    bad = good;
    if (kind == ibp::layout::in_place) {
      bad.data.resize(bad.data.size() - 1);  // the last slot is one byte short
    } else {
      bad.offsets.resize(rows);  // the last row has no end
    }
    EXPECT_THROW((void)ibp::stored_row(bad, cb, rows - 1), squeeze::format_error);
    bad = good;
    bad.kind = static_cast<ibp::layout>(7);
    EXPECT_THROW((void)ibp::stored_row(bad, cb, 0), squeeze::format_error);
    std::vector<std::byte> out(rows * l);
    EXPECT_THROW(ibp::decompress(bad, cb, out), squeeze::format_error);
  }
}

TEST(IbpFormat, SetsWhoseSizesWrapAreRefused) {
  const ibp::codebook cb{std::vector<std::byte>(8), std::vector<std::byte>(8), 8, 4};
  std::vector<std::byte> out(64);
  // 2^64 - 1 rows: ceil(rows / 32) and rows + 1 wrap to 0, so empty arrays "matched".
  ibp::compressed_set set;
  set.kind = ibp::layout::condensed;
  set.rows = ~std::uint64_t{0};
  EXPECT_THROW((void)set.is_raw(0), squeeze::format_error);
  EXPECT_THROW((void)ibp::stored_row(set, cb, 0), squeeze::format_error);
  try {
    ibp::validate(set, cb);
    FAIL() << "a set of 2^64 - 1 rows with no arrays was accepted";
  } catch (const squeeze::format_error& e) {
    EXPECT_NE(std::string{e.what()}.find("raw-row bitmask has 0 words"), std::string::npos)
        << e.what();
  }
  // The bitmask right, offsets + 1 wrapping: 2^64 - 1 rows need 2^64 offsets.
  EXPECT_EQ(ibp::raw_words(~std::uint64_t{0}), std::uint64_t{1} << 59);
  EXPECT_EQ(ibp::raw_words(33), 2u);
  // rows x tensor_bytes of an output that wraps: refused before anything is read.
  set.rows = std::uint64_t{1} << 61;  // x 8 = 2^64 -> 0 bytes of output
  EXPECT_THROW(ibp::decompress(set, cb, out), squeeze::error);
  // Bad input to the preprocessing whose product wraps.
  EXPECT_THROW((void)ibp::count_set_bits(out, std::size_t{1} << 61, 8), squeeze::invalid_argument);
  EXPECT_THROW((void)ibp::stored_total(out, std::size_t{1} << 61, cb), squeeze::invalid_argument);
  EXPECT_THROW((void)ibp::compress(out, std::size_t{1} << 61, cb, ibp::layout::condensed),
               squeeze::invalid_argument);
}

TEST(IbpFormat, CondensedRowsFollowTheGpuDecodersRules) {
  // A condensed row holds exactly its stream (the GPU decoder refuses trailing bytes), 1 .. L
  // bytes, L exactly when its raw bit is set.
  std::mt19937_64 rng{0x6D0};
  const std::size_t l = 32, rows = 12;
  const auto data = int32_small(rows, l, rng);
  const auto cb = ibp::make_codebook(ibp::count_set_bits(data, rows, l), rows, rows - 1, 4);
  const auto good = ibp::compress(data, rows, cb, ibp::layout::condensed);
  std::vector<std::byte> out(rows * l);
  ASSERT_NO_THROW(ibp::validate(good, cb));
  std::uint64_t victim = 0;
  while (good.is_raw(victim)) ++victim;
  ASSERT_LT(victim, rows);
  const auto with_row_size = [&](std::uint64_t r, std::int64_t delta) {
    auto s = good;
    const auto at = static_cast<std::ptrdiff_t>(s.offsets[r + 1]);
    if (delta > 0)
      s.data.insert(s.data.begin() + at, static_cast<std::size_t>(delta), std::byte{0});
    if (delta < 0) s.data.erase(s.data.begin() + at + delta, s.data.begin() + at);
    for (std::uint64_t i = r + 1; i <= rows; ++i)
      s.offsets[i] = static_cast<std::uint64_t>(static_cast<std::int64_t>(s.offsets[i]) + delta);
    return s;
  };
  const auto expect_refused = [&](const ibp::compressed_set& s, const std::string& needle) {
    for (int pass = 0; pass < 2; ++pass) {
      try {
        if (pass == 0) ibp::decompress(s, cb, out);
        if (pass == 1) ibp::validate(s, cb);
        FAIL() << "accepted, expected: " << needle;
      } catch (const squeeze::format_error& e) {
        EXPECT_NE(std::string{e.what()}.find(needle), std::string::npos) << e.what();
      }
    }
  };
  expect_refused(with_row_size(victim, 1), "stream ends after");
  const std::uint64_t s = good.offsets[victim + 1] - good.offsets[victim];
  expect_refused(with_row_size(victim, static_cast<std::int64_t>(l - s)), "raw bit is clear");
  expect_refused(with_row_size(victim, -static_cast<std::int64_t>(s)), "outside [1, 32]");
  std::uint64_t raw_row = 0;  // a raw row of L + 1 bytes
  while (raw_row < rows && !good.is_raw(raw_row)) ++raw_row;
  if (raw_row < rows) expect_refused(with_row_size(raw_row, 1), "outside [1, 32]");
}

TEST(IbpFormat, ValidateAndDecompressRowAgreeWithDecompress) {
  std::mt19937_64 rng{0xD1};
  const std::size_t l = 19, rows = 50;
  const auto data = float32_normal(rows, l, rng);
  for (const std::uint32_t chunk : {1u, 2u, 4u, 8u}) {
    const auto cb =
        ibp::sweep_threshold(data, rows, ibp::count_set_bits(data, rows, l), chunk, 4).best;
    for (const ibp::layout kind : {ibp::layout::in_place, ibp::layout::condensed}) {
      const auto set = ibp::compress(data, rows, cb, kind);
      ibp::validate(set, cb);
      std::vector<std::byte> row(l + 1, std::byte{0xA5});
      for (std::uint64_t r = 0; r < rows; ++r) {
        ibp::decompress_row(set, cb, r, std::span<std::byte>{row}.first(l));
        ASSERT_TRUE(std::equal(row.begin(), row.begin() + static_cast<std::ptrdiff_t>(l),
                               data.begin() + static_cast<std::ptrdiff_t>(r * l)))
            << "C=" << chunk << " row " << r;
        ASSERT_EQ(row.back(), std::byte{0xA5});
      }
      EXPECT_THROW(ibp::decompress_row(set, cb, rows, row), squeeze::invalid_argument);
      EXPECT_THROW(ibp::decompress_row(set, cb, 0, std::span<std::byte>{row}.first(l - 1)),
                   squeeze::invalid_argument);
    }
  }
}
