// SPDX-License-Identifier: Apache-2.0
// xfer asynchronous loads into shared memory: every source alignment 0..127 and lengths
// to beyond 4 KiB, warp and block variants, the libcu++ pipeline overload, the
// synchronous warp_load and the two-step warp_staged_load (registers, then shared memory),
// and a double-buffered stream of bounded loads.
#include <squeeze/core/buffer.hpp>
#include <squeeze/core/cuda_error.hpp>
#include <squeeze/xfer/async.cuh>
#include <squeeze/xfer/bounds.hpp>
#include <squeeze/xfer/mapped_memory.hpp>

#include <gtest/gtest.h>
#include <cuda/pipeline>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "common/gpu_test.hpp"

namespace core = squeeze::core;
namespace xfer = squeeze::xfer;

// Named, not anonymous: SQUEEZE_KERNEL gives kernels hidden visibility, which needs
// external linkage.
namespace async_test {

struct load_job {
  std::size_t src_offset;
  std::size_t dst_offset;
  std::size_t n;
};

enum class api {
  warp,
  warp_readable,
  warp_pipeline,
  block,
  warp_sync,          // warp_load, reading whole edge granules inside the pool
  warp_staged,        // warp_staged_load<2>, reading whole edge granules inside the pool
  warp_staged_exact,  // warp_staged_load<1>, reading exactly the range
};
constexpr std::size_t max_len = 4400;
constexpr std::size_t smem_bytes = xfer::window_bytes(max_len);

// One block per job: load [src, src + n) into shared memory, wait, then write the window's
// bytes out so the host can compare them; offsets[j] receives the window offset.
template <api Api, int Threads>
SQUEEZE_KERNEL(Threads)
void load_jobs(const load_job* jobs, const std::byte* src, std::byte* dst, unsigned* offsets,
               std::size_t pool_bytes) {
  __shared__ alignas(16) std::byte window[smem_bytes];
  const load_job job = jobs[blockIdx.x];
  xfer::smem_window w{};
  if constexpr (Api == api::warp) {
    w = xfer::warp_load_async(window, src + job.src_offset, job.n);
    xfer::async_commit();
    xfer::warp_async_wait<0>();
  } else if constexpr (Api == api::warp_readable) {
    w = xfer::warp_load_async(window, src + job.src_offset, job.n,
                              xfer::readable_range::of(src, pool_bytes));
    xfer::async_commit();
    xfer::warp_async_wait<0>();
  } else if constexpr (Api == api::warp_pipeline) {
    cuda::pipeline<cuda::thread_scope_thread> pipe = cuda::make_pipeline();
    pipe.producer_acquire();
    w = xfer::warp_load_async(window, src + job.src_offset, job.n, pipe);
    pipe.producer_commit();
    pipe.consumer_wait();
    __syncwarp();
    pipe.consumer_release();
  } else if constexpr (Api == api::warp_sync) {
    w = xfer::warp_load(window, src + job.src_offset, job.n,
                        xfer::readable_range::of(src, pool_bytes));
  } else if constexpr (Api == api::warp_staged || Api == api::warp_staged_exact) {
    constexpr unsigned waves = Api == api::warp_staged ? 2 : 1;
    const std::byte* from = src + job.src_offset;
    const auto readable = Api == api::warp_staged ? xfer::readable_range::of(src, pool_bytes)
                                                  : xfer::readable_range::of(from, job.n);
    xfer::warp_staged_load<waves> staged;
    staged.issue(from, job.n, readable);
    // Work between the steps that writes the window: issue() must not have touched it.
    for (std::size_t i = threadIdx.x; i < smem_bytes; i += 32) window[i] = std::byte{0x5A};
    __syncwarp();
    w = staged.land(window, from, job.n, readable);
  } else {
    w = xfer::block_load_async<Threads>(window, src + job.src_offset, job.n);
    xfer::async_commit();
    xfer::block_async_wait<0>();
  }
  for (std::size_t i = threadIdx.x; i < w.bytes; i += Threads)
    dst[job.dst_offset + i] = window[w.offset + i];
  if (threadIdx.x == 0) offsets[blockIdx.x] = w.offset;
}

// One warp streams job.n bytes through two shared-memory stages of bounded loads
// (>= 256 B each), consuming one stage while the next is in flight.
SQUEEZE_KERNEL(32)
void stream_double_buffered(const load_job* jobs, const std::byte* src, std::byte* dst,
                            unsigned* loads) {
  constexpr std::size_t lower = 256;
  constexpr std::size_t stage_bytes = xfer::window_bytes(lower + xfer::segment_bytes);
  __shared__ alignas(16) std::byte stage[2][stage_bytes];
  const load_job job = jobs[blockIdx.x];
  const std::byte* s = src + job.src_offset;
  std::size_t issued = 0;    // bytes whose loads were issued
  std::size_t consumed = 0;  // bytes written out
  xfer::smem_window w[2]{};
  w[0] = xfer::warp_load_bounded_async(stage[0], s, lower, job.n);
  xfer::async_commit();
  issued = w[0].bytes;
  unsigned count = 1;
  for (int cur = 0; consumed < job.n; cur ^= 1) {
    if (issued < job.n) {
      w[cur ^ 1] = xfer::warp_load_bounded_async(stage[cur ^ 1], s + issued, lower, job.n - issued);
      issued += w[cur ^ 1].bytes;
      ++count;
    }
    xfer::async_commit();  // an empty group when nothing was issued keeps the count uniform
    xfer::warp_async_wait<1>();
    for (std::size_t i = threadIdx.x; i < w[cur].bytes; i += 32) {
      dst[job.dst_offset + consumed + i] = stage[cur][w[cur].offset + i];
    }
    consumed += w[cur].bytes;
    __syncwarp();  // the stage is read before the next iteration overwrites it
  }
  if (threadIdx.x == 0) loads[blockIdx.x] = count;
}

class AsyncTest : public ::testing::TestWithParam<squeeze::test::source_kind> {
 protected:
  static constexpr std::size_t pool_bytes = std::size_t{4} << 20;

