// SPDX-License-Identifier: Apache-2.0
// squeeze/frsz2/cb_gmres.cuh: compressed-basis GMRES (CB-GMRES): restarted GMRES whose Krylov
// basis is stored as float64, float32, float16, bfloat16 or FRSZ2, all arithmetic in fp64.
//
//   frsz2::device_csr a{rows, cols, row_ptr, col_idx, values, stream};   // host spans in
//   frsz2::cb_gmres<frsz2::format<21>> solver{a.ref(), {.tolerance = 1e-10}, stream};
//   frsz2::cb_gmres_result r = solver.solve(b, x);   // b, x: device spans; x holds x0 on entry
//
// The algorithm (Fig. 1 of Grützmacher et al. (FRSZ2) without preconditioner, Ginkgo's
// CB-GMRES):
//   cycle: r = b - A x, recomputed (the true residual); the restart rules of gmres_control.hpp
//          keep the best x seen (a cycle that made ||r|| 10x worse is undone and the next one
//          is half as long) and stop on convergence, at max_iterations, or when restarts
//          stagnate, diverge or break down (cb_gmres_result::stop says which); v_0 = r / ||r||
//   step j = 0 .. min(m, n) - 1 (m = restart; a lossy basis may end the cycle sooner):
//     w = A v_j                        SpMV; v_j read through accessor<Basis, double>, or for
//                                      FRSZ2 from a decoded copy the store wrote with it
//     h = V^T w, omega^2 = w.w          one fused multi-dot over the j + 1 basis vectors
//     w -= V h, ||w||^2                 one fused kernel (update + norm)
//     if ||w|| < eta omega:             one reorthogonalization pass, decided on the device:
//       u = V^T w, w -= V u, h += u     the same two kernels, skipped when the flag is clear
//     h_{j+1,j} = ||w||, v_{j+1} = w / h_{j+1,j}, stored into the basis (array::store_normalized)
//     Givens rotations on the host; the cycle ends after m steps, when the implicit residual
//     |g_{j+1}| / ||b|| <= tolerance, when h_{j+1,j} = 0 (breakdown) or at max_iterations
//     a step whose ||w|| exceeds ||A v_j|| (the basis has lost orthogonality) is dropped and
//     ends the cycle
//   x += V y, y from the triangular solve on the host (a kernel like the w update).
// The vector that enters the basis is the stored one: every later read (SpMV, dots, updates,
// the solution update) decodes it, so the Arnoldi relation holds for the decompressed basis,
// as in CB-GMRES. The stopping test always uses the true residual: a cycle that ends on the
// implicit residual is followed by a recomputation and, if that misses the target, a restart.
//
// Per step: SpMV, multi-dot, update (each of the two ends with its cross-block sum in its last
// block), the same two for the reorthogonalization (they return at once when it is not
// needed), and the normalizing store: 6 launches; the update's last block writes the
// Hessenberg column and four scalars to mapped host memory. The host queues step j + 1 before
// it waits for step j's values, so the GPU runs on while the host updates the Givens
// rotations; a cycle that ends at step j leaves step j + 1's work unused (it writes only
// basis vector j + 2, w and the step's scalars, which nothing of the cycle reads again). Per
// cycle: the true residual (an SpMV and a norm, and a wait) and a copy of x (the best x seen).
//
// Basis layout: vector i occupies values [i * stride, (i + 1) * stride) of one frsz2::array of
// (m + 1) * stride values (m = min(restart, n)); stride = n rounded up to a tile (128 rows, 256 for
// 16-bit storage) and to the FRSZ2 block, so the kernels read whole tiles without conditions.
// The rows past n are padding that no result depends on: zeros (the kernels read w as 0
// there and write only rows below n; FRSZ2 gives whole blocks of zeros an ordinary exponent,
// frsz2/format.hpp, so they decode on the common path like every other block). Every basis read
// goes through frsz2::tile_reader: a thread reads 4 (or 8) consecutive rows with one vector load
// and the block exponent once, and a warp issues the loads of columns_in_flight vectors before it
// decodes any. On short vectors several warps share a tile and split the basis vectors
// (cb_gmres_policy::column_groups), and where that still leaves SMs without a block, each
// warp keeps one tile instead of tiles_per_warp, so that the GPU's SMs all take part; for
// 16-bit storage the kernels with more registers a thread (one block fewer an SM) run
// wherever they need no more rounds over the tiles. Sums are added in a fixed order, so a
// solve is deterministic.
//
// The pieces: the matrix in frsz2/csr.cuh, the basis storage and view in frsz2/basis.cuh,
// the restart rules in frsz2/gmres_control.hpp, the kernels in frsz2/detail/.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "squeeze/core/arch_policy.hpp"
#include "squeeze/core/bits.hpp"
#include "squeeze/core/buffer.hpp"
#include "squeeze/core/config.hpp"
#include "squeeze/core/cuda_error.hpp"
#include "squeeze/core/error.hpp"
#include "squeeze/core/launch.hpp"
#include "squeeze/core/timer.hpp"
#include "squeeze/frsz2/accessor.hpp"
#include "squeeze/frsz2/array.cuh"
#include "squeeze/frsz2/basis.cuh"
#include "squeeze/frsz2/compress.cuh"
#include "squeeze/frsz2/csr.cuh"
#include "squeeze/frsz2/detail/cb_gmres_kernels.cuh"
#include "squeeze/frsz2/format.hpp"
#include "squeeze/frsz2/gmres_control.hpp"

