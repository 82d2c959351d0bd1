// SPDX-License-Identifier: Apache-2.0
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
//   graphs  BFS and CC on Kronecker and uniform-random graphs of 2^24 vertices
//           (--graph-scale=N) with the edge list in host memory: direct zero-copy, the
//           three cached traversals over a 1 % cache, ODT over the file; checked against
//           the host references.
//   misses  1 GiB of floats in pinned host memory, every line a miss (the cache cleared
//           before each pass; a cache of 64 MiB), cache-line-aware, against the zero-copy
//           ceiling: a warp-per-128-bytes read of the same host memory without a cache.
//           Target: >= 0.85 x that ceiling.
//
// Every pass sums what it reads; the sums are checked against the host's before timing.
#include <benchmark/benchmark.h>

#include <squeeze/bam/array.cuh>
#include <squeeze/bam/graph.cuh>
#include <squeeze/bam/io_service.hpp>
#include <squeeze/core/buffer.hpp>
#include <squeeze/core/cuda_error.hpp>
#include <squeeze/core/device.hpp>
#include <squeeze/core/launch.hpp>
#include <squeeze/io/graph.hpp>

#include <fcntl.h>
#include <unistd.h>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
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
namespace io = squeeze::io;

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
        host, bam::cache_options{line_bytes, all}, bench_stream);
    naive = std::make_unique<bam::array<float, bam::cached_host_memory, bam::uncoalesced_policy>>(
        host, bam::cache_options{line_bytes, all}, bench_stream);
    small = std::make_unique<bam::array<float, bam::cached_host_memory>>(
        host, bam::cache_options{line_bytes, (64u << 20) / line_bytes}, bench_stream);
    {
      std::ofstream out{path, std::ios::binary | std::ios::trunc};
      out.write(reinterpret_cast<const char*>(host.data()),
                static_cast<std::streamsize>(elements * sizeof(float)));
      if (!out) throw std::runtime_error{"cannot write " + path};
    }
    bam::io_service_config config;
    config.queues = static_cast<std::uint32_t>(core::sm_count());
    config.depth = 64;
    config.line_bytes = line_bytes;
    config.threads = file_threads;
    service = std::make_unique<bam::io_service>(path, config, bench_stream);
    file = std::make_unique<bam::array<float, bam::cached_file>>(
        *service, 0, elements, bam::cache_options{line_bytes, (64u << 20) / line_bytes},
        bench_stream);
  }
  ~fixture() { std::remove(path.c_str()); }
};

fixture& the_fixture() {
  static fixture f;
  return f;
}

std::map<std::string, double> ms;  // median ms by benchmark name

// ---- BFS and CC: a generated graph with its edge list in pinned host memory ----------------
int graph_scale = 24;  // --graph-scale=N

/// One graph and every way of reading its edge list: direct zero-copy, host memory behind a
/// cache of 1 % of it (1 KiB lines), and a file behind such a cache (4 KiB lines: the file
/// path is bound by requests per second), with the host references.
struct graph_case {
  io::graph g;
  std::uint32_t source = 0;
  std::vector<std::uint32_t> bfs_reference, cc_reference;
  core::device_buffer<std::uint64_t> offsets;
  core::pinned_buffer<std::uint32_t> neighbors;
  core::device_buffer<std::uint32_t> fvl_1k, fvl_4k, out;
  std::unique_ptr<bam::array<std::uint32_t, bam::mapped_host_memory>> direct;
  std::unique_ptr<bam::array<std::uint32_t, bam::cached_host_memory>> cached;
  std::string path;
  std::unique_ptr<bam::io_service> service;
  std::unique_ptr<bam::array<std::uint32_t, bam::cached_file>> file;

  explicit graph_case(const std::string& kind) {
    if (kind == "kron") {
      io::kron_options k;
      k.scale = graph_scale;
      g = io::generate_kron(k);
    } else {
      io::urand_options u;
      u.num_vertices = std::uint64_t{1} << graph_scale;
      g = io::generate_urand(u);
    }
    for (std::uint32_t v = 1; v < g.num_vertices(); ++v) {
      if (g.degree(v) > g.degree(source)) source = v;
    }
    bfs_reference = io::bfs_reference(g, source);
    cc_reference = io::cc_reference(g);
    const std::uint64_t m = g.num_edges();
    offsets = core::device_buffer<std::uint64_t>{g.row_offsets.size()};
    offsets.copy_from(std::span<const std::uint64_t>{g.row_offsets}, nullptr);
    neighbors = core::pinned_buffer<std::uint32_t>{m, core::host_memory::mapped};
    std::memcpy(neighbors.data(), g.neighbors.data(), m * sizeof(std::uint32_t));
    out = core::device_buffer<std::uint32_t>{g.num_vertices()};
    const auto lines = [&](std::uint32_t line) { return (m * 4 + line - 1) / line; };
    fvl_1k = core::device_buffer<std::uint32_t>{lines(1024)};
    fvl_4k = core::device_buffer<std::uint32_t>{lines(4096)};
    const auto n = static_cast<std::uint32_t>(g.num_vertices());
    bam::first_vertex_list(offsets.data(), n, m, 256, fvl_1k.data(), bench_stream);
    bam::first_vertex_list(offsets.data(), n, m, 1024, fvl_4k.data(), bench_stream);
    direct = std::make_unique<bam::array<std::uint32_t, bam::mapped_host_memory>>(neighbors,
                                                                                  bench_stream);
    cached = std::make_unique<bam::array<std::uint32_t, bam::cached_host_memory>>(
        neighbors, bam::cache_options{1024, lines(1024) / 100}, bench_stream);
    path = "/tmp/squeeze_bench_bam_" + kind + ".bin";
    {
      std::ofstream file_out{path, std::ios::binary | std::ios::trunc};
      file_out.write(reinterpret_cast<const char*>(g.neighbors.data()),
                     static_cast<std::streamsize>(m * sizeof(std::uint32_t)));
      if (!file_out) throw std::runtime_error{"cannot write " + path};
    }
    bam::io_service_config config;
    config.queues = static_cast<std::uint32_t>(core::sm_count());
    config.line_bytes = 4096;
    config.threads = file_threads;
    service = std::make_unique<bam::io_service>(path, config, bench_stream);
    file = std::make_unique<bam::array<std::uint32_t, bam::cached_file>>(
        *service, 0, m, bam::cache_options{4096, lines(4096) / 100}, bench_stream);
    std::printf("graph %s scale %d: %llu vertices, %llu edge entries, source %u\n", kind.c_str(),
                graph_scale, static_cast<unsigned long long>(g.num_vertices()),
                static_cast<unsigned long long>(m), source);
  }
  ~graph_case() { std::remove(path.c_str()); }
};

