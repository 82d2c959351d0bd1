// SPDX-License-Identifier: Apache-2.0
// The xfer blocks of the README (xfer_gather, xfer_kernel) and of docs/guides/xfer.md
// (guide_xfer_policies, guide_xfer), compiled as written: the blocks come from the Markdown
// files at configure time (readme_snippets.cmake); this file supplies what they use.
// Its tests run the README blocks on a GPU (skipped without one) and check what the
// README says they do.
// The blocks' heads in the files' order:
// clang-format off
#include "xfer_gather.head.inc"
#include "xfer_kernel.head.inc"
#include "guide_xfer_policies.head.inc"
#include "guide_xfer.head.inc"
// clang-format on

#include <cstddef>
#include <cstdint>
#include <vector>

#include "run_checks.hpp"

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

// ---- the README's blocks run (skipped without a GPU) -----------------------------------

// "status_out receives status::out_of_bounds for a bad index": and ok for good ones.
TEST(ReadmeXfer, GatherReportsOnlyBadIndices) {
  SNIPPET_REQUIRE_GPU();
  const std::size_t nodes = 100, features = 16, batch = 8;
  squeeze::core::device_buffer<float> out{batch * features};
  snippet_checks::expect_only_bad_indices_reported(
      nodes, [&](const std::int64_t* d_ids, squeeze::status* d_status, cudaStream_t stream) {
        readme_xfer_gather(nodes, features, out.data(), d_ids, batch, d_status, stream);
      });
}

// The consume kernel walks streams of any length, in pieces, without a fault.
TEST(ReadmeXfer, ConsumeWalksStreamsOfAnyLength) {
  SNIPPET_REQUIRE_GPU();
  squeeze::core::stream stream;
  const std::vector<std::size_t> sizes{0, 1, 639, 5000};
  squeeze::core::device_buffer<std::byte> bytes{8192};
  bytes.fill_bytes(0x5a, stream);
  std::vector<const std::byte*> starts{bytes.data(), bytes.data() + 3, bytes.data() + 100,
                                       bytes.data() + 1001};
  const auto d_sizes = snippet_checks::upload(sizes, stream);
  const auto d_starts = snippet_checks::upload(starts, stream);
  consume<<<1, 128, 0, stream>>>(d_starts.data(), d_sizes.data());
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
}
