// SPDX-License-Identifier: Apache-2.0
// ROBE lookups on the host: chunk starts in range and aligned (64-bit M included), the hash
// close to uniform, signs, validation, and the host references (lookup, bag forward, bag
// backward) against naive computations on a materialized table.
#include <squeeze/roast/lookup.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace roast = squeeze::roast;
using squeeze::status;

namespace {

std::vector<float> random_memory(std::uint64_t n, std::uint64_t seed) {
  std::mt19937_64 rng{seed};
  std::uniform_real_distribution<float> u{-1.0f, 1.0f};
  std::vector<float> m(n);
  for (auto& v : m) v = u(rng);
  return m;
}

// Random bags: sizes in [0, max_size], empty ones included; offsets has bags + 1 entries.
struct bags_input {
  std::vector<std::int64_t> indices;
  std::vector<std::int64_t> offsets;
};

bags_input random_bags(std::uint64_t bags, std::uint64_t rows, int max_size, std::uint64_t seed) {
  std::mt19937_64 rng{seed};
  bags_input in;
  in.offsets.push_back(0);
  for (std::uint64_t b = 0; b < bags; ++b) {
    const auto size = static_cast<int>(rng() % static_cast<std::uint64_t>(max_size + 1));
    for (int k = 0; k < size; ++k) in.indices.push_back(static_cast<std::int64_t>(rng() % rows));
    in.offsets.push_back(static_cast<std::int64_t>(in.indices.size()));
  }
  return in;
}

TEST(RoastLookup, ChunkStartsAreAlignedAndInRange) {
  struct shape {
    std::uint32_t dim;
    std::uint32_t chunk;
  };
  for (shape s : {shape{64, 32}, shape{50, 16}, shape{37, 5}, shape{8, 12}, shape{128, 128}}) {
    for (std::uint64_t memory :
         {std::uint64_t{s.chunk}, std::uint64_t{s.chunk} + 3, std::uint64_t{100003},
          std::uint64_t{1} << 34}) {  // the last: offsets past 2^32
      const std::uint64_t rows = std::uint64_t{1} << 40;
      const roast::lookup_mapping map{roast::lookup_desc{rows, s.dim, s.chunk, 1.0f, 11}, memory};
      const std::uint32_t align = s.chunk % 4 == 0 ? 4u : 1u;
      EXPECT_EQ(map.alignment(), align);
      EXPECT_EQ(map.slots(), (memory - s.chunk) / align + 1);
      EXPECT_EQ(map.chunks_per_row(), (s.dim + s.chunk - 1) / s.chunk);
      std::mt19937_64 rng{memory + s.dim};
      std::uint64_t largest = 0;
      for (int i = 0; i < 20000; ++i) {
        // Random rows, the first and the last among them.
        const std::uint64_t row = i == 0 ? 0 : i == 1 ? rows - 1 : rng() % rows;
        const auto c = static_cast<std::uint32_t>(rng() % map.chunks_per_row());
        const std::uint64_t h = map.chunk_offset(row, c);
        ASSERT_EQ(h % align, 0u) << "row " << row << " chunk " << c;
        ASSERT_LE(h + s.chunk, memory) << "row " << row << " chunk " << c;
        largest = std::max(largest, h);
        const auto j = static_cast<std::uint32_t>(rng() % s.dim);
        ASSERT_LT(map.element_offset(row, j), memory);
      }
      if (memory > (std::uint64_t{1} << 33)) {
        EXPECT_GT(largest, std::uint64_t{1} << 32);
      }
      if (memory == s.chunk) {
        EXPECT_EQ(largest, 0u);  // one slot: every chunk at 0
      }
    }
  }
}

TEST(RoastLookup, ElementsComposeChunkStartAndPosition) {
  // dim 50 with Z 16: chunks of 16, 16, 16 and 2 values.
  const roast::lookup_mapping map{roast::lookup_desc{1000, 50, 16, 0.75f, 5, true}, 9000};
  const roast::lookup_mapping plain{roast::lookup_desc{1000, 50, 16, 0.75f, 5, false}, 9000};
  EXPECT_EQ(map.chunks_per_row(), 4u);
  for (std::uint64_t r = 0; r < 1000; r += 7) {
    for (std::uint32_t j = 0; j < 50; ++j) {
      EXPECT_EQ(map.element_offset(r, j), map.chunk_offset(r, j / 16) + j % 16);
      EXPECT_EQ(map.element_factor(r, j), 0.75f * map.chunk_sign(r, j / 16));
      EXPECT_EQ(plain.element_offset(r, j), map.element_offset(r, j));  // signs move nothing
      EXPECT_EQ(plain.element_factor(r, j), 0.75f);
    }
  }
  // Chunks are keyed per row: rows of the same table land at different places.
  int same = 0;
  for (std::uint64_t r = 1; r < 1000; ++r) same += map.chunk_offset(r, 0) == map.chunk_offset(0, 0);
  EXPECT_LT(same, 5);
}

TEST(RoastLookup, ChunkStartsAreCloseToUniform) {
  // 2^16 rows x 4 chunks = 2^18 keys into 1024 aligned slots (|M| = 16 + 4 * 1023): every
  // slot within 6 standard deviations of 256, and the chi-square statistic plausible.
  const roast::lookup_mapping map{roast::lookup_desc{1 << 16, 64, 16, 1.0f, 42}, 16 + 4 * 1023};
  ASSERT_EQ(map.slots(), 1024u);
  std::vector<int> count(1024, 0);
  for (std::uint64_t r = 0; r < (1u << 16); ++r) {
    for (std::uint32_t c = 0; c < 4; ++c) ++count[map.chunk_offset(r, c) / 4];
  }
  const double expected = 256.0;
  double chi2 = 0;
  for (int c : count) {
    EXPECT_LT(std::fabs(c - expected), 6 * std::sqrt(expected));
    chi2 += (c - expected) * (c - expected) / expected;
  }
  // 1023 degrees of freedom: mean 1023, sd ~45.
  EXPECT_LT(chi2, 1023 + 6 * 45.3);
  // Different seeds give different functions.
  const roast::lookup_mapping other{roast::lookup_desc{1 << 16, 64, 16, 1.0f, 43}, 16 + 4 * 1023};
  int same = 0;
  for (std::uint64_t r = 0; r < 4096; ++r)
    same += map.chunk_offset(r, 0) == other.chunk_offset(r, 0);
  EXPECT_LT(same, 64);
}

TEST(RoastLookup, SignsAreBalancedAndOptional) {
  const roast::lookup_mapping on{roast::lookup_desc{4096, 64, 32, 1.0f, 3, true}, 1 << 16};
  int negative = 0;
  for (std::uint64_t r = 0; r < 4096; ++r) negative += on.chunk_sign(r, 1) < 0;
  EXPECT_GT(negative, 4096 / 2 - 200);
  EXPECT_LT(negative, 4096 / 2 + 200);
}

TEST(RoastLookup, RejectsBadTables) {
  const auto make = [](roast::lookup_desc d, std::uint64_t m) {
    return roast::lookup_mapping{d, m};
  };
  EXPECT_THROW(make({0, 64}, 1 << 20), squeeze::invalid_argument);
  EXPECT_THROW(make({10, 0}, 1 << 20), squeeze::invalid_argument);
  EXPECT_THROW(make({10, 64, 0}, 1 << 20), squeeze::invalid_argument);
  EXPECT_THROW(make({10, 64, 32, std::nanf("")}, 1 << 20), squeeze::invalid_argument);
  EXPECT_THROW(make({10, 64, 32, INFINITY}, 1 << 20), squeeze::invalid_argument);
  // Keys r * chunks_per_row + c must stay below 2^61: 2^60 rows of 4 chunks do not.
  EXPECT_THROW(make({std::uint64_t{1} << 60, 64, 16}, 1 << 20), squeeze::invalid_argument);
  EXPECT_NO_THROW(make({std::uint64_t{1} << 58, 64, 16}, 1 << 20));
  EXPECT_THROW(make({std::uint64_t{1} << 63, 1, 1}, 1 << 20), squeeze::invalid_argument);
  try {
    make({10, 64, 32}, 31);  // M smaller than one chunk
    FAIL() << "a too-small M was accepted";
  } catch (const squeeze::invalid_argument& e) {
    EXPECT_NE(std::string{e.what()}.find("fewer than one chunk of 32"), std::string::npos)
        << e.what();
  }
  EXPECT_NO_THROW(make({10, 64, 32}, 32));  // exactly one chunk: one slot
  EXPECT_EQ(make({10, 64, 32}, 32).slots(), 1u);
  // A chunk longer than the row is allowed: one short chunk per row.
  EXPECT_EQ(make({10, 8, 32}, 64).chunks_per_row(), 1u);

  const roast::lookup_mapping map{roast::lookup_desc{10, 8, 4}, 64};
  const std::vector<float> m(64, 1.0f);
  EXPECT_THROW(roast::materialize_rows(map, m.data(), std::vector<std::int64_t>{3, 10}),
               squeeze::invalid_argument);
  EXPECT_THROW(roast::materialize_rows(map, m.data(), std::vector<std::int64_t>{-1}),
               squeeze::invalid_argument);
  EXPECT_THROW(
      roast::materialize_rows(roast::lookup_mapping{}, m.data(), std::vector<std::int64_t>{0}),
      squeeze::invalid_argument);
}

TEST(RoastLookup, MaterializeAndLookupApplyScaleSignAndChunks) {
  const roast::lookup_mapping map{roast::lookup_desc{300, 50, 12, 0.25f, 4, true}, 5000};
  std::vector<float> m(5000);
  for (std::size_t i = 0; i < m.size(); ++i) m[i] = static_cast<float>(i) + 0.5f;
  const std::vector<std::int64_t> rows{0, 299, 17, 17, 128};
  const auto w = roast::materialize_rows(map, m.data(), rows);
  ASSERT_EQ(w.size(), rows.size() * 50);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto r = static_cast<std::uint64_t>(rows[i]);
    for (std::uint32_t j = 0; j < 50; ++j) {
      const float expected = 0.25f * map.chunk_sign(r, j / 12) *
                             (static_cast<float>(map.chunk_offset(r, j / 12) + j % 12) + 0.5f);
      EXPECT_EQ(w[i * 50 + j], expected) << "row " << r << " j " << j;
    }
    // Neighbours inside a chunk are neighbours in M.
    for (std::uint32_t j = 1; j < 50; ++j) {
      if (j % 12 != 0) {
        EXPECT_EQ(map.element_offset(r, j), map.element_offset(r, j - 1) + 1);
      }
    }
  }
  // The lookup reference gives the same rows, and zeros plus a status for a bad index.
  std::vector<std::int64_t> with_bad = rows;
  with_bad.push_back(300);
  with_bad.push_back(-5);
  std::vector<float> out(with_bad.size() * 50, -7.0f);
  EXPECT_EQ(roast::reference_lookup(map, m.data(), rows.data(), rows.size(), out.data()),
            status::ok);
  EXPECT_TRUE(std::equal(w.begin(), w.end(), out.begin()));
  EXPECT_EQ(roast::reference_lookup(map, m.data(), with_bad.data(), with_bad.size(), out.data()),
            status::out_of_bounds);
  EXPECT_TRUE(std::equal(w.begin(), w.end(), out.begin()));
  EXPECT_TRUE(std::all_of(out.begin() + static_cast<std::ptrdiff_t>(w.size()), out.end(),
                          [](float v) { return v == 0.0f; }));
}

