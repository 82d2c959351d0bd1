// ibp on the GPU: the warp decoder and the compressed gather give exactly the rows the host
// reference encoded, for every chunk size, odd row lengths, raw and compressed rows, from
// device memory and mapped host memory; malformed rows are reported, not followed.
#include <squeeze/core/buffer.hpp>
#include <squeeze/core/cuda_error.hpp>
#include <squeeze/ibp/dataset.hpp>
#include <squeeze/ibp/gather.cuh>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "common/gpu_test.hpp"

namespace core = squeeze::core;
namespace ibp = squeeze::ibp;
using squeeze::status;
using squeeze::test::source_kind;

// Named, not anonymous: SQUEEZE_KERNEL gives kernels hidden visibility, which needs
// external linkage.
namespace ibp_decode_test {

// Rows that compress by different amounts: float32 N(0,1) features with every 7th row
// replaced by noise (stored raw), so one set holds both kinds.
std::vector<std::byte> mixed_rows(std::size_t rows, std::size_t row_bytes, std::uint64_t seed) {
  std::mt19937_64 rng{seed};
  std::normal_distribution<float> normal{0.0f, 1.0f};
  std::vector<std::byte> v(rows * row_bytes);
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t b = 0; b < row_bytes; b += 4) {
      const float f = normal(rng);
      std::uint32_t bits = 0;
      std::memcpy(&bits, &f, 4);
      if (r % 7 == 3) bits = static_cast<std::uint32_t>(rng());
      std::memcpy(v.data() + r * row_bytes + b, &bits, std::min<std::size_t>(4, row_bytes - b));
    }
  }
  return v;
}

struct device_codebook {
  core::device_buffer<std::byte> mask;
  core::device_buffer<std::byte> bitval;
  ibp::codebook_ref ref;

  explicit device_codebook(const ibp::codebook& cb)
      : mask{cb.tensor_bytes}, bitval{cb.tensor_bytes} {
    SQUEEZE_CUDA_TRY(
        cudaMemcpy(mask.data(), cb.mask.data(), cb.tensor_bytes, cudaMemcpyHostToDevice));
    SQUEEZE_CUDA_TRY(
        cudaMemcpy(bitval.data(), cb.bitval.data(), cb.tensor_bytes, cudaMemcpyHostToDevice));
    ref = {mask.data(), bitval.data(), cb.tensor_bytes, cb.chunk_bytes};
  }
};

struct gathered {
  std::vector<std::byte> out;
  status st = status::ok;
};

// Gathers `indices` from a condensed set placed in device or mapped memory.
gathered run_gather(source_kind kind, const ibp::compressed_set& set, const ibp::codebook& cb,
                    const std::vector<std::int64_t>& indices, std::size_t dst_stride,
                    std::vector<std::uint64_t> offsets) {
  device_codebook dcb{cb};
  // The stored bytes in their own exact-size allocation (memcheck sees any overrun).
  const squeeze::test::source_bytes stored{kind, set.data};
  const std::byte* data = stored.data();
  core::device_buffer<std::uint64_t> d_offsets{offsets.size()};
  core::device_buffer<std::int64_t> d_idx{indices.size()};
  core::device_buffer<std::byte> dst{indices.size() * dst_stride};
  core::device_buffer<status> d_status{1};
  SQUEEZE_CUDA_TRY(
      cudaMemcpy(d_offsets.data(), offsets.data(), offsets.size() * 8, cudaMemcpyHostToDevice));
  SQUEEZE_CUDA_TRY(
      cudaMemcpy(d_idx.data(), indices.data(), indices.size() * 8, cudaMemcpyHostToDevice));
  SQUEEZE_CUDA_TRY(cudaMemset(dst.data(), static_cast<int>(squeeze::test::poison), dst.bytes()));
  SQUEEZE_CUDA_TRY(cudaMemset(d_status.data(), 0, sizeof(status)));
  core::stream stream;
  ibp::gather_args<std::int64_t> a;
  a.dst = dst.data();
  a.dst_stride = dst_stride;
  a.data = data;
  a.data_bytes = set.data.size();
  a.offsets = d_offsets.data();
  a.rows = set.rows;
  a.indices = d_idx.data();
  a.count = indices.size();
  a.codebook = dcb.ref;
  a.status_out = d_status.data();
  ibp::gather_rows(a, stream);
  stream.synchronize();
  gathered g;
  g.out.resize(dst.bytes());
  SQUEEZE_CUDA_TRY(cudaMemcpy(g.out.data(), dst.data(), dst.bytes(), cudaMemcpyDeviceToHost));
  SQUEEZE_CUDA_TRY(cudaMemcpy(&g.st, d_status.data(), sizeof(status), cudaMemcpyDeviceToHost));
  return g;
}

