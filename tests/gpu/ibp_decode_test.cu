// SPDX-License-Identifier: Apache-2.0
// ibp on the GPU: the warp decoder and the compressed gather give exactly the rows the host
// reference encoded, for every chunk size, odd row lengths, raw and compressed rows, from
// device memory and mapped host memory; malformed rows are reported, not followed.
#include <squeeze/core/buffer.hpp>
#include <squeeze/core/cuda_error.hpp>
#include <squeeze/ibp/dataset.hpp>
#include <squeeze/ibp/gather.cuh>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "common/gpu_test.hpp"
#include "common/ibp_test.hpp"

namespace core = squeeze::core;
namespace ibp = squeeze::ibp;
using squeeze::status;
using squeeze::test::source_kind;

// Named, not anonymous: SQUEEZE_KERNEL gives kernels hidden visibility, which needs
// external linkage.
namespace ibp_decode_test {

using squeeze::ibp::device_codebook;
using squeeze::test::mixed_rows;

struct gathered {
  std::vector<std::byte> out;
  status st = status::ok;
};

// Gathers `indices` from a set (either layout) placed in device or mapped memory; a
// condensed set reads `offsets` (the set's own, or tampered ones).
template <class Policy = ibp::gather_policy>
gathered run_gather(source_kind kind, const ibp::compressed_set& set, const ibp::codebook& cb,
                    const std::vector<std::int64_t>& indices, std::size_t dst_stride,
                    std::vector<std::uint64_t> offsets) {
  device_codebook dcb{cb, nullptr};
  const squeeze::test::placed_set placed{kind, set, offsets};
  core::device_buffer<std::int64_t> d_idx{indices.size()};
  core::device_buffer<std::byte> dst{indices.size() * dst_stride};
  core::device_buffer<status> d_status{1};
  SQUEEZE_CUDA_TRY(
      cudaMemcpy(d_idx.data(), indices.data(), indices.size() * 8, cudaMemcpyHostToDevice));
  SQUEEZE_CUDA_TRY(cudaMemset(dst.data(), static_cast<int>(squeeze::test::poison), dst.bytes()));
  SQUEEZE_CUDA_TRY(cudaMemset(d_status.data(), 0, sizeof(status)));
  SQUEEZE_CUDA_TRY(cudaDeviceSynchronize());  // a non-blocking stream runs the gather
  core::stream stream;
  auto a = placed.args<std::int64_t>(dcb.ref());
  a.dst = dst.data();
  a.dst_stride = dst_stride;
  a.indices = d_idx.data();
  a.count = indices.size();
  a.status_out = d_status.data();
  ibp::gather_rows<Policy>(a, stream);
  stream.synchronize();
  gathered g;
  g.out.resize(dst.bytes());
  SQUEEZE_CUDA_TRY(cudaMemcpy(g.out.data(), dst.data(), dst.bytes(), cudaMemcpyDeviceToHost));
  SQUEEZE_CUDA_TRY(cudaMemcpy(&g.st, d_status.data(), sizeof(status), cudaMemcpyDeviceToHost));
  return g;
}

template <class Good>
std::vector<std::byte> expected(const std::vector<std::byte>& data, std::size_t row_bytes,
                                const std::vector<std::int64_t>& indices, std::size_t dst_stride,
                                Good&& good) {
  return squeeze::test::expected_rows(data, row_bytes, indices, dst_stride, good);
}

class IbpGatherTest : public ::testing::TestWithParam<
                          std::tuple<source_kind, std::uint32_t, std::size_t, ibp::layout>> {
 protected:
  void SetUp() override { SQUEEZE_REQUIRE_GPU(); }
};

}  // namespace ibp_decode_test

using namespace ibp_decode_test;

