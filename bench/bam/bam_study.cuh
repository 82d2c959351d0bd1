// SPDX-License-Identifier: Apache-2.0
// bench/bam/bam_study.cuh: what squeeze_bench_bam and the tour share: the access-pattern
// kernels (each sums what it reads, so every pass is checked) and the tour section.
#pragma once

#include <squeeze/bam/array.cuh>
#include <squeeze/bam/graph.cuh>
#include <squeeze/core/buffer.hpp>
#include <squeeze/core/cuda_error.hpp>
#include <squeeze/core/device.hpp>
#include <squeeze/core/launch.hpp>
#include <squeeze/core/timer.hpp>
#include <squeeze/io/graph.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "common/in_turns.hpp"
#include "common/report.hpp"

namespace bam_study {

namespace bam = squeeze::bam;
namespace core = squeeze::core;
namespace io = squeeze::io;
using squeeze::bench::collect_in_turns;
using squeeze::bench::comparison;
using squeeze::bench::report_table;
using squeeze::bench::tour_context;
using squeeze::bench::verification_error;

/// The stream the bam benches and the tour section order their arrays, caches, I/O services
/// and checks on: the legacy default stream, where their kernels, copies and timers run.
inline constexpr cudaStream_t bench_stream = nullptr;

// Thread per element (grid-stride): each warp reads 128 consecutive bytes per step.
template <class Ref>
SQUEEZE_KERNEL(256)
void linear_kernel(Ref a, std::uint64_t n, double* sum) {
  float s = 0.0f;
  for (std::uint64_t i = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::uint64_t{gridDim.x} * blockDim.x) {
    s += a.read(i);
  }
  for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
  if (threadIdx.x % 32 == 0) atomicAdd(sum, static_cast<double>(s));
}

// A warp per line: pin it, read it with 16-byte loads, unpin.
template <class Ref>
SQUEEZE_KERNEL(256)
void line_aware_kernel(Ref a, double* sum) {
  const std::uint64_t per_line = a.line_elements();
  const std::uint64_t lines = (a.size() + per_line - 1) / per_line;
  const unsigned lane = threadIdx.x % 32;
  float s = 0.0f;
  for (std::uint64_t l = (blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x) / 32; l < lines;
       l += std::uint64_t{gridDim.x} * blockDim.x / 32) {
    const auto line = a.warp_pin(l * per_line);
    if (line.data != nullptr) {
      const auto* v = reinterpret_cast<const float4*>(line.data);
      for (std::uint32_t j = lane; j < line.count / 4; j += 32) {
        const float4 q = v[j];
        s += (q.x + q.y) + (q.z + q.w);
      }
    }
    a.warp_unpin(line);
  }
  for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
  if (lane == 0) atomicAdd(sum, static_cast<double>(s));
}

// The ceilings: the same bytes read with 16-byte loads straight from GPU or mapped memory.
SQUEEZE_KERNEL(256)
void plain_kernel(const float4* data, std::uint64_t n4, double* sum) {
  float s = 0.0f;
  for (std::uint64_t i = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; i < n4;
       i += std::uint64_t{gridDim.x} * blockDim.x) {
    const float4 q = data[i];
    s += (q.x + q.y) + (q.z + q.w);
  }
  for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
  if (threadIdx.x % 32 == 0) atomicAdd(sum, static_cast<double>(s));
}

inline unsigned blocks() {
  return static_cast<unsigned>(core::per_sm(8));
}

/// Sum of a pass launched by `launch(sum)`.
template <class Launch>
double run_sum(core::device_buffer<double>& sum, Launch&& launch) {
  sum.fill_bytes(0, nullptr);
  launch(sum.data());
  SQUEEZE_CHECK_LAUNCH();
  double got = 0.0;
  SQUEEZE_CUDA_TRY(cudaMemcpy(&got, sum.data(), sizeof(double), cudaMemcpyDeviceToHost));
  return got;
}

/// The tour: with 256 MiB of floats in pinned host memory, cache-line-aware hits (a cache as
/// large as the data) against a device-to-device copy, and misses (a 16 MiB cache, cleared
/// before each pass) against zero-copy; then BFS on a Kronecker graph (scale 20) with the
/// edge list in host memory, ODT through a cache of 1 % of it against direct zero-copy.
inline void tour_section(report_table& table, const tour_context& context) {
  if (!context.has_gpu()) {
    table.add_note(
        "bam: no GPU, nothing to run (the cache state machine, queues and graphs "
        "are covered by the host tests)");
    return;
  }
  const core::timing_options timing{.warmup = 2, .repeats = 7};
  const auto add = [&](const std::string& what, double value, double baseline,
                       const std::string& unit, double min_ratio) {
    comparison c;
    c.family = "bam";
    c.measurement = what;
    c.value = value;
    c.baseline = baseline;
    c.unit = unit;
    c.min_ratio = min_ratio;
    table.add(c);
  };
  constexpr std::uint64_t n = std::uint64_t{1} << 26;  // 256 MiB of floats
  constexpr std::uint32_t line = 4096;
  core::pinned_buffer<float> host{n, core::host_memory::mapped};
  double expected = 0.0;
  std::mt19937 rng{5};
  for (std::uint64_t i = 0; i < n; ++i) {
    host.data()[i] = static_cast<float>(rng() % 1024) / 1024.0f;
    expected += host.data()[i];
  }
  core::device_buffer<float> device{n}, copy{n};
  SQUEEZE_CUDA_TRY(
      cudaMemcpy(device.data(), host.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  core::device_buffer<double> sum{1};
  bam::array<float, bam::cached_host_memory> resident{
      host, {line, n * sizeof(float) / line}, bench_stream};
  bam::array<float, bam::cached_host_memory> small{host, {line, (16u << 20) / line}, bench_stream};
  const auto check = [&](const std::string& what, double got) {
    if (!(std::fabs(got - expected) <= 1e-6 * expected)) {
      throw verification_error{"bam " + what + ": sum " + std::to_string(got) + ", expected " +
                               std::to_string(expected)};
    }
  };
  const auto hits = [&](double* s) { line_aware_kernel<<<blocks(), 256>>>(resident.ref(), s); };
  const auto misses = [&](double* s) {
    small.clear(bench_stream);
    line_aware_kernel<<<blocks(), 256>>>(small.ref(), s);
  };
  const auto zero_copy = [&](double* s) {
    plain_kernel<<<blocks(), 256>>>(reinterpret_cast<const float4*>(host.device_data()), n / 4, s);
  };
  check("hits", run_sum(sum, hits));
  check("misses", run_sum(sum, misses));
  check("zero-copy", run_sum(sum, zero_copy));
  const auto d2d = [&](double*) {
    SQUEEZE_CUDA_TRY(cudaMemcpyAsync(copy.data(), device.data(), n * sizeof(float),
                                     cudaMemcpyDeviceToDevice, nullptr));
  };
  // Each measurement and its baseline timed in turns (collect_in_turns): timed(work) is one
  // run of work() between events on the legacy stream.
  core::event_timer timer{nullptr};
  const auto timed = [&timer](auto work) -> std::function<double()> {
    return [&timer, work] {
      timer.start();
      work();
      timer.stop();
      return static_cast<double>(timer.elapsed_ms());
    };
  };
  const auto into_sum = [&sum](auto f) { return [&sum, f] { f(sum.data()); }; };
  const auto t = collect_in_turns(timing, {timed(into_sum(hits)), timed(into_sum(d2d)),
                                           timed(into_sum(misses)), timed(into_sum(zero_copy))});
  const double gb = n * sizeof(float) / 1e9;
  const auto gbs = [&](const core::timing_summary& s) { return gb / (s.median_ms * 1e-3); };
  add("cache hits, cache-line-aware vs device-to-device copy (>= 0.5)", gbs(t[0]), gbs(t[1]),
      "GB/s", 0.5);
  add("cache misses from pinned host memory vs zero-copy (>= 0.85)", gbs(t[2]), gbs(t[3]), "GB/s",
      0.85);

  constexpr std::uint32_t graph_line = 1024;  // see examples/common/bam_graph.cuh
  io::kron_options k;
  k.scale = 20;
  const io::graph g = io::generate_kron(k);
  std::uint32_t source = 0;
  for (std::uint32_t v = 1; v < g.num_vertices(); ++v)
    source = g.degree(v) > g.degree(source) ? v : source;
  const auto reference = io::bfs_reference(g, source);
  core::device_buffer<std::uint64_t> offsets{g.row_offsets.size()};
  offsets.copy_from(std::span<const std::uint64_t>{g.row_offsets}, nullptr);
  core::pinned_buffer<std::uint32_t> neighbors{g.num_edges(), core::host_memory::mapped};
  std::memcpy(neighbors.data(), g.neighbors.data(), g.num_edges() * sizeof(std::uint32_t));
  const std::uint64_t lines = (g.num_edges() * 4 + graph_line - 1) / graph_line;
  core::device_buffer<std::uint32_t> fvl{lines}, depth{g.num_vertices()};
  const auto vertices = static_cast<std::uint32_t>(g.num_vertices());
  bam::first_vertex_list(offsets.data(), vertices, g.num_edges(), graph_line / 4, fvl.data(),
                         bench_stream);
  bam::array<std::uint32_t, bam::mapped_host_memory> direct{neighbors, bench_stream};
  bam::array<std::uint32_t, bam::cached_host_memory> cached{
      neighbors, {graph_line, lines / 100}, bench_stream};
  // A BFS through `array`, checked against the host BFS once; returns one timed run of it.
  const auto checked_bfs = [&](auto& array, bam::traversal how) -> std::function<double()> {
    const bam::graph_ref<typename std::remove_reference_t<decltype(array)>::ref_type> ref{
        offsets.data(), array.ref(), vertices, fvl.data()};
    auto* a = &array;
    const auto run = [&, a, ref, how] {
      a->clear(bench_stream);
      bam::bfs(ref, g.num_edges(), source, how, depth.data(), bench_stream);
    };
    run();
    array.check(bench_stream);
    std::vector<std::uint32_t> got(vertices);
    depth.copy_to(std::span<std::uint32_t>{got}, nullptr);
    SQUEEZE_CUDA_TRY(cudaDeviceSynchronize());
    if (got != reference) throw verification_error{"bam BFS differs from the host BFS"};
    return timed(run);
  };
  const auto bfs_times = collect_in_turns(timing, {checked_bfs(direct, bam::traversal::vertex),
                                                   checked_bfs(cached, bam::traversal::odt)});
  const double t_direct = bfs_times[0].median_ms;
  const double t_odt = bfs_times[1].median_ms;
  add("BFS kron scale 20, ODT with a 1 % cache vs direct zero-copy (time <= 1.3x)", 1.0 / t_odt,
      1.0 / t_direct, "1/ms", 1.0 / 1.3);
  table.add_note(
      "bam: 4 KiB lines; BFS from a vertex of largest degree, edge list in pinned host "
      "memory, checked against the host BFS");
}

}  // namespace bam_study
