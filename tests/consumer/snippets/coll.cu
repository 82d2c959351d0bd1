// SPDX-License-Identifier: Apache-2.0
// The coll blocks of the README (coll_nccl, coll_mpi) and of docs/guides/coll.md (guide_coll),
// compiled as written and linked with squeeze::nccl and squeeze::mpi: the blocks come from the
// Markdown files at configure time (readme_snippets.cmake); this file supplies what they use.
// The blocks' heads in the files' order:
// clang-format off
#include "coll_nccl.head.inc"
#include "coll_mpi.head.inc"
#include "guide_coll.head.inc"
// clang-format on

#include <cstddef>

void readme_coll_nccl([[maybe_unused]] ncclComm_t comm, [[maybe_unused]] float* d_grad,
                      [[maybe_unused]] const float* d_x, [[maybe_unused]] float* d_y,
                      [[maybe_unused]] std::size_t count, [[maybe_unused]] cudaStream_t stream) {
#include "coll_nccl.body.inc"
}

void readme_coll_mpi([[maybe_unused]] float* d_grad, [[maybe_unused]] std::size_t count,
                     [[maybe_unused]] cudaStream_t stream) {
#include "coll_mpi.body.inc"
}

// docs/guides/coll.md, each block in a namespace of its own (its names are its own).
namespace guide_coll {
#include "guide_coll.body.inc"
}  // namespace guide_coll