namespace squeeze::frsz2 {

// ---- options, result, policy ----------------------------------------------------------------

/// What a cb_gmres solve does: the restart length, when to stop, when to reorthogonalize.
struct cb_gmres_options {
  int restart = 100;           ///< m: steps per cycle, >= 1 (the basis holds m + 1 vectors;
                               ///< m is capped at n, where the Krylov space is exhausted)
  double tolerance = 1e-10;    ///< stop when ||b - A x|| / ||b|| <= tolerance (>= 0)
  int max_iterations = 10000;  ///< cap on Arnoldi steps over all cycles (>= 0)
  double eta = 0.70710678118654752440;  ///< reorthogonalize when ||w|| < eta ||A v||; 0: never
  rounding mode = rounding::nearest;    ///< how FRSZ2 bases round (plain types round to nearest)
  int stagnation_restarts = 10;  ///< stop after this many restarts in a row without a new best
                                 ///< true residual (>= 1; gmres_control.hpp)
};

/// What a solve did: iterations, restarts, why it stopped, the residual, the time.
struct cb_gmres_result {
  int iterations = 0;            ///< Arnoldi steps (one SpMV each), over all cycles
  int restarts = 0;              ///< cycles started after the first
  int reorthogonalizations = 0;  ///< steps that ran the second Gram-Schmidt pass
  double relative_residual = 0;  ///< true ||b - A x|| / ||b|| of the returned x
  bool converged = false;        ///< relative_residual <= tolerance
  cb_gmres_stop stop = cb_gmres_stop::converged;  ///< why the solve stopped (to_string(stop))
  double seconds = 0;                             ///< device time of the whole solve (CUDA events)
  double seconds_per_iteration = 0;               ///< seconds / iterations (0 without iterations)
  std::size_t basis_bytes = 0;                    ///< device bytes of the m + 1 basis vectors
  const char* storage = "";                       ///< storage_traits<Basis>::name()
};

/// Launch shapes of the vector kernels (multi-dot V^T w, update w -= V h). Each warp owns
/// tiles_per_warp tiles of 128 rows (lane j: rows 4j .. 4j + 3, read by frsz2::tile_reader)
/// and walks the basis vectors over them with columns_in_flight vectors' loads issued before
/// any is used: 2 x 4 x 1 KiB = 8 KiB in flight per warp for float64, 4 KiB for frsz2_32.
/// Chosen on an H200 (2026-11-22, ms per iteration on the generated 108^3 matrix): 2 tiles x
/// 4 columns beat 1 x 8 for every storage (frsz2_32 0.431 vs 0.458, float64 0.603 vs 0.616);
/// the first version, one column's 8 tiles per round with a warp sum each and a last-block
/// reduction, took 1.52 (float64) and 1.76 (frsz2_32).
struct cb_gmres_policy {
  static constexpr int block_threads = 256;    ///< threads per block (a multiple of 32)
  static constexpr int tiles_per_warp = 2;     ///< 128-row tiles a warp keeps (as 256-row
                                               ///< tiles for 16-bit storage: half as many)
  static constexpr int columns_in_flight = 4;  ///< basis vectors loaded before use
  static constexpr int min_blocks_per_sm = 2;  ///< launch bounds: caps registers accordingly
  static constexpr int max_blocks = 0;         ///< a cap on the grid; 0: occupancy (tests set one)
  static constexpr int max_batch = 512;        ///< basis vectors per multi-dot launch (shared mem)
  /// Warps that share a tile and split the basis vectors between them (a divisor of the
  /// block's warps); 0: by the vector's length, as many as keep the grid within the blocks
  /// that fit at once (10^4 rows: 84 tiles, 6 blocks with one warp a tile, 42 with eight).
  /// Optional in a user's policy (0 when absent).
  static constexpr int column_groups = 0;
};

/// The launch policy cb_gmres uses on Hopper (sm_90) unless given one: cb_gmres_policy, with
/// 3 blocks per SM (80 registers) for 16-bit storage and 2 (up to 128) for the others.
/// Measured on an H200 (2026-11-22, generated 108^3 matrix, ms per iteration at 2 / 3 blocks):
/// float16 0.295 / 0.274, frsz2_16 0.365 / 0.354, but frsz2_21 0.426 / 0.444, frsz2_32 0.434 /
/// 0.451 (their kernels spill under 80 registers), float64 0.599 / 0.596. Where 2 blocks need
/// no more rounds over the tiles than 3, cb_gmres launches the kernels built for 2
/// (cb_gmres::shape_for).
template <class S>
struct default_cb_gmres_policy_sm90 : cb_gmres_policy {
  /// The architecture this entry is for (core/arch_policy.hpp).
  static constexpr int arch = 90;
  /// Launch bounds: 3 blocks per SM for 16-bit storage, 2 for the others (above).
  static constexpr int min_blocks_per_sm = storage_traits<S>::bits_per_value <= 17 ? 3 : 2;
};

/// The same on Ampere (sm_80 .. sm_89). Not measured on such a GPU (the project has none).
/// block_threads, tiles_per_warp, max_blocks and max_batch shape the launches the host
/// makes, so they equal sm_90's (checked below). min_blocks_per_sm and columns_in_flight only
/// bound the kernels' registers and loads in flight: sm_90's values, as an A100 has the same
/// 64 K registers per SM (the spills that rule out 3 blocks for frsz2_21 and frsz2_32 are the
/// compiler's, the same there) and needs fewer bytes in flight for its ~2 TB/s than an H100.
template <class S>
struct default_cb_gmres_policy_sm80 : default_cb_gmres_policy_sm90<S> {
  /// The architecture this entry is for (core/arch_policy.hpp).
  static constexpr int arch = 80;
};

/// The launch policy cb_gmres uses unless given one: by the architecture compiled for.
template <class S>
struct default_cb_gmres_policy
    : core::arch_policy<default_cb_gmres_policy_sm80<S>, default_cb_gmres_policy_sm90<S>> {
  static_assert(default_cb_gmres_policy_sm80<S>::block_threads ==
                        default_cb_gmres_policy_sm90<S>::block_threads &&
                    default_cb_gmres_policy_sm80<S>::tiles_per_warp ==
                        default_cb_gmres_policy_sm90<S>::tiles_per_warp &&
                    default_cb_gmres_policy_sm80<S>::max_blocks ==
                        default_cb_gmres_policy_sm90<S>::max_blocks &&
                    default_cb_gmres_policy_sm80<S>::max_batch ==
                        default_cb_gmres_policy_sm90<S>::max_batch &&
                    default_cb_gmres_policy_sm80<S>::column_groups ==
                        default_cb_gmres_policy_sm90<S>::column_groups,
                "frsz2::default_cb_gmres_policy: the host shapes launches with these: one value "
                "on every architecture");
};

namespace detail {
template <class P>
concept policy_members = requires {
  { P::block_threads } -> std::convertible_to<int>;
  { P::tiles_per_warp } -> std::convertible_to<int>;
  { P::columns_in_flight } -> std::convertible_to<int>;
  { P::min_blocks_per_sm } -> std::convertible_to<int>;
  { P::max_blocks } -> std::convertible_to<int>;
  { P::max_batch } -> std::convertible_to<int>;
};
/// P::column_groups, or 0 (by the vector's length) when P has none.
template <class P>
constexpr int column_groups_of() {
  if constexpr (requires { P::column_groups; })
    return P::column_groups;
  else
    return 0;
}
/// P with one tile a warp (cb_gmres's kernels for short vectors).
template <class P>
struct one_tile_policy : P {
  static constexpr int tiles_per_warp = 1;
};
/// P with one block fewer an SM in its launch bounds, so more registers a thread (cb_gmres's
/// kernels where that takes no more rounds over the tiles).
template <class P>
struct roomier_policy : P {
  static constexpr int min_blocks_per_sm = P::min_blocks_per_sm - 1;
};
template <class P>
constexpr bool policy_in_range() {
  return P::block_threads % 32 == 0 && P::block_threads >= 32 && P::block_threads <= 1024 &&
         P::tiles_per_warp >= 1 && P::tiles_per_warp <= 8 && P::columns_in_flight >= 1 &&
         P::columns_in_flight <= 8 && P::min_blocks_per_sm >= 1 &&
         P::min_blocks_per_sm * P::block_threads <= 2048 && P::max_blocks >= 0 &&
         P::max_batch >= 1 &&
         (P::block_threads / 32) * (P::max_batch + 1) * 8 <= 48 * 1024 &&  // multi-dot shared
         column_groups_of<P>() >= 0 &&
         (P::block_threads / 32) % std::max(1, column_groups_of<P>()) == 0;
}
}  // namespace detail

/// A launch policy like cb_gmres_policy: the six members (and optionally column_groups), in
/// range.
template <class P>
concept cb_gmres_policy_like = detail::policy_members<P> && detail::policy_in_range<P>();

// ---- the solver -----------------------------------------------------------------------------

/// CB-GMRES with its Krylov basis stored as `Basis` (double, float, __half, __nv_bfloat16 or
/// frsz2::format<l>). Owns its workspace (basis, vectors, reduction buffers) on one stream,
/// given at construction, which must outlive the solver; solve() may be called repeatedly. The
/// matrix behind `a` must stay alive and unchanged while the solver is used.
template <basis_storage Basis, cb_gmres_policy_like Policy = default_cb_gmres_policy<Basis>>
class cb_gmres {
 public:
  /// Checks `a` and `options` (squeeze::invalid_argument naming the problem), then allocates.
  cb_gmres(csr_ref a, cb_gmres_options options, cudaStream_t stream)
      : a_{a}, options_{options}, stream_{stream} {
    SQUEEZE_EXPECTS(a.rows == a.cols, "frsz2::cb_gmres: the matrix must be square, is " +
                                          std::to_string(a.rows) + " x " + std::to_string(a.cols));
    SQUEEZE_EXPECTS(a.rows >= 1, "frsz2::cb_gmres: the matrix is empty (0 rows)");
    SQUEEZE_EXPECTS(a.nnz >= 0 && a.nnz <= std::numeric_limits<std::int32_t>::max(),
                    "frsz2::cb_gmres: nnz = " + std::to_string(a.nnz) +
                        " must lie in [0, 2^31 - 1] (int32 row_ptr)");
    SQUEEZE_EXPECTS(a.row_ptr != nullptr && (a.nnz == 0 || (a.col_idx && a.values)),
                    "frsz2::cb_gmres: the matrix has a null array");
    SQUEEZE_EXPECTS(options.restart >= 1, "frsz2::cb_gmres: restart must be at least 1, is " +
                                              std::to_string(options.restart));
    SQUEEZE_EXPECTS(std::isfinite(options.tolerance) && options.tolerance >= 0.0,
                    "frsz2::cb_gmres: tolerance must be finite and >= 0, is " +
                        std::to_string(options.tolerance));
    SQUEEZE_EXPECTS(options.max_iterations >= 0,
                    "frsz2::cb_gmres: max_iterations must be >= 0, is " +
                        std::to_string(options.max_iterations));
    SQUEEZE_EXPECTS(options.eta >= 0.0 && options.eta <= 1.0,
                    "frsz2::cb_gmres: eta must lie in [0, 1], is " + std::to_string(options.eta));
    SQUEEZE_EXPECTS(options.stagnation_restarts >= 1,
                    "frsz2::cb_gmres: stagnation_restarts must be at least 1, is " +
                        std::to_string(options.stagnation_restarts));

    n_ = static_cast<std::size_t>(a.rows);
    m_ = std::min(static_cast<std::size_t>(options.restart), n_);  // (n steps exhaust R^n)
    // Vectors start on tile and block boundaries, so the kernels read whole tiles without
    // conditions; the rows past n are padding (the file comment).
    constexpr std::size_t align =
        std::max<std::size_t>(detail::tile_rows<Basis>, storage_traits<Basis>::block_size);
    stride_ = core::align_up(n_, align);
    tiles_ = stride_ / detail::tile_rows<Basis>;
    const std::size_t max_cols = std::min<std::size_t>(Policy::max_batch, m_ + 1) + 1;
    multidot_ =
        shape_for<detail::multidot_kernel<Basis, Policy>,
                  detail::multidot_kernel<Basis, alternate>>(max_cols * warps * sizeof(double));
    update_ =
        shape_for<detail::update_kernel<Basis, Policy>, detail::update_kernel<Basis, alternate>>(0);

    basis_ = array<Basis>{(m_ + 1) * stride_, stream_};
    w_ = core::device_buffer<double>{stride_, stream_};
    SQUEEZE_CUDA_TRY(cudaMemsetAsync(w_.data(), 0, stride_ * sizeof(double), stream_));
    scalars_ = core::device_buffer<double>{scalar_count(), stream_};
    // fetch() copies a prefix of the scalars, slots not yet written included: zero them once
    // so that no uninitialized byte ever leaves the GPU.
    scalars_.fill_bytes(0, stream_);
    partials_ =
        core::device_buffer<double>{max_cols * std::max(multidot_.blocks, update_.blocks), stream_};
    counter_ = core::device_buffer<unsigned>{1, stream_};
    counter_.fill_bytes(0, stream_);
    host_ = core::pinned_buffer<double>{2 * scalar_count(),  // steps j and j + 1
                                        core::host_memory::mapped};
    best_x_ = core::device_buffer<double>{n_, stream_};
    if constexpr (format_like<Basis>) decoded_ = core::device_buffer<double>{stride_, stream_};
  }

