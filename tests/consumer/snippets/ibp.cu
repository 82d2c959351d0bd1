// SPDX-License-Identifier: Apache-2.0
// The IBP blocks of the README (ibp_gather, ibp_kernel) and of docs/guides/ibp.md (guide_ibp),
// compiled as written: the blocks come from the Markdown files at configure time
// (readme_snippets.cmake); this file supplies what they use.
// Its tests run the README blocks on a GPU (skipped without one) and check what the
// README says they do.
// The blocks' heads in the files' order:
// clang-format off
#include "ibp_gather.head.inc"
#include "ibp_kernel.head.inc"
#include "guide_ibp.head.inc"
// clang-format on

#include <cstddef>
#include <cstdint>
#include <vector>

#include "run_checks.hpp"

#include "ibp_kernel.body.inc"  // a kernel: file scope

void readme_ibp_gather([[maybe_unused]] std::size_t nodes, [[maybe_unused]] std::uint32_t row_bytes,
                       [[maybe_unused]] void* out, [[maybe_unused]] const std::int64_t* d_ids,
                       [[maybe_unused]] std::size_t batch,
                       [[maybe_unused]] squeeze::status* d_status,
                       [[maybe_unused]] cudaStream_t stream) {
#include "ibp_gather.body.inc"
}

// docs/guides/ibp.md, each block in a namespace of its own (its names are its own).
namespace guide_ibp {
#include "guide_ibp.body.inc"
}  // namespace guide_ibp

// ---- the README's blocks run (skipped without a GPU) -----------------------------------

// The table is compressed on the GPU and gathered back; "out_of_bounds for a bad index",
// ok for good ones.
TEST(ReadmeIbp, GatherReportsOnlyBadIndices) {
  SNIPPET_REQUIRE_GPU();
  const std::size_t nodes = 256, batch = 8;
  const std::uint32_t row_bytes = 64;
  squeeze::core::device_buffer<std::byte> out{batch * row_bytes};
  snippet_checks::expect_only_bad_indices_reported(
      nodes, [&](const std::int64_t* d_ids, squeeze::status* d_status, cudaStream_t stream) {
        readme_ibp_gather(nodes, row_bytes, out.data(), d_ids, batch, d_status, stream);
      });
}
