// SPDX-License-Identifier: Apache-2.0
// core::device_status on the GPU: the word starts ok, the first error a kernel reports wins
// (later and racing reports are dropped), peek reads without clearing, check throws the
// squeeze::error subclass that matches the status (throw_if_error's mapping) with a message
// naming the caller's `what` and the status, and leaves the word ok; reset and moves; and
// peek and check wait for their own stream only, never for another stream's kernel.
#include <squeeze/core/buffer.hpp>
#include <squeeze/core/cuda_error.hpp>
#include <squeeze/core/device_status.cuh>
#include <squeeze/core/error.hpp>
#include <squeeze/core/status.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <span>
#include <string>
#include <typeinfo>
#include <utility>
#include <vector>

#include "common/gpu_test.hpp"
#include "common/stream_blocker.cuh"

namespace core = squeeze::core;
using squeeze::status;

namespace device_status_test {

// Thread t reports codes[t % n_codes].
SQUEEZE_KERNEL(256)
void report_kernel(status* word, const status* codes, unsigned n_codes, unsigned threads) {
  const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t < threads) core::report_status(word, codes[t % n_codes]);
}

// Reports `codes` on `stream`: codes.size() threads, one code each (or `threads` threads
// cycling through them).
void report(core::device_status& st, const std::vector<status>& codes, cudaStream_t stream,
            unsigned threads = 0) {
  if (threads == 0) threads = static_cast<unsigned>(codes.size());
  core::device_buffer<status> d{codes.size(), stream};
  d.copy_from(std::span<const status>{codes}, stream);
  report_kernel<<<(threads + 255) / 256, 256, 0, stream>>>(
      st.data(), d.data(), static_cast<unsigned>(codes.size()), threads);
  SQUEEZE_CHECK_LAUNCH();
}

// Whether check(stream, what) throws exactly an E (and not only a base of it) whose message
// names `what` and the status, and leaves the word ok.
template <class E>
void expect_check_throws(status s) {
  SCOPED_TRACE(squeeze::to_string(s));
  core::stream stream;
  core::device_status st{stream};
  report(st, {s}, stream);
  bool thrown = false;
  try {
    st.check(stream, "my_op");
  } catch (const E& e) {
    thrown = true;
    EXPECT_EQ(typeid(e), typeid(E)) << "a subclass of the expected type was thrown";
    const std::string m = e.message();
    EXPECT_NE(m.find("my_op"), std::string::npos) << m;
    EXPECT_NE(m.find(squeeze::to_string(s)), std::string::npos) << m;
    EXPECT_NE(std::string{e.where().file_name()}.find("device_status_test.cu"), std::string::npos)
        << "raised at " << e.where().file_name();
  }
  EXPECT_TRUE(thrown);
  EXPECT_EQ(st.peek(stream), status::ok) << "check left the status set";
  EXPECT_NO_THROW(st.check(stream, "my_op"));
}

}  // namespace device_status_test

using namespace device_status_test;

TEST(DeviceStatus, StartsOkAndTheFirstErrorWins) {
  SQUEEZE_REQUIRE_GPU();
  core::stream stream;
  core::device_status st{stream};
  ASSERT_NE(st.data(), nullptr);
  EXPECT_EQ(st.peek(stream), status::ok);
  report(st, {status::ok, status::ok}, stream);  // ok is never recorded
  EXPECT_EQ(st.peek(stream), status::ok);
  report(st, {status::io_error}, stream);
  report(st, {status::corrupt, status::out_of_bounds, status::cache_full}, stream, 64 * 256);
  EXPECT_EQ(st.peek(stream), status::io_error);
  EXPECT_EQ(st.peek(stream), status::io_error) << "peek cleared the status";
  st.reset(stream);
  EXPECT_EQ(st.peek(stream), status::ok);
}

TEST(DeviceStatus, RacingReportsKeepOneOfThem) {
  SQUEEZE_REQUIRE_GPU();
  core::stream stream;
  core::device_status st{stream};
  const std::vector<status> codes{status::invalid_argument, status::out_of_bounds,
                                  status::truncated,        status::corrupt,
                                  status::io_error,         status::cache_full};
  report(st, codes, stream, 132 * 256);
  const status got = st.peek(stream);
  EXPECT_NE(got, status::ok);
  EXPECT_NE(std::find(codes.begin(), codes.end(), got), codes.end())
      << "a status nobody reported: " << static_cast<unsigned>(got);
}

TEST(DeviceStatus, CheckThrowsTheMatchingErrorAndClears) {
  SQUEEZE_REQUIRE_GPU();
  expect_check_throws<squeeze::invalid_argument>(status::invalid_argument);
  expect_check_throws<squeeze::invalid_argument>(status::out_of_bounds);
  expect_check_throws<squeeze::format_error>(status::truncated);
  expect_check_throws<squeeze::format_error>(status::corrupt);
  expect_check_throws<squeeze::io_error>(status::io_error);
  expect_check_throws<squeeze::error>(status::cache_full);
}

TEST(DeviceStatus, MovesAndEmptyOwners) {
  SQUEEZE_REQUIRE_GPU();
  core::stream stream;
  core::device_status a{stream};
  status* word = a.data();
  report(a, {status::truncated}, stream);
  core::device_status b{std::move(a)};
  EXPECT_EQ(b.data(), word);
  EXPECT_EQ(a.data(), nullptr);  // NOLINT(bugprone-use-after-move): moved-from is empty
  EXPECT_EQ(a.peek(stream), status::ok);
  EXPECT_NO_THROW(a.check(stream, "empty"));
  a.reset(stream);
  EXPECT_THROW(b.check(stream, "moved"), squeeze::format_error);
  core::device_status c{stream};
  c = std::move(b);
  EXPECT_EQ(c.data(), word);
  EXPECT_EQ(c.peek(stream), status::ok);
}

// peek and check synchronize their stream only: a kernel held on another stream is still
// running when they return.
TEST(DeviceStatus, WaitsForItsOwnStreamOnly) {
  SQUEEZE_REQUIRE_GPU();
  if (squeeze::test::under_sanitizer()) {
    GTEST_SKIP() << "a compute sanitizer serializes kernels: the blocker would hold every stream";
  }
  core::stream stream;
  core::device_status st{stream};
  const std::vector<status> codes{status::corrupt};
  core::device_buffer<status> d{1};
  d.copy_from(std::span<const status>{codes}, stream);
  // The kernel launched once (no thread reports) so that its code is loaded before the
  // blocker runs: see stream_blocker.cuh.
  report_kernel<<<1, 32, 0, stream>>>(st.data(), d.data(), 1, 0);
  SQUEEZE_CHECK_LAUNCH();
  stream.synchronize();
  squeeze::test::stream_blocker blocker{squeeze::test::hang_limit(std::chrono::seconds{20})};
  EXPECT_EQ(st.peek(stream), status::ok);
  EXPECT_NO_THROW(st.check(stream, "blocked"));
  report_kernel<<<1, 32, 0, stream>>>(st.data(), d.data(), 1, 32);
  SQUEEZE_CHECK_LAUNCH();
  EXPECT_EQ(st.peek(stream), status::corrupt);
  EXPECT_TRUE(blocker.still_blocking()) << "peek or check waited for another stream's kernel";
  blocker.release();
  EXPECT_THROW(st.check(stream, "released"), squeeze::format_error);
}
