// SPDX-License-Identifier: Apache-2.0
// core:: on the GPU: the bit utilities give the host's answers in device code, buffers
// and mapped memory are readable by kernels, events time a known delay, and the device
// query describes the GPU.
#include <squeeze/core.hpp>
#include <squeeze/xfer/copy.cuh>
#include <squeeze/xfer/mapped_memory.hpp>

#include <gtest/gtest.h>

#include <unistd.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "common/gpu_test.hpp"

namespace core = squeeze::core;
namespace xfer = squeeze::xfer;

// Named, not anonymous: SQUEEZE_KERNEL gives kernels hidden visibility, which needs
// external linkage.
namespace core_gpu_test {

// One record of every bit utility's result for one input; filled by the same function on
// the host and on the device.
struct bit_results {
  std::uint32_t extract32[33];
  std::uint64_t extract64[65];
  std::uint32_t deposit32[2];
  int popc32, popc64, clz32, clz64, ctz32, ctz64;
  std::uint32_t funnel[33];
  std::uint32_t field;
  float cast;
};

SQUEEZE_HOST_DEVICE void compute_bits(const std::uint64_t* in, unsigned offset, bit_results& r) {
  const auto* w32 = reinterpret_cast<const std::uint32_t*>(in);
  for (unsigned width = 0; width <= 32; ++width)
    r.extract32[width] = core::extract_bits(w32, offset, width);
  for (unsigned width = 0; width <= 64; ++width)
    r.extract64[width] = core::extract_bits(in, offset, width);
  r.deposit32[0] = w32[2];
  r.deposit32[1] = w32[3];
  core::deposit_bits(r.deposit32, offset % 32, 1 + offset % 32, w32[0]);
  r.popc32 = core::popcount(w32[0]);
  r.popc64 = core::popcount(in[1]);
  r.clz32 = core::countl_zero(w32[1] >> (offset % 32));
  r.clz64 = core::countl_zero(in[0] >> (offset % 64));
  r.ctz32 = core::countr_zero(w32[2] << (offset % 32));
  r.ctz64 = core::countr_zero(in[1] << (offset % 64));
  for (unsigned s = 0; s <= 32; ++s) r.funnel[s] = core::funnel_shift_right(w32[0], w32[1], s);
  r.field = core::insert_field(w32[3], w32[0], offset % 16, 1 + offset % 16);
  r.cast = core::bit_cast<float>(w32[1]);
}

SQUEEZE_KERNEL(128) void bits_kernel(const std::uint64_t* in, int cases, bit_results* out) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < cases) compute_bits(in + 2 * i, static_cast<unsigned>(i % 64), out[i]);
}

SQUEEZE_KERNEL(32) void spin_kernel(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

SQUEEZE_KERNEL(32) void count_kernel(int* counter) {
  if (threadIdx.x == 0) atomicAdd(counter, 1);
}

SQUEEZE_KERNEL(256) void sum_bytes(const std::byte* p, std::size_t n, unsigned long long* sum) {
  unsigned long long local = 0;
  for (std::size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    local += static_cast<unsigned long long>(p[i]);
  }
  atomicAdd(sum, local);
}

SQUEEZE_KERNEL(32) void copy_kernel(std::byte* dst, const std::byte* src, std::size_t n) {
  xfer::warp_copy(dst, src, n);
}

unsigned long long host_sum(const std::vector<std::byte>& v) {
  unsigned long long s = 0;
  for (const auto b : v) s += static_cast<unsigned long long>(b);
  return s;
}

}  // namespace core_gpu_test

using namespace core_gpu_test;

