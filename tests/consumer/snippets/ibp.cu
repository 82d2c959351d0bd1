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
#include <cstring>
#include <random>
#include <span>
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

// The README's kernel decodes rows of a condensed set (built by the host reference encoder
// from rows whose top byte of every 4-byte chunk is the same) and reports what it finds:
// ok for whole rows, truncated or corrupt for a row whose offsets cut it short.
TEST(ReadmeIbp, KernelDecodesRowsAndReportsACutRow) {
  SNIPPET_REQUIRE_GPU();
  constexpr std::uint32_t row_bytes = 256;  // use_rows holds rows of up to 512 bytes
  constexpr std::size_t rows = 16;          // 4 blocks of 4 warps, a row each
  std::vector<std::byte> table(rows * row_bytes);
  std::mt19937 rng{3};
  for (std::size_t c = 0; c < table.size(); c += 4) {
    const std::uint32_t v = (static_cast<std::uint32_t>(rng()) & 0x00ffffffu) | 0x5a000000u;
    std::memcpy(table.data() + c, &v, 4);
  }
  const ibp::codebook cb = ibp::make_codebook(
      ibp::count_set_bits(std::span<const std::byte>{table}, rows, row_bytes), rows, rows - 1, 4);
  const ibp::compressed_set set =
      ibp::compress(std::span<const std::byte>{table}, rows, cb, ibp::layout::condensed);
  ASSERT_LT(set.data.size(), table.size());  // the invariant top bytes are gone

  squeeze::core::stream stream;
  const ibp::device_codebook d_cb{cb, stream};
  const auto d_data = snippet_checks::upload(set.data, stream);
  std::vector<std::int64_t> ids(rows);
  for (std::size_t i = 0; i < rows; ++i) ids[i] = static_cast<std::int64_t>(rows - 1 - i);
  const auto d_ids = snippet_checks::upload(ids, stream);
  squeeze::core::device_buffer<squeeze::status> status{1};
  const auto decode = [&](const std::vector<std::uint64_t>& offsets) {
    const auto d_offsets = snippet_checks::upload(offsets, stream);
    status.fill_bytes(0, stream);
    use_rows<<<rows / 4, 128, 0, stream>>>(d_data.data(), d_data.size(), d_offsets.data(),
                                           d_cb.ref(), d_ids.data(), status.data());
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
    return snippet_checks::download(status, stream)[0];
  };
  EXPECT_EQ(decode(set.offsets), squeeze::status::ok);
  std::vector<std::uint64_t> cut = set.offsets;
  cut[6] = cut[5] + 1;  // row 5 stored in 1 byte: its stream ends early
  const squeeze::status got = decode(cut);
  EXPECT_TRUE(got == squeeze::status::truncated || got == squeeze::status::corrupt)
      << "status " << static_cast<int>(got);
}
