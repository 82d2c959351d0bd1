// SPDX-License-Identifier: Apache-2.0
// The ROAST blocks of the README (roast) and of docs/guides/roast.md (guide_roast), compiled
// as written for sm_90a (the tensor-core path): the blocks come from the Markdown files at
// configure time (readme_snippets.cmake); this file supplies what they use.
// The blocks' heads in the files' order:
// clang-format off
#include "roast.head.inc"
#include "guide_roast.head.inc"
// clang-format on

#include <cuda_bf16.h>

#include <cstdint>

void readme_roast([[maybe_unused]] std::uint64_t K, [[maybe_unused]] std::uint64_t N,
                  [[maybe_unused]] double C, [[maybe_unused]] std::uint64_t m_size,
                  [[maybe_unused]] std::uint64_t batch, [[maybe_unused]] const __nv_bfloat16* m,
                  [[maybe_unused]] const __nv_bfloat16* x, [[maybe_unused]] __nv_bfloat16* y,
                  [[maybe_unused]] const __nv_bfloat16* dy, [[maybe_unused]] __nv_bfloat16* dx,
                  [[maybe_unused]] float* dm, [[maybe_unused]] cudaStream_t stream) {
#include "roast.body.inc"
}

// docs/guides/roast.md, each block in a namespace of its own (its names are its own).
namespace guide_roast {
#include "guide_roast.body.inc"
}  // namespace guide_roast
