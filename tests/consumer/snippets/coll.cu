// SPDX-License-Identifier: Apache-2.0
// The coll blocks of the README (coll_nccl, coll_mpi) and of docs/guides/coll.md (guide_coll),
// compiled as written and linked with squeeze::nccl and squeeze::mpi: the blocks come from the
// Markdown files at configure time (readme_snippets.cmake); this file supplies what they use.
// Its tests run the README blocks on a GPU (skipped without one) and check what the
// README says they do.
// The blocks' heads in the files' order:
// clang-format off
#include "coll_nccl.head.inc"
#include "coll_mpi.head.inc"
#include "guide_coll.head.inc"
// clang-format on

#include <cmath>
#include <cstddef>
#include <cstring>
#include <vector>

#include "run_checks.hpp"

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

// ---- the README's blocks run (skipped without a GPU) -----------------------------------

// The NCCL block on a one-rank communicator: every reduction over one rank returns its input
// bit for bit (the allreducer copies; nothing goes through the codec). The MPI block needs
// MPI_Init and a launcher: compiled only.
TEST(ReadmeColl, NcclBlockOnOneRankReturnsItsInput) {
  SNIPPET_REQUIRE_GPU();
  ncclComm_t comm = nullptr;
  int device = 0;
  ASSERT_EQ(ncclCommInitAll(&comm, 1, &device), ncclSuccess);
  {
    squeeze::core::stream stream;
    const std::size_t count = 10000;
    std::vector<float> grad(count), x(count);
    for (std::size_t i = 0; i < count; ++i) {
      grad[i] = std::sin(0.1f * static_cast<float>(i));
      x[i] = std::cos(0.3f * static_cast<float>(i));
    }
    auto d_grad = snippet_checks::upload(grad, stream);
    const auto d_x = snippet_checks::upload(x, stream);
    auto d_y = snippet_checks::upload(std::vector<float>(count, -1.0f), stream);
    readme_coll_nccl(comm, d_grad.data(), d_x.data(), d_y.data(), count, stream);
    const std::vector<float> got_grad = snippet_checks::download(d_grad, stream);
    const std::vector<float> got_y = snippet_checks::download(d_y, stream);
    EXPECT_EQ(std::memcmp(got_grad.data(), grad.data(), count * sizeof(float)), 0);
    EXPECT_EQ(std::memcmp(got_y.data(), x.data(), count * sizeof(float)), 0);
  }
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}
