// SPDX-License-Identifier: Apache-2.0
// xfer::warp_copy / warp_copy_bounded / block_copy / block_copy_bounded on the GPU:
// every source and destination alignment 0..127, lengths from 0 to beyond 4 KiB, from
// device memory and from mapped host memory; outputs poisoned first and compared byte for
// byte, guard bytes between outputs included.
#include <squeeze/core/buffer.hpp>
#include <squeeze/core/cuda_error.hpp>
#include <squeeze/xfer/bounds.hpp>
#include <squeeze/xfer/copy.cuh>
#include <squeeze/xfer/mapped_memory.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "common/gpu_test.hpp"

namespace core = squeeze::core;
namespace xfer = squeeze::xfer;

// Named, not anonymous: SQUEEZE_KERNEL gives kernels hidden visibility, which needs
// external linkage.
namespace copy_test {

struct copy_job {
  std::size_t src_offset;  // into the source pool
  std::size_t dst_offset;  // into the output
  std::size_t n;           // length (plain copies) or upper bound (bounded copies)
  std::size_t lower;       // bounded copies only
};

enum class api { warp_copy, warp_copy_readable, warp_bounded, block_copy, block_bounded };
constexpr int block_threads = 128;

template <api Api>
SQUEEZE_KERNEL(block_threads)
void run_jobs(const copy_job* jobs, std::size_t count, const std::byte* src, std::byte* dst,
              std::size_t* copied, std::size_t pool_bytes) {
  constexpr bool per_warp =
      Api == api::warp_copy || Api == api::warp_copy_readable || Api == api::warp_bounded;
  const std::size_t workers_per_block = per_warp ? block_threads / 32 : 1;
  const std::size_t worker = blockIdx.x * workers_per_block + (per_warp ? threadIdx.x / 32 : 0);
  const std::size_t workers = gridDim.x * workers_per_block;
  for (std::size_t j = worker; j < count; j += workers) {
    const copy_job job = jobs[j];
    const std::byte* s = src + job.src_offset;
    std::byte* d = dst + job.dst_offset;
    std::size_t n = job.n;
    if constexpr (Api == api::warp_copy) xfer::warp_copy(d, s, job.n);
    if constexpr (Api == api::warp_copy_readable) {
      xfer::warp_copy(d, s, job.n, xfer::readable_range::of(src, pool_bytes));
    }
    if constexpr (Api == api::warp_bounded) n = xfer::warp_copy_bounded(d, s, job.lower, job.n);
    if constexpr (Api == api::block_copy) xfer::block_copy<block_threads>(d, s, job.n);
    if constexpr (Api == api::block_bounded) {
      n = xfer::block_copy_bounded<block_threads>(d, s, job.lower, job.n);
    }
    if (threadIdx.x % 32 == 0) copied[j] = n;
  }
}

// One warp per job reads job.n bytes as bounded copies of at least job.lower bytes.
SQUEEZE_KERNEL(32)
void read_stream(const copy_job* jobs, const std::byte* src, std::byte* out, std::size_t* reads) {
  const copy_job job = jobs[blockIdx.x];
  std::size_t done = 0;
  std::size_t count = 0;
  while (done < job.n) {
    done += xfer::warp_copy_bounded(out + job.dst_offset + done, src + job.src_offset + done,
                                    job.lower, job.n - done);
    ++count;
  }
  if (threadIdx.x == 0) reads[blockIdx.x] = count;
}

// Jobs laid out one after another in the output, each behind a guard of 64..191 bytes
// that must stay poisoned. Source offsets random (with the job's alignment) in the pool.
struct job_set {
  std::vector<copy_job> jobs;
  std::size_t dst_bytes = 0;
};

job_set make_jobs(const std::vector<std::array<std::size_t, 4>>& specs,  // {sa, da, n, lower}
                  std::size_t pool_bytes, std::uint64_t seed) {
  std::mt19937_64 rng{seed};
  job_set set;
  std::size_t cursor = 0;
  for (const auto& [sa, da, n, lower] : specs) {
    const std::size_t extent = std::max(n, lower) + 128;
    const std::size_t slots = (pool_bytes - extent) / 128;
    copy_job job{};
    job.src_offset = (rng() % slots) * 128 + sa;
    cursor = core::align_up<std::size_t>(cursor + 64 + rng() % 128, 128);
    job.dst_offset = cursor + da;
    job.n = n;
    job.lower = lower;
    cursor = job.dst_offset + n;
    set.jobs.push_back(job);
  }
  set.dst_bytes = core::align_up<std::size_t>(cursor + 256, 128);
  return set;
}

class CopyTest : public ::testing::TestWithParam<squeeze::test::source_kind> {
 protected:
  static constexpr std::size_t pool_bytes = std::size_t{8} << 20;

  void SetUp() override {
    SQUEEZE_REQUIRE_GPU();
    pool_ = squeeze::test::source_bytes{GetParam(), pool_bytes, 0xC0FFEE};
    src_ = pool_.data();
  }