// The bag reference against sums over the materialized table: exactly when scale is 1 (then
// fma(g, M, acc) is acc + W rounded once), within fp32 summation bounds otherwise.
TEST(RoastLookup, BagReferenceMatchesMaterializedTable) {
  for (float scale : {1.0f, 0.37f}) {
    for (roast::bag_mode mode : {roast::bag_mode::sum, roast::bag_mode::mean}) {
      const std::uint64_t rows = 500, bags = 300;
      const std::uint32_t dim = 40;
      const roast::lookup_mapping map{roast::lookup_desc{rows, dim, 16, scale, 8, true}, 3001};
      const auto m = random_memory(map.memory_size(), 17);
      std::vector<std::int64_t> all(rows);
      std::iota(all.begin(), all.end(), 0);
      const auto w = roast::materialize_rows(map, m.data(), all);
      const auto in = random_bags(bags, rows, 12, 99);
      std::vector<float> out(bags * dim);
      ASSERT_EQ(roast::reference_bag_forward(map, m.data(), in.indices.data(), in.indices.size(),
                                             in.offsets.data(), bags, mode, out.data()),
                status::ok);
      int empty = 0;
      for (std::uint64_t b = 0; b < bags; ++b) {
        const auto first = static_cast<std::uint64_t>(in.offsets[b]);
        const auto last = static_cast<std::uint64_t>(in.offsets[b + 1]);
        empty += first == last;
        const double n = mode == roast::bag_mode::mean && last > first ? double(last - first) : 1.0;
        for (std::uint32_t j = 0; j < dim; ++j) {
          float naive = 0.0f;
          double exact = 0.0;
          double magnitude = 0.0;
          for (std::uint64_t k = first; k < last; ++k) {
            const float v = w[static_cast<std::uint64_t>(in.indices[k]) * dim + j];
            naive += v;
            exact += static_cast<double>(scale) *
                     map.chunk_sign(static_cast<std::uint64_t>(in.indices[k]), j / 16) *
                     m[map.element_offset(static_cast<std::uint64_t>(in.indices[k]), j)];
            magnitude += std::fabs(v);
          }
          if (mode == roast::bag_mode::mean && last > first) naive /= static_cast<float>(n);
          const float got = out[b * dim + j];
          if (scale == 1.0f) {
            ASSERT_EQ(got, naive) << "bag " << b << " j " << j;
          }
          // k additions and one division, each within 2^-24 relative.
          const double bound =
              (static_cast<double>(last - first) + 2) * std::ldexp(1.0, -24) * magnitude / n;
          ASSERT_NEAR(got, exact / n, bound + 1e-30) << "bag " << b << " j " << j;
          if (first == last) {
            ASSERT_EQ(got, 0.0f);
          }
        }
      }
      EXPECT_GT(empty, 5);  // the input had empty bags
    }
  }
}

