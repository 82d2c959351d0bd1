// SPDX-License-Identifier: Apache-2.0
// ROAST's mapping on the host: the hash's range, alignment and uniformity, exact 64-bit
// arithmetic, the in-tile order (a bijection that keeps 16-byte chunks whole), signs,
// validation, and the gradient fold checked by finite differences.
#include <squeeze/roast/gemm_policy.hpp>
#include <squeeze/roast/mapping.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace roast = squeeze::roast;

namespace {

TEST(RoastMapping, MulModMatchesWideArithmetic) {
  std::mt19937_64 rng{1};
  const std::uint64_t p = roast::detail::mersenne61;
  for (int i = 0; i < 100000; ++i) {
    const std::uint64_t x = rng() % p;
    const std::uint64_t y = i % 2 ? rng() % p : p - 1 - (rng() % 8);
    __extension__ using u128 = unsigned __int128;
    const auto expected = static_cast<std::uint64_t>(static_cast<u128>(x) * y % p);
    ASSERT_EQ(roast::detail::mul_mod_mersenne61(x, y), expected) << x << " * " << y;
  }
}

TEST(RoastMapping, InTileOrderIsABijectionKeepingChunksWhole) {
  for (std::uint32_t bytes : {2u, 4u}) {
    for (roast::tile_shape t : {roast::tile_shape{64, 8}, roast::tile_shape{64, 72},
                                roast::tile_shape{128, 256}, roast::tile_shape{192, 64}}) {
      const roast::tile_layout layout{t.k, t.n, bytes};
      std::vector<int> seen(std::size_t{t.k} * t.n, 0);
      const std::uint32_t per_chunk = 16 / bytes;
      for (std::uint32_t i = 0; i < t.k; ++i) {
        for (std::uint32_t j = 0; j < t.n; ++j) {
          const std::uint32_t o = layout.offset(i, j);
          ASSERT_LT(o, seen.size());
          std::uint32_t pi = 0, pj = 0;
          layout.position(o, pi, pj);
          ASSERT_EQ(pi, i);
          ASSERT_EQ(pj, j);
          ++seen[o];
          // Values of one 16-byte chunk along k stay adjacent and in order.
          if (i % per_chunk != 0) {
            EXPECT_EQ(o, layout.offset(i - 1, j) + 1);
          }
          // 8 rows (n) of 128 bytes form a 1 KiB atom, rows 128 bytes apart before the swizzle.
          EXPECT_EQ(o / layout.atom_values(), (i / layout.atom_k()) * (t.n / 8) + j / 8);
        }
      }
      EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int c) { return c == 1; }))
          << "tile " << t.k << "x" << t.n << ", " << bytes << "-byte elements";
    }
  }
}

TEST(RoastMapping, TileStartsAreAlignedAndInRange) {
  for (std::uint32_t bytes : {2u, 4u}) {
    for (std::uint64_t memory : {std::uint64_t{64 * 64}, std::uint64_t{100003},
                                 std::uint64_t{1} << 34}) {  // the last: 64-bit offsets
      const roast::mapping map{roast::module_desc{8192, 4096, {64, 64}, 1.0f, 7}, memory, bytes};
      std::uint64_t largest = 0;
      for (std::uint64_t kb = 0; kb < map.tiles_k(); kb += 3) {
        for (std::uint64_t nb = 0; nb < map.tiles_n(); ++nb) {
          const std::uint64_t h = map.tile_offset(kb, nb);
          ASSERT_EQ((h * bytes) % 128, 0u);
          ASSERT_LE(h + 64 * 64, memory);
          largest = std::max(largest, h);
        }
      }
      if (memory > (std::uint64_t{1} << 33)) {
        EXPECT_GT(largest, std::uint64_t{1} << 32);
      }
    }
  }
}

TEST(RoastMapping, HashIsCloseToUniform) {
  // 2^20 keys into 1024 slots: every bucket within 6 standard deviations of 1024.
  const auto h = roast::universal_hash::from_seed(42, 1024);
  std::vector<int> count(1024, 0);
  for (std::uint64_t key = 0; key < (1u << 20); ++key) ++count[h(key)];
  const double sd = std::sqrt(1024.0);
  for (int c : count) EXPECT_LT(std::fabs(c - 1024.0), 6 * sd);
  // Different seeds give different functions.
  const auto g = roast::universal_hash::from_seed(43, 1024);
  int same = 0;
  for (std::uint64_t key = 0; key < 4096; ++key) same += h(key) == g(key);
  EXPECT_LT(same, 64);
}

