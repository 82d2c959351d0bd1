// SPDX-License-Identifier: Apache-2.0
// examples/common/bam_graph.cuh: what bam_bfs and bam_cc share: the command line, the graph
// (generated or read from a file), its edge list placed in pinned host memory, and one run
// of the algorithm per traversal, timed and checked against io's host reference.
//
//   --graph kron|urand|PATH   a generator, or an edge-list (.txt/.el), Matrix Market (.mtx)
//                             or squeeze binary graph (.sqg) file         (default kron)
//   --scale N                 2^N vertices for the generators               (default 22)
//   --degree N                edges per vertex for the generators           (default 16)
//   --cache-percent P         cache size as a percentage of the edge list   (default 1)
//   --line B                  cache line bytes                              (default 1024)
//   --repeats N               timed runs per traversal (median reported)    (default 3)
//   --file PATH               also run ODT with the edge list written to PATH, behind the
//                             cache through a host I/O service (the file is removed after)
#pragma once

#include <squeeze/bam/graph.cuh>
#include <squeeze/bam/io_service.hpp>
#include <squeeze/core/buffer.hpp>
#include <squeeze/core/cuda_error.hpp>
#include <squeeze/core/launch.hpp>
#include <squeeze/core/timer.hpp>
#include <squeeze/io/graph.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "common/cli.hpp"

namespace squeeze_examples {

namespace bam = squeeze::bam;
namespace core = squeeze::core;
namespace io = squeeze::io;

struct graph_options {
  std::string graph = "kron";
  int scale = 22;
  std::uint64_t degree = 16;
  double cache_percent = 1.0;
  /// 1 KiB: measured on the H200 (BFS, 2^24 vertices, 1 % cache), ODT took 0.76x direct
  /// zero-copy's time on kron and 1.20x on urand with 1 KiB lines, 1.03x and 1.58x with 4 KiB
  /// (whole lines are fetched for scattered active vertices, and small caches have few slots).
  std::uint32_t line = 1024;
  int repeats = 3;
  std::string file;  ///< also run ODT with the edge list in this file (written, then removed)
};

inline const char* graph_usage() {
  return "  --graph kron|urand|PATH  --scale N  --degree N  --cache-percent P  --line B  "
         "--repeats N  --file PATH\n";
}

/// Parses the options above (--help prints them and exits); an option it does not know goes to
/// `other(argc, argv, i)`, which returns false to reject it (and may read a value with
/// option_value).
template <class Other>
graph_options parse_graph_options(int argc, char** argv, Other&& other) {
  graph_options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a{argv[i]};
    const auto value = [&] { return option_value(argc, argv, i); };
    if (a == "--graph") {
      o.graph = std::string{value()};
    } else if (a == "--scale") {
      o.scale = parse_number<int>(a, value());
    } else if (a == "--degree") {
      o.degree = parse_number<std::uint64_t>(a, value());
    } else if (a == "--cache-percent") {
      o.cache_percent = parse_number<double>(a, value());
    } else if (a == "--line") {
      o.line = parse_number<std::uint32_t>(a, value());
    } else if (a == "--repeats") {
      o.repeats = parse_number<int>(a, value());
    } else if (a == "--file") {
      o.file = std::string{value()};
    } else if (a == "--help" || a == "-h") {
      std::fputs(graph_usage(), stdout);
      std::exit(0);
    } else if (!other(argc, argv, i)) {
      throw usage_error{"unknown option '" + std::string{a} + "'"};
    }
  }
  if (o.scale < 1 || o.scale > 31) throw usage_error{"--scale must be in 1..31"};
  if (!(o.cache_percent > 0.0)) throw usage_error{"--cache-percent must be positive"};
  if (o.repeats < 1) throw usage_error{"--repeats must be at least 1"};
  return o;
}