  void SetUp() override {
    SQUEEZE_REQUIRE_GPU();
    pool_ = squeeze::test::source_bytes{GetParam(), pool_bytes, 0xA51C};
    src_ = pool_.data();
  }

  // Jobs at every source alignment 0..127, lengths 0..max_len.
  std::vector<load_job> make_jobs(std::uint64_t seed, std::size_t per_alignment,
                                  std::size_t fixed_n = 0) const {
    std::mt19937_64 rng{seed};
    std::vector<load_job> jobs;
    std::size_t cursor = 0;
    for (std::size_t sa = 0; sa < 128; ++sa) {
      for (std::size_t k = 0; k < per_alignment; ++k) {
        const std::size_t n = fixed_n != 0 ? fixed_n : (k == 0 ? sa % 3 : rng() % (max_len + 1));
        load_job j{};
        j.src_offset = (rng() % ((pool_bytes - fixed_n - max_len - 256) / 128)) * 128 + sa;
        j.dst_offset = cursor;
        j.n = n;
        cursor += n + 64;
        jobs.push_back(j);
      }
    }
    return jobs;
  }

  template <class Launch>
  void check(const std::vector<load_job>& js, Launch&& launch, bool check_offsets) {
    std::size_t dst_bytes = 64;
    for (const auto& j : js) dst_bytes = std::max(dst_bytes, j.dst_offset + j.n + 64);
    core::device_buffer<load_job> jobs{js.size()};
    core::device_buffer<std::byte> dst{dst_bytes};
    core::device_buffer<unsigned> out{js.size()};
    SQUEEZE_CUDA_TRY(
        cudaMemcpy(jobs.data(), js.data(), js.size() * sizeof(load_job), cudaMemcpyHostToDevice));
    SQUEEZE_CUDA_TRY(cudaMemset(dst.data(), static_cast<int>(squeeze::test::poison), dst_bytes));
    SQUEEZE_CUDA_TRY(cudaMemset(out.data(), 0xff, out.bytes()));
    launch(jobs.data(), dst.data(), out.data());
    SQUEEZE_CHECK_LAUNCH();
    SQUEEZE_CUDA_TRY(cudaDeviceSynchronize());
    std::vector<std::byte> got(dst_bytes);
    std::vector<unsigned> got_out(js.size());
    SQUEEZE_CUDA_TRY(cudaMemcpy(got.data(), dst.data(), dst_bytes, cudaMemcpyDeviceToHost));
    SQUEEZE_CUDA_TRY(cudaMemcpy(got_out.data(), out.data(), out.bytes(), cudaMemcpyDeviceToHost));
    std::vector<std::byte> want(dst_bytes, squeeze::test::poison);
    for (const auto& j : js) {
      std::copy_n(pool_.host().begin() + static_cast<std::ptrdiff_t>(j.src_offset), j.n,
                  want.begin() + static_cast<std::ptrdiff_t>(j.dst_offset));
    }
    for (std::size_t k = 0; k < js.size(); ++k) {
      const auto& j = js[k];
      ASSERT_EQ(
          squeeze::test::first_mismatch(got.data() + j.dst_offset, want.data() + j.dst_offset, j.n),
          -1)
          << "job " << k << " src%128=" << j.src_offset % 128 << " n=" << j.n;
      if (check_offsets) {
        const auto address = reinterpret_cast<std::uintptr_t>(src_ + j.src_offset);
        ASSERT_EQ(got_out[k], address % xfer::granule_bytes) << "job " << k;
      }
    }
    ASSERT_EQ(squeeze::test::first_mismatch(got.data(), want.data(), dst_bytes), -1)
        << "a byte outside the loaded ranges was written";
    last_out_ = std::move(got_out);
  }