  /// Solves A x = b. b and x are device memory of n values; x holds the initial guess on entry
  /// (zeros for x0 = 0) and the solution on exit. Blocks until the solve ends. Throws
  /// invalid_argument for wrong sizes, null data or a b holding NaN or infinity.
  cb_gmres_result solve(std::span<const double> b, std::span<double> x) {
    SQUEEZE_EXPECTS(b.size() == n_, "frsz2::cb_gmres::solve: b has " + std::to_string(b.size()) +
                                        " values, the matrix " + std::to_string(n_) + " rows");
    SQUEEZE_EXPECTS(x.size() == n_, "frsz2::cb_gmres::solve: x has " + std::to_string(x.size()) +
                                        " values, the matrix " + std::to_string(n_) + " rows");
    SQUEEZE_EXPECTS(b.data() != nullptr && x.data() != nullptr,
                    "frsz2::cb_gmres::solve: b or x is null");
    cb_gmres_result res;
    res.basis_bytes = basis_.bytes();
    res.storage = storage_traits<Basis>::name();
    core::event_timer timer{stream_};
    timer.start();

    multidot(0, b.data(), n_, true, nullptr, nullptr, slot(detail::final2));
    const double bnorm = std::sqrt(fetch(detail::final2 + 1)[detail::final2]);
    SQUEEZE_EXPECTS(std::isfinite(bnorm), "frsz2::cb_gmres::solve: b holds a NaN or infinity");
    if (bnorm == 0.0) {  // x = 0 solves it exactly
      SQUEEZE_CUDA_TRY(cudaMemsetAsync(x.data(), 0, n_ * sizeof(double), stream_));
      res.converged = true;
      finish(timer, res);
      return res;
    }

    hessenberg_lsq lsq{m_};
    restart_guard guard{bnorm, options_.tolerance, static_cast<int>(m_),
                        options_.stagnation_restarts};
    std::vector<double> h(m_ + 1), y(m_);
    const std::size_t x_bytes = n_ * sizeof(double);
    for (int cycle = 0;; ++cycle) {
      const double beta = true_residual(b, x);
      const restart_guard::decision d =
          guard.at_restart(beta, res.iterations < options_.max_iterations);
      if (d.save) {
        SQUEEZE_CUDA_TRY(
            cudaMemcpyAsync(best_x_.data(), x.data(), x_bytes, cudaMemcpyDeviceToDevice, stream_));
      }
      if (d.restore) {  // the best x back
        SQUEEZE_CUDA_TRY(
            cudaMemcpyAsync(x.data(), best_x_.data(), x_bytes, cudaMemcpyDeviceToDevice, stream_));
      }
      res.relative_residual = guard.best_relative();
      if (d.stop) {
        res.stop = *d.stop;
        res.converged = res.stop == cb_gmres_stop::converged;
        break;
      }
      if (d.restore) true_residual(b, x);  // r of the best x back in w
      if (cycle > 0) ++res.restarts;
      normalize_and_store(0);
      lsq.reset(d.restore ? guard.best() : beta);

      std::size_t k = 0;  // basis vectors the cycle's solution update uses
      int taken = 0;      // steps taken, a dropped one included
      cycle_end how = cycle_end::steps;
      // Step j may run while j < d.steps and the iteration cap allows it; step j + 1 is
      // queued before the host reads step j (file comment).
      const int first_iteration = res.iterations;
      const auto may_run = [&](std::size_t j) {
        return j < static_cast<std::size_t>(d.steps) &&
               first_iteration + static_cast<long long>(j) < options_.max_iterations;
      };
      if (may_run(0)) queue_step(0);
      for (std::size_t j = 0; may_run(j); ++j) {
        if (may_run(j + 1)) queue_step(j + 1);
        const double* s = wait_step(j);
        ++res.iterations;
        ++taken;
        if (s[detail::reorth] != 0.0) ++res.reorthogonalizations;
        std::copy(s + h_offset(), s + h_offset() + j + 1, h.begin());
        h[j + 1] = std::sqrt(s[detail::final2]);
        const step_end end = arnoldi_step_end(h[j + 1], std::sqrt(s[detail::omega2]));
        if (end == step_end::lost_orthogonality) {
          how = cycle_end::lost_orthogonality;
          break;
        }
        const double implicit = lsq.add_column(j, h.data()) / bnorm;
        k = j + 1;
        if (end == step_end::breakdown) {
          how = cycle_end::breakdown;
          break;
        }
        if (!std::isfinite(implicit) || implicit <= options_.tolerance) break;
      }
      guard.cycle_ended(how, taken);

      // x += V y.
      const std::size_t k_eff = lsq.solve(k, y.data());
      if (k_eff > 0) {
        std::copy(y.begin(), y.begin() + static_cast<std::ptrdiff_t>(k_eff),
                  host_.data() + y_offset());
        SQUEEZE_CUDA_TRY(cudaMemcpyAsync(slot(y_offset()), host_.data() + y_offset(),
                                         k_eff * sizeof(double), cudaMemcpyHostToDevice, stream_));
        update(static_cast<int>(k_eff), slot(y_offset()), x.data(), n_,
               detail::update_kind::solution, nullptr, {});
      }
    }
    finish(timer, res);
    return res;
  }

