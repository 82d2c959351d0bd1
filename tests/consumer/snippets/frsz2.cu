// SPDX-License-Identifier: Apache-2.0
// The FRSZ2 blocks of the README (frsz2_solver, frsz2_kernel) and of docs/guides/frsz2.md
// (guide_frsz2), compiled as written: the blocks come from the Markdown files at configure time
// (readme_snippets.cmake); this file supplies what they use.
// The blocks' heads in the files' order:
// clang-format off
#include "frsz2_solver.head.inc"
#include "frsz2_kernel.head.inc"
#include "guide_frsz2.head.inc"
// clang-format on

#include <cstddef>
#include <cstdint>
#include <span>

#include "frsz2_kernel.body.inc"  // the kernel `twice`: file scope

void readme_frsz2_solver([[maybe_unused]] std::int64_t rows, [[maybe_unused]] std::int64_t cols,
                         [[maybe_unused]] std::span<const std::int32_t> row_ptr,
                         [[maybe_unused]] std::span<const std::int32_t> col_idx,
                         [[maybe_unused]] std::span<const double> values,
                         [[maybe_unused]] const double* d_b, [[maybe_unused]] double* d_x,
                         [[maybe_unused]] std::size_t n, [[maybe_unused]] const double* d_values,
                         [[maybe_unused]] double* d_out, [[maybe_unused]] cudaStream_t stream) {
#include "frsz2_solver.body.inc"
}

// docs/guides/frsz2.md, each block in a namespace of its own (its names are its own).
namespace guide_frsz2 {
#include "guide_frsz2.body.inc"
}  // namespace guide_frsz2
