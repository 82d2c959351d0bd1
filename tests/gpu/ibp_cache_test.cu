// SPDX-License-Identifier: Apache-2.0
// ibp::compressed_cache: handles pack and unpack; a gather through the cache gives exactly
// the rows of the set, hits served from the slabs (counted) and misses from host memory,
// in both layouts and across several slabs; tampered handles and bad arguments are reported.
#include <squeeze/core/buffer.hpp>
#include <squeeze/core/cuda_error.hpp>
#include <squeeze/ibp/cache.cuh>
#include <squeeze/ibp/dataset.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "common/gpu_test.hpp"
#include "common/ibp_test.hpp"

namespace core = squeeze::core;
namespace ibp = squeeze::ibp;
using squeeze::status;
using squeeze::test::source_kind;

TEST(IbpCacheHandle, PacksSlabOffsetFlagAndSize) {
  constexpr auto h = ibp::cache_handle::make(5, 0xFF'FFFF'FFFFull, true, 0xFFFFF);
  static_assert(h.slab() == 5 && h.offset() == 0xFF'FFFF'FFFFull && h.compressed() &&
                h.stored() == 0xFFFFF);
  std::mt19937_64 rng{3};
  for (int t = 0; t < 1000; ++t) {
    const auto slab = static_cast<std::uint32_t>(rng() % 8);
    const std::uint64_t offset = rng() & ibp::cache_handle::max_offset;
    const bool compressed = (rng() & 1) != 0;
    const auto stored = static_cast<std::uint32_t>(rng() % (1u << 20));
    const auto k = ibp::cache_handle::make(slab, offset, compressed, stored);
    ASSERT_EQ(k.slab(), slab);
    ASSERT_EQ(k.offset(), offset);
    ASSERT_EQ(k.compressed(), compressed);
    ASSERT_EQ(k.stored(), stored);
  }
}

namespace ibp_cache_test {

struct result {
  std::vector<std::byte> out;
  status st = status::ok;
  unsigned long long hits = 0;
};

// Gathers `indices` of `set` (placed in mapped host memory) through `cache`.
// (With `clusters`, the set's rows decode with their clusters' codebooks instead of cb.)
result gather_through(const ibp::compressed_set& set, const ibp::codebook& cb,
                      const ibp::compressed_cache_ref& cache,
                      const std::vector<std::int64_t>& indices, std::size_t dst_stride,
                      const ibp::cluster_ref& clusters = {}) {
  const ibp::device_codebook dcb{cb, nullptr};
  const squeeze::test::placed_set placed{source_kind::mapped_host, set};
  core::device_buffer<std::int64_t> idx{indices.size()};
  core::device_buffer<std::byte> dst{indices.size() * dst_stride};
  core::device_buffer<status> st{1};
  core::device_buffer<unsigned long long> hits{1};
  SQUEEZE_CUDA_TRY(cudaMemcpy(idx.data(), indices.data(), idx.bytes(), cudaMemcpyHostToDevice));
  SQUEEZE_CUDA_TRY(cudaMemset(dst.data(), static_cast<int>(squeeze::test::poison), dst.bytes()));
  SQUEEZE_CUDA_TRY(cudaMemset(st.data(), 0, sizeof(status)));
  SQUEEZE_CUDA_TRY(cudaMemset(hits.data(), 0, sizeof(unsigned long long)));
  // The setup ran on the legacy stream, which a non-blocking stream does not wait for: a
  // memset landing after the gather once zeroed its hit count and status (4 concurrent test
  // processes, H200, 2026-11-25).
  SQUEEZE_CUDA_TRY(cudaDeviceSynchronize());
  auto a = placed.args<std::int64_t>(dcb.ref());
  a.clusters = clusters;
  a.dst = dst.data();
  a.dst_stride = dst_stride;
  a.indices = idx.data();
  a.count = indices.size();
  a.status_out = st.data();
  core::stream stream;
  ibp::gather_cached(a, cache, stream, hits.data());
  stream.synchronize();
  result r;
  r.out.resize(dst.bytes());
  SQUEEZE_CUDA_TRY(cudaMemcpy(r.out.data(), dst.data(), dst.bytes(), cudaMemcpyDeviceToHost));
  SQUEEZE_CUDA_TRY(cudaMemcpy(&r.st, st.data(), sizeof(status), cudaMemcpyDeviceToHost));
  SQUEEZE_CUDA_TRY(cudaMemcpy(&r.hits, hits.data(), sizeof r.hits, cudaMemcpyDeviceToHost));
  return r;
}

class IbpCacheTest : public ::testing::TestWithParam<std::tuple<ibp::layout, std::uint32_t>> {
 protected:
  void SetUp() override { SQUEEZE_REQUIRE_GPU(); }
};

}  // namespace ibp_cache_test

