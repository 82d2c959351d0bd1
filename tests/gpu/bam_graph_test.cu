// SPDX-License-Identifier: Apache-2.0
// bam::bfs and bam::connected_components on generated graphs (Kronecker with Graph500
// parameters, uniform random) against io's host references, for every traversal over a
// cached edge list (caches of 1-2 % of the edge list, lines of 512 B and 4 KiB) and the
// direct zero-copy baseline; the FirstVertexList built on the GPU against the host's.
// Outputs are poisoned with 0xFF bytes first. Everything runs on a stream of the test's own.
#include <squeeze/bam/graph.cuh>
#include <squeeze/core/buffer.hpp>
#include <squeeze/core/cuda_error.hpp>
#include <squeeze/io/graph.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "common/gpu_test.hpp"

namespace bam = squeeze::bam;
namespace core = squeeze::core;
namespace io = squeeze::io;

// The GPU traversals and the host reference mark an unreached vertex alike.
static_assert(bam::unreached == io::unreached);

namespace {

struct gpu_graph {
  core::device_buffer<std::uint64_t> offsets;
  core::pinned_buffer<std::uint32_t> neighbors;
  std::uint32_t vertices;
  std::uint64_t edges;

  gpu_graph(const io::graph& g, cudaStream_t s)
      : offsets{g.row_offsets.size()},
        neighbors{std::max<std::size_t>(g.neighbors.size(), 1), core::host_memory::mapped},
        vertices{static_cast<std::uint32_t>(g.num_vertices())},
        edges{g.num_edges()} {
    offsets.copy_from(std::span<const std::uint64_t>{g.row_offsets}, s);
    std::memcpy(neighbors.data(), g.neighbors.data(), g.neighbors.size() * sizeof(std::uint32_t));
  }
};

std::vector<std::uint32_t> download(const core::device_buffer<std::uint32_t>& d, cudaStream_t s) {
  std::vector<std::uint32_t> h(d.size());
  d.copy_to(std::span<std::uint32_t>{h}, s);
  SQUEEZE_CUDA_TRY(cudaStreamSynchronize(s));
  return h;
}

template <class Array>
void check_graph(const io::graph& host, const gpu_graph& g, Array& neighbors, bam::traversal how,
                 const std::uint32_t* fvl, cudaStream_t s) {
  const bam::graph_ref<typename Array::ref_type> ref{g.offsets.data(), neighbors.ref(), g.vertices,
                                                     fvl};
  core::device_buffer<std::uint32_t> out{g.vertices};
  std::uint32_t hub = 0;
  for (std::uint32_t v = 1; v < g.vertices; ++v) hub = host.degree(v) > host.degree(hub) ? v : hub;
  for (const std::uint32_t source : {hub, 0u, g.vertices / 2, g.vertices - 1}) {
    out.fill_bytes(0xFF, s);
    bam::bfs(ref, g.edges, source, how, out.data(), s);
    neighbors.check(s);
    EXPECT_EQ(download(out, s), io::bfs_reference(host, source)) << "BFS from " << source;
  }
  out.fill_bytes(0xFF, s);
  bam::connected_components(ref, g.edges, how, out.data(), s);
  neighbors.check(s);
  EXPECT_EQ(download(out, s), io::cc_reference(host)) << "CC";
}

void check_every_traversal(const io::graph& host) {
  core::stream s;
  const gpu_graph g{host, s};
  {
    SCOPED_TRACE("direct zero-copy");
    bam::array<std::uint32_t, bam::mapped_host_memory> direct{g.neighbors, s};
    check_graph(host, g, direct, bam::traversal::vertex, nullptr, s);
  }
  for (const std::uint32_t line : {512u, 4096u}) {
    const std::uint64_t lines = (g.edges * 4 + line - 1) / line;
    const std::uint64_t slots = std::max<std::uint64_t>(lines / 64, 16);  // ~1.5 % of the data
    bam::array<std::uint32_t, bam::cached_host_memory> cached{g.neighbors, {line, slots}, s};
    const std::uint64_t per_line = line / 4;
    core::device_buffer<std::uint32_t> fvl{std::max<std::uint64_t>(lines, 1)};
    fvl.fill_bytes(0xFF, s);
    bam::first_vertex_list(g.offsets.data(), g.vertices, g.edges, per_line, fvl.data(), s);
    std::vector<std::uint32_t> got = download(fvl, s);
    got.resize(lines);
    EXPECT_EQ(got, io::first_vertex_list(host, per_line)) << "FirstVertexList, line " << line;
    for (const auto how :
         {bam::traversal::vertex, bam::traversal::line_aware, bam::traversal::odt}) {
      SCOPED_TRACE("line " + std::to_string(line) + " traversal " +
                   std::to_string(static_cast<int>(how)) + " slots " + std::to_string(slots));
      check_graph(host, g, cached, how, fvl.data(), s);
    }
  }
}

}  // namespace

TEST(BamGraph, KroneckerEveryTraversal) {
  SQUEEZE_REQUIRE_GPU();
  io::kron_options o;
  o.scale = 14;
  o.seed = 3;
  check_every_traversal(io::generate_kron(o));
}

TEST(BamGraph, UniformRandomEveryTraversal) {
  SQUEEZE_REQUIRE_GPU();
  io::urand_options o;
  o.num_vertices = 1 << 14;
  o.edge_factor = 8;
  o.seed = 4;
  check_every_traversal(io::generate_urand(o));
}

TEST(BamGraph, BadArgumentsThrow) {
  SQUEEZE_REQUIRE_GPU();
  io::urand_options o;
  o.num_vertices = 64;
  o.edge_factor = 2;
  const io::graph host = io::generate_urand(o);
  core::stream s;
  const gpu_graph g{host, s};
  core::device_buffer<std::uint32_t> out{g.vertices};
  bam::array<std::uint32_t, bam::mapped_host_memory> direct{g.neighbors, s};
  const bam::graph_ref<decltype(direct)::ref_type> d{g.offsets.data(), direct.ref(), g.vertices,
                                                     nullptr};
  EXPECT_THROW(bam::bfs(d, g.edges, 0, bam::traversal::line_aware, out.data(), s),
               squeeze::invalid_argument);
  EXPECT_THROW(bam::bfs(d, g.edges, g.vertices, bam::traversal::vertex, out.data(), s),
               squeeze::invalid_argument);
  bam::array<std::uint32_t, bam::cached_host_memory> cached{g.neighbors, {512, 4}, s};
  const bam::graph_ref<decltype(cached)::ref_type> c{g.offsets.data(), cached.ref(), g.vertices,
                                                     nullptr};
  EXPECT_THROW(bam::bfs(c, g.edges, 0, bam::traversal::odt, out.data(), s),
               squeeze::invalid_argument);
}
