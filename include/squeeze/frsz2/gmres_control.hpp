// SPDX-License-Identifier: Apache-2.0
// squeeze/frsz2/gmres_control.hpp: the host-side decisions of restarted (CB-)GMRES: the
// small least-squares problem, when a cycle ends, and what a restart does with the result.
// frsz2::cb_gmres runs them beside its kernels; a host GMRES can run them beside its own.
//
//   restart_guard guard{bnorm, tolerance, cycle_steps, stagnation_restarts};
//   for (;;) {                                             // cycle_steps = min(restart, n)
//     const restart_guard::decision d = guard.at_restart(||b - A x||, iterations_left);
//     if (d.save) x_best = x;  if (d.restore) x = x_best;
//     if (d.stop) break;                                   // *d.stop says why
//     for (j = 0; j < d.steps; ++j) {                      // Arnoldi steps
//       const step_end e = arnoldi_step_end(h_next, omega);
//       ...
//     }
//     guard.cycle_ended(how, steps_taken);
//   }
//
// Why these rules. With a lossy basis (FRSZ2, 16-bit floats) the stored vectors are only
// nearly orthonormal, so a cycle's least-squares solution can be far worse than its implicit
// residual claims: on badly scaled matrices (row scales spanning 10^7) a frsz2_16 basis lost
// orthogonality once the Krylov space was exhausted (||w|| after Gram-Schmidt grew past
// ||A v_j||, impossible with an orthonormal basis) and the restarts then made x worse and
// worse, to a relative residual of 1e+35 after 20 000 steps. So:
//  - a cycle takes at most n steps (n + 1 vectors of R^n are dependent), and ends before a
//    step whose new vector is longer than A v_j was (the basis has lost orthogonality);
//  - the true residual is recomputed at every restart and the best x seen is kept; a cycle
//    that made the residual more than 10x worse than the best (or not finite) is undone (x
//    goes back to the best) and the next cycle is half as long; a cycle that is merely no
//    better is kept (restarted GMRES need not lower the residual at every restart);
//  - the solve stops as stagnated after `stagnation_restarts` restarts in a row without a
//    new best, as diverged after three undone cycles in a row, and as breakdown when a cycle
//    that ended on an exact breakdown (h_{j+1,j} = 0) brought no new best (the next would
//    do the same).
// The x a solve returns is always the best it has seen.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <optional>
#include <vector>

namespace squeeze::frsz2 {

/// Why a CB-GMRES solve stopped.
enum class cb_gmres_stop {
  converged,      ///< ||b - A x|| / ||b|| <= tolerance
  iteration_cap,  ///< max_iterations Arnoldi steps were taken
  stagnated,      ///< restarts stopped lowering the true residual
  diverged,       ///< a cycle made the true residual 10x worse (or not finite); undone
  breakdown,      ///< an exact breakdown (h_{j+1,j} = 0) left the residual above tolerance
};

/// "converged", "iteration cap", "stagnated", "diverged" or "breakdown".
[[nodiscard]] constexpr const char* to_string(cb_gmres_stop s) noexcept {
  switch (s) {
    case cb_gmres_stop::converged: return "converged";
    case cb_gmres_stop::iteration_cap: return "iteration cap";
    case cb_gmres_stop::stagnated: return "stagnated";
    case cb_gmres_stop::diverged: return "diverged";
    case cb_gmres_stop::breakdown: return "breakdown";
  }
  return "unknown";
}

/// How one Arnoldi step ends its cycle, from h_{j+1,j} = ||w|| after Gram-Schmidt and
/// omega = ||A v_j|| before it.
enum class step_end {
  go_on,               ///< keep the step
  breakdown,           ///< h_{j+1,j} = 0: keep the step, end the cycle (the space is invariant)
  lost_orthogonality,  ///< ||w|| > ||A v_j||: drop the step, end the cycle
};

/// How the step ends: h_next = ||w|| after Gram-Schmidt, omega = ||A v_j|| before it.
[[nodiscard]] inline step_end arnoldi_step_end(double h_next, double omega) noexcept {
  if (h_next == 0.0) return step_end::breakdown;
  if (!(h_next <= omega)) return step_end::lost_orthogonality;  // (also NaN)
  return step_end::go_on;
}

/// The least-squares problem of one cycle: the Hessenberg columns turned into R by Givens
/// rotations, and g = Q^T beta e_1.
class hessenberg_lsq {
 public:
  /// Room for cycles of up to m steps.
  explicit hessenberg_lsq(std::size_t m) : m_{m}, r_(m * (m + 1)), cs_(m), sn_(m), g_(m + 1) {}

