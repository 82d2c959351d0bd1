// SPDX-License-Identifier: Apache-2.0
// xfer::gather_rows on the GPU: random indices (repeats included), odd row sizes and
// strides, from mapped host memory and device memory, several index types; outputs
// poisoned first and compared byte for byte; bad indices reported, not followed.
#include <squeeze/core/buffer.hpp>
#include <squeeze/core/cuda_error.hpp>
#include <squeeze/xfer/gather.cuh>
#include <squeeze/xfer/mapped_memory.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <tuple>
#include <type_traits>
#include <vector>

#include "common/gpu_test.hpp"

namespace core = squeeze::core;
namespace xfer = squeeze::xfer;
using squeeze::status;

// Named, not anonymous: SQUEEZE_KERNEL gives kernels hidden visibility, which needs
// external linkage.
namespace gather_test {

using squeeze::test::source_kind;

struct gather_case {
  std::size_t row_bytes;
  std::size_t src_pad;  // src_stride = row_bytes + src_pad
  std::size_t dst_pad;  // dst_stride = row_bytes + dst_pad
};

inline void PrintTo(const gather_case& c, std::ostream* os) {
  *os << "row " << c.row_bytes << " B, src pad " << c.src_pad << ", dst pad " << c.dst_pad;
}

template <class Index>
struct gather_run {
  std::vector<std::byte> got;
  status st = status::ok;
};

// Gathers `indices` from a fresh random table and returns the output and status.
template <class Index, class Policy = xfer::gather_policy>
gather_run<Index> run_gather(source_kind kind, const gather_case& c, std::size_t rows,
                             const std::vector<Index>& indices, std::vector<std::byte>& table) {
  const std::size_t src_stride = c.row_bytes + c.src_pad;
  const std::size_t dst_stride = c.row_bytes + c.dst_pad;
  // The table starts 3 bytes past an allocation's start, so rows are misaligned even when
  // the stride is a multiple of 16.
  constexpr std::size_t skew = 3;
  const squeeze::test::source_bytes source{kind, rows * src_stride + skew,
                                           rows * 7919 + c.row_bytes};
  const std::byte* src = source.data() + skew;
  table.assign(source.host().begin() + skew, source.host().end());

  core::device_buffer<Index> d_indices{indices.size()};
  core::device_buffer<std::byte> dst{indices.size() * dst_stride + 64};
  core::device_buffer<status> d_status{1};
  SQUEEZE_CUDA_TRY(cudaMemcpy(d_indices.data(), indices.data(), indices.size() * sizeof(Index),
                              cudaMemcpyHostToDevice));
  SQUEEZE_CUDA_TRY(cudaMemset(dst.data(), static_cast<int>(squeeze::test::poison), dst.bytes()));
  SQUEEZE_CUDA_TRY(cudaMemset(d_status.data(), 0, sizeof(status)));
  SQUEEZE_CUDA_TRY(cudaDeviceSynchronize());  // a non-blocking stream runs the gather

  core::stream stream;
  xfer::gather_args<Index> args;
  args.dst = dst.data();
  args.dst_stride = dst_stride;
  args.src = src;
  args.src_stride = src_stride;
  args.src_rows = rows;
  args.row_bytes = c.row_bytes;
  args.indices = d_indices.data();
  args.count = indices.size();
  args.status_out = d_status.data();
  xfer::gather_rows<Policy>(args, stream);
  stream.synchronize();

  gather_run<Index> run;
  run.got.resize(dst.bytes());
  SQUEEZE_CUDA_TRY(cudaMemcpy(run.got.data(), dst.data(), dst.bytes(), cudaMemcpyDeviceToHost));
  SQUEEZE_CUDA_TRY(cudaMemcpy(&run.st, d_status.data(), sizeof(status), cudaMemcpyDeviceToHost));
  return run;
}

// The host reference: poison everywhere, row i = table row indices[i] where valid.
template <class Index>
std::vector<std::byte> reference(const gather_case& c, std::size_t rows,
                                 const std::vector<Index>& indices,
                                 const std::vector<std::byte>& table, std::size_t out_bytes) {
  std::vector<std::byte> want(out_bytes, squeeze::test::poison);
  const std::size_t src_stride = c.row_bytes + c.src_pad;
  const std::size_t dst_stride = c.row_bytes + c.dst_pad;
  for (std::size_t i = 0; i < indices.size(); ++i) {
    const auto idx = indices[i];
    if constexpr (std::is_signed_v<Index>) {
      if (idx < 0) continue;
    }
    if (static_cast<std::size_t>(idx) >= rows) continue;
    std::copy_n(
        table.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(idx) * src_stride),
        c.row_bytes, want.begin() + static_cast<std::ptrdiff_t>(i * dst_stride));
  }
  return want;
}

template <class Index>
std::vector<Index> random_indices(std::size_t count, std::size_t rows, std::uint64_t seed) {
  std::mt19937_64 rng{seed};
  std::vector<Index> v(count);
  for (auto& x : v) x = static_cast<Index>(rng() % rows);
  return v;
}

class GatherTest : public ::testing::TestWithParam<std::tuple<source_kind, gather_case>> {
 protected:
  void SetUp() override { SQUEEZE_REQUIRE_GPU(); }