  /// The options the solver was built with.
  [[nodiscard]] const cb_gmres_options& options() const noexcept { return options_; }
  /// n: the matrix's rows.
  [[nodiscard]] std::size_t rows() const noexcept { return n_; }
  /// Values between consecutive basis vectors.
  [[nodiscard]] std::size_t stride() const noexcept { return stride_; }
  /// Device bytes of the basis (m + 1 vectors of stride values).
  [[nodiscard]] std::size_t basis_bytes() const noexcept { return basis_.bytes(); }

 private:
  // Device scalars: [scalar_slots] | h [m + 1] | u [m + 1] | y [m].
  [[nodiscard]] std::size_t h_offset() const noexcept { return detail::scalar_slots; }
  [[nodiscard]] std::size_t u_offset() const noexcept { return h_offset() + m_ + 1; }
  [[nodiscard]] std::size_t y_offset() const noexcept { return u_offset() + m_ + 1; }
  [[nodiscard]] std::size_t scalar_count() const noexcept { return y_offset() + m_; }
  [[nodiscard]] double* slot(std::size_t i) const noexcept { return scalars_.data() + i; }

  [[nodiscard]] basis_ref<Basis> view() const noexcept { return {basis_.data_handle(), stride_}; }

  static constexpr int warps = Policy::block_threads / 32;

