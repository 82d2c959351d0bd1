// SPDX-License-Identifier: Apache-2.0
// io/stencil.hpp: the 3D convection-diffusion matrix has the documented size, nnz, entries
// (interior, corner, non-cubic grids, negative convection), is nonsymmetric, a valid CSR
// matrix and a weakly diagonally dominant M-matrix, and refuses bad parameters.
#include <squeeze/io/stencil.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

namespace io = squeeze::io;

namespace {

using matrix = io::csr_matrix<double, std::int32_t>;

// The stored value at (row, col); NaN when the entry is not stored.
double at(const matrix& a, std::int64_t row, std::int64_t col) {
  const auto begin = a.col_idx.begin() + a.row_ptr[static_cast<std::size_t>(row)];
  const auto end = a.col_idx.begin() + a.row_ptr[static_cast<std::size_t>(row) + 1];
  const auto it = std::lower_bound(begin, end, static_cast<std::int32_t>(col));
  if (it == end || *it != col) return std::nan("");
  return a.values[static_cast<std::size_t>(it - a.col_idx.begin())];
}

std::int64_t row_entries(const matrix& a, std::int64_t row) {
  return a.row_ptr[static_cast<std::size_t>(row) + 1] - a.row_ptr[static_cast<std::size_t>(row)];
}

double row_sum(const matrix& a, std::int64_t row) {
  double s = 0.0;
  for (auto k = a.row_ptr[static_cast<std::size_t>(row)];
       k < a.row_ptr[static_cast<std::size_t>(row) + 1]; ++k) {
    s += a.values[static_cast<std::size_t>(k)];
  }
  return s;
}

TEST(Stencil, SizesAndNnzFollowTheFormula) {
  const std::int64_t grids[][3] = {{1, 1, 1}, {1, 1, 5}, {3, 4, 5}, {7, 1, 2}, {10, 10, 10}};
  for (const auto& g : grids) {
    const auto [nx, ny, nz] = std::tuple{g[0], g[1], g[2]};
    const matrix a = io::convection_diffusion_3d(nx, ny, nz);
    SCOPED_TRACE(std::to_string(nx) + " x " + std::to_string(ny) + " x " + std::to_string(nz));
    EXPECT_EQ(a.rows, nx * ny * nz);
    EXPECT_EQ(a.cols, nx * ny * nz);
    EXPECT_EQ(a.nnz(), 7 * nx * ny * nz - 2 * (ny * nz + nx * nz + nx * ny));
    ASSERT_NO_THROW(io::validate(a));
  }
}

TEST(Stencil, InteriorAndCornerEntriesMatchTheFormula) {
  const std::int64_t n = 6;
  const double h = 1.0 / 7.0, b = 50.0;  // the defaults: eps 1, beta (50, 50, 50)
  const matrix a = io::convection_diffusion_3d(n, n, n);
  const double diagonal = 6.0 + 3.0 * b * h, upwind = -1.0 - b * h, downwind = -1.0;

  const auto index = [&](std::int64_t x, std::int64_t y, std::int64_t z) {
    return x + n * (y + n * z);
  };
  const std::int64_t p = index(2, 3, 3);  // interior
  EXPECT_EQ(row_entries(a, p), 7);
  EXPECT_DOUBLE_EQ(at(a, p, p), diagonal);
  EXPECT_DOUBLE_EQ(at(a, p, index(1, 3, 3)), upwind);  // beta > 0: upwind is x - 1
  EXPECT_DOUBLE_EQ(at(a, p, index(3, 3, 3)), downwind);
  EXPECT_DOUBLE_EQ(at(a, p, index(2, 2, 3)), upwind);
  EXPECT_DOUBLE_EQ(at(a, p, index(2, 4, 3)), downwind);
  EXPECT_DOUBLE_EQ(at(a, p, index(2, 3, 2)), upwind);
  EXPECT_DOUBLE_EQ(at(a, p, index(2, 3, 4)), downwind);
  EXPECT_NEAR(row_sum(a, p), 0.0, 1e-13);  // interior rows sum to sigma h^2 = 0

  const std::int64_t c = index(0, 0, 0);  // corner: only the +x, +y, +z neighbours
  EXPECT_EQ(row_entries(a, c), 4);
  EXPECT_DOUBLE_EQ(at(a, c, c), diagonal);
  EXPECT_DOUBLE_EQ(at(a, c, index(1, 0, 0)), downwind);
  EXPECT_DOUBLE_EQ(at(a, c, index(0, 1, 0)), downwind);
  EXPECT_DOUBLE_EQ(at(a, c, index(0, 0, 1)), downwind);
  EXPECT_DOUBLE_EQ(row_sum(a, c), 3.0 + 3.0 * b * h);

  const std::int64_t far = index(n - 1, n - 1, n - 1);  // far corner: the -x, -y, -z ones
  EXPECT_EQ(row_entries(a, far), 4);
  EXPECT_DOUBLE_EQ(row_sum(a, far), diagonal + 3.0 * upwind);
}

TEST(Stencil, NonCubicGridAndNegativeConvection) {
  // nx = 3, ny = 1, nz = 7: h = 1/8, h_x = 1/4, h_z = 1/8, h_y = 1/2.
  io::convection_diffusion_params params;
  params.beta = {-4.0, 2.0, 8.0};
  params.diffusion = 0.5;
  params.reaction = 16.0;
  const matrix a = io::convection_diffusion_3d(3, 1, 7, params);
  const double h = 1.0 / 8.0;
  const double hd[3] = {1.0 / 4.0, 1.0 / 2.0, 1.0 / 8.0};
  double r[3], conv[3], diagonal = 16.0 * h * h;
  for (int d = 0; d < 3; ++d) {
    r[d] = 0.5 * h * h / (hd[d] * hd[d]);
    conv[d] = std::abs(params.beta[static_cast<std::size_t>(d)]) * h * h / hd[d];
    diagonal += 2.0 * r[d] + conv[d];
  }
  const std::int64_t p = 1 + 3 * (0 + 1 * 3);  // x = 1, y = 0, z = 3
  EXPECT_DOUBLE_EQ(at(a, p, p), diagonal);
  EXPECT_DOUBLE_EQ(at(a, p, p - 1), -r[0]);  // beta_x < 0: upwind is x + 1
  EXPECT_DOUBLE_EQ(at(a, p, p + 1), -r[0] - conv[0]);
  EXPECT_DOUBLE_EQ(at(a, p, p - 3), -r[2] - conv[2]);  // beta_z > 0: upwind is z - 1
  EXPECT_DOUBLE_EQ(at(a, p, p + 3), -r[2]);
  EXPECT_EQ(row_entries(a, p), 5);  // no y neighbours (ny = 1)
  EXPECT_DOUBLE_EQ(row_sum(a, p), 16.0 * h * h + 2.0 * r[1] + conv[1]);
}

TEST(Stencil, IsNonsymmetricValidAndDiagonallyDominant) {
  const matrix a = io::convection_diffusion_3d(9, 8, 7);
  ASSERT_NO_THROW(io::validate(a));
  EXPECT_NE(at(a, 1, 0), at(a, 0, 1));  // convection: A != A^T
  EXPECT_NE(at(a, 9, 0), at(a, 0, 9));
  for (std::int64_t row = 0; row < a.rows; ++row) {
    double diagonal = 0.0, off = 0.0;
    for (auto k = a.row_ptr[static_cast<std::size_t>(row)];
         k < a.row_ptr[static_cast<std::size_t>(row) + 1]; ++k) {
      const double v = a.values[static_cast<std::size_t>(k)];
      const std::int64_t col = a.col_idx[static_cast<std::size_t>(k)];
      if (col == row) {
        diagonal = v;
      } else {
        ASSERT_LT(v, 0.0) << row << ", " << col;  // an M-matrix's off-diagonal
        ASSERT_FALSE(std::isnan(at(a, col, row))) << "the pattern is symmetric";
        off -= v;
      }
    }
    ASSERT_GE(diagonal, off * (1.0 - 1e-14)) << "row " << row;
  }
}

TEST(Stencil, SpmvOfOnesGivesTheRowSums) {
  const matrix a = io::convection_diffusion_3d(5, 6, 7);
  std::vector<double> ones(static_cast<std::size_t>(a.cols), 1.0);
  std::vector<double> y(static_cast<std::size_t>(a.rows), std::nan(""));
  io::spmv_reference(a, ones, y);
  for (std::int64_t row = 0; row < a.rows; ++row) {
    EXPECT_NEAR(y[static_cast<std::size_t>(row)], row_sum(a, row), 1e-13) << "row " << row;
  }
}

TEST(Stencil, AtmosmodLikeHasTheDocumentedSize) {
  const auto start = std::chrono::steady_clock::now();
  const matrix a = io::atmosmod_like();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(a.rows, 1259712);
  EXPECT_EQ(a.nnz(), 8748000);
  EXPECT_NO_THROW(io::validate(a));
  RecordProperty("generation_seconds", std::to_string(seconds));
  EXPECT_EQ(io::atmosmod_like(4).rows, 64);
}

TEST(Stencil, RefusesBadParameters) {
  const auto expect = [](auto make, const std::string& words) {
    try {
      (void)make();
      ADD_FAILURE() << "accepted: " << words;
    } catch (const squeeze::invalid_argument& e) {
      EXPECT_NE(std::string{e.what()}.find(words), std::string::npos) << e.what();
    }
  };
  expect([] { return io::convection_diffusion_3d(0, 4, 4); }, "at least 1 point");
  expect([] { return io::convection_diffusion_3d(4, -1, 4); }, "at least 1 point");
  expect([] { return io::convection_diffusion_3d(1000, 1000, 1000); }, "int32");
  expect([] { return io::convection_diffusion_3d(1, 1, 400'000'000); }, "int32");
  expect([] { return io::convection_diffusion_3d(std::int64_t{1} << 40, 1 << 30, 1 << 30); },
         "int32");
  io::convection_diffusion_params p;
  p.diffusion = 0.0;
  expect([&] { return io::convection_diffusion_3d(2, 2, 2, p); }, "diffusion > 0");
  p = {};
  p.beta[1] = std::nan("");
  expect([&] { return io::convection_diffusion_3d(2, 2, 2, p); }, "finite");
  p = {};
  p.reaction = -1.0;
  expect([&] { return io::convection_diffusion_3d(2, 2, 2, p); }, "reaction >= 0");
}

}  // namespace