TEST_P(IbpGatherTest, MatchesTheHostReference) {
  const auto [kind, chunk, row_bytes, layout] = GetParam();
  // Rows longer than the decoder's 4 KiB workspace are streamed through it.
  const std::size_t rows = std::min<std::size_t>(700, (std::size_t{8} << 20) / row_bytes);
  const auto data = mixed_rows(rows, row_bytes, row_bytes * 13 + chunk);
  const auto counts = ibp::count_set_bits(data, rows, static_cast<std::uint32_t>(row_bytes));
  const auto cb = ibp::sweep_threshold(data, rows, counts, chunk, 4).best;
  const auto set = ibp::compress(data, rows, cb, layout);
  std::size_t raw = 0;
  for (std::size_t r = 0; r < rows; ++r) raw += set.is_raw(r) ? 1 : 0;
  ASSERT_GT(raw, 0u);  // the set exercises raw rows
  if (row_bytes >= 256) {
    ASSERT_LT(raw, rows);  // and compressed ones (tiny rows cannot save a byte)
  }
  std::mt19937_64 rng{row_bytes};
  std::vector<std::int64_t> indices(std::min<std::size_t>(1500, 2 * rows));
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
                                         std::size_t{1000}, std::size_t{4096}, std::size_t{4099},
                                         std::size_t{20000}, std::size_t{65536}),
                       ::testing::Values(ibp::layout::condensed, ibp::layout::in_place)),
    [](const auto& info) {
      return std::string{squeeze::test::name(std::get<0>(info.param))} + "_C" +
             std::to_string(std::get<1>(info.param)) + "_L" +
             std::to_string(std::get<2>(info.param)) +
             (std::get<3>(info.param) == ibp::layout::in_place ? "_in_place" : "_condensed");
    });

