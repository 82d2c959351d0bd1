// SPDX-License-Identifier: Apache-2.0
// The xfer blocks of the README (xfer_gather, xfer_kernel) and of docs/guides/xfer.md
// (guide_xfer_policies, guide_xfer), compiled as written: the blocks come from the Markdown
// files at configure time (readme_snippets.cmake); this file supplies what they use.
// The blocks' heads in the files' order:
// clang-format off
#include "xfer_gather.head.inc"
#include "xfer_kernel.head.inc"
#include "guide_xfer_policies.head.inc"
#include "guide_xfer.head.inc"
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

// docs/guides/xfer.md, each block in a namespace of its own (its names are its own).
namespace guide_xfer_policies {
#include "guide_xfer_policies.body.inc"
}  // namespace guide_xfer_policies
namespace guide_xfer {
#include "guide_xfer.body.inc"
}  // namespace guide_xfer