  /// Starts a cycle whose initial residual norm is beta (g = beta e_1).
  void reset(double beta) {
    std::fill(g_.begin(), g_.end(), 0.0);
    g_[0] = beta;
  }
  /// Adds column j (h[0 .. j + 1], overwritten) and returns |g_{j+1}|, the implicit residual.
  double add_column(std::size_t j, double* h) {
    for (std::size_t i = 0; i < j; ++i) {
      const double t = cs_[i] * h[i] + sn_[i] * h[i + 1];
      h[i + 1] = -sn_[i] * h[i] + cs_[i] * h[i + 1];
      h[i] = t;
    }
    // A zero column (A v_j in the span of the earlier vectors and R(j, j) = 0) contributes
    // nothing: the swap keeps |g_{j+1}| the residual of the columns before it.
    const double d = std::hypot(h[j], h[j + 1]);
    cs_[j] = d == 0.0 ? 0.0 : h[j] / d;
    sn_[j] = d == 0.0 ? 1.0 : h[j + 1] / d;
    h[j] = d;
    std::copy(h, h + j + 1, r_.begin() + static_cast<std::ptrdiff_t>(j * (m_ + 1)));
    g_[j + 1] = -sn_[j] * g_[j];
    g_[j] = cs_[j] * g_[j];
    return std::abs(g_[j + 1]);
  }
  /// Solves R y = g over the leading k' <= k columns whose diagonal is nonzero; returns k'.
  /// (Column j's rotation changes g only from g_j on, so the first k columns may be solved
  /// after more were added.)
  std::size_t solve(std::size_t k, double* y) const {
    std::size_t k_eff = 0;
    while (k_eff < k && r_[k_eff * (m_ + 1) + k_eff] != 0.0) ++k_eff;
    for (std::size_t i = k_eff; i-- > 0;) {
      double s = g_[i];
      for (std::size_t c = i + 1; c < k_eff; ++c) s -= r_[c * (m_ + 1) + i] * y[c];
      y[i] = s / r_[i * (m_ + 1) + i];
    }
    return k_eff;
  }

 private:
  std::size_t m_;
  std::vector<double> r_;  // [m][m + 1], column j holds R(0 .. j, j)
  std::vector<double> cs_, sn_, g_;
};

/// How a cycle ended (for the restart that follows it).
enum class cycle_end {
  steps,               ///< it took the steps it was given, or met the tolerance implicitly
  breakdown,           ///< h_{j+1,j} = 0
  lost_orthogonality,  ///< a step was dropped
};

/// The restart rules above. One guard per solve.
class restart_guard {
 public:
  static constexpr double diverged_ratio = 10;  ///< a cycle this much worse than the best
  static constexpr int max_undone = 3;          ///< such cycles in a row: diverged

  /// `cycle_steps` >= 1: the longest cycle (min(restart, n)); `stagnation_restarts` >= 1:
  /// restarts in a row without a new best before the solve stops as stagnated.
  restart_guard(double bnorm, double tolerance, int cycle_steps, int stagnation_restarts) noexcept
      : bnorm_{bnorm},
        tolerance_{tolerance},
        full_{std::max(cycle_steps, 1)},
        steps_{full_},
        stagnation_{std::max(stagnation_restarts, 1)} {}

  /// What to do at a restart.
  struct decision {
    bool save = false;                  ///< x is the best so far: keep a copy
    bool restore = false;               ///< put the best x back (x diverged, or the solve stops)
    std::optional<cb_gmres_stop> stop;  ///< stop (with x the best), or go on
    int steps = 0;                      ///< the next cycle's steps at most
  };

  /// At a restart (and before the first cycle): `beta` = ||b - A x|| of the current x;
  /// `iterations_left`: whether another step may be taken. After `restore`, the current x is
  /// the best one, whose residual is best().
  decision at_restart(double beta, bool iterations_left) noexcept {
    decision d;
    if (std::isfinite(beta) && beta < best_) {  // a new best
      best_ = beta;
      d.save = true;
      current_is_best_ = true;
      unproductive_ = undone_ = 0;
      steps_ = full_;
    } else {
      ++unproductive_;
      current_is_best_ = false;
      if (!std::isfinite(beta) || beta > diverged_ratio * best_) {  // undo the cycle
        d.restore = true;
        current_is_best_ = true;
        ++undone_;
        steps_ = std::max(1, last_steps_ / 2);
      } else {
        undone_ = 0;  // go on from this x: GMRES need not lower the residual every cycle
      }
    }
    if (best_ / bnorm_ <= tolerance_) {
      d.stop = cb_gmres_stop::converged;
    } else if (unproductive_ > 0 && last_end_ == cycle_end::breakdown) {
      d.stop = cb_gmres_stop::breakdown;  // the same cycle again would break down again
    } else if (undone_ >= max_undone) {
      d.stop = cb_gmres_stop::diverged;
    } else if (unproductive_ >= stagnation_) {
      d.stop = cb_gmres_stop::stagnated;
    } else if (!iterations_left) {
      d.stop = cb_gmres_stop::iteration_cap;
    }
    if (d.stop && !current_is_best_) d.restore = true;
    d.steps = steps_;
    return d;
  }

  /// After a cycle: how it ended and how many steps it took (a dropped one included).
  void cycle_ended(cycle_end how, int steps) noexcept {
    last_end_ = how;
    last_steps_ = std::max(steps, 1);
  }

  /// ||b - A x|| of the best x (infinity before the first restart).
  [[nodiscard]] double best() const noexcept { return best_; }
  /// best() / ||b||.
  [[nodiscard]] double best_relative() const noexcept { return best_ / bnorm_; }

 private:
  double bnorm_;
  double tolerance_;
  int full_;
  int steps_;
  int stagnation_;
  int last_steps_ = 1;
  cycle_end last_end_ = cycle_end::steps;
  double best_ = std::numeric_limits<double>::infinity();
  bool current_is_best_ = true;
  int unproductive_ = 0;  // restarts in a row without a new best
  int undone_ = 0;        // of those, cycles undone in a row
};

}  // namespace squeeze::frsz2