TEST(CoreGpu, BitUtilitiesAgreeWithTheHost) {
  SQUEEZE_REQUIRE_GPU();
  constexpr int cases = 4096;
  std::mt19937_64 rng{0xB17};
  std::vector<std::uint64_t> in(2 * cases);
  for (auto& x : in) x = rng();
  core::device_buffer<std::uint64_t> d_in{in.size()};
  core::device_buffer<bit_results> d_out{cases};
  SQUEEZE_CUDA_TRY(cudaMemcpy(d_in.data(), in.data(), in.size() * 8, cudaMemcpyHostToDevice));
  SQUEEZE_CUDA_TRY(cudaMemset(d_out.data(), 0xA5, d_out.bytes()));
  bits_kernel<<<cases / 128, 128>>>(d_in.data(), cases, d_out.data());
  SQUEEZE_CHECK_LAUNCH();
  std::vector<bit_results> got(cases);
  SQUEEZE_CUDA_TRY(cudaMemcpy(got.data(), d_out.data(), d_out.bytes(), cudaMemcpyDeviceToHost));
  for (int i = 0; i < cases; ++i) {
    bit_results want;
    std::memset(&want, 0xA5, sizeof want);
    compute_bits(in.data() + 2 * i, static_cast<unsigned>(i % 64), want);
    ASSERT_EQ(std::memcmp(&got[i], &want, sizeof want), 0) << "case " << i;
  }
}

TEST(CoreGpu, DeviceQueryDescribesTheGpu) {
  SQUEEZE_REQUIRE_GPU();
  const auto info = core::query_device();
  EXPECT_GE(info.cc_major, 7);
  EXPECT_GT(info.sm_count, 0);
  EXPECT_GT(info.l2_bytes, 0u);
  EXPECT_TRUE(info.can_map_host_memory);
  EXPECT_TRUE(info.unified_addressing);
  const std::string text = core::describe(info);
  EXPECT_NE(text.find("sm_" + std::to_string(info.cc_major) + std::to_string(info.cc_minor)),
            std::string::npos)
      << text;
}

TEST(CoreGpu, DeviceScopeRestoresTheCurrentDevice) {
  SQUEEZE_REQUIRE_GPU();
  int count = 0, before = -1, inside = -1, after = -1;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  ASSERT_EQ(cudaGetDevice(&before), cudaSuccess);
  const int other = count > 1 ? (before + 1) % count : before;
  {
    squeeze::core::device_scope on{other};
    ASSERT_EQ(cudaGetDevice(&inside), cudaSuccess);
  }
  ASSERT_EQ(cudaGetDevice(&after), cudaSuccess);
  EXPECT_EQ(inside, other);
  EXPECT_EQ(after, before);
  EXPECT_THROW(squeeze::core::device_scope{count}, squeeze::cuda_error);
  ASSERT_EQ(cudaGetDevice(&after), cudaSuccess);
  EXPECT_EQ(after, before);
}

TEST(CoreGpu, BuffersRoundTripAndAreStreamOrdered) {
  SQUEEZE_REQUIRE_GPU();
  core::stream s;
  const auto data = squeeze::test::random_bytes(1 << 20, 3);
  core::device_buffer<std::byte> a{data.size(), s};  // stream-ordered allocation
  a.copy_from(std::span<const std::byte>{data}, s);
  std::vector<std::byte> back(data.size(), std::byte{0});
  a.copy_to(std::span<std::byte>{back}, s);
  s.synchronize();
  EXPECT_EQ(back, data);
  core::device_buffer<std::byte> moved = std::move(a);
  EXPECT_EQ(a.data(), nullptr);
  EXPECT_EQ(moved.size(), data.size());
  EXPECT_THROW(
      moved.copy_from(std::span<const std::byte>{std::vector<std::byte>(data.size() + 1)}, s),
      squeeze::invalid_argument);
}