TEST(RoastLookup, BagReferenceReportsBadInput) {
  const roast::lookup_mapping map{roast::lookup_desc{20, 8, 4, 1.0f, 2}, 100};
  const auto m = random_memory(100, 3);
  const std::vector<std::int64_t> indices{1, 2, 20, 3, -1, 4};
  std::vector<float> out(4 * 8, -9.0f);
  // Bag 0 = {1, 2, 20}: 20 is skipped; bag 1 = {3, -1}; bag 2 decreasing; bag 3 past count.
  {
    const std::vector<std::int64_t> offsets{0, 3, 5, 4, 7};
    EXPECT_EQ(roast::reference_bag_forward(map, m.data(), indices.data(), indices.size(),
                                           offsets.data(), 4, roast::bag_mode::mean, out.data()),
              status::out_of_bounds);
    const auto w = roast::materialize_rows(map, m.data(), std::vector<std::int64_t>{1, 2, 3});
    for (std::uint32_t j = 0; j < 8; ++j) {
      EXPECT_EQ(out[j], std::fma(1.0f, w[8 + j], std::fma(1.0f, w[j], 0.0f)) / 3.0f);
      EXPECT_EQ(out[8 + j], w[16 + j] / 2.0f);
      EXPECT_EQ(out[16 + j], 0.0f);
      EXPECT_EQ(out[24 + j], 0.0f);
    }
  }
  // The backward reference skips the same input.
  {
    const std::vector<std::int64_t> offsets{0, 3, 5, 4, 7};
    std::vector<float> grad(4 * 8, 1.0f);
    std::vector<double> dm(100, 0.0);
    EXPECT_EQ(roast::reference_bag_backward(map, indices.data(), indices.size(), offsets.data(), 4,
                                            roast::bag_mode::sum, grad.data(), dm.data()),
              status::out_of_bounds);
    EXPECT_DOUBLE_EQ(std::accumulate(dm.begin(), dm.end(), 0.0), 3.0 * 8.0);  // rows 1, 2, 3
  }
  // Good input reports ok; an empty bag list is fine.
  const std::vector<std::int64_t> good{0, 2, 2, 6};
  const std::vector<std::int64_t> ok_indices{1, 2, 3, 4, 5, 6};
  EXPECT_EQ(roast::reference_bag_forward(map, m.data(), ok_indices.data(), 6, good.data(), 3,
                                         roast::bag_mode::sum, out.data()),
            status::ok);
  for (std::uint32_t j = 0; j < 8; ++j) EXPECT_EQ(out[8 + j], 0.0f);  // the empty bag
}