inline io::graph load_graph(const graph_options& o) {
  const auto start = std::chrono::steady_clock::now();
  io::graph g;
  if (o.graph == "kron") {
    io::kron_options k;
    k.scale = o.scale;
    k.edge_factor = o.degree;
    g = io::generate_kron(k);
  } else if (o.graph == "urand") {
    io::urand_options u;
    u.num_vertices = std::uint64_t{1} << o.scale;
    u.edge_factor = o.degree;
    g = io::generate_urand(u);
  } else if (o.graph.ends_with(".mtx")) {
    g = io::read_matrix_market_graph(o.graph);
  } else if (o.graph.ends_with(".sqg")) {
    g = io::read_graph_binary(o.graph);
  } else {
    g = io::read_edge_list(o.graph);
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("graph %s: %llu vertices, %llu edge entries (%.2f GB edge list), built in %.1f s\n",
              o.graph.c_str(), static_cast<unsigned long long>(g.num_vertices()),
              static_cast<unsigned long long>(g.num_edges()), g.num_edges() * 4.0 / 1e9, s);
  return g;
}

/// Runs `algorithm(graph_ref, edges, traversal, out, stream)` for the direct zero-copy
/// baseline and the three cached traversals, all on one stream; checks every result against
/// `reference`; prints median times. Returns 0 when every result matched, 1 otherwise.
template <class Algorithm>
int run_every_traversal(const char* name, const io::graph& host, const graph_options& o,
                        const std::vector<std::uint32_t>& reference, Algorithm&& algorithm) {
  const auto vertices = static_cast<std::uint32_t>(host.num_vertices());
  const std::uint64_t edges = host.num_edges();
  core::stream stream;
  core::device_buffer<std::uint64_t> offsets{host.row_offsets.size()};
  offsets.copy_from(std::span<const std::uint64_t>{host.row_offsets}, stream);
  core::pinned_buffer<std::uint32_t> neighbors{std::max<std::uint64_t>(edges, 1),
                                               core::host_memory::mapped};
  std::memcpy(neighbors.data(), host.neighbors.data(), edges * sizeof(std::uint32_t));
  core::device_buffer<std::uint32_t> out{vertices};

  const std::uint64_t lines = (edges * 4 + o.line - 1) / o.line;
  const auto slots = std::max<std::uint64_t>(
      16, static_cast<std::uint64_t>(static_cast<double>(lines) * o.cache_percent / 100.0));
  core::device_buffer<std::uint32_t> fvl{std::max<std::uint64_t>(lines, 1)};
  bam::first_vertex_list(offsets.data(), vertices, edges, o.line / 4, fvl.data(), stream);
  std::printf("cache: %llu lines of %u B = %.1f MB (%.2f %% of the edge list)\n",
              static_cast<unsigned long long>(slots), o.line, slots * o.line / 1e6,
              100.0 * static_cast<double>(slots) / static_cast<double>(lines));

  int failures = 0;
  double direct_ms = 0.0;
  const auto run = [&](const char* variant, auto& array, bam::traversal how) {
    const bam::graph_ref<typename std::remove_reference_t<decltype(array)>::ref_type> g{
        offsets.data(), array.ref(), vertices, fvl.data()};
    std::vector<double> times;
    std::uint32_t rounds = 0;
    for (int r = 0; r <= o.repeats; ++r) {  // the first run warms up (and fills the cache)
      out.fill_bytes(0xFF, stream);
      array.clear(stream);
      core::event_timer timer{stream};
      timer.start();
      rounds = algorithm(g, edges, how, out.data(), stream.get());
      timer.stop();
      if (r > 0) times.push_back(timer.elapsed_ms());
    }
    array.check(stream);
    std::vector<std::uint32_t> got(vertices);
    out.copy_to(std::span<std::uint32_t>{got}, stream);
    stream.synchronize();
    const bool ok = got == reference;
    failures += ok ? 0 : 1;
    const double ms = core::summarize(times).median_ms;
    if (direct_ms == 0.0) direct_ms = ms;
    std::printf("%s %-26s %10.2f ms %6u rounds %7.2f x direct   %s\n", name, variant, ms, rounds,
                ms / direct_ms, ok ? "matches the host" : "DIFFERS FROM THE HOST");
  };
  {
    bam::array<std::uint32_t, bam::mapped_host_memory> direct{neighbors, stream};
    run("direct zero-copy (EMOGI)", direct, bam::traversal::vertex);
  }
  bam::array<std::uint32_t, bam::cached_host_memory> cached{neighbors, {o.line, slots}, stream};
  run("bam vertex-centric", cached, bam::traversal::vertex);
  run("bam cache-line-aware", cached, bam::traversal::line_aware);
  run("bam ODT", cached, bam::traversal::odt);
  if (!o.file.empty()) {
    // The edge list in a file (it stays in the page cache after the write), served by an
    // io_service with a queue per SM and 16 threads.
    {
      std::ofstream out{o.file, std::ios::binary | std::ios::trunc};
      out.write(reinterpret_cast<const char*>(host.neighbors.data()),
                static_cast<std::streamsize>(edges * sizeof(std::uint32_t)));
      if (!out) throw std::runtime_error{"cannot write " + o.file};
    }
    bam::io_service_config config;
    config.queues = static_cast<std::uint32_t>(core::sm_count());
    config.line_bytes = o.line;
    config.threads = 16;
    bam::io_service service{o.file, config, stream};
    bam::array<std::uint32_t, bam::cached_file> in_file{service, 0, edges, {o.line, slots}, stream};
    run("bam ODT, file-backed", in_file, bam::traversal::odt);
    service.check();
    std::remove(o.file.c_str());
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace squeeze_examples