TEST(CoreGpu, MappedMemoryIsReadByKernels) {
  SQUEEZE_REQUIRE_GPU();
  const auto data = squeeze::test::random_bytes(3 << 20, 4);
  core::device_buffer<unsigned long long> sum{1};

  auto mapped = xfer::allocate_mapped<std::byte>(data.size());
  ASSERT_NE(mapped.device_data(), nullptr);
  std::copy(data.begin(), data.end(), mapped.data());
  SQUEEZE_CUDA_TRY(cudaMemset(sum.data(), 0, 8));
  sum_bytes<<<64, 256>>>(mapped.device_data(), data.size(), sum.data());
  SQUEEZE_CHECK_LAUNCH();
  unsigned long long got = 0;
  SQUEEZE_CUDA_TRY(cudaMemcpy(&got, sum.data(), 8, cudaMemcpyDeviceToHost));
  EXPECT_EQ(got, host_sum(data));

  // Existing host memory, registered.
  std::vector<std::byte> heap = data;
  {
    xfer::host_registration reg{heap.data(), heap.size(),
                                xfer::host_registration::access::read_only};
    ASSERT_NE(reg.device_data(), nullptr);
    SQUEEZE_CUDA_TRY(cudaMemset(sum.data(), 0, 8));
    sum_bytes<<<64, 256>>>(static_cast<const std::byte*>(reg.device_data()), heap.size(),
                           sum.data());
    SQUEEZE_CHECK_LAUNCH();
    SQUEEZE_CUDA_TRY(cudaMemcpy(&got, sum.data(), 8, cudaMemcpyDeviceToHost));
    EXPECT_EQ(got, host_sum(data));
    // Registering the same range twice is an error the runtime reports; it surfaces as a
    // cuda_error naming the call.
    try {
      xfer::host_registration again{heap.data(), heap.size()};
      FAIL() << "second registration succeeded";
    } catch (const squeeze::cuda_error& e) {
      EXPECT_NE(std::string{e.what()}.find("cudaHostRegister"), std::string::npos) << e.what();
    }
  }
  // Unregistered on destruction: registering again now works.
  EXPECT_NO_THROW((xfer::host_registration{heap.data(), heap.size()}));
}

TEST(CoreGpu, MappedFileIsReadByKernels) {
  SQUEEZE_REQUIRE_GPU();
  const auto data = squeeze::test::random_bytes((1 << 20) + 12345, 5);
  char path[] = "/tmp/squeeze-mapped-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, data.data(), data.size()), static_cast<ssize_t>(data.size()));
  close(fd);
  {
    xfer::mapped_file file{path};
    ASSERT_EQ(file.bytes(), data.size());
    core::device_buffer<std::byte> dst{data.size() + 32};
    SQUEEZE_CUDA_TRY(cudaMemset(dst.data(), 0xA5, dst.bytes()));
    // Misaligned on both sides: starts 7 bytes into the file, lands 5 bytes into dst.
    copy_kernel<<<1, 32>>>(dst.data() + 5, file.device_data() + 7, data.size() - 7);
    SQUEEZE_CHECK_LAUNCH();
    std::vector<std::byte> got(dst.bytes());
    SQUEEZE_CUDA_TRY(cudaMemcpy(got.data(), dst.data(), dst.bytes(), cudaMemcpyDeviceToHost));
    EXPECT_EQ(squeeze::test::first_mismatch(got.data() + 5, data.data() + 7, data.size() - 7), -1);
    EXPECT_EQ(got[4], std::byte{0xA5});
    EXPECT_EQ(got[5 + data.size() - 7], std::byte{0xA5});
  }
  std::remove(path);
  // An empty file maps to an empty range.
  char empty[] = "/tmp/squeeze-empty-XXXXXX";
  const int efd = mkstemp(empty);
  ASSERT_GE(efd, 0);
  close(efd);
  {
    xfer::mapped_file file{empty};
    EXPECT_EQ(file.bytes(), 0u);
  }
  std::remove(empty);
}

