// SPDX-License-Identifier: Apache-2.0
// squeeze/io/stencil.hpp: generated test matrices: the 3D convection-diffusion operator on a
// regular grid, a stand-in for SuiteSparse's atmosmodd (1,270,432 rows, nonsymmetric).
//
// The operator is  L u = -eps * Laplace(u) + beta . grad(u) + sigma * u  on the unit cube,
// with u = 0 on the boundary (Dirichlet). The unknowns are the interior grid points
//
//   (x_i, y_j, z_k) = ((i + 1) h_x, (j + 1) h_y, (k + 1) h_z),   0 <= i < nx, ...
//   h_x = 1 / (nx + 1),  h_y = 1 / (ny + 1),  h_z = 1 / (nz + 1)
//   row p = i + nx * (j + ny * k)                   (lexicographic, x fastest)
//
// Diffusion is discretized with central differences, convection with first-order upwind
// differences (the neighbour a particle comes from), so the matrix is a nonsingular M-matrix
// for every beta: off-diagonal entries are <= 0 and every row is weakly diagonally dominant
// (interior rows with sigma = 0 sum to zero, rows next to the boundary to more). Its
// symmetric part is positive definite, so GMRES(m) converges for every restart length m.
// The matrix is L scaled by h^2, h = min(h_x, h_y, h_z), so entries are O(1). With
// r_d = h^2 / h_d^2 and c_d = |beta_d| h^2 / h_d for the directions d = x, y, z:
//
//   diagonal                                 sum_d (2 eps r_d + c_d) + sigma h^2
//   upwind neighbour   (p - s_d if beta_d >= 0, p + s_d if beta_d < 0)     -eps r_d - c_d
//   downwind neighbour (the other one)                                     -eps r_d
//
// where s_x = 1, s_y = nx, s_z = nx ny. On a cube (n^3 unknowns, h = 1 / (n + 1)) that is
// diagonal 6 eps + h (|b_x| + |b_y| + |b_z|) + sigma h^2, upwind -eps - |b_d| h, downwind
// -eps. Neighbours outside the grid (on the boundary, where u = 0) are dropped, so each row
// holds 7 entries minus one per grid face it touches, and
//   nnz = 7 nx ny nz - 2 (ny nz [nx > 0] + nx nz [ny > 0] + nx ny [nz > 0])
//       = 7 nx ny nz - 2 (ny nz + nx nz + nx ny)      for nx, ny, nz >= 1.
// Columns are sorted within each row (z-, y-, x-, diagonal, x+, y+, z+).
//
// Defaults: eps = 1, beta = (50, 50, 50), sigma = 0. On the 108^3 grid (h = 1/109) that is
// diagonal 6 + 150/109 = 7.376, upwind -1 - 50/109 = -1.459, downwind -1: clearly
// nonsymmetric (the pair (p, p - 1), (p - 1, p) differs by 46 %) yet diagonally dominant.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "squeeze/core/error.hpp"
#include "squeeze/io/csr.hpp"