  // Runs the jobs through Api and checks every output byte (copied ranges and guards)
  // and the returned lengths.
  template <api Api>
  void check(const job_set& set) {
    const std::size_t count = set.jobs.size();
    core::device_buffer<copy_job> jobs{count};
    core::device_buffer<std::size_t> copied{count};
    core::device_buffer<std::byte> dst{set.dst_bytes};
    SQUEEZE_CUDA_TRY(
        cudaMemcpy(jobs.data(), set.jobs.data(), count * sizeof(copy_job), cudaMemcpyHostToDevice));
    SQUEEZE_CUDA_TRY(cudaMemset(dst.data(), static_cast<int>(squeeze::test::poison), dst.bytes()));
    SQUEEZE_CUDA_TRY(cudaMemset(copied.data(), 0xff, copied.bytes()));
    const auto blocks = static_cast<unsigned>(std::min<std::size_t>(count, 2048));
    run_jobs<Api><<<blocks, block_threads>>>(jobs.data(), count, src_, dst.data(), copied.data(),
                                             pool_bytes);
    SQUEEZE_CHECK_LAUNCH();
    SQUEEZE_CUDA_TRY(cudaDeviceSynchronize());

    std::vector<std::byte> got(set.dst_bytes);
    std::vector<std::size_t> got_n(count);
    SQUEEZE_CUDA_TRY(cudaMemcpy(got.data(), dst.data(), got.size(), cudaMemcpyDeviceToHost));
    SQUEEZE_CUDA_TRY(cudaMemcpy(got_n.data(), copied.data(), count * sizeof(std::size_t),
                                cudaMemcpyDeviceToHost));

    constexpr bool bounded = Api == api::warp_bounded || Api == api::block_bounded;
    std::vector<std::byte> want(set.dst_bytes, squeeze::test::poison);
    for (std::size_t j = 0; j < count; ++j) {
      const copy_job& job = set.jobs[j];
      std::size_t n = job.n;
      if (bounded) {
        const auto address = reinterpret_cast<std::uintptr_t>(src_ + job.src_offset);
        n = xfer::bounded_length(address, job.lower, job.n);
        // The defining property, independent of bounded_length: the read ends on a
        // segment boundary unless the upper bound stopped it.
        ASSERT_TRUE(n == job.n || (address + n) % xfer::segment_bytes == 0) << "job " << j;
        ASSERT_TRUE(n >= std::min(job.lower, job.n)) << "job " << j;
      }
      ASSERT_EQ(got_n[j], n) << "job " << j;
      std::copy_n(pool_.host().begin() + static_cast<std::ptrdiff_t>(job.src_offset), n,
                  want.begin() + static_cast<std::ptrdiff_t>(job.dst_offset));
    }
    for (std::size_t j = 0; j < count; ++j) {
      // Report the first bad job with its alignment, then compare everything.
      const copy_job& job = set.jobs[j];
      const std::size_t n = got_n[j];
      const long long bad = squeeze::test::first_mismatch(got.data() + job.dst_offset,
                                                          want.data() + job.dst_offset, n);
      ASSERT_EQ(bad, -1) << "job " << j << ": src%128=" << (job.src_offset % 128)
                         << " dst%128=" << (job.dst_offset % 128) << " n=" << n;
    }
    const long long bad = squeeze::test::first_mismatch(got.data(), want.data(), got.size());
    ASSERT_EQ(bad, -1) << "a byte outside every copied range was written, at output offset " << bad;
  }

  squeeze::test::source_bytes pool_;
  const std::byte* src_ = nullptr;
};

// Every (source, destination) alignment pair 0..127 x 0..127, with lengths around the
// granule, segment and wave sizes.
std::vector<std::array<std::size_t, 4>> all_alignment_specs() {
  std::vector<std::array<std::size_t, 4>> specs;
  const std::size_t lengths[] = {0, 1, 5, 15, 16, 17, 33, 127, 128, 129, 511, 513, 700};
  std::size_t k = 0;
  for (std::size_t sa = 0; sa < 128; ++sa) {
    for (std::size_t da = 0; da < 128; ++da) {
      // Two lengths per pair, rotating through the list, so each pair sees two and each
      // length sees every residue of the pair.
      specs.push_back({sa, da, lengths[k++ % std::size(lengths)], 0});
      specs.push_back({sa, da, lengths[k++ % std::size(lengths)], 0});
    }
  }
  return specs;
}

// Every length 0..4400 at a few alignment pairs, plus large copies.
std::vector<std::array<std::size_t, 4>> all_length_specs() {
  std::vector<std::array<std::size_t, 4>> specs;
  const std::size_t pairs[][2] = {{0, 0}, {1, 0}, {0, 7}, {64, 3}, {127, 127}, {13, 100}};
  for (const auto& [sa, da] : pairs) {
    for (std::size_t n = 0; n <= 4400; ++n) specs.push_back({sa, da, n, 0});
    for (const std::size_t n : {std::size_t{65536 + 3}, std::size_t{(1u << 20) + 77}}) {
      specs.push_back({sa, da, n, 0});
    }
  }
  return specs;
}

// Bounded reads: lower and upper bounds around segment boundaries at every alignment.
std::vector<std::array<std::size_t, 4>> bounded_specs() {
  std::vector<std::array<std::size_t, 4>> specs;
  std::mt19937_64 rng{0xB0B};
  for (std::size_t sa = 0; sa < 128; ++sa) {
    for (const std::size_t lower : {std::size_t{0}, std::size_t{1}, std::size_t{127},
                                    std::size_t{128}, std::size_t{129}, std::size_t{1000}}) {
      for (const std::size_t upper : {std::size_t{0}, std::size_t{64}, std::size_t{128},
                                      std::size_t{300}, std::size_t{5000}}) {
        specs.push_back({sa, rng() % 128, upper, lower});
      }
    }
  }
  return specs;
}

}  // namespace copy_test