  /// The second kernel of each vector operation, taken where it serves better (shape_for):
  /// where a warp keeps several tiles, the policy with one tile a warp, for vectors too short
  /// to give every SM a block; where it keeps one (16-bit storage: tiles of 256 rows) and
  /// the launch bounds ask for 3 or more blocks an SM, the policy with one block fewer (more
  /// registers a thread), wherever that takes no more rounds over the tiles; otherwise the
  /// policy itself.
  static constexpr bool has_narrow = detail::warp_tiles_of<Basis, Policy> > 1;
  static constexpr bool has_roomier = !has_narrow && Policy::min_blocks_per_sm >= 3;
  using alternate =
      std::conditional_t<has_narrow, detail::one_tile_policy<Policy>,
                         std::conditional_t<has_roomier, detail::roomier_policy<Policy>, Policy>>;

  /// How a vector kernel covers the tiles: `groups` warps a tile (the policy's column_groups,
  /// or by the length: the most that keep the grid within the blocks that fit at once), and
  /// as many blocks as fit at once (Policy::max_blocks caps them), spread so every block gets
  /// the same number of rounds. `alternate`: the second kernel. One tile a warp (up to twice
  /// the blocks) is taken where the policy's tiles_per_warp would leave SMs without a block
  /// and one tile a warp gives more blocks. Measured on an H200 (2026-11-28, frsz2_32, us an
  /// iteration over 300 at 10 648 rows): 35.4 against 39.9 (float32 33.9); at 97 336 rows,
  /// where the wide kernel gives every SM a block, one tile a warp was slower (64.3 against
  /// 62.3). One block fewer an SM is taken where it needs no more rounds than the policy's
  /// blocks: for 16-bit storage 2 blocks were up to 7 % faster than 3 from 10^5 to 10^6 rows
  /// (one or two rounds either way), 3 blocks 5-10 % faster from 1.26 M rows, where 2 take a
  /// round more (H200, 2026-11-28).
  struct launch_shape {
    unsigned blocks = 1;
    int groups = 1;
    bool alternate = false;
  };
  template <auto Kernel, int TilesPerWarp>
  launch_shape shape_at(std::size_t shared_bytes) const {
    std::size_t cap = core::resident_blocks<Kernel>(Policy::block_threads, shared_bytes);
    if (Policy::max_blocks > 0) cap = std::min<std::size_t>(cap, Policy::max_blocks);
    int groups = detail::column_groups_of<Policy>();
    if (groups == 0) {
      groups = 1;
      while (warps % (2 * groups) == 0 &&
             core::div_ceil(tiles_, std::size_t(warps / (2 * groups) * TilesPerWarp)) <= cap) {
        groups *= 2;
      }
    }
    return {core::balanced_grid(tiles_, std::size_t(warps / groups * TilesPerWarp), cap), groups};
  }
  /// The rounds a block of `shape` makes over the tiles (for_block_rounds).
  template <int TilesPerWarp>
  std::size_t rounds_of(const launch_shape& shape) const {
    return core::div_ceil(
        tiles_, std::size_t{shape.blocks} * std::size_t(warps / shape.groups * TilesPerWarp));
  }
  template <auto Kernel, auto AlternateKernel>
  launch_shape shape_for(std::size_t shared_bytes) const {
    constexpr int T = detail::warp_tiles_of<Basis, Policy>;
    const launch_shape wide = shape_at<Kernel, T>(shared_bytes);
    if constexpr (has_narrow) {
      if (wide.blocks < static_cast<unsigned>(core::sm_count())) {
        launch_shape n = shape_at<AlternateKernel, 1>(shared_bytes);
        n.alternate = true;
        if (n.blocks > wide.blocks) return n;  // not where max_blocks holds both to one grid
      }
    } else if constexpr (has_roomier) {
      launch_shape r = shape_at<AlternateKernel, T>(shared_bytes);
      r.alternate = true;
      if (rounds_of<T>(r) <= rounds_of<T>(wide)) return r;
    }
    return wide;
  }

