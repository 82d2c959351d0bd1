// core/device.hpp and core/timer.hpp on the host: the query never throws, and says why
// there is no GPU; the timing summary is right.
#include <squeeze/core/device.hpp>
#include <squeeze/core/timer.hpp>

#include <chrono>

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