// The expected output: poison, with row i = data row indices[i] where `good(i)`.
template <class Good>
std::vector<std::byte> expected(const std::vector<std::byte>& data, std::size_t row_bytes,
                                const std::vector<std::int64_t>& indices, std::size_t dst_stride,
                                Good&& good) {
  std::vector<std::byte> want(indices.size() * dst_stride, squeeze::test::poison);
  for (std::size_t i = 0; i < indices.size(); ++i) {
    if (!good(i)) continue;
    std::copy_n(data.begin() + static_cast<std::ptrdiff_t>(indices[i] * row_bytes), row_bytes,
                want.begin() + static_cast<std::ptrdiff_t>(i * dst_stride));
  }
  return want;
}

class IbpGatherTest
    : public ::testing::TestWithParam<std::tuple<source_kind, std::uint32_t, std::size_t>> {
 protected:
  void SetUp() override { SQUEEZE_REQUIRE_GPU(); }
};

}  // namespace ibp_decode_test

using namespace ibp_decode_test;

TEST_P(IbpGatherTest, MatchesTheHostReference) {
  const auto [kind, chunk, row_bytes] = GetParam();
  const std::size_t rows = 700;
  const auto data = mixed_rows(rows, row_bytes, row_bytes * 13 + chunk);
  const auto counts = ibp::count_set_bits(data, rows, static_cast<std::uint32_t>(row_bytes));
  const auto cb = ibp::sweep_threshold(data, rows, counts, chunk, 4).best;
  const auto set = ibp::compress(data, rows, cb, ibp::layout::condensed);
  std::size_t raw = 0;
  for (std::size_t r = 0; r < rows; ++r) raw += set.is_raw(r) ? 1 : 0;
  ASSERT_GT(raw, 0u);  // the set exercises raw rows
  if (row_bytes >= 256) {
    ASSERT_LT(raw, rows);  // and compressed ones (tiny rows cannot save a byte)
  }
  std::mt19937_64 rng{row_bytes};
  std::vector<std::int64_t> indices(1500);
  for (auto& x : indices) x = static_cast<std::int64_t>(rng() % rows);
  const std::size_t dst_stride = row_bytes + 3;  // misaligned output rows
  const auto g = run_gather(kind, set, cb, indices, dst_stride, set.offsets);
  EXPECT_EQ(g.st, status::ok);
  const auto want =
      expected(data, row_bytes, indices, dst_stride, [](std::size_t) { return true; });
  const long long bad = squeeze::test::first_mismatch(g.out.data(), want.data(), want.size());
  ASSERT_EQ(bad, -1) << "output row " << bad / static_cast<long long>(dst_stride) << " byte "
                     << bad % static_cast<long long>(dst_stride);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, IbpGatherTest,
    ::testing::Combine(::testing::Values(source_kind::device, source_kind::mapped_host),
                       ::testing::Values(1u, 2u, 4u, 8u),
                       ::testing::Values(std::size_t{1}, std::size_t{13}, std::size_t{256},
                                         std::size_t{1000}, std::size_t{4096})),
    [](const auto& info) {
      return std::string{squeeze::test::name(std::get<0>(info.param))} + "_C" +
             std::to_string(std::get<1>(info.param)) + "_L" +
             std::to_string(std::get<2>(info.param));
    });