using namespace ibp_cache_test;

// Three slabs on one GPU, sized so the hot rows fill them and stop: some hits in every
// slab, the rest misses; every output row right; hits counted exactly.
TEST_P(IbpCacheTest, HitsFromSlabsMissesFromHostMemory) {
  const auto [layout, chunk] = GetParam();
  const std::size_t rows = 3000, row_bytes = 1000;
  const auto data = squeeze::test::mixed_rows(rows, row_bytes, 17 + chunk);
  const auto cb = squeeze::test::best_codebook(data, rows, row_bytes, chunk);
  const auto set = ibp::compress(data, rows, cb, layout);
  int device = 0;
  SQUEEZE_CUDA_TRY(cudaGetDevice(&device));
  const std::size_t slab_bytes = 64 * 1024;
  ibp::compressed_cache cache{slab_bytes, {device, device, device}};
  std::vector<std::uint64_t> hot(rows);
  std::iota(hot.begin(), hot.end(), 0);
  std::shuffle(hot.begin(), hot.end(), std::mt19937_64{chunk});
  const std::size_t added = cache.insert(set, cb, hot);
  ASSERT_EQ(cache.rows(), added);
  ASSERT_GT(added, 3 * slab_bytes / row_bytes);  // compressed rows fit more than raw ones
  ASSERT_LT(added, rows);
  ASSERT_GT(cache.bytes_used(), 2 * slab_bytes);  // all three slabs in use
  ASSERT_LE(cache.bytes_used(), cache.capacity_bytes());
  EXPECT_EQ(cache.insert(set, cb, std::vector<std::uint64_t>(hot.begin(), hot.begin() + 10)), 0u);

  std::mt19937_64 rng{chunk * 7 + 1};
  std::vector<std::int64_t> indices(5000);
  for (auto& x : indices) x = static_cast<std::int64_t>(rng() % rows);
  unsigned long long want_hits = 0;
  for (const auto x : indices) want_hits += cache.contains(static_cast<std::uint64_t>(x)) ? 1 : 0;
  ASSERT_GT(want_hits, 0u);
  ASSERT_LT(want_hits, indices.size());

  const std::size_t stride = row_bytes + 8;
  const auto r = gather_through(set, cb, cache.ref(), indices, stride);
  EXPECT_EQ(r.st, status::ok);
  EXPECT_EQ(r.hits, want_hits);
  const auto want = squeeze::test::expected_rows(data, row_bytes, indices, stride,
                                                 [](std::size_t) { return true; });
  EXPECT_EQ(squeeze::test::first_mismatch(r.out.data(), want.data(), want.size()), -1);
}

INSTANTIATE_TEST_SUITE_P(Layouts, IbpCacheTest,
                         ::testing::Combine(::testing::Values(ibp::layout::condensed,
                                                              ibp::layout::in_place),
                                            ::testing::Values(1u, 4u, 8u)),
                         [](const auto& info) {
                           return std::string{std::get<0>(info.param) == ibp::layout::in_place
                                                  ? "in_place"
                                                  : "condensed"} +
                                  "_C" + std::to_string(std::get<1>(info.param));
                         });

