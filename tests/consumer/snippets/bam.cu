// SPDX-License-Identifier: Apache-2.0
// The BaM blocks of the README (bam) and of docs/guides/bam.md (guide_bam), compiled as
// written: the blocks come from the Markdown files at configure time (readme_snippets.cmake);
// this file supplies what they use. Its tests run the README blocks on a GPU
// (skipped without one) and check what the README says they do.
// The blocks' heads in the files' order:
// clang-format off
#include "bam.head.inc"
#include "guide_bam.head.inc"
// clang-format on

#include <cstdint>
#include <vector>

#include "run_checks.hpp"

// The block's my_kernel: sums the array (a.read through the cache).
template <class ArrayRef>
__global__ void my_kernel(ArrayRef a) {
  const std::uint64_t stride = std::uint64_t{gridDim.x} * blockDim.x;
  unsigned long long sum = 0;
  for (std::uint64_t i = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; i < a.size();
       i += stride)
    sum += a.read(i);
  if (sum == 0xFFFFFFFFFFFFFFFFull) a.write(0, 0);  // keeps the loop
}

void readme_bam([[maybe_unused]] std::uint64_t m, [[maybe_unused]] std::uint32_t n,
                [[maybe_unused]] const std::uint64_t* offsets, [[maybe_unused]] std::uint32_t* fvl,
                [[maybe_unused]] std::uint32_t source, [[maybe_unused]] std::uint32_t* depth,
                [[maybe_unused]] unsigned blocks, [[maybe_unused]] cudaStream_t stream) {
#include "bam.body.inc"
}

// docs/guides/bam.md, each block in a namespace of its own (its names are its own).
namespace guide_bam {
#include "guide_bam.body.inc"
}  // namespace guide_bam

// ---- the README's blocks run (skipped without a GPU) -----------------------------------

// The array, a kernel reading all of it through the cache, check(), the first-vertex list and
// a BFS. The block leaves the edge list's contents to the caller ("yours"), so the graph here
// gives them to the last vertex only and the BFS starts at vertex 0, which has none: depth 0
// there, every other vertex unreached.
TEST(ReadmeBam, CachedArrayAndBfsRun) {
  SNIPPET_REQUIRE_GPU();
  squeeze::core::stream stream;
  const std::uint64_t m = 1 << 20;  // 40 cache lines of 1 KiB: 1 % of the 4 MiB
  const std::uint32_t n = 1000;
  std::vector<std::uint64_t> offsets(n + 1, 0);
  offsets[n] = m;
  const auto d_offsets = snippet_checks::upload(offsets, stream);
  auto fvl = snippet_checks::upload(std::vector<std::uint32_t>(m * 4 / 1024 + 1, 0), stream);
  auto depth = snippet_checks::upload(std::vector<std::uint32_t>(n, 12345), stream);
  readme_bam(m, n, d_offsets.data(), fvl.data(), 0, depth.data(), 64, stream);
  const std::vector<std::uint32_t> got = snippet_checks::download(depth, stream);
  EXPECT_EQ(got[0], 0u);
  for (std::uint32_t v = 1; v < n; ++v) ASSERT_EQ(got[v], bam::unreached) << v;
}