  /// Calls launch.template operator()<P>() with the policy whose kernel `shape` is for.
  template <class Launch>
  static void with_policy(const launch_shape& shape, Launch&& launch) {
    if (shape.alternate) {
      launch.template operator()<alternate>();
    } else {
      launch.template operator()<Policy>();
    }
  }

  /// Queues Arnoldi step j (v_j in the basis, v_{j+1} stored by it); its update kernels
  /// leave the scalars and the Hessenberg column in host buffer j % 2 (mapped memory: no
  /// copy in the stream), where wait_step(j) finds them.
  void queue_step(std::size_t j) {
    const int count = static_cast<int>(j + 1);
    const detail::arnoldi_ref step{scalars_.data(), slot(h_offset()), slot(u_offset()),
                                   options_.eta * options_.eta,
                                   host_.device_data() + (j % 2) * scalar_count()};
    if constexpr (format_like<Basis>) {  // v_j as stored, decoded by the store that wrote it
      spmv(accessor<double, double>{}, decoded_.data(), nullptr);
    } else {
      const accessor<Basis, double> acc;
      spmv(acc, acc.offset(view().data, j * stride_), nullptr);
    }
    multidot(count, w_.data(), n_, true, nullptr, slot(h_offset()), slot(detail::omega2));
    update(count, slot(h_offset()), w_.data(), n_, detail::update_kind::first_pass, nullptr, step);
    const double* reorth = slot(detail::reorth);  // the second pass runs when it is set
    multidot(count, w_.data(), n_, false, reorth, slot(u_offset()), nullptr);
    update(count, slot(u_offset()), w_.data(), n_, detail::update_kind::reorth_pass, reorth, step);
    step_done_[j % 2].record(stream_);  // the host's values are final here
    normalize_and_store(j + 1);
  }

