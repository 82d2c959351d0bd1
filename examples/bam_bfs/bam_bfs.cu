// SPDX-License-Identifier: Apache-2.0
// bam_bfs: breadth-first search over a graph whose edge list stays in host memory, read by
// the GPU directly (EMOGI's zero-copy) or through bam's cache of 1 % of the edge list with
// each of the three traversals; every result is checked against a host BFS.
//
//   bam_bfs [--graph kron|urand|PATH] [--scale N] [--degree N] [--cache-percent P]
//           [--line B] [--repeats N] [--file PATH] [--source V]
//           (default source: a vertex of largest degree)
#include <cstdio>
#include <exception>
#include <string_view>
#include <vector>

#include "common/bam_graph.cuh"
#include "common/gpu.hpp"

using namespace squeeze_examples;

int main(int argc, char** argv) {
  try {
    std::uint32_t source = 0xffffffffu;  // default: a vertex of largest degree
    const graph_options o = parse_graph_options(argc, argv, [&](int n, char** v, int& i) {
      if (std::string_view{v[i]} != "--source") return false;
      source = parse_number<std::uint32_t>("--source", option_value(n, v, i));
      return true;
    });
    const auto presence = core::detect_devices();
    if (!presence.present()) return exit_without_gpu("bam_bfs", presence);
    const io::graph g = load_graph(o);
    if (source == 0xffffffffu) {
      source = 0;
      for (std::uint32_t v = 1; v < g.num_vertices(); ++v) {
        if (g.degree(v) > g.degree(source)) source = v;
      }
    }
    if (source >= g.num_vertices()) throw usage_error{"--source is not a vertex of the graph"};
    std::printf("source %u (degree %llu)\n", source,
                static_cast<unsigned long long>(g.degree(source)));
    const auto reference = io::bfs_reference(g, source);
    return run_every_traversal(
        "bfs", g, o, reference,
        [&](const auto& ref, std::uint64_t edges, bam::traversal how, std::uint32_t* depth,
            cudaStream_t stream) { return bam::bfs(ref, edges, source, how, depth, stream); });
  } catch (const usage_error& e) {
    std::fprintf(stderr, "bam_bfs: %s\nusage: bam_bfs [options] [--source V]\n%s",
                 e.message.c_str(), graph_usage());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bam_bfs: %s\n", e.what());
    return 1;
  }
}