graph_case& graph(const std::string& kind) {
  static std::map<std::string, std::unique_ptr<graph_case>> cases;
  auto& c = cases[kind];
  if (!c) c = std::make_unique<graph_case>(kind);
  return *c;
}

/// Registers algorithm x traversal on one graph: each iteration one whole run from a cold
/// cache, checked against the host reference first.
void reg_graph(const std::string& kind, bool bfs, const std::string& variant) {
  const std::string name = std::string{bfs ? "bfs/" : "cc/"} + kind + "/" + variant;
  benchmark::RegisterBenchmark(
      name.c_str(),
      [=](benchmark::State& bs) {
        graph_case& c = graph(kind);
        const auto n = static_cast<std::uint32_t>(c.g.num_vertices());
        const auto go = [&](auto& array, const std::uint32_t* fvl, bam::traversal how) {
          const bam::graph_ref<typename std::remove_reference_t<decltype(array)>::ref_type> ref{
              c.offsets.data(), array.ref(), n, fvl};
          return [&, ref, how] {
            array.clear(bench_stream);
            if (bfs) {
              bam::bfs(ref, c.g.num_edges(), c.source, how, c.out.data(), bench_stream);
            } else {
              bam::connected_components(ref, c.g.num_edges(), how, c.out.data(), bench_stream);
            }
          };
        };
        std::function<void()> run;
        std::function<void()> check;
        if (variant == "direct") {
          run = go(*c.direct, nullptr, bam::traversal::vertex);
          check = [&] { c.direct->check(bench_stream); };
        } else if (variant == "odt-file") {
          run = go(*c.file, c.fvl_4k.data(), bam::traversal::odt);
          check = [&] { c.file->check(bench_stream); };
        } else {
          const auto how = variant == "vertex"       ? bam::traversal::vertex
                           : variant == "line-aware" ? bam::traversal::line_aware
                                                     : bam::traversal::odt;
          run = go(*c.cached, c.fvl_1k.data(), how);
          check = [&] { c.cached->check(bench_stream); };
        }
        c.out.fill_bytes(0xFF, nullptr);
        run();
        check();
        std::vector<std::uint32_t> got(n);
        c.out.copy_to(std::span<std::uint32_t>{got}, nullptr);
        SQUEEZE_CUDA_TRY(cudaDeviceSynchronize());
        if (got != (bfs ? c.bfs_reference : c.cc_reference)) {
          std::fprintf(stderr, "MISMATCH %s: differs from the host reference\n", name.c_str());
          std::exit(3);
        }
        ms[name] = squeeze::bench::time_manual(bs, run);
      })
      ->UseManualTime()
      ->Iterations(3)
      ->Unit(benchmark::kMillisecond);
}

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

void register_graphs() {
  for (const char* kind : {"kron", "urand"}) {
    for (const bool bfs : {true, false}) {
      for (const char* variant : {"direct", "vertex", "line-aware", "odt", "odt-file"}) {
        reg_graph(kind, bfs, variant);
      }
    }
  }
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
      [] { the_fixture().file->clear(bench_stream); });
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
      [] { the_fixture().small->clear(bench_stream); });
}

}  // namespace bam_bench

using namespace bam_bench;

int main(int argc, char** argv) {
  const auto presence = core::detect_devices();
  if (!presence.present()) {
    std::printf("squeeze_bench_bam: %s; nothing to run\n", presence.message().c_str());
    return 0;
  }
  benchmark::AddCustomContext("gpu", core::describe(core::query_device()));
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg{argv[i]};
    if (arg.rfind("--graph-scale=", 0) == 0) {
      graph_scale = std::atoi(argv[i] + 14);
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  register_all();
  register_graphs();
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
  std::printf(
      "\nBFS and CC, 2^%d vertices, edge list in host memory; cache 1 %% of it (1 KiB lines; "
      "file: 4 KiB); time / direct zero-copy (target for ODT <= 1.3)\n",
      graph_scale);
  std::printf("%-9s %12s %10s %12s %8s %10s\n", "", "direct ms", "vertex", "line-aware", "ODT",
              "ODT file");
  for (const char* kind : {"kron", "urand"}) {
    for (const char* algo : {"bfs", "cc"}) {
      const std::string k = std::string{algo} + "/" + kind + "/";
      const auto get = [&](const char* v) { return ms.count(k + v) ? ms[k + v] : NAN; };
      const double d = get("direct");
      std::printf("%-5s %-3s %12.1f %10.2f %12.2f %8.2f %10.2f\n", kind, algo, d, get("vertex") / d,
                  get("line-aware") / d, get("odt") / d, get("odt-file") / d);
    }
  }
  return 0;
}
