// SPDX-License-Identifier: Apache-2.0
// What a consumer's host code sees through squeeze::squeeze alone (g++, no nvcc): the
// version the package was found at, the errors, the arithmetic and the device query.
#include <squeeze/core.hpp>
#include <squeeze/xfer/mapped_memory.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

TEST(Consumer, HeadersMatchThePackageVersion) {
#if defined(SQUEEZE_CONSUMER_PACKAGE_VERSION)
  const std::string headers = std::to_string(SQUEEZE_VERSION_MAJOR) + "." +
                              std::to_string(SQUEEZE_VERSION_MINOR) + "." +
                              std::to_string(SQUEEZE_VERSION_PATCH);
  EXPECT_EQ(headers, SQUEEZE_CONSUMER_PACKAGE_VERSION);
#else
  GTEST_SKIP() << "the consumer was not told the package's version";
#endif
}

TEST(Consumer, ErrorsSayTheMessageAndKeepTheLocation) {
  const squeeze::invalid_argument e{"n must be positive"};
  EXPECT_STREQ(e.what(), "squeeze: n must be positive");
  EXPECT_NE(e.what_and_where().find("host.cpp"), std::string::npos) << e.what_and_where();
}

TEST(Consumer, CheckedArithmeticAndBits) {
  EXPECT_EQ(squeeze::core::popcount(0xF0F0u), 8);
  EXPECT_EQ(squeeze::core::checked_mul<std::uint64_t>(1ull << 32, 1ull << 31),
            std::uint64_t{1} << 63);
  EXPECT_FALSE(squeeze::core::checked_mul<std::uint64_t>(1ull << 32, 1ull << 32).has_value());
}

TEST(Consumer, DeviceQueryExplainsAnAbsentGpu) {
  const auto presence = squeeze::core::detect_devices();
  EXPECT_GE(presence.count, 0);
  if (presence.present()) {
    EXPECT_TRUE(presence.message().empty());
  } else {
    EXPECT_NE(presence.message().find("no NVIDIA GPU or driver found"), std::string::npos)
        << presence.message();
  }
}