  /// Step j's scalars (scalar_slot order, then its Hessenberg column), once they are here.
  const double* wait_step(std::size_t j) {
    step_done_[j % 2].synchronize();
    return host_.data() + (j % 2) * scalar_count();
  }

  /// Copies the first `count` device scalars to the host and waits for them.
  const double* fetch(std::size_t count) {
    SQUEEZE_CUDA_TRY(cudaMemcpyAsync(host_.data(), scalars_.data(), count * sizeof(double),
                                     cudaMemcpyDeviceToHost, stream_));
    SQUEEZE_CUDA_TRY(cudaStreamSynchronize(stream_));
    return host_.data();
  }

  /// w = b - A x and its norm (left in the final2 slot for normalize_and_store).
  double true_residual(std::span<const double> b, std::span<double> x) {
    spmv(accessor<double, double>{}, x.data(), b.data());
    multidot(0, w_.data(), n_, true, nullptr, nullptr, slot(detail::final2));
    return std::sqrt(fetch(detail::final2 + 1)[detail::final2]);
  }

  void finish(core::event_timer& timer, cb_gmres_result& res) {
    timer.stop();
    res.seconds = timer.elapsed_ms() * 1e-3;
    res.seconds_per_iteration = res.iterations > 0 ? res.seconds / res.iterations : 0.0;
  }

