// SPDX-License-Identifier: Apache-2.0
// The FRSZ2 blocks of the README (frsz2_solver, frsz2_kernel) and of docs/guides/frsz2.md
// (guide_frsz2), compiled as written: the blocks come from the Markdown files at configure time
// (readme_snippets.cmake); this file supplies what they use.
// Its tests run the README blocks on a GPU (skipped without one) and check what the
// README says they do.
// The blocks' heads in the files' order:
// clang-format off
#include "frsz2_solver.head.inc"
#include "frsz2_kernel.head.inc"
#include "guide_frsz2.head.inc"
// clang-format on

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "run_checks.hpp"

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

// ---- the README's blocks run (skipped without a GPU) -----------------------------------

// The solver solves (x checked on the host), and `twice` doubles the stored values (within
// frsz2_21's error: 2^-20 of a block's largest magnitude, here <= 1).
TEST(ReadmeFrsz2, SolverSolvesAndKernelDoubles) {
  SNIPPET_REQUIRE_GPU();
  squeeze::core::stream stream;
  const std::size_t n = 1024;  // a multiple of 512, as `twice` needs
  std::vector<std::int32_t> row_ptr{0}, col_idx;
  std::vector<double> values, b(n), v(n);
  for (std::size_t i = 0; i < n; ++i) {  // tridiagonal, diagonally dominant
    for (std::size_t j = i == 0 ? 0 : i - 1; j <= std::min(n - 1, i + 1); ++j) {
      col_idx.push_back(static_cast<std::int32_t>(j));
      values.push_back(j == i ? 4.0 : -1.0 - 0.001 * static_cast<double>(i % 7));
    }
    row_ptr.push_back(static_cast<std::int32_t>(col_idx.size()));
    b[i] = std::sin(0.37 * static_cast<double>(i)) + 0.5;
    v[i] = std::cos(1.3 * static_cast<double>(i)) * (i % 3 == 0 ? 1.0 : 1e-3);
  }
  const auto d_b = snippet_checks::upload(b, stream);
  auto d_x = snippet_checks::upload(std::vector<double>(n, 0.0), stream);
  const auto d_values = snippet_checks::upload(v, stream);
  auto d_out = snippet_checks::upload(std::vector<double>(n, -7.0), stream);
  readme_frsz2_solver(static_cast<std::int64_t>(n), static_cast<std::int64_t>(n), row_ptr, col_idx,
                      values, d_b.data(), d_x.data(), n, d_values.data(), d_out.data(), stream);
  const std::vector<double> x = snippet_checks::download(d_x, stream);
  double r2 = 0, b2 = 0;
  for (std::size_t i = 0; i < n; ++i) {
    double ax = 0;
    for (std::int32_t k = row_ptr[i]; k < row_ptr[i + 1]; ++k) ax += values[k] * x[col_idx[k]];
    r2 += (b[i] - ax) * (b[i] - ax);
    b2 += b[i] * b[i];
  }
  EXPECT_LE(std::sqrt(r2 / b2), 1e-10);
  const std::vector<double> out = snippet_checks::download(d_out, stream);
  for (std::size_t i = 0; i < n; ++i) ASSERT_NEAR(out[i], 2 * v[i], 4e-6) << i;
}
