// squeeze_bench_bam: bam::array's cache against the bandwidths it sits between.
//
//   hits    1 GiB of floats, all resident in a cache as large as the data, read in full:
//           naive linear (thread per element, read()), naive without warp coalescing, and
//           cache-line-aware (a warp per line: one probe, then plain loads), against a
//           plain read of the same bytes in GPU memory (and cudaMemcpy device to device).
//           Target: cache-line-aware >= 0.5 x the device copy bandwidth.
//   file    the same 1 GiB in a file (in the page cache), behind a 64 MiB cache, every line a
//           miss served by the io_service's threads, against the same number of host threads
//           preading the file in line-sized blocks (GB/s and requests/s).
//   misses  1 GiB of floats in pinned host memory, every line a miss (the cache cleared
//           before each pass; a cache of 64 MiB), cache-line-aware, against the zero-copy
//           ceiling: a warp-per-128-bytes read of the same host memory without a cache.
//           Target: >= 0.85 x that ceiling.
//
// Every pass sums what it reads; the sums are checked against the host's before timing.
#include <benchmark/benchmark.h>

#include <squeeze/bam/array.cuh>
#include <squeeze/bam/io_service.hpp>
#include <squeeze/core/buffer.hpp>
#include <squeeze/core/cuda_error.hpp>
#include <squeeze/core/device.hpp>

#include <fcntl.h>
#include <unistd.h>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bam/bam_study.cuh"
#include "common/manual_time.hpp"

namespace bam = squeeze::bam;
namespace core = squeeze::core;

namespace bam_bench {

using namespace bam_study;

constexpr std::uint64_t elements = std::uint64_t{1} << 28;  // 1 GiB of floats
constexpr std::uint32_t line_bytes = 4096;
constexpr std::uint32_t file_threads = 16;  // the io_service's, and the pread baseline's

struct fixture {
  core::pinned_buffer<float> host{elements, core::host_memory::mapped};
  core::device_buffer<float> device{elements};
  core::device_buffer<float> copy{elements};
  core::device_buffer<double> sum{1};
  double expected = 0.0;
  std::unique_ptr<bam::array<float, bam::cached_host_memory>> resident;
  std::unique_ptr<bam::array<float, bam::cached_host_memory, bam::uncoalesced_policy>> naive;
  std::unique_ptr<bam::array<float, bam::cached_host_memory>> small;
  // The same floats in a file, served by an io_service, behind a 64 MiB cache.
  std::string path = "/tmp/squeeze_bench_bam.bin";
  std::unique_ptr<bam::io_service> service;
  std::unique_ptr<bam::array<float, bam::cached_file>> file;

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
    {
      std::ofstream out{path, std::ios::binary | std::ios::trunc};
      out.write(reinterpret_cast<const char*>(host.data()),
                static_cast<std::streamsize>(elements * sizeof(float)));
      if (!out) throw std::runtime_error{"cannot write " + path};
    }
    bam::io_service_config config;
    config.queues = static_cast<std::uint32_t>(core::current_sm_count());
    config.depth = 64;
    config.line_bytes = line_bytes;
    config.threads = file_threads;
    service = std::make_unique<bam::io_service>(path, config);
    file = std::make_unique<bam::array<float, bam::cached_file>>(
        *service, 0, elements, bam::cache_options{line_bytes, (64u << 20) / line_bytes});
  }
  ~fixture() { std::remove(path.c_str()); }
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
      "file/bam-line-aware",
      [](double* s) { line_aware_kernel<<<blocks(), 256>>>(the_fixture().file->ref(), s); },
      [] { the_fixture().file->clear(nullptr); });
  // The baseline: file_threads host threads pread the file in line-sized blocks.
  benchmark::RegisterBenchmark(
      "file/pread-threads",
      [](benchmark::State& bs) {
        auto& f = the_fixture();
        const int fd = open(f.path.c_str(), O_RDONLY);
        if (fd < 0) throw std::runtime_error{"cannot open " + f.path};
        const std::uint64_t blocks_total = elements * sizeof(float) / line_bytes;
        std::vector<double> samples;
        std::atomic<bool> bad{false};
        const auto pass = [&] {
          std::vector<std::thread> pool;
          for (std::uint32_t t = 0; t < file_threads; ++t) {
            pool.emplace_back([&, t] {
              std::vector<char> buf(line_bytes);
              for (std::uint64_t b = t; b < blocks_total; b += file_threads) {
                const auto got =
                    pread(fd, buf.data(), line_bytes, static_cast<off_t>(b * line_bytes));
                if (got != static_cast<ssize_t>(line_bytes)) bad = true;
              }
            });
          }
          for (auto& th : pool) th.join();
        };
        pass();
        for (auto _ : bs) {
          const auto start = std::chrono::steady_clock::now();
          pass();
          const double sec =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
          bs.SetIterationTime(sec);
          samples.push_back(sec * 1e3);
        }
        close(fd);
        if (bad) throw std::runtime_error{"a pread came back short"};
        ms["file/pread-threads"] = core::summarize(samples).median_ms;
        bs.counters["GB/s"] = elements * sizeof(float) / (ms["file/pread-threads"] * 1e-3) / 1e9;
      })
      ->UseManualTime()
      ->Iterations(5)
      ->Unit(benchmark::kMillisecond);
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
  const double requests = static_cast<double>(elements) * sizeof(float) / line_bytes;
  std::printf(
      "file (page cache), %u service threads: bam line-aware %.1f GB/s (%.2f M requests/s), "
      "pread by %u threads %.1f GB/s (%.2f M/s): %.2f\n",
      file_threads, gbs("file/bam-line-aware"), requests / (ms["file/bam-line-aware"] * 1e-3) / 1e6,
      file_threads, gbs("file/pread-threads"), requests / (ms["file/pread-threads"] * 1e-3) / 1e6,
      gbs("file/bam-line-aware") / gbs("file/pread-threads"));
  std::printf(
      "misses from pinned host memory: line-aware %.1f, zero-copy ceiling %.1f (%.2f; "
      "target >= 0.85)\n",
      gbs("miss/line-aware"), gbs("host/zero-copy"),
      gbs("miss/line-aware") / gbs("host/zero-copy"));
  return 0;
}
