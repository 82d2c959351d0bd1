// SPDX-License-Identifier: Apache-2.0
// tests/common/gmres_reference.hpp: the host reference of frsz2::cb_gmres.
//
// Restarted GMRES(m) on the host, the same algorithm step for step, in fp64 (the products
// A x by io::spmv_reference, which sums each row in long double):
//   cycle: r = b - A x (true residual); the restart rules (frsz2::restart_guard, shared with
//          the GPU solver) keep the best x, undo a cycle that made r 10x worse and stop on
//          convergence, at the iteration cap, or when restarts stagnate, diverge or break
//          down; v_0 = r / ||r||
//   step j < min(m, n): w = A v_j, omega = ||w||; classical Gram-Schmidt h = V^T w,
//          w -= V h; one reorthogonalization pass (u = V^T w, w -= V u, h += u) when
//          ||w|| < eta omega; h_{j+1,j} = ||w||, v_{j+1} = w / h_{j+1,j}; a step with
//          ||w|| > omega is dropped and ends the cycle (lost orthogonality); Givens rotations
//          (frsz2::hessenberg_lsq); the cycle ends when the implicit residual
//          |g_{j+1}| / ||b|| <= tol, when h_{j+1,j} = 0, or at the iteration cap; then
//          x += V y (y from the leading nonsingular block of R).
// `round_trip`, when given, replaces each new basis vector by its stored-and-read-back value
// (float32, float16, FRSZ2 ...), simulating a compressed basis as CB-GMRES uses it.
#pragma once

#include <squeeze/frsz2/gmres_control.hpp>
#include <squeeze/io/csr.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <random>
#include <span>
#include <utility>
#include <vector>

namespace squeeze::test {

struct gmres_reference_options {
  int restart = 100;
  double tolerance = 1e-10;
  int max_iterations = 10000;
  double eta = 0.70710678118654752440;
  int stagnation_restarts = 10;
  /// Applied to every normalized vector before it enters the basis; empty: exact fp64.
  std::function<void(std::span<double>)> round_trip;
};

struct gmres_reference_result {
  int iterations = 0;
  int restarts = 0;
  int reorthogonalizations = 0;
  double relative_residual = 0.0;  ///< true ||b - A x|| / ||b|| of the returned x
  bool converged = false;
  frsz2::cb_gmres_stop stop = frsz2::cb_gmres_stop::converged;  ///< why it stopped
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

/// A random sparse nonsymmetric n x n matrix whose rows are scaled by 10^U(0, 7): the
/// diagonal (1 + |U(-1, 1)|) s_r, `per_row` off-diagonal entries U(-1, 1) s_r.
inline io::csr_matrix<double, std::int32_t> badly_scaled(std::int64_t n, int per_row,
                                                         std::uint64_t seed) {
  std::mt19937_64 rng{seed};
  std::uniform_real_distribution<double> value{-1.0, 1.0};
  std::uniform_real_distribution<double> decades{0.0, 7.0};
  std::uniform_int_distribution<std::int64_t> column{0, n - 1};
  std::vector<io::coordinate_entry<double>> entries;
  for (std::int64_t r = 0; r < n; ++r) {
    const double scale = std::pow(10.0, decades(rng));
    entries.push_back({r, r, scale * (1.0 + std::abs(value(rng)))});
    for (int k = 0; k < per_row; ++k) {
      const std::int64_t c = column(rng);
      if (c != r) entries.push_back({r, c, scale * value(rng)});
    }
  }
  return io::csr_from_coordinates<double, std::int32_t>(n, n, std::move(entries));
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
  std::vector<double> w(n), h(m + 1), u(m + 1), y(m), best_x;
  frsz2::hessenberg_lsq lsq{m};
  frsz2::restart_guard guard{bnorm, opt.tolerance, static_cast<int>(std::min(m, n)),
                             opt.stagnation_restarts};
  for (int cycles = 0;; ++cycles) {
    io::spmv_reference(a, x, std::span<double>{w});
    for (std::size_t i = 0; i < n; ++i) w[i] = b[i] - w[i];
    const double beta = std::sqrt(host_dot(w, w));
    const frsz2::restart_guard::decision d =
        guard.at_restart(beta, res.iterations < opt.max_iterations);
    if (d.save) best_x = x;
    if (d.restore) {
      x = best_x;
      io::spmv_reference(a, x, std::span<double>{w});  // (r = b - A x again)
      for (std::size_t i = 0; i < n; ++i) w[i] = b[i] - w[i];
    }
    res.relative_residual = guard.best_relative();
    if (d.stop) {
      res.stop = *d.stop;
      res.converged = res.stop == frsz2::cb_gmres_stop::converged;
      break;
    }
    if (cycles > 0) ++res.restarts;
    const double r0 = d.restore ? guard.best() : beta;
    for (std::size_t i = 0; i < n; ++i) v[0][i] = w[i] / r0;
    if (opt.round_trip) opt.round_trip(v[0]);
    lsq.reset(r0);
    std::size_t k = 0, taken = 0;
    frsz2::cycle_end how = frsz2::cycle_end::steps;
    for (std::size_t j = 0;
         j < static_cast<std::size_t>(d.steps) && res.iterations < opt.max_iterations; ++j) {
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
      ++taken;
      const frsz2::step_end e = frsz2::arnoldi_step_end(norm, omega);
      if (e == frsz2::step_end::lost_orthogonality) {
        how = frsz2::cycle_end::lost_orthogonality;
        break;
      }
      const double implicit = lsq.add_column(j, h.data()) / bnorm;
      k = j + 1;
      if (e == frsz2::step_end::breakdown) {
        how = frsz2::cycle_end::breakdown;
        break;
      }
      if (!std::isfinite(implicit) || implicit <= opt.tolerance) break;
    }
    guard.cycle_ended(how, static_cast<int>(taken));
    // y from the leading block of R with a nonzero diagonal; x += V y.
    const std::size_t k_eff = lsq.solve(k, y.data());
    for (std::size_t i = 0; i < k_eff; ++i) {
      for (std::size_t r = 0; r < n; ++r) x[r] += y[i] * v[i][r];
    }
  }
  return res;
}

}  // namespace squeeze::test
