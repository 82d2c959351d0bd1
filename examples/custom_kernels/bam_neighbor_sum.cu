// SPDX-License-Identifier: Apache-2.0
// bam_neighbor_sum: a user's graph kernel whose edge list stays in host memory, read through
// bam's software cache in GPU memory (Mailthody, PhD thesis, UIUC 2022 (BaM)). For every vertex
// v it sums a value over v's neighbours: the pull step of PageRank or of a GNN layer's
// aggregation, here on integers so that the GPU must match the host exactly.
//
//   out[v] = sum of x[u] over the neighbours u of v         (uint64; x[u] < 2^16)
//
//   graph           CSR: offsets [vertices + 1] in GPU memory,
//                   neighbours [edges] in pinned, mapped host memory
//   neighbours      bam::array<std::uint32_t, bam::cached_host_memory>: 1 KiB lines, a cache
//                   of 5 % of the edge list; kernels take its ref() inside a bam::graph_ref
//   the kernel      a warp per vertex: lane j reads neighbours j, j + 32, ... with
//                   neighbors.read(k) (the lanes that ask for one line share one probe of the
//                   cache), then the warp adds up its lanes' sums
//
// After the kernel, neighbors.check(stream) throws the first error a read reported (an index
// past the end, a failed transfer, a cache that stayed full); the sums are then compared with
// the host's.
//
//   custom_bam_neighbor_sum   exit 0: matches the host; 1: mismatch; 2: error; 77: no GPU
#include <squeeze/bam/array.cuh>
#include <squeeze/bam/graph_ref.cuh>
#include <squeeze/core/buffer.hpp>
#include <squeeze/core/cuda_error.hpp>
#include <squeeze/core/launch.hpp>
#include <squeeze/io/graph.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <span>
#include <vector>

#include "support.hpp"

namespace bam = squeeze::bam;
namespace core = squeeze::core;
namespace io = squeeze::io;

namespace {

using neighbors_array = bam::array<std::uint32_t, bam::cached_host_memory>;
using graph_view = bam::graph_ref<neighbors_array::ref_type>;

constexpr int threads = 256;

/// out[v] = sum of x[u] over the neighbours u of v: a warp per vertex (the warps loop over
/// the vertices), each lane taking every 32nd neighbour.
__global__ void __launch_bounds__(threads)
    neighbor_sum(graph_view g, const std::uint32_t* x, std::uint64_t* out) {
  const unsigned lane = threadIdx.x % 32;
  const std::uint64_t warps = std::uint64_t{gridDim.x} * (threads / 32);
  for (std::uint64_t v = (std::uint64_t{blockIdx.x} * threads + threadIdx.x) / 32; v < g.vertices;
       v += warps) {
    std::uint64_t sum = 0;
    for (std::uint64_t k = g.row_offsets[v] + lane; k < g.row_offsets[v + 1]; k += 32) {
      sum += x[g.neighbors.read(k)];  // through bam's cache
    }
    for (int offset = 16; offset > 0; offset /= 2) {
      sum += __shfl_down_sync(0xffffffffu, sum, offset);
    }
    if (lane == 0) out[v] = sum;
  }
}

}  // namespace

int main() {
  return custom_kernels::run("custom_bam_neighbor_sum", [] {
    // A Kronecker graph (Graph500's parameters): 2^15 vertices, about a million edge entries
    // (4 MB), degrees from 0 to a few thousand.
    io::kron_options options;
    options.scale = 15;
    options.seed = 7;
    const io::graph host = io::generate_kron(options);
    const auto vertices = static_cast<std::uint32_t>(host.num_vertices());
    const std::uint64_t edges = host.num_edges();
    std::vector<std::uint32_t> x(vertices);
    for (std::uint32_t u = 0; u < vertices; ++u) x[u] = (u * 2654435761u) >> 16;

    core::stream stream;
    // The edge list in pinned, mapped host memory; the cache holds 5 % of its lines.
    core::pinned_buffer<std::uint32_t> edge_list{std::max<std::uint64_t>(edges, 1),
                                                 core::host_memory::mapped};
    std::memcpy(edge_list.data(), host.neighbors.data(), edges * sizeof(std::uint32_t));
    const bam::cache_options cache{.line_bytes = 1024,
                                   .slots = std::max<std::uint64_t>(edges * 4 / 1024 / 20, 16)};
    neighbors_array neighbors{edge_list, cache, stream};

    const auto offsets = custom_kernels::upload(host.row_offsets, stream);
    const auto dx = custom_kernels::upload(x, stream);
    core::device_buffer<std::uint64_t> out{vertices};
    out.fill_bytes(0xFF, stream);  // poison: an unwritten sum shows
    const graph_view g{offsets.data(), neighbors.ref(), vertices};
    const unsigned blocks = core::grid_for(vertices, threads / 32, core::per_sm(8));
    neighbor_sum<<<blocks, threads, 0, stream>>>(g, dx.data(), out.data());
    SQUEEZE_CHECK_LAUNCH();
    neighbors.check(stream);  // throws what a read reported; synchronizes `stream`

    std::vector<std::uint64_t> got(vertices);
    out.copy_to(std::span<std::uint64_t>{got}, stream);
    stream.synchronize();
    std::printf(
        "%u vertices, %llu edge entries (%.1f MB in host memory), cache %llu lines of "
        "%u B (%.1f %%)\n",
        vertices, static_cast<unsigned long long>(edges), edges * 4 / 1e6,
        static_cast<unsigned long long>(cache.slots), cache.line_bytes,
        100.0 * static_cast<double>(cache.slots * cache.line_bytes) /
            static_cast<double>(std::max<std::uint64_t>(edges * 4, 1)));
    int bad = 0;
    for (std::uint32_t v = 0; v < vertices; ++v) {
      std::uint64_t want = 0;
      for (const std::uint32_t u : host.neighbors_of(v)) want += x[u];
      if (got[v] != want && bad++ < 5) {
        std::printf("MISMATCH at vertex %u: got %llu, want %llu\n", v,
                    static_cast<unsigned long long>(got[v]), static_cast<unsigned long long>(want));
      }
    }
    return custom_kernels::verdict("custom_bam_neighbor_sum", bad, vertices);
  });
}
