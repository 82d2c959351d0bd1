// SPDX-License-Identifier: Apache-2.0
// The BaM blocks of the README (bam) and of docs/guides/bam.md (guide_bam), compiled as
// written: the blocks come from the Markdown files at configure time (readme_snippets.cmake);
// this file supplies what they use.
// The blocks' heads in the files' order:
// clang-format off
#include "bam.head.inc"
#include "guide_bam.head.inc"
// clang-format on

#include <cstdint>

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
