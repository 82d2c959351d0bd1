// SPDX-License-Identifier: Apache-2.0
// ibp preprocessing and compression on the GPU: bit counters, stored sizes and the
// condensed compressed bytes are identical to the host reference, for every chunk size
// and odd row lengths, from device memory and mapped host memory; and what the GPU
// compressed, the GPU gather decodes back to the input.
#include <squeeze/core/buffer.hpp>
#include <squeeze/core/cuda_error.hpp>
#include <squeeze/ibp/compress.cuh>
#include <squeeze/ibp/dataset.hpp>
#include <squeeze/ibp/gather.cuh>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "common/gpu_test.hpp"

namespace core = squeeze::core;
namespace ibp = squeeze::ibp;
using squeeze::test::source_kind;

namespace ibp_compress_test {

// int32 ids and float32 features alternating by column: some bits invariant, some not.
std::vector<std::byte> rows_of(std::size_t rows, std::size_t row_bytes, std::uint64_t seed) {
  std::mt19937_64 rng{seed};
  std::normal_distribution<float> normal{0.0f, 1.0f};
  std::vector<std::byte> v(rows * row_bytes);
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t b = 0; b < row_bytes; b += 4) {
      std::uint32_t bits = 0;
      if ((b / 4) % 2 == 0) {
        const float f = normal(rng);
        std::memcpy(&bits, &f, 4);
      } else {
        bits = static_cast<std::uint32_t>(rng() % 1000);
      }
      if (r % 11 == 5) bits = static_cast<std::uint32_t>(rng());  // some rows stay raw
      std::memcpy(v.data() + r * row_bytes + b, &bits, std::min<std::size_t>(4, row_bytes - b));
    }
  }
  return v;
}

class IbpCompressTest
    : public ::testing::TestWithParam<std::tuple<source_kind, std::uint32_t, std::size_t>> {
 protected:
  void SetUp() override { SQUEEZE_REQUIRE_GPU(); }
};

}  // namespace ibp_compress_test

using namespace ibp_compress_test;