TEST(IbpGather, MalformedRowsAreReportedAndNotFollowed) {
  SQUEEZE_REQUIRE_GPU();
  const std::size_t rows = 200, row_bytes = 256;
  const auto data = mixed_rows(rows, row_bytes, 77);
  const auto cb = squeeze::test::best_codebook(data, rows, row_bytes, 4);
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

namespace ibp_decode_test {

template <std::uint32_t Workspace>
struct small_workspace {
  static constexpr int block_threads = 128;
  static constexpr int min_blocks_per_sm = 5;
  struct decode {
    static constexpr std::uint32_t workspace_bytes = Workspace;
    static constexpr bool async_loads = false;
    static constexpr unsigned prefetch_waves = 1;
  };
};

}  // namespace ibp_decode_test

// A 1 KiB workspace streams 4 KiB rows in both layouts; a 256-byte one (too small to
// stream) reports them as invalid_argument and leaves them untouched.
TEST(IbpGather, WorkspaceSizeDecidesBetweenStreamingAndReporting) {
  SQUEEZE_REQUIRE_GPU();
  const std::size_t rows = 300, row_bytes = 4096;
  const auto data = mixed_rows(rows, row_bytes, 31);
  const auto cb = squeeze::test::best_codebook(data, rows, row_bytes, 2);
  std::vector<std::int64_t> indices(rows);
  for (std::size_t i = 0; i < rows; ++i) indices[i] = static_cast<std::int64_t>(rows - 1 - i);
  for (const auto layout : {ibp::layout::condensed, ibp::layout::in_place}) {
    const auto set = ibp::compress(data, rows, cb, layout);
    auto g = run_gather<small_workspace<1024>>(source_kind::mapped_host, set, cb, indices,
                                               row_bytes, set.offsets);
    EXPECT_EQ(g.st, status::ok);
    auto want = expected(data, row_bytes, indices, row_bytes, [](std::size_t) { return true; });
    EXPECT_EQ(squeeze::test::first_mismatch(g.out.data(), want.data(), want.size()), -1);

    g = run_gather<small_workspace<256>>(source_kind::device, set, cb, indices, row_bytes,
                                         set.offsets);
    EXPECT_EQ(g.st, status::invalid_argument);
    // Every row is stored in more than 256 bytes: none is written.
    want = expected(data, row_bytes, indices, row_bytes, [](std::size_t) { return false; });
    EXPECT_EQ(squeeze::test::first_mismatch(g.out.data(), want.data(), want.size()), -1);
  }
}

// An in-place row whose participation bits describe a stream that does not fit its slot
// is corrupt: reported, its output row untouched, the other rows right.
TEST(IbpGather, InPlaceRowsThatOverflowTheirSlotAreReported) {
  SQUEEZE_REQUIRE_GPU();
  const std::size_t rows = 64, row_bytes = 512;
  const auto data = mixed_rows(rows, row_bytes, 41);
  const auto cb = squeeze::test::best_codebook(data, rows, row_bytes, 4);
  auto set = ibp::compress(data, rows, cb, ibp::layout::in_place);
  std::size_t victim = 0;
  while (set.is_raw(victim)) ++victim;
  // No chunk participates: every chunk stored whole, longer than the slot.
  const std::size_t pbytes = (cb.ref().chunks() + 7) / 8;
  std::fill_n(set.data.begin() + static_cast<std::ptrdiff_t>(victim * row_bytes), pbytes,
              std::byte{0});
  std::vector<std::int64_t> indices(rows);
  for (std::size_t i = 0; i < rows; ++i) indices[i] = static_cast<std::int64_t>(i);
  const auto g = run_gather(source_kind::mapped_host, set, cb, indices, row_bytes, {});
  EXPECT_EQ(g.st, status::corrupt);
  const auto want =
      expected(data, row_bytes, indices, row_bytes, [&](std::size_t i) { return i != victim; });
  EXPECT_EQ(squeeze::test::first_mismatch(g.out.data(), want.data(), want.size()), -1);
}

// Clustered sets (one codebook per cluster, ids packed per row) decode exactly in both
// layouts; an id past the last cluster is corrupt and its row untouched.
TEST(IbpGather, ClusteredSetsDecodeWithEachRowsCodebook) {
  SQUEEZE_REQUIRE_GPU();
  const std::size_t rows = 2000, row_bytes = 300;
  const auto data = squeeze::test::grouped_rows(rows, row_bytes, 5, 51);
  ibp::cluster_options opt;
  opt.clusters = 5;
  opt.seed = 3;
  const ibp::cluster_set clusters = ibp::make_clusters(data, rows, row_bytes, 4, opt);
  ASSERT_EQ(clusters.id_bits, 3u);
  std::vector<std::int64_t> indices(3000);
  std::mt19937_64 rng{8};
  for (auto& x : indices) x = static_cast<std::int64_t>(rng() % rows);
  for (const auto layout : {ibp::layout::condensed, ibp::layout::in_place}) {
    const auto set = ibp::compress(data, rows, clusters, layout);
    auto ids = clusters.ids;
    std::size_t victim = 0;
    if (layout == ibp::layout::in_place) {  // row `victim` gets id 7 (only 5 clusters)
      victim = static_cast<std::size_t>(indices[17]);
      for (unsigned b = 0; b < 3; ++b) ids[(victim * 3 + b) / 32] |= 1u << ((victim * 3 + b) % 32);
    }
    const squeeze::test::device_clusters dc{clusters, ids};
    const squeeze::test::placed_set placed{source_kind::mapped_host, set};
    core::device_buffer<std::int64_t> d_idx{indices.size()};
    core::device_buffer<std::byte> dst{indices.size() * row_bytes};
    core::device_buffer<status> st{1};
    SQUEEZE_CUDA_TRY(
        cudaMemcpy(d_idx.data(), indices.data(), d_idx.bytes(), cudaMemcpyHostToDevice));
    SQUEEZE_CUDA_TRY(cudaMemset(dst.data(), static_cast<int>(squeeze::test::poison), dst.bytes()));
    SQUEEZE_CUDA_TRY(cudaMemset(st.data(), 0, sizeof(status)));
    auto a = placed.args<std::int64_t>({});
    a.clusters = dc.ref;
    a.dst = dst.data();
    a.dst_stride = row_bytes;
    a.indices = d_idx.data();
    a.count = indices.size();
    a.status_out = st.data();
    SQUEEZE_CUDA_TRY(cudaDeviceSynchronize());  // a non-blocking stream runs the gather
    core::stream stream;
    ibp::gather_rows(a, stream);
    stream.synchronize();
    std::vector<std::byte> got(dst.bytes());
    status s{};
    SQUEEZE_CUDA_TRY(cudaMemcpy(got.data(), dst.data(), got.size(), cudaMemcpyDeviceToHost));
    SQUEEZE_CUDA_TRY(cudaMemcpy(&s, st.data(), sizeof s, cudaMemcpyDeviceToHost));
    const bool tampered = layout == ibp::layout::in_place;
    EXPECT_EQ(s, tampered ? status::corrupt : status::ok);
    const auto want = expected(data, row_bytes, indices, row_bytes, [&](std::size_t i) {
      return !tampered || static_cast<std::size_t>(indices[i]) != victim;
    });
    EXPECT_EQ(squeeze::test::first_mismatch(got.data(), want.data(), want.size()), -1);
  }
}

TEST(IbpGather, BadArgumentsThrowBeforeAnyLaunch) {
  ibp::gather_args<std::int32_t> a;
  a.count = 1;
  EXPECT_THROW(ibp::gather_rows(a, nullptr), squeeze::invalid_argument);
  a.count = 0;
  EXPECT_NO_THROW(ibp::gather_rows(a, nullptr));
  // An in-place set whose data cannot hold its rows.
  std::byte one{};
  std::uint32_t raw = 0;
  std::int32_t idx = 0;
  std::byte mask[4] = {}, bitval[4] = {};
  a = {};
  a.dst = &one;
  a.dst_stride = 4;
  a.kind = ibp::layout::in_place;
  a.data = &one;
  a.data_bytes = 7;
  a.raw = &raw;
  a.rows = 2;
  a.indices = &idx;
  a.count = 1;
  a.codebook = {mask, bitval, 4, 4};
  try {
    ibp::gather_rows(a, nullptr);
    ADD_FAILURE() << "no exception";
  } catch (const squeeze::invalid_argument& e) {
    EXPECT_NE(std::string{e.what()}.find("needs 8 data bytes, has 7"), std::string::npos)
        << e.what();
  }
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

namespace ibp_decode_test {

// Runs kernel<<<blocks, 32>>>(data, offsets, rows, data_bytes, codebook, out, status) over
// the condensed set in mapped host memory, out poisoned with 0xA5 first; returns out.
template <class Kernel>
std::vector<std::byte> run_user_kernel(Kernel kernel, unsigned blocks,
                                       const ibp::compressed_set& set, const ibp::codebook& cb,
                                       std::size_t rows, status& s) {
  const squeeze::test::source_bytes stored{source_kind::mapped_host, set.data};
  const device_codebook dcb{cb, nullptr};
  core::device_buffer<std::uint64_t> offsets{set.offsets.size()};
  core::device_buffer<std::byte> out{rows * cb.tensor_bytes};
  core::device_buffer<status> st{1};
  SQUEEZE_CUDA_TRY(
      cudaMemcpy(offsets.data(), set.offsets.data(), offsets.bytes(), cudaMemcpyHostToDevice));
  SQUEEZE_CUDA_TRY(cudaMemset(out.data(), 0xA5, out.bytes()));
  SQUEEZE_CUDA_TRY(cudaMemset(st.data(), 0, sizeof(status)));
  kernel<<<blocks, 32>>>(stored.data(), offsets.data(), rows, set.data.size(), dcb.ref(),
                         out.data(), st.data());
  SQUEEZE_CHECK_LAUNCH();
  std::vector<std::byte> back(out.bytes());
  SQUEEZE_CUDA_TRY(cudaMemcpy(back.data(), out.data(), back.size(), cudaMemcpyDeviceToHost));
  SQUEEZE_CUDA_TRY(cudaMemcpy(&s, st.data(), sizeof s, cudaMemcpyDeviceToHost));
  return back;
}

}  // namespace ibp_decode_test

TEST(IbpDecoder, OneCallDecodeInAUserKernel) {
  SQUEEZE_REQUIRE_GPU();
  const std::size_t rows = 300, row_bytes = 1000;
  const auto data = mixed_rows(rows, row_bytes, 5);
  const auto cb = squeeze::test::best_codebook(data, rows, row_bytes, 4);
  const auto set = ibp::compress(data, rows, cb, ibp::layout::condensed);
  status s{};
  const auto back = run_user_kernel(decode_each_row, 64, set, cb, rows, s);
  EXPECT_EQ(s, status::ok);
  EXPECT_EQ(squeeze::test::first_mismatch(back.data(), data.data(), data.size()), -1);
}

namespace ibp_decode_test {

// One warp per row, the next row prefetched into registers while this one decodes: the
// shape of the library's gather, in a user's kernel, with a decoder for one chunk size.
template <unsigned Chunk>
SQUEEZE_KERNEL(32)
void decode_rows_prefetched(const std::byte* data, const std::uint64_t* offsets, std::size_t rows,
                            std::uint64_t data_bytes, ibp::codebook_ref cb, std::byte* out,
                            squeeze::status* st) {
  using decoder = ibp::warp_decoder<ibp::decode_policy, true, Chunk>;
  __shared__ typename decoder::TempStorage storage;
  decoder dec{storage, cb};
  typename decoder::stage staged;
  const auto row = [&](std::size_t r) {
    ibp::row_source s;
    s.src = data + offsets[r];
    s.stored = static_cast<std::uint32_t>(offsets[r + 1] - offsets[r]);
    s.readable = squeeze::xfer::readable_range::of(data, data_bytes);
    s.codebook = cb;
    return s;
  };
  std::size_t r = blockIdx.x;
  if (r >= rows) return;
  decoder::prefetch(row(r), staged);
  for (; r < rows; r += gridDim.x) {
    __syncwarp();  // the workspace's last row is decoded
    dec.land(row(r), staged);
    if (r + gridDim.x < rows) decoder::prefetch(row(r + gridDim.x), staged);
    const status s = dec.decode_loaded(out + r * cb.tensor_bytes);
    if (threadIdx.x == 0 && s != status::ok) *st = s;
  }
}

}  // namespace ibp_decode_test

// prefetch/land in a user kernel, with decoders for any chunk size and for the set's
// own; a decoder compiled for another chunk size reports every compressed row and leaves
// it untouched (raw rows do not depend on the chunk size: it copies them).
TEST(IbpDecoder, PrefetchedRowsInAUserKernel) {
  SQUEEZE_REQUIRE_GPU();
  const std::size_t rows = 300, row_bytes = 1000;
  const auto data = mixed_rows(rows, row_bytes, 6);
  const auto cb = squeeze::test::best_codebook(data, rows, row_bytes, 4);
  const auto set = ibp::compress(data, rows, cb, ibp::layout::condensed);
  for (auto kernel : {decode_rows_prefetched<0>, decode_rows_prefetched<4>}) {
    status s{};
    const auto back = run_user_kernel(kernel, 37, set, cb, rows, s);
    EXPECT_EQ(s, status::ok);
    EXPECT_EQ(squeeze::test::first_mismatch(back.data(), data.data(), data.size()), -1);
  }
  status s{};
  const auto back = run_user_kernel(decode_rows_prefetched<2>, 37, set, cb, rows, s);
  EXPECT_EQ(s, status::invalid_argument);
  std::vector<std::byte> want(data.size(), std::byte{0xA5});
  std::size_t raw = 0;
  for (std::size_t r = 0; r < rows; ++r) {
    if (!set.is_raw(r)) continue;
    ++raw;
    std::copy_n(data.begin() + static_cast<std::ptrdiff_t>(r * row_bytes), row_bytes,
                want.begin() + static_cast<std::ptrdiff_t>(r * row_bytes));
  }
  ASSERT_LT(raw, rows);
  EXPECT_EQ(squeeze::test::first_mismatch(back.data(), want.data(), want.size()), -1);
}
