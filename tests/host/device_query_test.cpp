// SPDX-License-Identifier: Apache-2.0
// core/device.hpp, core/launch.hpp and core/timer.hpp on the host: the query never throws,
// and says why there is no GPU; grids are sized as documented; the timing summary is right.
#include <squeeze/core/arch_policy.hpp>
#include <squeeze/core/device.hpp>
#include <squeeze/core/launch.hpp>
#include <squeeze/core/timer.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <string>
#include <type_traits>

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
    EXPECT_TRUE(p.message().empty());
  } else {
    EXPECT_FALSE(p.reason.empty());
    EXPECT_EQ(p.message(), "no NVIDIA GPU or driver found (" + p.reason + ")");
    if (p.error != cudaSuccess) {
      EXPECT_EQ(p.reason.rfind(std::string{cudaGetErrorName(p.error)} + ": ", 0), 0u) << p.reason;
    }
    EXPECT_THROW(squeeze::core::query_device(0), squeeze::cuda_error);
  }
}

// What the user reads without a GPU, for each way cudaGetDeviceCount can say so (the runtime
// names an error without a device or a driver).
TEST(DeviceQuery, AbsenceReasonNamesTheErrorAndWhatItMeans) {
  using squeeze::core::detail::absence_reason;
  EXPECT_EQ(absence_reason(cudaErrorInsufficientDriver, 0, 0, 13000, nullptr),
            "cudaErrorInsufficientDriver: no NVIDIA driver is installed");
  EXPECT_EQ(absence_reason(cudaErrorInsufficientDriver, 0, 12020, 13000, nullptr),
            "cudaErrorInsufficientDriver: the NVIDIA driver supports CUDA 12.2, this program "
            "needs 13.0 or newer");
  EXPECT_EQ(absence_reason(cudaErrorNoDevice, 0, 13000, 13000, nullptr),
            "cudaErrorNoDevice: the NVIDIA driver finds no GPU");
  EXPECT_EQ(absence_reason(cudaErrorNoDevice, 0, 13000, 13000, ""),
            "cudaErrorNoDevice: the NVIDIA driver finds no GPU among CUDA_VISIBLE_DEVICES=\"\"");
  EXPECT_EQ(absence_reason(cudaSuccess, 0, 13000, 13000, nullptr),
            "the NVIDIA driver finds no GPU");
  EXPECT_EQ(absence_reason(cudaSuccess, 2, 13000, 13000, nullptr), "");
  EXPECT_EQ(absence_reason(cudaErrorStubLibrary, 0, 0, 13000, nullptr)
                .rfind("cudaErrorStubLibrary: only CUDA's stub driver library", 0),
            0u);
  // Any other error: its name and the runtime's description.
  EXPECT_EQ(absence_reason(cudaErrorDevicesUnavailable, 0, 13000, 13000, nullptr),
            std::string{"cudaErrorDevicesUnavailable: "} +
                cudaGetErrorString(cudaErrorDevicesUnavailable));
  squeeze::core::device_presence none;
  none.reason = absence_reason(cudaErrorNoDevice, 0, 13000, 13000, nullptr);
  EXPECT_EQ(none.message(),
            "no NVIDIA GPU or driver found (cudaErrorNoDevice: the NVIDIA driver finds no GPU)");
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

// core::arch_policy: of a family's entries (oldest first), a device pass takes the newest
// not newer than the architecture it compiles for, the host pass the newest.
struct entry_sm80 {
  static constexpr int arch = 80;
};
struct entry_sm90 {
  static constexpr int arch = 90;
};
namespace arch_test {
namespace core = squeeze::core;
static_assert(std::is_same_v<core::policy_for_arch<0, entry_sm80, entry_sm90>, entry_sm90>);
static_assert(std::is_same_v<core::policy_for_arch<80, entry_sm80, entry_sm90>, entry_sm80>);
static_assert(std::is_same_v<core::policy_for_arch<86, entry_sm80, entry_sm90>, entry_sm80>);
static_assert(std::is_same_v<core::policy_for_arch<90, entry_sm80, entry_sm90>, entry_sm90>);
static_assert(std::is_same_v<core::policy_for_arch<100, entry_sm80, entry_sm90>, entry_sm90>);
static_assert(std::is_same_v<core::policy_for_arch<75, entry_sm80, entry_sm90>, entry_sm80>);
static_assert(std::is_same_v<core::arch_policy<entry_sm80, entry_sm90>, entry_sm90>);
static_assert(core::compiled_arch == 0);
}  // namespace arch_test