TEST_P(IbpCompressTest, IdenticalToTheHostReference) {
  const auto [kind, chunk, row_bytes] = GetParam();
  // Rows longer than the 4 KiB shared workspace are encoded with global atomics.
  const std::size_t rows = std::min<std::size_t>(900, (std::size_t{8} << 20) / row_bytes);
  const auto data = rows_of(rows, row_bytes, row_bytes * 31 + chunk);
  // The rows in their own exact-size allocation, device or mapped.
  const squeeze::test::source_bytes source{kind, data};
  const std::byte* src = source.data();
  core::stream stream;
  const auto l = static_cast<std::uint32_t>(row_bytes);

  // Preprocessing: counters.
  const auto counts = ibp::count_set_bits(src, rows, l, stream);
  ASSERT_EQ(counts, ibp::count_set_bits(std::span<const std::byte>{data}, rows, l));

  // The threshold sweep on the GPU keeps the same codebook as the host sweep.
  const ibp::sweep_result host_sweep = ibp::sweep_threshold(data, rows, counts, chunk, 4);
  const ibp::sweep_result gpu_sweep =
      ibp::sweep_threshold_on_gpu(src, rows, counts, chunk, 4, stream);
  EXPECT_EQ(gpu_sweep.threshold, host_sweep.threshold);
  EXPECT_EQ(gpu_sweep.stored_bytes, host_sweep.stored_bytes);
  EXPECT_EQ(gpu_sweep.best.mask, host_sweep.best.mask);
  EXPECT_EQ(gpu_sweep.best.bitval, host_sweep.best.bitval);
  const ibp::codebook& cb = host_sweep.best;
  const ibp::device_codebook on_gpu{cb, stream};
  const ibp::codebook_ref dcb = on_gpu.ref();

  // Stored sizes and their total.
  core::device_buffer<std::uint64_t> sizes{rows};
  core::device_buffer<unsigned long long> total{1};
  SQUEEZE_CUDA_TRY(cudaMemsetAsync(total.data(), 0, sizeof(unsigned long long), stream));
  ibp::stored_sizes(src, rows, dcb, sizes.data(), total.data(), stream);
  std::vector<std::uint64_t> got_sizes(rows);
  sizes.copy_to(std::span<std::uint64_t>{got_sizes}, stream);
  unsigned long long got_total = 0;
  SQUEEZE_CUDA_TRY(
      cudaMemcpyAsync(&got_total, total.data(), sizeof got_total, cudaMemcpyDeviceToHost, stream));
  stream.synchronize();
  std::uint64_t want_total = 0;
  for (std::size_t r = 0; r < rows; ++r) {
    const std::uint32_t want = ibp::stored_bytes(data.data() + r * row_bytes, cb.ref());
    ASSERT_EQ(got_sizes[r], want) << "row " << r;
    want_total += want;
  }
  EXPECT_EQ(got_total, want_total);

  // Compression: bit for bit the host's condensed set.
  const ibp::device_set set = ibp::compress_condensed(src, rows, dcb, stream);
  const ibp::compressed_set want = ibp::compress(data, rows, cb, ibp::layout::condensed);
  std::vector<std::uint64_t> offsets(rows + 1);
  set.offsets.copy_to(std::span<std::uint64_t>{offsets}, stream);
  std::vector<std::byte> bytes(set.data_bytes);
  set.data.copy_to(std::span<std::byte>{bytes}, stream);
  stream.synchronize();
  ASSERT_EQ(offsets, want.offsets);
  ASSERT_EQ(bytes.size(), want.data.size());
  const long long bad = squeeze::test::first_mismatch(bytes.data(), want.data.data(), bytes.size());
  ASSERT_EQ(bad, -1) << "compressed byte " << bad;

  // And the GPU gather decodes it back.
  std::vector<std::int32_t> idx(rows);
  for (std::size_t r = 0; r < rows; ++r) idx[r] = static_cast<std::int32_t>(rows - 1 - r);
  core::device_buffer<std::int32_t> d_idx{rows};
  d_idx.copy_from(std::span<const std::int32_t>{idx}, stream);
  core::device_buffer<std::byte> out{rows * row_bytes};
  out.fill_bytes(0xA5, stream);
  ibp::gather_args<std::int32_t> a;
  a.dst = out.data();
  a.dst_stride = row_bytes;
  a.data = set.data.data();
  a.data_bytes = set.data_bytes;
  a.offsets = set.offsets.data();
  a.rows = rows;
  a.indices = d_idx.data();
  a.count = rows;
  a.codebook = dcb;
  ibp::gather_rows(a, stream);
  std::vector<std::byte> back(rows * row_bytes);
  out.copy_to(std::span<std::byte>{back}, stream);
  stream.synchronize();
  for (std::size_t r = 0; r < rows; ++r) {
    ASSERT_TRUE(std::equal(back.begin() + static_cast<std::ptrdiff_t>(r * row_bytes),
                           back.begin() + static_cast<std::ptrdiff_t>((r + 1) * row_bytes),
                           data.begin() + static_cast<std::ptrdiff_t>(idx[r] * row_bytes)))
        << "row " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, IbpCompressTest,
    ::testing::Combine(::testing::Values(source_kind::device, source_kind::mapped_host),
                       ::testing::Values(1u, 2u, 4u, 8u),
                       ::testing::Values(std::size_t{1}, std::size_t{13}, std::size_t{256},
                                         std::size_t{1000}, std::size_t{4096}, std::size_t{4099},
                                         std::size_t{65536})),
    [](const auto& info) {
      return std::string{squeeze::test::name(std::get<0>(info.param))} + "_C" +
             std::to_string(std::get<1>(info.param)) + "_L" +
             std::to_string(std::get<2>(info.param));
    });

TEST(IbpCompress, RejectsEmptyRowsAndNullData) {
  const std::byte* rows = nullptr;
  EXPECT_THROW(ibp::compress_condensed(rows, 0, ibp::codebook_ref{nullptr, nullptr, 0, 4}, nullptr),
               squeeze::invalid_argument);
  EXPECT_THROW(
      ibp::compress_condensed(rows, 5, ibp::codebook_ref{nullptr, nullptr, 64, 4}, nullptr),
      squeeze::invalid_argument);
}