namespace squeeze::io {

/// Coefficients of -eps Laplace(u) + beta . grad(u) + sigma u (see the comment above).
struct convection_diffusion_params {
  std::array<double, 3> beta{50.0, 50.0, 50.0};  ///< convection velocity (x, y, z)
  double diffusion = 1.0;                        ///< eps > 0
  double reaction = 0.0;                         ///< sigma >= 0 (a shift: 1/dt, say)
};

/// The 3D convection-diffusion matrix on an nx x ny x nz interior grid of the unit cube:
/// 7-point stencil, upwind convection, Dirichlet boundaries, lexicographic order (x fastest),
/// scaled by h^2 (formulas in the comment above). Throws invalid_argument when a size is below
/// 1, when nx ny nz or nnz does not fit int32, or when diffusion <= 0, reaction < 0 or a
/// coefficient is not finite. O(nnz) time, no sorting: 108^3 takes well under a second.
[[nodiscard]] inline csr_matrix<double, std::int32_t> convection_diffusion_3d(
    std::int64_t nx, std::int64_t ny, std::int64_t nz,
    const convection_diffusion_params& params = {}) {
  if (nx < 1 || ny < 1 || nz < 1) {
    throw invalid_argument{"convection_diffusion_3d: grid " + std::to_string(nx) + " x " +
                           std::to_string(ny) + " x " + std::to_string(nz) +
                           " must have at least 1 point in each direction"};
  }
  constexpr std::int64_t index_max = std::numeric_limits<std::int32_t>::max();
  // (Each factor is checked before it multiplies, so nothing overflows int64.)
  if (nx > index_max || ny > index_max / nx || nz > index_max / (nx * ny) ||
      7 * nx * ny * nz > index_max) {
    throw invalid_argument{"convection_diffusion_3d: grid " + std::to_string(nx) + " x " +
                           std::to_string(ny) + " x " + std::to_string(nz) +
                           " has too many rows or entries for int32 indices (at most " +
                           std::to_string(index_max) + " entries)"};
  }
  const auto finite = [](double v) { return std::isfinite(v); };
  if (!finite(params.diffusion) || params.diffusion <= 0.0 || !finite(params.reaction) ||
      params.reaction < 0.0 || !finite(params.beta[0]) || !finite(params.beta[1]) ||
      !finite(params.beta[2])) {
    throw invalid_argument{
        "convection_diffusion_3d: need finite coefficients with diffusion > 0 and reaction >= "
        "0; got diffusion " +
        std::to_string(params.diffusion) + ", reaction " + std::to_string(params.reaction) +
        ", beta (" + std::to_string(params.beta[0]) + ", " + std::to_string(params.beta[1]) + ", " +
        std::to_string(params.beta[2]) + ")"};
  }

  const std::int64_t extent[3] = {nx, ny, nz};
  const std::int64_t stride[3] = {1, nx, nx * ny};
  const double h = 1.0 / static_cast<double>(std::max({nx, ny, nz}) + 1);
  double minus[3], plus[3];  // coefficient of u(p - s_d), u(p + s_d)
  double diagonal = params.reaction * h * h;
  for (int d = 0; d < 3; ++d) {
    const double h_d = 1.0 / static_cast<double>(extent[d] + 1);
    const double diffusion = params.diffusion * (h * h) / (h_d * h_d);
    const double convection = std::abs(params.beta[d]) * (h * h) / h_d;
    diagonal += 2.0 * diffusion + convection;
    minus[d] = -diffusion - (params.beta[d] >= 0.0 ? convection : 0.0);
    plus[d] = -diffusion - (params.beta[d] >= 0.0 ? 0.0 : convection);
  }

  const std::int64_t n = nx * ny * nz;
  const std::int64_t nnz = 7 * n - 2 * (ny * nz + nx * nz + nx * ny);
  csr_matrix<double, std::int32_t> a;
  a.rows = n;
  a.cols = n;
  a.row_ptr.resize(static_cast<std::size_t>(n) + 1);
  a.col_idx.resize(static_cast<std::size_t>(nnz));
  a.values.resize(static_cast<std::size_t>(nnz));
  std::int32_t* col = a.col_idx.data();
  double* val = a.values.data();
  std::int64_t k = 0;  // entries written
  std::int64_t p = 0;  // row
  const auto put = [&](std::int64_t c, double v) {
    col[k] = static_cast<std::int32_t>(c);
    val[k] = v;
    ++k;
  };
  for (std::int64_t z = 0; z < nz; ++z) {
    for (std::int64_t y = 0; y < ny; ++y) {
      for (std::int64_t x = 0; x < nx; ++x, ++p) {
        a.row_ptr[static_cast<std::size_t>(p)] = static_cast<std::int32_t>(k);
        if (z > 0) put(p - stride[2], minus[2]);
        if (y > 0) put(p - stride[1], minus[1]);
        if (x > 0) put(p - stride[0], minus[0]);
        put(p, diagonal);
        if (x + 1 < nx) put(p + stride[0], plus[0]);
        if (y + 1 < ny) put(p + stride[1], plus[1]);
        if (z + 1 < nz) put(p + stride[2], plus[2]);
      }
    }
  }
  a.row_ptr[static_cast<std::size_t>(n)] = static_cast<std::int32_t>(k);
  return a;
}

/// A stand-in for SuiteSparse's atmosmodd (1,270,432 rows, 8,814,880 entries, nonsymmetric
/// convection-diffusion): convection_diffusion_3d on an n_side^3 grid with the default
/// parameters. The default 108^3 gives 1,259,712 rows and 8,748,000 entries.
[[nodiscard]] inline csr_matrix<double, std::int32_t> atmosmod_like(std::int64_t n_side = 108) {
  return convection_diffusion_3d(n_side, n_side, n_side);
}

}  // namespace squeeze::io