TEST(RoastMapping, SignsAreBalancedAndOptional) {
  const roast::mapping on{roast::module_desc{4096, 4096, {64, 64}, 1.0f, 3, true}, 1 << 20, 4};
  const roast::mapping off{roast::module_desc{4096, 4096, {64, 64}, 1.0f, 3, false}, 1 << 20, 4};
  int negative = 0;
  for (std::uint64_t kb = 0; kb < 64; ++kb) {
    for (std::uint64_t nb = 0; nb < 64; ++nb) {
      negative += on.tile_sign(kb, nb) < 0;
      EXPECT_EQ(off.tile_sign(kb, nb), 1.0f);
      EXPECT_EQ(on.tile_offset(kb, nb), off.tile_offset(kb, nb));
    }
  }
  EXPECT_GT(negative, 4096 / 2 - 200);
  EXPECT_LT(negative, 4096 / 2 + 200);
}

TEST(RoastMapping, ElementOffsetsComposeTileAndLayout) {
  const roast::mapping map{roast::module_desc{300, 200, {64, 72}, 0.5f, 9, true}, 50000, 2};
  EXPECT_EQ(map.tiles_k(), 5u);
  EXPECT_EQ(map.tiles_n(), 3u);
  for (std::uint64_t k = 0; k < 300; k += 7) {
    for (std::uint64_t n = 0; n < 200; n += 5) {
      EXPECT_EQ(map.element_offset(k, n),
                map.tile_offset(k / 64, n / 72) +
                    map.layout().offset(static_cast<std::uint32_t>(k % 64),
                                        static_cast<std::uint32_t>(n % 72)));
      EXPECT_EQ(map.element_factor(k, n), 0.5f * map.tile_sign(k / 64, n / 72));
    }
  }
}

TEST(RoastMapping, RejectsBadModules) {
  const auto make = [](roast::module_desc d, std::uint64_t m, std::uint32_t b) {
    return roast::mapping{d, m, b};
  };
  EXPECT_THROW(make({0, 64, {64, 64}}, 1 << 20, 4), squeeze::invalid_argument);
  EXPECT_THROW(make({64, 64, {48, 64}}, 1 << 20, 2), squeeze::invalid_argument);  // k % 64
  EXPECT_THROW(make({64, 64, {32, 60}}, 1 << 20, 4), squeeze::invalid_argument);  // n % 8
  EXPECT_THROW(make({64, 64, {64, 64}}, 1 << 20, 8), squeeze::invalid_argument);  // bytes
  EXPECT_THROW(make({64, 64, {64, 64}, std::nanf("")}, 1 << 20, 4), squeeze::invalid_argument);
  try {
    make({64, 64, {64, 64}}, 4095, 4);  // M smaller than one tile
    FAIL() << "a too-small M was accepted";
  } catch (const squeeze::invalid_argument& e) {
    EXPECT_NE(std::string{e.what()}.find("fewer than one 64x64 tile"), std::string::npos)
        << e.what();
  }
  EXPECT_NO_THROW(make({64, 64, {32, 8}}, 32 * 8, 4));  // exactly one tile: one slot
  EXPECT_EQ(make({64, 64, {32, 8}}, 32 * 8, 4).slots(), 1u);
  EXPECT_THROW(roast::gms_scale(1.0, 0), squeeze::invalid_argument);
  EXPECT_FLOAT_EQ(roast::gms_scale(2.0, 16), 0.5f);
}