// An empty cache serves every row from the set; a handle that points outside its slab or
// whose size contradicts its flag is corrupt, and that row is left untouched.
TEST(IbpCache, EmptyCacheAndTamperedHandles) {
  SQUEEZE_REQUIRE_GPU();
  const std::size_t rows = 200, row_bytes = 256;
  const auto data = squeeze::test::mixed_rows(rows, row_bytes, 23);
  const auto cb = squeeze::test::best_codebook(data, rows, row_bytes, 4);
  const auto set = ibp::compress(data, rows, cb, ibp::layout::condensed);
  std::vector<std::int64_t> indices(rows);
  std::iota(indices.begin(), indices.end(), 0);
  const auto all = squeeze::test::expected_rows(data, row_bytes, indices, row_bytes,
                                                [](std::size_t) { return true; });

  const ibp::compressed_cache empty{4096};
  auto r = gather_through(set, cb, empty.ref(), indices, row_bytes);
  EXPECT_EQ(r.st, status::ok);
  EXPECT_EQ(r.hits, 0u);
  EXPECT_EQ(squeeze::test::first_mismatch(r.out.data(), all.data(), all.size()), -1);

  // Cache rows 0..9, then rewrite row 4's and row 7's handles in a copy of the map.
  ibp::compressed_cache cache{1 << 16};
  std::vector<std::uint64_t> first(10);
  std::iota(first.begin(), first.end(), 0);
  ASSERT_EQ(cache.insert(set, cb, first), 10u);
  ibp::compressed_cache_ref ref = cache.ref();
  std::vector<std::uint64_t> keys(ref.capacity), handles(ref.capacity);
  SQUEEZE_CUDA_TRY(cudaMemcpy(keys.data(), ref.keys, ref.capacity * 8, cudaMemcpyDeviceToHost));
  SQUEEZE_CUDA_TRY(
      cudaMemcpy(handles.data(), ref.handles, ref.capacity * 8, cudaMemcpyDeviceToHost));
  std::size_t tampered = 0;
  for (std::size_t s = 0; s < keys.size(); ++s) {
    const ibp::cache_handle h{handles[s]};
    if (keys[s] == 4) {  // past the end of the slab
      handles[s] =
          ibp::cache_handle::make(h.slab(), ref.slab_bytes[0] - 8, h.compressed(), h.stored()).bits;
      ++tampered;
    } else if (keys[s] == 7) {  // a raw-length row flagged compressed
      handles[s] = ibp::cache_handle::make(h.slab(), h.offset(), true, row_bytes).bits;
      ++tampered;
    }
  }
  ASSERT_EQ(tampered, 2u);
  core::device_buffer<std::uint64_t> keys_d{keys.size()}, handles_d{handles.size()};
  SQUEEZE_CUDA_TRY(cudaMemcpy(keys_d.data(), keys.data(), keys_d.bytes(), cudaMemcpyHostToDevice));
  SQUEEZE_CUDA_TRY(
      cudaMemcpy(handles_d.data(), handles.data(), handles_d.bytes(), cudaMemcpyHostToDevice));
  ref.keys = keys_d.data();
  ref.handles = handles_d.data();
  r = gather_through(set, cb, ref, indices, row_bytes);
  EXPECT_EQ(r.st, status::corrupt);
  EXPECT_EQ(r.hits, 10u);
  const auto want = squeeze::test::expected_rows(data, row_bytes, indices, row_bytes,
                                                 [](std::size_t i) { return i != 4 && i != 7; });
  EXPECT_EQ(squeeze::test::first_mismatch(r.out.data(), want.data(), want.size()), -1);
}