  squeeze::test::source_bytes pool_;
  const std::byte* src_ = nullptr;
  std::vector<unsigned> last_out_;
};

}  // namespace async_test

using namespace async_test;

TEST_P(AsyncTest, WarpLoadEveryAlignment) {
  const auto jobs = make_jobs(11, 4);
  check(
      jobs,
      [&](const load_job* j, std::byte* d, unsigned* o) {
        load_jobs<api::warp, 32>
            <<<static_cast<unsigned>(jobs.size()), 32>>>(j, src_, d, o, pool_bytes);
      },
      true);
}

TEST_P(AsyncTest, WarpLoadReadingWholeEdgeGranules) {
  const auto jobs = make_jobs(15, 4);
  check(
      jobs,
      [&](const load_job* j, std::byte* d, unsigned* o) {
        load_jobs<api::warp_readable, 32>
            <<<static_cast<unsigned>(jobs.size()), 32>>>(j, src_, d, o, pool_bytes);
      },
      true);
}

TEST_P(AsyncTest, WarpLoadThroughPipeline) {
  const auto jobs = make_jobs(12, 4);
  check(
      jobs,
      [&](const load_job* j, std::byte* d, unsigned* o) {
        load_jobs<api::warp_pipeline, 32>
            <<<static_cast<unsigned>(jobs.size()), 32>>>(j, src_, d, o, pool_bytes);
      },
      true);
}

TEST_P(AsyncTest, SynchronousWarpLoadEveryAlignment) {
  const auto jobs = make_jobs(16, 4);
  check(
      jobs,
      [&](const load_job* j, std::byte* d, unsigned* o) {
        load_jobs<api::warp_sync, 32>
            <<<static_cast<unsigned>(jobs.size()), 32>>>(j, src_, d, o, pool_bytes);
      },
      true);
}

// Lengths to 4400 B: ranges wholly in registers and ranges whose rest land() loads.
TEST_P(AsyncTest, StagedWarpLoadEveryAlignment) {
  const auto jobs = make_jobs(17, 4);
  check(
      jobs,
      [&](const load_job* j, std::byte* d, unsigned* o) {
        load_jobs<api::warp_staged, 32>
            <<<static_cast<unsigned>(jobs.size()), 32>>>(j, src_, d, o, pool_bytes);
      },
      true);
  const auto exact = make_jobs(18, 4);
  check(
      exact,
      [&](const load_job* j, std::byte* d, unsigned* o) {
        load_jobs<api::warp_staged_exact, 32>
            <<<static_cast<unsigned>(exact.size()), 32>>>(j, src_, d, o, pool_bytes);
      },
      true);
}

TEST_P(AsyncTest, BlockLoadEveryAlignment) {
  const auto jobs = make_jobs(13, 4);
  check(
      jobs,
      [&](const load_job* j, std::byte* d, unsigned* o) {
        load_jobs<api::block, 128>
            <<<static_cast<unsigned>(jobs.size()), 128>>>(j, src_, d, o, pool_bytes);
      },
      true);
}

TEST_P(AsyncTest, DoubleBufferedBoundedStream) {
  const auto jobs = make_jobs(14, 1, 20000);
  check(
      jobs,
      [&](const load_job* j, std::byte* d, unsigned* o) {
        stream_double_buffered<<<static_cast<unsigned>(jobs.size()), 32>>>(j, src_, d, o);
      },
      false);
  // 20000 B in bounded loads of >= 256 B that end on segment boundaries.
  for (const unsigned loads : last_out_) {
    EXPECT_GE(loads, 20000u / (256 + 128));
    EXPECT_LE(loads, 20000u / 256 + 1);
  }
}

INSTANTIATE_TEST_SUITE_P(Sources, AsyncTest,
                         ::testing::Values(squeeze::test::source_kind::device,
                                           squeeze::test::source_kind::mapped_host),
                         [](const auto& info) { return squeeze::test::name(info.param); });
