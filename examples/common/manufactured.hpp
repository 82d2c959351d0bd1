// SPDX-License-Identifier: Apache-2.0
// examples/common/manufactured.hpp: the test problem the solver examples share.
#pragma once

#include <squeeze/core/error.hpp>
#include <squeeze/io/csr.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace squeeze_examples {

/// A system with a known solution: x* = sin(i) normalized, b = A x* (in fp64 on the host).
struct manufactured_system {
  std::vector<double> x_star;
  std::vector<double> b;
};

/// The manufactured system of `a`, which must be square (invalid_argument naming `name`
/// otherwise: GMRES needs a square matrix).
inline manufactured_system manufacture(const std::string& name,
                                       const squeeze::io::csr_matrix<double, std::int32_t>& a) {
  if (a.rows != a.cols || a.rows < 1) {
    throw squeeze::invalid_argument{name + " is " + std::to_string(a.rows) + " x " +
                                    std::to_string(a.cols) + "; GMRES needs a square matrix"};
  }
  const auto n = static_cast<std::size_t>(a.rows);
  manufactured_system s{std::vector<double>(n), std::vector<double>(n)};
  double norm = 0;
  for (std::size_t i = 0; i < n; ++i) {
    s.x_star[i] = std::sin(static_cast<double>(i));
    norm += s.x_star[i] * s.x_star[i];
  }
  for (double& v : s.x_star) v /= std::sqrt(norm);
  squeeze::io::spmv_reference(a, std::span<const double>{s.x_star}, std::span<double>{s.b});
  return s;
}

}  // namespace squeeze_examples
