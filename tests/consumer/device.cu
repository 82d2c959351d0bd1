// SPDX-License-Identifier: Apache-2.0
// The .cuh headers through nvcc, as a consumer's kernel uses them: the static_asserts state
// what a kernel relies on, and the tests run a consumer's own kernel and launch on a GPU
// (skipped where there is none, as in CI).
#include <gtest/gtest.h>

#include <squeeze/squeeze.cuh>

#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>
#include <vector>

static_assert(std::is_trivially_copyable_v<squeeze::xfer::gather_args<std::int64_t>>,
              "argument structs are passed to kernels by value");
static_assert(squeeze::xfer::gather_policy_like<squeeze::xfer::gather_policy>);
static_assert(squeeze::roast::hopper_gemm_tuning<squeeze::roast::hopper_gemm_policy>);
static_assert(squeeze::core::compiled_arch == 0 || squeeze::core::compiled_arch >= 80,
              "squeeze builds for sm_80 or newer");

SQUEEZE_KERNEL(256) void consumer_gather(squeeze::xfer::gather_args<std::int64_t> args) {
  squeeze::xfer::warp_gather_rows(args, 0, 1);
}

void consumer_launch(const squeeze::xfer::gather_args<std::int32_t>& args, cudaStream_t stream) {
  squeeze::xfer::gather_rows(args, stream);
}

namespace {

namespace core = squeeze::core;

/// rows x row_bytes of distinct bytes, and the gather job of `ids` into `out`.
struct gather_setup {
  static constexpr std::size_t rows = 64, row_bytes = 200;
  std::vector<std::byte> table = [] {
    std::vector<std::byte> t(rows * row_bytes);
    for (std::size_t i = 0; i < t.size(); ++i) t[i] = static_cast<std::byte>(i * 7 + i / 251);
    return t;
  }();
};

template <class Index>
std::vector<std::byte> run_gather(const std::vector<Index>& ids, bool own_kernel,
                                  squeeze::status* status_seen) {
  const gather_setup g;
  core::stream stream;
  core::device_buffer<std::byte> src{g.table.size()}, dst{ids.size() * g.row_bytes};
  core::device_buffer<Index> d_ids{ids.size()};
  core::device_buffer<squeeze::status> status{1};
  src.copy_from(std::span<const std::byte>{g.table}, stream);
  d_ids.copy_from(std::span<const Index>{ids}, stream);
  dst.fill_bytes(0xA5, stream);
  status.fill_bytes(0, stream);
  squeeze::xfer::gather_args<Index> args;
  args.dst = dst.data();
  args.dst_stride = g.row_bytes;
  args.src = src.data();
  args.src_stride = g.row_bytes;
  args.src_rows = g.rows;
  args.row_bytes = g.row_bytes;
  args.indices = d_ids.data();
  args.count = ids.size();
  args.status_out = status.data();
  if constexpr (std::is_same_v<Index, std::int64_t>) {
    if (own_kernel) consumer_gather<<<1, 32, 0, stream>>>(args);  // row 0 only
  } else {
    consumer_launch(args, stream);
  }
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  std::vector<std::byte> out(dst.size());
  std::vector<squeeze::status> st(1);
  dst.copy_to(std::span<std::byte>{out}, stream);
  status.copy_to(std::span<squeeze::status>{st}, stream);
  stream.synchronize();
  *status_seen = st[0];
  return out;
}

bool have_gpu() {
  return squeeze::core::detect_devices().present();
}

}  // namespace

// A consumer's kernel calling warp_gather_rows gathers the row it was given.
TEST(ConsumerDevice, OwnKernelGathersARow) {
  if (!have_gpu()) GTEST_SKIP() << squeeze::core::detect_devices().message();
  squeeze::status st{};
  const std::vector<std::int64_t> ids{17, 3};
  const std::vector<std::byte> out = run_gather(ids, true, &st);
  EXPECT_EQ(st, squeeze::status::ok);
  const gather_setup g;
  for (std::size_t b = 0; b < g.row_bytes; ++b)
    ASSERT_EQ(out[b], g.table[17 * g.row_bytes + b]) << b;
  for (std::size_t b = g.row_bytes; b < out.size(); ++b) ASSERT_EQ(out[b], std::byte{0xA5}) << b;
}

// The library's launch from a consumer's translation unit: every row, and a bad index reported.
TEST(ConsumerDevice, LaunchGathersRowsAndReportsABadIndex) {
  if (!have_gpu()) GTEST_SKIP() << squeeze::core::detect_devices().message();
  const gather_setup g;
  squeeze::status st{};
  const std::vector<std::int32_t> ids{5, 63, 0, 5, 40};
  const std::vector<std::byte> out = run_gather(ids, false, &st);
  EXPECT_EQ(st, squeeze::status::ok);
  for (std::size_t r = 0; r < ids.size(); ++r) {
    for (std::size_t b = 0; b < g.row_bytes; ++b) {
      ASSERT_EQ(out[r * g.row_bytes + b], g.table[ids[r] * g.row_bytes + b]) << r << ", " << b;
    }
  }
  run_gather(std::vector<std::int32_t>{1, 64}, false, &st);
  EXPECT_EQ(st, squeeze::status::out_of_bounds);
}
