// SPDX-License-Identifier: Apache-2.0
// bam_cc: connected components (min-label propagation) over a graph whose edge list stays in
// host memory, read by the GPU directly (EMOGI's zero-copy) or through bam's cache of 1 % of
// the edge list with each of the three traversals; every labeling is checked against a host
// CC (a label is the smallest vertex id of its component).
//
//   bam_cc [--graph kron|urand|PATH] [--scale N] [--degree N] [--cache-percent P]
//          [--line B] [--repeats N] [--file PATH]
#include <cstdio>
#include <exception>

#include "common/bam_graph.cuh"
#include "common/gpu.hpp"

using namespace squeeze_examples;

int main(int argc, char** argv) {
  try {
    const graph_options o =
        parse_graph_options(argc, argv, [](int, char**, int&) { return false; });
    const auto presence = core::detect_devices();
    if (!presence.present()) return exit_without_gpu("bam_cc", presence);
    const io::graph g = load_graph(o);
    const auto reference = io::cc_reference(g);
    std::printf("%llu components\n",
                static_cast<unsigned long long>(io::count_components(reference)));
    return run_every_traversal("cc ", g, o, reference,
                               [](const auto& ref, std::uint64_t edges, bam::traversal how,
                                  std::uint32_t* label, cudaStream_t stream) {
                                 return bam::connected_components(ref, edges, how, label, stream);
                               });
  } catch (const usage_error& e) {
    std::fprintf(stderr, "bam_cc: %s\nusage: bam_cc [options]\n%s", e.message.c_str(),
                 graph_usage());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bam_cc: %s\n", e.what());
    return 1;
  }
}