// A clustered set: cached rows keep their cluster's codebook.
TEST(IbpCache, ClusteredSet) {
  SQUEEZE_REQUIRE_GPU();
  const std::size_t rows = 1500, row_bytes = 200;
  const auto data = squeeze::test::grouped_rows(rows, row_bytes, 4, 61);
  ibp::cluster_options opt;
  opt.clusters = 4;
  const ibp::cluster_set clusters = ibp::make_clusters(data, rows, row_bytes, 2, opt);
  const auto set = ibp::compress(data, rows, clusters, ibp::layout::in_place);
  const squeeze::test::device_clusters dc{clusters};
  ibp::compressed_cache cache{40'000};
  std::vector<std::uint64_t> hot(rows / 2);
  std::iota(hot.begin(), hot.end(), rows / 4);
  auto fewer = clusters;  // ids for fewer rows than the set holds
  fewer.rows = rows / 2;
  fewer.ids.resize(ibp::cluster_id_words(fewer.rows, fewer.id_bits));
  EXPECT_THROW(cache.insert(set, fewer, hot), squeeze::invalid_argument);
  EXPECT_EQ(cache.contains(hot.front()), false);
  ASSERT_GT(cache.insert(set, clusters, hot), 0u);
  std::vector<std::int64_t> indices(4000);
  std::mt19937_64 rng{12};
  for (auto& x : indices) x = static_cast<std::int64_t>(rng() % rows);
  unsigned long long want_hits = 0;
  for (const auto x : indices) want_hits += cache.contains(static_cast<std::uint64_t>(x)) ? 1 : 0;
  ASSERT_GT(want_hits, 0u);
  // cb is unused with clusters; any well-formed codebook of the right size will do.
  const ibp::codebook unused{std::vector<std::byte>(row_bytes), std::vector<std::byte>(row_bytes),
                             static_cast<std::uint32_t>(row_bytes), 2};
  const auto r = gather_through(set, unused, cache.ref(), indices, row_bytes, dc.ref);
  EXPECT_EQ(r.st, status::ok);
  EXPECT_EQ(r.hits, want_hits);
  const auto want = squeeze::test::expected_rows(data, row_bytes, indices, row_bytes,
                                                 [](std::size_t) { return true; });
  EXPECT_EQ(squeeze::test::first_mismatch(r.out.data(), want.data(), want.size()), -1);
}

TEST(IbpCache, BadArgumentsThrow) {
  SQUEEZE_REQUIRE_GPU();
  EXPECT_THROW(ibp::compressed_cache{0}, squeeze::invalid_argument);
  EXPECT_THROW((ibp::compressed_cache{64, std::vector<int>(9, 0)}), squeeze::invalid_argument);
  const std::size_t rows = 50, row_bytes = 64;
  const auto data = squeeze::test::mixed_rows(rows, row_bytes, 29);
  const auto cb = squeeze::test::best_codebook(data, rows, row_bytes, 4);
  const auto set = ibp::compress(data, rows, cb, ibp::layout::condensed);
  ibp::compressed_cache cache{4096};
  const std::vector<std::uint64_t> outside{3, rows};
  try {
    cache.insert(set, cb, outside);
    ADD_FAILURE() << "no exception";
  } catch (const squeeze::invalid_argument& e) {
    EXPECT_NE(std::string{e.what()}.find("row id 50 is outside"), std::string::npos) << e.what();
  }
  auto broken = set;
  broken.offsets[5] = broken.offsets[6] + 1;  // not monotone
  EXPECT_THROW(cache.insert(broken, cb, std::vector<std::uint64_t>{5}), squeeze::format_error);
  auto short_mask = set;  // the raw-row bitmask one word short
  short_mask.raw.pop_back();
  EXPECT_THROW(cache.insert(short_mask, cb, std::vector<std::uint64_t>{1}), squeeze::format_error);
  auto swollen = set;  // row 5 stored as more bytes than a raw row
  swollen.offsets[5] = swollen.offsets[6] - row_bytes - 1;
  EXPECT_THROW(cache.insert(swollen, cb, std::vector<std::uint64_t>{5}), squeeze::format_error);
  EXPECT_EQ(cache.contains(1), false);
  EXPECT_EQ(cache.contains(5), false);
}