// L(M) = sum(Y * R) with Y = X . W(M): dL/dM from fold_gradient(X^T R) against central
// differences of L in double precision.
TEST(RoastMapping, GradientFoldMatchesFiniteDifferences) {
  const std::uint64_t batch = 5, k = 70, n = 40, memory = 6000;
  const roast::mapping map{roast::module_desc{k, n, {32, 16}, 0.8f, 21, true}, memory, 4};
  std::mt19937_64 rng{5};
  std::uniform_real_distribution<double> u{-1, 1};
  std::vector<double> m(memory), x(batch * k), r(batch * n);
  for (auto* v : {&m, &x, &r}) {
    for (auto& e : *v) e = u(rng);
  }
  const auto loss = [&](const std::vector<double>& mem) {
    double l = 0;
    for (std::uint64_t b = 0; b < batch; ++b) {
      for (std::uint64_t j = 0; j < n; ++j) {
        double y = 0;
        for (std::uint64_t i = 0; i < k; ++i) {
          y += x[b * k + i] * map.element_factor(i, j) * mem[map.element_offset(i, j)];
        }
        l += y * r[b * n + j];
      }
    }
    return l;
  };
  std::vector<float> dw(k * n);
  for (std::uint64_t i = 0; i < k; ++i) {
    for (std::uint64_t j = 0; j < n; ++j) {
      double s = 0;
      for (std::uint64_t b = 0; b < batch; ++b) s += x[b * k + i] * r[b * n + j];
      dw[i * n + j] = static_cast<float>(s);
    }
  }
  std::vector<double> dm(memory, 0.0);
  roast::fold_gradient(map, dw.data(), dm.data());
  int used = 0;
  for (std::uint64_t e = 0; e < memory; e += 97) {
    std::vector<double> plus = m, minus = m;
    plus[e] += 1e-3;
    minus[e] -= 1e-3;
    const double fd = (loss(plus) - loss(minus)) / 2e-3;
    EXPECT_NEAR(dm[e], fd, 1e-5 * (1 + std::fabs(fd))) << "element " << e;
    used += dm[e] != 0.0;
  }
  EXPECT_GT(used, 10);  // the check saw elements that many weights share
}

TEST(RoastMapping, MaterializeAppliesScaleSignAndLayout) {
  const roast::mapping map{roast::module_desc{96, 40, {32, 8}, 0.25f, 4, true}, 5000, 4};
  std::vector<float> m(5000);
  for (std::size_t i = 0; i < m.size(); ++i) m[i] = static_cast<float>(i) + 0.5f;
  const auto w = roast::materialize(map, m.data(), [](float v) { return v; });
  for (std::uint64_t k = 0; k < 96; ++k) {
    for (std::uint64_t n = 0; n < 40; ++n) {
      EXPECT_EQ(w[k * 40 + n], map.element_factor(k, n) * m[map.element_offset(k, n)]);
    }
  }
}

// ROAST-MM's policy: a user's own type is accepted with the members and ranges the kernel
// supports, and refused at compile time otherwise.
struct wide_ring : squeeze::roast::hopper_gemm_policy {
  static constexpr int stage_budget_bytes = 160 * 1024;
};
struct odd_width : squeeze::roast::hopper_gemm_policy {
  static constexpr int block_n = 96;
};
struct ragged_batch : squeeze::roast::hopper_gemm_policy {
  static constexpr int source_batch = 48;
};
struct no_fill : squeeze::roast::hopper_gemm_policy {
  static constexpr int fill_percent = 0;
};
struct rows_64 : squeeze::roast::hopper_gemm_policy {
  static constexpr int block_m = 64;
};
struct rows_96 : squeeze::roast::hopper_gemm_policy {
  static constexpr int block_m = 96;
};
struct missing_members {
  static constexpr int block_n = 128;
};
static_assert(squeeze::roast::hopper_gemm_tuning<squeeze::roast::hopper_gemm_policy>);
static_assert(squeeze::roast::hopper_gemm_tuning<squeeze::roast::hopper_gemm_policy_n<64>>);
static_assert(squeeze::roast::hopper_gemm_policy_n<256>::block_n == 256);
static_assert(squeeze::roast::hopper_gemm_tuning<wide_ring>);
static_assert(!squeeze::roast::hopper_gemm_tuning<odd_width>);
static_assert(!squeeze::roast::hopper_gemm_tuning<ragged_batch>);
static_assert(!squeeze::roast::hopper_gemm_tuning<no_fill>);
static_assert(squeeze::roast::hopper_gemm_tuning<rows_64>);
static_assert(!squeeze::roast::hopper_gemm_tuning<rows_96>);
static_assert(!squeeze::roast::hopper_gemm_tuning<missing_members>);

}  // namespace