// time_graph times the device alone: a call that sleeps 5 ms on the host before a 0.25 ms
// kernel measures ~5 ms by time_region and ~0.25 ms by time_graph, and every run counts
// (warm-ups eagerly, the capture not at all, then calls x (1 + repeats) replays).
TEST(CoreGpu, TimeGraphLeavesOutTheHostAndRunsEveryCall) {
  SQUEEZE_REQUIRE_GPU();
  int clock_khz = 0;
  SQUEEZE_CUDA_TRY(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
  const long long cycles = clock_khz / 4;     // ~0.25 ms at the nominal clock
  SQUEEZE_CUDA_TRY(cudaDeviceSynchronize());  // ordered before the non-blocking stream
  core::stream s;
  core::device_buffer<int> counter{1};
  counter.fill_bytes(0, s);
  const auto work = [&] {
    usleep(5000);
    count_kernel<<<1, 32, 0, s>>>(counter.data());
    spin_kernel<<<1, 32, 0, s>>>(cycles);
  };
  const auto region = core::time_region(s, {.warmup = 1, .repeats = 3}, work);
  const auto graph = core::time_graph(s, {.warmup = 2, .repeats = 3}, 4, work);
  EXPECT_GT(region.median_ms, 4.5);
  EXPECT_GT(graph.median_ms, 0.05);
  if (!squeeze::test::under_sanitizer()) EXPECT_LT(graph.median_ms, 2.5);
  EXPECT_EQ(graph.samples, 3);
  int runs = 0;
  SQUEEZE_CUDA_TRY(cudaMemcpyAsync(&runs, counter.data(), sizeof runs, cudaMemcpyDeviceToHost, s));
  s.synchronize();
  EXPECT_EQ(runs, (1 + 3) + 2 + 4 * (1 + 3));
}

TEST(CoreGpu, CapturedCallsRejectBadUseAndLeaveTheStreamUsable) {
  SQUEEZE_REQUIRE_GPU();
  core::stream s;
  core::device_buffer<int> counter{1};
  counter.fill_bytes(0, s);
  const auto count = [&] { count_kernel<<<1, 32, 0, s>>>(counter.data()); };
  EXPECT_THROW(core::captured_calls(s.get(), 0, count), squeeze::invalid_argument);
  // The legacy default stream cannot be captured.
  EXPECT_THROW(core::captured_calls(nullptr, 1, [] {}), squeeze::cuda_error);
  // Work that throws during the capture: the capture ends, the error comes through, and
  // the stream runs work again.
  int calls = 0;
  EXPECT_THROW(core::captured_calls(s, 3,
                                    [&] {
                                      if (++calls == 2) throw std::runtime_error("work failed");
                                      count();
                                    }),
               std::runtime_error);
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusActive;
  SQUEEZE_CUDA_TRY(cudaStreamIsCapturing(s, &capturing));
  EXPECT_EQ(capturing, cudaStreamCaptureStatusNone);
  count();
  SQUEEZE_CHECK_LAUNCH();
  int runs = -1;
  SQUEEZE_CUDA_TRY(cudaMemcpyAsync(&runs, counter.data(), sizeof runs, cudaMemcpyDeviceToHost, s));
  s.synchronize();
  EXPECT_EQ(runs, 1);  // the captured call before the throw never ran
}

TEST(CoreGpu, EventTimerMeasuresAKnownDelay) {
  SQUEEZE_REQUIRE_GPU();
  int clock_khz = 0;
  SQUEEZE_CUDA_TRY(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
  core::stream s;
  // ~2 ms at the nominal clock (the real clock may be lower or boosted, hence the range).
  const long long cycles = 2LL * clock_khz;
  core::event_timer t{s};
  t.start();
  spin_kernel<<<1, 32, 0, s>>>(cycles);
  SQUEEZE_CHECK_LAUNCH();
  t.stop();
  const float ms = t.elapsed_ms();
  EXPECT_GT(ms, 0.5f);
  if (!squeeze::test::under_sanitizer()) EXPECT_LT(ms, 20.0f);
  const auto summary = core::time_region(s, {.warmup = 1, .repeats = 5},
                                         [&] { spin_kernel<<<1, 32, 0, s>>>(cycles / 2); });
  EXPECT_EQ(summary.samples, 5);
  EXPECT_GT(summary.median_ms, 0.25);
  EXPECT_LE(summary.min_ms, summary.median_ms);
  EXPECT_LE(summary.median_ms, summary.max_ms);
}