using namespace copy_test;

TEST_P(CopyTest, WarpCopyEveryAlignmentPair) {
  check<api::warp_copy>(make_jobs(all_alignment_specs(), pool_bytes, 1));
}
TEST_P(CopyTest, WarpCopyEveryLength) {
  check<api::warp_copy>(make_jobs(all_length_specs(), pool_bytes, 2));
}
TEST_P(CopyTest, WarpCopyReadingWholeEdgeGranules) {
  // With the whole pool readable, edge granules are read whole; the bytes written must be
  // exactly the same (every alignment pair, every length to 4400).
  check<api::warp_copy_readable>(make_jobs(all_alignment_specs(), pool_bytes, 8));
  check<api::warp_copy_readable>(make_jobs(all_length_specs(), pool_bytes, 9));
}
TEST_P(CopyTest, WarpCopyBounded) {
  check<api::warp_bounded>(make_jobs(bounded_specs(), pool_bytes, 3));
}
TEST_P(CopyTest, BlockCopyEveryAlignmentPair) {
  check<api::block_copy>(make_jobs(all_alignment_specs(), pool_bytes, 4));
}
TEST_P(CopyTest, BlockCopyEveryLength) {
  check<api::block_copy>(make_jobs(all_length_specs(), pool_bytes, 5));
}
TEST_P(CopyTest, BlockCopyBounded) {
  check<api::block_bounded>(make_jobs(bounded_specs(), pool_bytes, 6));
}

TEST_P(CopyTest, BoundedReadsOfAStreamCoverItExactly) {
  // One warp reads a 10000-byte stream starting at each alignment 0..127 as a sequence of
  // bounded copies of >= 128 B; the concatenation must equal the stream.
  std::vector<std::array<std::size_t, 4>> specs;
  for (std::size_t sa = 0; sa < 128; ++sa) specs.push_back({sa, sa, 10000, 128});
  const job_set set = make_jobs(specs, pool_bytes, 7);
  core::device_buffer<copy_job> jobs{set.jobs.size()};
  core::device_buffer<std::byte> dst{set.dst_bytes};
  core::device_buffer<std::size_t> reads{set.jobs.size()};
  SQUEEZE_CUDA_TRY(cudaMemcpy(jobs.data(), set.jobs.data(), set.jobs.size() * sizeof(copy_job),
                              cudaMemcpyHostToDevice));
  SQUEEZE_CUDA_TRY(cudaMemset(dst.data(), static_cast<int>(squeeze::test::poison), dst.bytes()));
  read_stream<<<static_cast<unsigned>(set.jobs.size()), 32>>>(jobs.data(), src_, dst.data(),
                                                              reads.data());
  SQUEEZE_CHECK_LAUNCH();
  SQUEEZE_CUDA_TRY(cudaDeviceSynchronize());
  std::vector<std::byte> got(set.dst_bytes);
  SQUEEZE_CUDA_TRY(cudaMemcpy(got.data(), dst.data(), got.size(), cudaMemcpyDeviceToHost));
  std::vector<std::size_t> nreads(set.jobs.size());
  SQUEEZE_CUDA_TRY(cudaMemcpy(nreads.data(), reads.data(), nreads.size() * sizeof(std::size_t),
                              cudaMemcpyDeviceToHost));
  for (std::size_t j = 0; j < set.jobs.size(); ++j) {
    const copy_job& job = set.jobs[j];
    EXPECT_EQ(squeeze::test::first_mismatch(got.data() + job.dst_offset,
                                            pool_.host().data() + job.src_offset, job.n),
              -1)
        << "stream at alignment " << job.src_offset % 128;
    // 10000 B in reads of >= 128 B ending on boundaries: at most 10000/128 + 1 reads.
    EXPECT_LE(nreads[j], 10000u / 128 + 1);
  }
}

INSTANTIATE_TEST_SUITE_P(Sources, CopyTest,
                         ::testing::Values(squeeze::test::source_kind::device,
                                           squeeze::test::source_kind::mapped_host),
                         [](const auto& info) { return squeeze::test::name(info.param); });
