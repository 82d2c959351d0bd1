// tests/common/gmres_reference.hpp: the host reference of frsz2::cb_gmres.
//
// Restarted GMRES(m) on the host, the same algorithm step for step, in fp64 (the products
// A x by io::spmv_reference, which sums each row in long double):
//   cycle: r = b - A x (true residual), stop when ||r|| / ||b|| <= tol or the iteration cap
//          is reached; v_0 = r / ||r||
//   step j: w = A v_j, omega = ||w||; classical Gram-Schmidt h = V^T w, w -= V h; one
//          reorthogonalization pass (u = V^T w, w -= V u, h += u) when ||w|| < eta omega;
//          h_{j+1,j} = ||w||, v_{j+1} = w / h_{j+1,j}; Givens rotations; the cycle ends after
//          m steps, when the implicit residual |g_{j+1}| / ||b|| <= tol, when h_{j+1,j} = 0,
//          or at the iteration cap; then x += V y (y from the leading nonsingular block of R).
// `round_trip`, when given, replaces each new basis vector by its stored-and-read-back value
// (float32, float16, FRSZ2 ...), simulating a compressed basis as CB-GMRES uses it.
#pragma once

#include <squeeze/io/csr.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <utility>
#include <vector>

namespace squeeze::test {

struct gmres_reference_options {
  int restart = 100;
  double tolerance = 1e-10;
  int max_iterations = 10000;
  double eta = 0.70710678118654752440;
  /// Applied to every normalized vector before it enters the basis; empty: exact fp64.
  std::function<void(std::span<double>)> round_trip;
};

struct gmres_reference_result {
  int iterations = 0;
  int restarts = 0;
  int reorthogonalizations = 0;
  double relative_residual = 0.0;  ///< true ||b - A x|| / ||b|| at the end
  bool converged = false;
  std::vector<double> x;
};

inline double host_dot(std::span<const double> x, std::span<const double> y) {
  double s = 0.0;
  for (std::size_t i = 0; i < x.size(); ++i) s += x[i] * y[i];
  return s;
}

/// ||b - A x|| / ||b|| (0 when b = 0 and A x = 0).
inline double host_relative_residual(const io::csr_matrix<double, std::int32_t>& a,
                                     std::span<const double> b, std::span<const double> x) {
  std::vector<double> r(b.size());
  io::spmv_reference(a, x, std::span<double>{r});
  double rr = 0.0;
  for (std::size_t i = 0; i < r.size(); ++i) rr += (b[i] - r[i]) * (b[i] - r[i]);
  const double bb = host_dot(b, b);
  return bb == 0.0 ? std::sqrt(rr) : std::sqrt(rr / bb);
}

/// Solves A x = b from x0 (see the file comment).
inline gmres_reference_result gmres_reference(const io::csr_matrix<double, std::int32_t>& a,
                                              std::span<const double> b, std::vector<double> x0,
                                              const gmres_reference_options& opt) {
  const auto n = static_cast<std::size_t>(a.rows);
  const auto m = static_cast<std::size_t>(opt.restart);
  gmres_reference_result res;
  res.x = std::move(x0);
  std::vector<double>& x = res.x;
  const double bnorm = std::sqrt(host_dot(b, b));
  if (bnorm == 0.0) {
    x.assign(n, 0.0);
    res.converged = true;
    return res;
  }
  std::vector<std::vector<double>> v(m + 1, std::vector<double>(n));  // [m + 1][n]
  std::vector<double> w(n), h(m + 2), u(m + 2), cs(m), sn(m), g(m + 1), y(m);
  std::vector<std::vector<double>> rmat(m, std::vector<double>(m + 1));  // columns of R
  int cycles = 0;
  for (;;) {
    io::spmv_reference(a, x, std::span<double>{w});
    for (std::size_t i = 0; i < n; ++i) w[i] = b[i] - w[i];
    const double beta = std::sqrt(host_dot(w, w));
    res.relative_residual = beta / bnorm;
    if (res.relative_residual <= opt.tolerance) {
      res.converged = true;
      break;
    }
    if (res.iterations >= opt.max_iterations || !std::isfinite(beta)) break;
    if (cycles++ > 0) ++res.restarts;
    for (std::size_t i = 0; i < n; ++i) v[0][i] = w[i] / beta;
    if (opt.round_trip) opt.round_trip(v[0]);
    std::fill(g.begin(), g.end(), 0.0);
    g[0] = beta;
    std::size_t k = 0;
    for (std::size_t j = 0; j < m && res.iterations < opt.max_iterations; ++j) {
      io::spmv_reference(a, v[j], std::span<double>{w});
      const double omega = std::sqrt(host_dot(w, w));
      for (std::size_t i = 0; i <= j; ++i) h[i] = host_dot(v[i], w);
      for (std::size_t i = 0; i <= j; ++i) {
        for (std::size_t r = 0; r < n; ++r) w[r] -= h[i] * v[i][r];
      }
      double norm = std::sqrt(host_dot(w, w));
      if (norm < opt.eta * omega) {
        ++res.reorthogonalizations;
        for (std::size_t i = 0; i <= j; ++i) u[i] = host_dot(v[i], w);
        for (std::size_t i = 0; i <= j; ++i) {
          for (std::size_t r = 0; r < n; ++r) w[r] -= u[i] * v[i][r];
          h[i] += u[i];
        }
        norm = std::sqrt(host_dot(w, w));
      }
      h[j + 1] = norm;
      if (norm > 0.0) {
        for (std::size_t r = 0; r < n; ++r) v[j + 1][r] = w[r] / norm;
        if (opt.round_trip) opt.round_trip(v[j + 1]);
      }
      ++res.iterations;
      // Previous rotations, then the one that zeroes h[j + 1].
      for (std::size_t i = 0; i < j; ++i) {
        const double t = cs[i] * h[i] + sn[i] * h[i + 1];
        h[i + 1] = -sn[i] * h[i] + cs[i] * h[i + 1];
        h[i] = t;
      }
      const double d = std::hypot(h[j], h[j + 1]);
      cs[j] = d == 0.0 ? 1.0 : h[j] / d;
      sn[j] = d == 0.0 ? 0.0 : h[j + 1] / d;
      h[j] = d;
      for (std::size_t i = 0; i <= j; ++i) rmat[j][i] = h[i];
      g[j + 1] = -sn[j] * g[j];
      g[j] = cs[j] * g[j];
      k = j + 1;
      if (!std::isfinite(g[j + 1])) break;
      if (std::abs(g[j + 1]) / bnorm <= opt.tolerance || norm == 0.0) break;
    }
    // y from the leading block of R with a nonzero diagonal; x += V y.
    std::size_t k_eff = 0;
    while (k_eff < k && rmat[k_eff][k_eff] != 0.0) ++k_eff;
    for (std::size_t i = k_eff; i-- > 0;) {
      double s = g[i];
      for (std::size_t c = i + 1; c < k_eff; ++c) s -= rmat[c][i] * y[c];
      y[i] = s / rmat[i][i];
    }
    for (std::size_t i = 0; i < k_eff; ++i) {
      for (std::size_t r = 0; r < n; ++r) x[r] += y[i] * v[i][r];
    }
  }
  return res;
}

}  // namespace squeeze::test