  template <class Index>
  void check_random(std::size_t rows, std::size_t count) {
    const auto [kind, c] = GetParam();
    const auto indices = random_indices<Index>(count, rows, c.row_bytes * 31 + count);
    std::vector<std::byte> table;
    const auto run = run_gather(kind, c, rows, indices, table);
    EXPECT_EQ(run.st, status::ok);
    const auto want = reference(c, rows, indices, table, run.got.size());
    const long long bad = squeeze::test::first_mismatch(run.got.data(), want.data(), want.size());
    ASSERT_EQ(bad, -1) << "row " << (bad / static_cast<long long>(c.row_bytes + c.dst_pad))
                       << " byte " << (bad % static_cast<long long>(c.row_bytes + c.dst_pad));
  }
};

// A policy far from the default: one row in flight, two warps per block.
struct one_row_policy : xfer::gather_policy {
  static constexpr int rows_in_flight = 1;
  static constexpr int block_threads = 64;
};

}  // namespace gather_test

using namespace gather_test;

TEST_P(GatherTest, RandomIndicesInt32) {
  check_random<std::int32_t>(3000, 5003);
}
TEST_P(GatherTest, RandomIndicesInt64) {
  check_random<std::int64_t>(1000, 777);
}
TEST_P(GatherTest, RandomIndicesUint32) {
  check_random<std::uint32_t>(5, 100);
}

INSTANTIATE_TEST_SUITE_P(
    RowShapes, GatherTest,
    ::testing::Combine(
        ::testing::Values(source_kind::device, source_kind::mapped_host),
        ::testing::Values(gather_case{1, 0, 0}, gather_case{3, 0, 5}, gather_case{16, 0, 0},
                          gather_case{17, 13, 0}, gather_case{64, 0, 0}, gather_case{100, 1, 3},
                          gather_case{255, 0, 0}, gather_case{256, 0, 0}, gather_case{257, 128, 7},
                          gather_case{481, 0, 0}, gather_case{482, 3, 0}, gather_case{500, 0, 1},
                          gather_case{1024, 0, 0}, gather_case{1027, 5, 9}, gather_case{4095, 1, 0},
                          gather_case{4096, 0, 0}, gather_case{5000, 16, 16})),
    [](const auto& info) {
      const auto& c = std::get<1>(info.param);
      return std::string{std::get<0>(info.param) == source_kind::device ? "Device" : "Mapped"} +
             "_row" + std::to_string(c.row_bytes) + "_srcpad" + std::to_string(c.src_pad) +
             "_dstpad" + std::to_string(c.dst_pad);
    });

TEST(Gather, OutOfRangeIndicesAreReportedAndNotFollowed) {
  SQUEEZE_REQUIRE_GPU();
  const gather_case c{200, 8, 0};
  const std::size_t rows = 64;
  auto indices = random_indices<std::int64_t>(1000, rows, 99);
  indices[3] = static_cast<std::int64_t>(rows);  // one past the end
  indices[500] = -1;                             // negative
  indices[999] = std::int64_t{1} << 40;          // far away
  std::vector<std::byte> table;
  const auto run = run_gather(source_kind::mapped_host, c, rows, indices, table);
  EXPECT_EQ(run.st, status::out_of_bounds);
  const auto want = reference(c, rows, indices, table, run.got.size());
  // Bad rows stay poisoned (the reference skips them); every good row is right.
  EXPECT_EQ(squeeze::test::first_mismatch(run.got.data(), want.data(), want.size()), -1);
}

TEST(Gather, FewRowsPerWarpPolicyGivesTheSameBytes) {
  SQUEEZE_REQUIRE_GPU();
  const gather_case c{129, 3, 0};
  const auto indices = random_indices<std::int32_t>(999, 500, 5);
  std::vector<std::byte> table;
  const auto run =
      run_gather<std::int32_t, one_row_policy>(source_kind::device, c, 500, indices, table);
  EXPECT_EQ(run.st, status::ok);
  const auto want = reference(c, 500, indices, table, run.got.size());
  EXPECT_EQ(squeeze::test::first_mismatch(run.got.data(), want.data(), want.size()), -1);
}

TEST(Gather, BadArgumentsThrowBeforeAnyLaunch) {
  // Validation needs no device: it runs before the launch.
  std::byte dummy[64];
  std::int32_t idx[1] = {0};
  xfer::gather_args<std::int32_t> a;
  a.dst = dummy;
  a.dst_stride = 32;
  a.src = dummy;
  a.src_stride = 32;
  a.src_rows = 1;
  a.row_bytes = 32;
  a.indices = idx;
  a.count = 1;
  auto bad = a;
  bad.dst = nullptr;
  EXPECT_THROW(xfer::gather_rows(bad, nullptr), squeeze::invalid_argument);
  bad = a;
  bad.dst_stride = 31;
  try {
    xfer::gather_rows(bad, nullptr);
    FAIL() << "no exception";
  } catch (const squeeze::invalid_argument& e) {
    EXPECT_NE(std::string{e.what()}.find("dst_stride must be at least row_bytes"),
              std::string::npos);
  }
  bad = a;
  bad.src_stride = 8;
  EXPECT_THROW(xfer::gather_rows(bad, nullptr), squeeze::invalid_argument);
  bad = a;
  bad.indices = nullptr;
  EXPECT_THROW(xfer::gather_rows(bad, nullptr), squeeze::invalid_argument);
  bad = a;
  bad.row_bytes = 0;
  EXPECT_THROW(xfer::gather_rows(bad, nullptr), squeeze::invalid_argument);
  bad.count = 0;
  EXPECT_NO_THROW(xfer::gather_rows(bad, nullptr));  // nothing to do is not an error
}