  /// w = A x (b null) or w = b - A x, x read through `acc`.
  template <class Acc>
  void spmv(Acc acc, typename Acc::data_handle_type x, const double* b) {
    constexpr int threads = 256;
    const int width = detail::spmv_width(a_);
    const std::size_t rows_per_block = threads / width;
    const unsigned blocks = core::grid_for(n_, rows_per_block, core::per_sm(16));
    const auto launch = [&]<int Width>() {
      detail::spmv_kernel<Width, threads, Acc>
          <<<blocks, threads, 0, stream_>>>(a_, acc, x, b, w_.data());
      SQUEEZE_CHECK_LAUNCH();
    };
    switch (width) {
      case 2: launch.template operator()<2>(); break;
      case 4: launch.template operator()<4>(); break;
      case 8: launch.template operator()<8>(); break;
      case 16: launch.template operator()<16>(); break;
      default: launch.template operator()<32>(); break;
    }
  }

  /// out[i] = V_i . w for i < count, *out_self = w . w when with_self (w has n_w rows); in
  /// batches of max_batch vectors (the shared-memory accumulators), all guarded by `guard`.
  /// (Every kernel's last block resets the counter: launches on one stream share it.)
  void multidot(int count, const double* w, std::size_t n_w, bool with_self, const double* guard,
                double* out, double* out_self) {
    int first = 0;
    do {
      const int batch = std::min(Policy::max_batch, count - first);
      const bool self = with_self && first == 0;
      const int cols = batch + (self ? 1 : 0);
      const std::size_t shared = std::size_t(warps) * cols * sizeof(double);
      with_policy(multidot_, [&]<class P>() {
        detail::multidot_kernel<Basis, P><<<multidot_.blocks, P::block_threads, shared, stream_>>>(
            view(), static_cast<std::size_t>(first), batch, w, n_w, tiles_, multidot_.groups, self,
            guard, sums(), out == nullptr ? nullptr : out + first, out_self);
      });
      SQUEEZE_CHECK_LAUNCH();
      first += batch;
    } while (first < count);
  }

  /// target (n_target rows) -= V coeffs, or += for the solution; then, for the Arnoldi
  /// passes, ||target||^2 and the step's scalars. Skipped on the device when *guard == 0.
  void update(int count, const double* coeffs, double* target, std::size_t n_target,
              detail::update_kind kind, const double* guard, detail::arnoldi_ref step) {
    with_policy(update_, [&]<class P>() {
      detail::update_kernel<Basis, P><<<update_.blocks, P::block_threads, 0, stream_>>>(
          view(), count, coeffs, target, n_target, tiles_, update_.groups, kind, guard, sums(),
          step);
    });
    SQUEEZE_CHECK_LAUNCH();
  }

  /// w / sqrt(final2) stored as basis vector `vec` (w as it is when final2 is 0 or not
  /// finite: a breakdown, whose vector the host never uses).
  void normalize_and_store(std::size_t vec) {
    basis_.store_normalized(vec * stride_, w_.data(), stride_, slot(detail::final2), stream_,
                            options_.mode, decoded_.data());  // the padding too
  }

  [[nodiscard]] detail::grid_sum sums() const noexcept {
    return {partials_.data(), counter_.data()};
  }

  csr_ref a_;
  cb_gmres_options options_;
  cudaStream_t stream_;
  std::size_t n_ = 0;
  std::size_t m_ = 0;
  std::size_t stride_ = 0;
  std::size_t tiles_ = 0;
  launch_shape multidot_;
  launch_shape update_;
  array<Basis> basis_;                    // [(m + 1) * stride]
  core::device_buffer<double> w_;         // [stride]; zeros past n
  core::device_buffer<double> scalars_;   // [scalar_count()]
  core::device_buffer<double> partials_;  // [max_batch + 1][grid]
  core::device_buffer<unsigned> counter_;  // [1], the blocks done of the running kernel
  core::pinned_buffer<double> host_;       // [2][scalar_count()], mapped: mirrors of two steps
  core::event step_done_[2] = {core::event{cudaEventDisableTiming},
                               core::event{cudaEventDisableTiming}};
  core::device_buffer<double> best_x_;    // [n], the best x of the current solve
  core::device_buffer<double> decoded_;   // [stride], FRSZ2 only: the newest basis vector
                                          // as stored, decoded (the SpMV's x)
};

/// One solve with a fresh solver (allocation included); see cb_gmres.
template <basis_storage Basis, cb_gmres_policy_like Policy = default_cb_gmres_policy<Basis>>
cb_gmres_result cb_gmres_solve(csr_ref a, std::span<const double> b, std::span<double> x,
                               const cb_gmres_options& options, cudaStream_t stream) {
  return cb_gmres<Basis, Policy>{a, options, stream}.solve(b, x);
}

}  // namespace squeeze::frsz2