// The backward reference is the adjoint of the forward: <forward(M), R> = <M, backward(R)>,
// both sides in double; and a single index scatters factor * grad to its elements.
TEST(RoastLookup, BagBackwardReferenceIsTheAdjoint) {
  for (roast::bag_mode mode : {roast::bag_mode::sum, roast::bag_mode::mean}) {
    const std::uint64_t rows = 200, bags = 150;
    const std::uint32_t dim = 24;
    const roast::lookup_mapping map{roast::lookup_desc{rows, dim, 8, 0.6f, 31, true}, 700};
    const auto m = random_memory(map.memory_size(), 5);
    const auto r = random_memory(bags * dim, 6);
    const auto in = random_bags(bags, rows, 10, 7);
    std::vector<double> dm(map.memory_size(), 0.0);
    ASSERT_EQ(roast::reference_bag_backward(map, in.indices.data(), in.indices.size(),
                                            in.offsets.data(), bags, mode, r.data(), dm.data()),
              status::ok);
    double lhs = 0.0;
    double magnitude = 0.0;
    for (std::uint64_t b = 0; b < bags; ++b) {
      const auto first = static_cast<std::uint64_t>(in.offsets[b]);
      const auto last = static_cast<std::uint64_t>(in.offsets[b + 1]);
      const double n = mode == roast::bag_mode::mean && last > first ? double(last - first) : 1.0;
      for (std::uint32_t j = 0; j < dim; ++j) {
        double y = 0.0;
        for (std::uint64_t k = first; k < last; ++k) {
          const auto row = static_cast<std::uint64_t>(in.indices[k]);
          y += static_cast<double>(map.element_factor(row, j)) * m[map.element_offset(row, j)];
        }
        lhs += y / n * r[b * dim + j];
        magnitude += std::fabs(y / n * r[b * dim + j]);
      }
    }
    double rhs = 0.0;
    for (std::uint64_t e = 0; e < map.memory_size(); ++e) rhs += m[e] * dm[e];
    EXPECT_NEAR(lhs, rhs, 1e-12 * (magnitude + 1.0));
    EXPECT_GT(std::count_if(dm.begin(), dm.end(), [](double v) { return v != 0.0; }), 100);
  }
  const roast::lookup_mapping map{roast::lookup_desc{10, 8, 4, 0.5f, 1, true}, 64};
  const std::vector<std::int64_t> indices{7};
  const std::vector<std::int64_t> offsets{0, 1};
  const std::vector<float> grad{1, 2, 3, 4, 5, 6, 7, 8};
  std::vector<double> dm(64, 0.0);
  ASSERT_EQ(roast::reference_bag_backward(map, indices.data(), 1, offsets.data(), 1,
                                          roast::bag_mode::sum, grad.data(), dm.data()),
            status::ok);
  std::vector<double> expected(64, 0.0);
  for (std::uint32_t j = 0; j < 8; ++j) {
    expected[map.element_offset(7, j)] += map.element_factor(7, j) * grad[j];
  }
  EXPECT_EQ(dm, expected);
}

}  // namespace
