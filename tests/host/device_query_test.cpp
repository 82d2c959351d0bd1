// core/device.hpp, core/launch.hpp and core/timer.hpp on the host: the query never throws,
// and says why there is no GPU; grids are sized as documented; the timing summary is right.
#include <squeeze/core/device.hpp>
#include <squeeze/core/launch.hpp>
#include <squeeze/core/timer.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>

#include <gtest/gtest.h>

TEST(DeviceQuery, DetectNeverThrowsAndExplainsAbsence) {
  const auto p = squeeze::core::detect_devices();
  EXPECT_GE(p.count, 0);
  if (p.present()) {
    EXPECT_TRUE(p.reason.empty());
    const auto info = squeeze::core::query_device(0);
    EXPECT_FALSE(info.name.empty());
    EXPECT_GT(info.sm_count, 0);
    EXPECT_NE(squeeze::core::describe(info).find(info.name), std::string::npos);
  } else {
    EXPECT_FALSE(p.reason.empty());
    EXPECT_THROW(squeeze::core::query_device(0), squeeze::cuda_error);
  }
}

TEST(Launch, GridsAreClampedAndBalanced) {
  using squeeze::core::balanced_grid;
  using squeeze::core::grid_for;
  static_assert(grid_for(0, 256, 100) == 1);  // never a grid of zero blocks
  static_assert(grid_for(1, 256, 100) == 1);
  static_assert(grid_for(256, 256, 100) == 1);
  static_assert(grid_for(257, 256, 100) == 2);
  static_assert(grid_for(1'000'000, 256, 100) == 100);
  static_assert(grid_for(1'000'000, 256, 0) == 1);  // a cap of 0 is read as 1
  static_assert(grid_for(std::size_t{1} << 50, 1, std::size_t{1} << 40) == 0x7fffffffu);
  // 10 blocks' work on a cap of 8: 5 blocks of two rounds each.
  static_assert(balanced_grid(10 * 64, 64, 8) == 5);
  static_assert(balanced_grid(8 * 64, 64, 8) == 8);
  static_assert(balanced_grid(17 * 64, 64, 8) == 6);  // 3 rounds: ceil(17 / 3)
  static_assert(balanced_grid(3, 64, 8) == 1);
  for (std::size_t items : {0u, 1u, 63u, 64u, 65u, 1000u, 100000u}) {
    for (std::size_t cap : {1u, 3u, 8u, 132u}) {
      const std::size_t blocks = balanced_grid(items, 64, cap);
      const std::size_t wanted = std::max<std::size_t>(1, (items + 63) / 64);
      const std::size_t rounds = (wanted + blocks - 1) / blocks;
      ASSERT_LE(blocks, cap);
      ASSERT_GE(blocks * rounds, wanted);
      // No block could go: one block fewer would need one round more.
      if (blocks > 1) {
        ASSERT_LT((blocks - 1) * rounds, wanted);
      }
    }
  }
  const auto p = squeeze::core::detect_devices();
  if (p.present()) {
    EXPECT_EQ(squeeze::core::sm_count(), squeeze::core::query_device().sm_count);
    EXPECT_EQ(squeeze::core::per_sm(8), 8u * static_cast<unsigned>(squeeze::core::sm_count()));
  } else {
    EXPECT_THROW(squeeze::core::sm_count(), squeeze::cuda_error);
  }
}

TEST(Timer, SummaryTakesMedianMinMax) {
  const auto odd = squeeze::core::summarize({5.0, 1.0, 3.0});
  EXPECT_EQ(odd.samples, 3);
  EXPECT_DOUBLE_EQ(odd.median_ms, 3.0);
  EXPECT_DOUBLE_EQ(odd.min_ms, 1.0);
  EXPECT_DOUBLE_EQ(odd.max_ms, 5.0);
  const auto even = squeeze::core::summarize({4.0, 1.0, 2.0, 10.0});
  EXPECT_DOUBLE_EQ(even.median_ms, 3.0);
  EXPECT_EQ(squeeze::core::summarize({}).samples, 0);
}

TEST(Timer, CollectDiscardsWarmupAndSummarizesRepeats) {
  int calls = 0;
  const auto s = squeeze::core::collect({.warmup = 2, .repeats = 5}, [&] {
    ++calls;
    return calls <= 2 ? 1000.0 : static_cast<double>(calls);  // warm-up runs are slow
  });
  EXPECT_EQ(calls, 7);
  EXPECT_EQ(s.samples, 5);
  EXPECT_DOUBLE_EQ(s.median_ms, 5.0);  // samples 3..7
  EXPECT_DOUBLE_EQ(s.max_ms, 7.0);
}

TEST(Timer, HostClockTimesHostWork) {
  const double ms = squeeze::core::host_ms([] {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(3);
    while (std::chrono::steady_clock::now() < until) {
    }
  });
  EXPECT_GE(ms, 3.0);
  EXPECT_LT(ms, 1000.0);
  int runs = 0;
  const auto s = squeeze::core::time_host({.warmup = 1, .repeats = 3}, [&] { ++runs; });
  EXPECT_EQ(runs, 4);
  EXPECT_EQ(s.samples, 3);
}
