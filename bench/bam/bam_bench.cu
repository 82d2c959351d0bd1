// squeeze_bench_bam: bam::array's cache against the bandwidths it sits between.
//
//   hits    1 GiB of floats, all resident in a cache as large as the data, read in full:
//           naive linear (thread per element, read()), naive without warp coalescing, and
//           cache-line-aware (a warp per line: one probe, then plain loads), against a
//           plain read of the same bytes in GPU memory (and cudaMemcpy device to device).
//           Target: cache-line-aware >= 0.5 x the device copy bandwidth.
//   misses  1 GiB of floats in pinned host memory, every line a miss (the cache cleared
//           before each pass; a cache of 64 MiB), cache-line-aware, against the zero-copy
//           ceiling: a warp-per-128-bytes read of the same host memory without a cache.
//           Target: >= 0.85 x that ceiling.
//
// Every pass sums what it reads; the sums are checked against the host's before timing.
#include <benchmark/benchmark.h>

#include <squeeze/bam/array.cuh>
#include <squeeze/core/buffer.hpp>
#include <squeeze/core/cuda_error.hpp>
#include <squeeze/core/device.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>

#include "bam/bam_study.cuh"
#include "common/manual_time.hpp"

namespace bam = squeeze::bam;
namespace core = squeeze::core;

namespace bam_bench {

using namespace bam_study;

constexpr std::uint64_t elements = std::uint64_t{1} << 28;  // 1 GiB of floats
constexpr std::uint32_t line_bytes = 4096;

struct fixture {
  core::pinned_buffer<float> host{elements, core::host_memory::mapped};
  core::device_buffer<float> device{elements};
  core::device_buffer<float> copy{elements};
  core::device_buffer<double> sum{1};
  double expected = 0.0;
  std::unique_ptr<bam::array<float, bam::cached_host_memory>> resident;
  std::unique_ptr<bam::array<float, bam::cached_host_memory, bam::uncoalesced_policy>> naive;
  std::unique_ptr<bam::array<float, bam::cached_host_memory>> small;

  fixture() {
    std::mt19937 rng{5};
    for (std::uint64_t i = 0; i < elements; ++i) {
      host.data()[i] = static_cast<float>(rng() % 1024) / 1024.0f;  // exact sums in fp64
      expected += host.data()[i];
    }
    SQUEEZE_CUDA_TRY(
        cudaMemcpy(device.data(), host.data(), elements * sizeof(float), cudaMemcpyHostToDevice));
    const std::uint64_t all = elements * sizeof(float) / line_bytes;
    resident = std::make_unique<bam::array<float, bam::cached_host_memory>>(
        host, bam::cache_options{line_bytes, all});
    naive = std::make_unique<bam::array<float, bam::cached_host_memory, bam::uncoalesced_policy>>(
        host, bam::cache_options{line_bytes, all});
    small = std::make_unique<bam::array<float, bam::cached_host_memory>>(
        host, bam::cache_options{line_bytes, (64u << 20) / line_bytes});
  }
};

fixture& the_fixture() {
  static fixture f;
  return f;
}

std::map<std::string, double> ms;  // median ms by benchmark name

void verify(const std::string& name, double got) {
  const double want = the_fixture().expected;
  if (!(std::fabs(got - want) <= 1e-6 * want)) {
    std::fprintf(stderr, "MISMATCH %s: sum %.17g, expected %.17g\n", name.c_str(), got, want);
    std::exit(3);
  }
}

void reg(const std::string& name, std::function<void(double*)> launch,
         std::function<void()> before = {}) {
  benchmark::RegisterBenchmark(name.c_str(),
                               [=](benchmark::State& bs) {
                                 if (before) before();
                                 verify(name, run_sum(the_fixture().sum, launch));
                                 auto& f = the_fixture();
                                 ms[name] = squeeze::bench::time_manual(bs, [&] {
                                   if (before) before();
                                   launch(f.sum.data());
                                 });
                                 bs.counters["GB/s"] =
                                     elements * sizeof(float) / (ms[name] * 1e-3) / 1e9;
                               })
      ->UseManualTime()
      ->Iterations(10)
      ->Unit(benchmark::kMillisecond);
}

void register_all() {
  const auto n4 = elements / 4;
  reg("device/plain-read", [=](double* s) {
    plain_kernel<<<blocks(), 256>>>(reinterpret_cast<const float4*>(the_fixture().device.data()),
                                    n4, s);
  });
  benchmark::RegisterBenchmark(
      "device/memcpy",
      [](benchmark::State& bs) {
        auto& f = the_fixture();
        ms["device/memcpy"] = squeeze::bench::time_manual(bs, [&] {
          SQUEEZE_CUDA_TRY(cudaMemcpyAsync(f.copy.data(), f.device.data(), elements * sizeof(float),
                                           cudaMemcpyDeviceToDevice, nullptr));
        });
        bs.counters["GB/s"] = elements * sizeof(float) / (ms["device/memcpy"] * 1e-3) / 1e9;
      })
      ->UseManualTime()
      ->Iterations(10)
      ->Unit(benchmark::kMillisecond);
  reg("hit/linear", [](double* s) {
    linear_kernel<<<blocks(), 256>>>(the_fixture().resident->ref(), elements, s);
  });
  reg("hit/linear-uncoalesced",
      [](double* s) { linear_kernel<<<blocks(), 256>>>(the_fixture().naive->ref(), elements, s); });
  reg("hit/line-aware",
      [](double* s) { line_aware_kernel<<<blocks(), 256>>>(the_fixture().resident->ref(), s); });
  reg("host/zero-copy", [=](double* s) {
    plain_kernel<<<blocks(), 256>>>(
        reinterpret_cast<const float4*>(the_fixture().host.device_data()), n4, s);
  });
  reg(
      "miss/line-aware",
      [](double* s) { line_aware_kernel<<<blocks(), 256>>>(the_fixture().small->ref(), s); },
      [] { the_fixture().small->clear(nullptr); });
}

}  // namespace bam_bench

using namespace bam_bench;

int main(int argc, char** argv) {
  const auto presence = core::detect_devices();
  if (!presence.present()) {
    std::printf("squeeze_bench_bam: no CUDA device found (%s); nothing to run\n",
                presence.reason.c_str());
    return 0;
  }
  benchmark::AddCustomContext("gpu", core::describe(core::query_device()));
  register_all();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  const auto gbs = [](const std::string& k) {
    return ms.count(k) ? elements * sizeof(float) / (ms[k] * 1e-3) / 1e9 : NAN;
  };
  std::printf("\nbam, 1 GiB of floats, lines of %u B (GB/s; ratios against the ceilings)\n",
              line_bytes);
  std::printf("device plain read %.0f, device memcpy %.0f (bytes copied / time)\n",
              gbs("device/plain-read"), gbs("device/memcpy"));
  std::printf(
      "hits: linear %.0f (%.2f), linear uncoalesced %.0f (%.2f), line-aware %.0f "
      "(%.2f of memcpy; target >= 0.5)\n",
      gbs("hit/linear"), gbs("hit/linear") / gbs("device/memcpy"), gbs("hit/linear-uncoalesced"),
      gbs("hit/linear-uncoalesced") / gbs("device/memcpy"), gbs("hit/line-aware"),
      gbs("hit/line-aware") / gbs("device/memcpy"));
  std::printf(
      "misses from pinned host memory: line-aware %.1f, zero-copy ceiling %.1f (%.2f; "
      "target >= 0.85)\n",
      gbs("miss/line-aware"), gbs("host/zero-copy"),
      gbs("miss/line-aware") / gbs("host/zero-copy"));
  return 0;
}