TEST(IbpGather, MalformedRowsAreReportedAndNotFollowed) {
  SQUEEZE_REQUIRE_GPU();
  const std::size_t rows = 200, row_bytes = 256;
  const auto data = mixed_rows(rows, row_bytes, 77);
  const auto cb =
      ibp::sweep_threshold(data, rows, ibp::count_set_bits(data, rows, row_bytes), 4, 4).best;
  const auto set = ibp::compress(data, rows, cb, ibp::layout::condensed);
  std::vector<std::int64_t> indices(rows);
  for (std::size_t i = 0; i < rows; ++i) indices[i] = static_cast<std::int64_t>(i);

  // An index past the end: out_of_bounds, that output row untouched, the rest right.
  auto bad_idx = indices;
  bad_idx[10] = static_cast<std::int64_t>(rows);
  auto g = run_gather(source_kind::mapped_host, set, cb, bad_idx, row_bytes, set.offsets);
  EXPECT_EQ(g.st, status::out_of_bounds);
  auto want = expected(data, row_bytes, bad_idx, row_bytes, [](std::size_t i) { return i != 10; });
  EXPECT_EQ(squeeze::test::first_mismatch(g.out.data(), want.data(), want.size()), -1);

  // Offsets leaving the data: corrupt, the row untouched.
  auto offsets = set.offsets;
  offsets[rows] = set.data.size() + 64;
  g = run_gather(source_kind::device, set, cb, indices, row_bytes, offsets);
  EXPECT_EQ(g.st, status::corrupt);
  want =
      expected(data, row_bytes, indices, row_bytes, [&](std::size_t i) { return i != rows - 1; });
  EXPECT_EQ(squeeze::test::first_mismatch(g.out.data(), want.data(), want.size()), -1);

  // A compressed row cut one byte short: truncated or corrupt, other rows right.
  std::size_t victim = 0;
  while (set.is_raw(victim)) ++victim;
  offsets = set.offsets;
  offsets[victim + 1] -= 1;
  g = run_gather(source_kind::device, set, cb, {static_cast<std::int64_t>(victim)}, row_bytes,
                 offsets);
  EXPECT_TRUE(g.st == status::truncated || g.st == status::corrupt) << squeeze::to_string(g.st);
}

TEST(IbpGather, BadArgumentsThrowBeforeAnyLaunch) {
  ibp::gather_args<std::int32_t> a;
  a.count = 1;
  EXPECT_THROW(ibp::gather_rows(a, nullptr), squeeze::invalid_argument);
  a.count = 0;
  EXPECT_NO_THROW(ibp::gather_rows(a, nullptr));
}

namespace ibp_decode_test {

// One warp per row through the one-call decode(): what a user's own kernel does.
SQUEEZE_KERNEL(32)
void decode_each_row(const std::byte* data, const std::uint64_t* offsets, std::size_t rows,
                     std::uint64_t data_bytes, ibp::codebook_ref cb, std::byte* out,
                     squeeze::status* st) {
  __shared__ ibp::warp_decoder<>::TempStorage storage;
  ibp::warp_decoder<> dec{storage, cb};
  const auto readable = squeeze::xfer::readable_range::of(data, data_bytes);
  for (std::size_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const auto stored = static_cast<std::uint32_t>(offsets[r + 1] - offsets[r]);
    const status s = dec.decode(out + r * cb.tensor_bytes, data + offsets[r], stored, readable);
    if (threadIdx.x == 0 && s != status::ok) *st = s;
    __syncwarp();
  }
}

}  // namespace ibp_decode_test

TEST(IbpDecoder, OneCallDecodeInAUserKernel) {
  SQUEEZE_REQUIRE_GPU();
  const std::size_t rows = 300, row_bytes = 1000;
  const auto data = mixed_rows(rows, row_bytes, 5);
  const auto cb =
      ibp::sweep_threshold(data, rows, ibp::count_set_bits(data, rows, row_bytes), 4, 4).best;
  const auto set = ibp::compress(data, rows, cb, ibp::layout::condensed);
  const squeeze::test::source_bytes stored{source_kind::mapped_host, set.data};
  const device_codebook dcb{cb};
  core::device_buffer<std::uint64_t> offsets{set.offsets.size()};
  core::device_buffer<std::byte> out{data.size()};
  core::device_buffer<status> st{1};
  SQUEEZE_CUDA_TRY(
      cudaMemcpy(offsets.data(), set.offsets.data(), offsets.bytes(), cudaMemcpyHostToDevice));
  SQUEEZE_CUDA_TRY(cudaMemset(out.data(), 0xA5, out.bytes()));
  SQUEEZE_CUDA_TRY(cudaMemset(st.data(), 0, sizeof(status)));
  decode_each_row<<<64, 32>>>(stored.data(), offsets.data(), rows, set.data.size(), dcb.ref,
                              out.data(), st.data());
  SQUEEZE_CHECK_LAUNCH();
  std::vector<std::byte> back(data.size());
  SQUEEZE_CUDA_TRY(cudaMemcpy(back.data(), out.data(), back.size(), cudaMemcpyDeviceToHost));
  status s{};
  SQUEEZE_CUDA_TRY(cudaMemcpy(&s, st.data(), sizeof s, cudaMemcpyDeviceToHost));
  EXPECT_EQ(s, status::ok);
  EXPECT_EQ(squeeze::test::first_mismatch(back.data(), data.data(), data.size()), -1);
}
