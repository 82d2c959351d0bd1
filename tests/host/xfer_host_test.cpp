// SPDX-License-Identifier: Apache-2.0
// xfer on the host: the arithmetic of bounded and asynchronous reads, and the errors of
// mapped_file and host_registration that need no GPU.
#include <squeeze/xfer/bounds.hpp>
#include <squeeze/xfer/mapped_memory.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

namespace xfer = squeeze::xfer;

namespace {

// The rule written the slow way: at least `lower`, then on to the next 128-byte boundary
// of the source, never more than `upper`.
std::size_t reference_bounded(std::uintptr_t src, std::size_t lower, std::size_t upper) {
  std::size_t n = lower;
  while ((src + n) % 128 != 0) ++n;
  return n < upper ? n : upper;
}

}  // namespace

TEST(Bounds, BoundedLengthMatchesTheRuleAtEveryAlignment) {
  for (std::uintptr_t src = 4096; src < 4096 + 256; ++src) {
    for (std::size_t lower = 0; lower <= 300; lower += 7) {
      for (const std::size_t upper : {std::size_t{0}, std::size_t{1}, std::size_t{100},
                                      std::size_t{128}, std::size_t{255}, std::size_t{1} << 20}) {
        ASSERT_EQ(xfer::bounded_length(src, lower, upper), reference_bounded(src, lower, upper))
            << "src%128=" << src % 128 << " lower=" << lower << " upper=" << upper;
      }
    }
  }
}

TEST(Bounds, SuccessiveBoundedReadsStayAligned) {
  // Reading a stream as bounded reads of at least 128 B: every read after the first starts
  // on a segment boundary, and together they cover the stream exactly.
  for (std::uintptr_t start = 1000; start < 1000 + 128; ++start) {
    const std::size_t total = 5000;
    std::size_t done = 0;
    int reads = 0;
    while (done < total) {
      if (reads > 0) {
        ASSERT_EQ((start + done) % 128, 0u);
      }
      const std::size_t n = xfer::bounded_length(start + done, 128, total - done);
      ASSERT_GT(n, 0u);
      done += n;
      ++reads;
    }
    EXPECT_EQ(done, total);
  }
}

TEST(Bounds, WindowHoldsTheRangeAtAnyOffset) {
  for (std::size_t n = 0; n < 300; ++n) {
    for (std::uintptr_t src = 0; src < 16; ++src) {
      const std::size_t used = xfer::granules_touched(src, n) * xfer::granule_bytes;
      EXPECT_LE(used, xfer::window_bytes(n)) << n << " " << src;
      EXPECT_GE(used, n == 0 ? 0 : src % 16 + n);
    }
    EXPECT_EQ(xfer::window_bytes(n) % 16, 0u);
  }
}

TEST(MappedFile, MissingFileIsAnIoErrorNamingThePath) {
  try {
    xfer::mapped_file f{"/nonexistent/squeeze-test.bin"};
    FAIL() << "no exception";
  } catch (const squeeze::io_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("cannot open '/nonexistent/squeeze-test.bin'"), std::string::npos) << what;
    EXPECT_NE(what.find("No such file"), std::string::npos) << what;
  }
}

TEST(MappedFile, DirectoryIsNotARegularFile) {
  EXPECT_THROW(xfer::mapped_file{"/tmp"}, squeeze::io_error);
}

TEST(HostRegistration, NullRangeIsRejected) {
  EXPECT_THROW((xfer::host_registration{nullptr, 64}), squeeze::invalid_argument);
  EXPECT_NO_THROW((xfer::host_registration{nullptr, 0}));
}
