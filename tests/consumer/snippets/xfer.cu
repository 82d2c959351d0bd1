// SPDX-License-Identifier: Apache-2.0
// The README's xfer blocks (xfer_gather, xfer_kernel), compiled as written: the blocks come
// from README.md at configure time (readme_snippets.cmake); this file supplies what they use.
// The blocks' heads in the README's order:
// clang-format off
#include "xfer_gather.head.inc"
#include "xfer_kernel.head.inc"
// clang-format on

#include <cstddef>
#include <cstdint>

#include "xfer_kernel.body.inc"  // a kernel: file scope

void readme_xfer_gather([[maybe_unused]] std::size_t nodes, [[maybe_unused]] std::size_t features,
                        [[maybe_unused]] void* out, [[maybe_unused]] const std::int64_t* d_ids,
                        [[maybe_unused]] std::size_t batch,
                        [[maybe_unused]] squeeze::status* d_status,
                        [[maybe_unused]] cudaStream_t stream) {
#include "xfer_gather.body.inc"
}
