// squeeze/frsz2/cb_gmres.cuh: compressed-basis GMRES (CB-GMRES): restarted GMRES whose Krylov
// basis is stored as float64, float32, float16, bfloat16 or FRSZ2, all arithmetic in fp64.
//
//   frsz2::device_csr a{rows, cols, row_ptr, col_idx, values, stream};   // host spans in
//   frsz2::cb_gmres<frsz2::format<21>> solver{a.ref(), {.tolerance = 1e-10}, stream};
//   frsz2::cb_gmres_result r = solver.solve(b, x);   // b, x: device spans; x holds x0 on entry
//
// The algorithm (the FRSZ2 paper's Fig. 1 without preconditioner, Ginkgo's CB-GMRES):
//   cycle: r = b - A x, recomputed (the true residual); the restart rules of gmres_control.hpp
//          keep the best x seen (a cycle that made ||r|| 10x worse is undone and the next one
//          is half as long) and stop on convergence, at max_iterations, or when restarts
//          stagnate, diverge or break down (cb_gmres_result::stop says which); v_0 = r / ||r||
//   step j = 0 .. min(m, n) - 1 (m = restart; a lossy basis may end the cycle sooner):
//     w = A v_j                        SpMV; v_j read through accessor<Basis, double>
//     h = V^T w, omega^2 = w.w          one fused multi-dot over the j + 1 basis vectors
//     w -= V h, ||w||^2                 one fused kernel (update + norm)
//     if ||w|| < eta omega:             one reorthogonalization pass, decided on the device:
//       u = V^T w, w -= V u, h += u     the same two kernels, skipped when the flag is clear
//     h_{j+1,j} = ||w||, v_{j+1} = w / h_{j+1,j}, stored into the basis (array::store)
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
// Per step: SpMV, multi-dot + its reduction, update + its reduction (and the same four for
// the reorthogonalization, which return at once when it is not needed), normalization and
// the store: 11 launches, one device-to-host copy of the Hessenberg column and four scalars,
// and one stream synchronization (the host needs h_{j+1,j} to decide whether to go on). Per
// cycle: the true residual (an SpMV and a norm) and a copy of x (the best x seen).
//
// Basis layout: vector i occupies values [i * stride, (i + 1) * stride) of one frsz2::array of
// (m + 1) * stride values (m = min(restart, n)); stride = n rounded up to a tile (128 rows, 256 for
// 16-bit storage) and to the FRSZ2 block, and the rows past n are stored zeros (w is kept zero
// there), so the kernels read whole tiles without conditions. Every basis read goes through
// frsz2::tile_reader: a thread reads 4 (or 8) consecutive rows with one vector load and the
// block exponent once, and a warp issues the loads of columns_in_flight vectors before it
// decodes any. Cross-block sums are added in a fixed order, so a solve is deterministic.
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

#include "squeeze/core/bits.hpp"
#include "squeeze/core/buffer.hpp"
#include "squeeze/core/config.hpp"
#include "squeeze/core/cuda_error.hpp"
#include "squeeze/core/error.hpp"
#include "squeeze/core/timer.hpp"
#include "squeeze/frsz2/accessor.hpp"
#include "squeeze/frsz2/array.cuh"
#include "squeeze/frsz2/compress.cuh"
#include "squeeze/frsz2/format.hpp"
#include "squeeze/frsz2/gmres_control.hpp"

namespace squeeze::frsz2 {

// ---- the matrix -----------------------------------------------------------------------------

/// A CSR matrix in device memory, as kernels see it (passed by value).
///   row_ptr [rows + 1], col_idx [nnz] (0-based), values [nnz]
struct csr_ref {
  std::int32_t rows = 0;
  std::int32_t cols = 0;
  std::int64_t nnz = 0;
  const std::int32_t* row_ptr = nullptr;
  const std::int32_t* col_idx = nullptr;
  const double* values = nullptr;
};

/// An owned CSR matrix in device memory, uploaded from host arrays after checking them
/// (sizes, row_ptr monotone from 0 to nnz, columns in range). Allocated stream-ordered on
/// `stream`, which must outlive the matrix.
class device_csr {
 public:
  device_csr() = default;
  device_csr(std::int64_t rows, std::int64_t cols, std::span<const std::int32_t> row_ptr,
             std::span<const std::int32_t> col_idx, std::span<const double> values,
             cudaStream_t stream = nullptr) {
    constexpr std::int64_t index_max = std::numeric_limits<std::int32_t>::max();
    SQUEEZE_EXPECTS(rows >= 0 && cols >= 0 && rows <= index_max && cols <= index_max,
                    "frsz2::device_csr: dimensions " + std::to_string(rows) + " x " +
                        std::to_string(cols) + " must lie in [0, 2^31 - 1]");
    SQUEEZE_EXPECTS(row_ptr.size() == static_cast<std::size_t>(rows) + 1,
                    "frsz2::device_csr: row_ptr has " + std::to_string(row_ptr.size()) +
                        " entries; rows + 1 = " + std::to_string(rows + 1) + " expected");
    SQUEEZE_EXPECTS(col_idx.size() == values.size(),
                    "frsz2::device_csr: col_idx has " + std::to_string(col_idx.size()) +
                        " entries but values has " + std::to_string(values.size()));
    SQUEEZE_EXPECTS(row_ptr[0] == 0,
                    "frsz2::device_csr: row_ptr[0] must be 0, is " + std::to_string(row_ptr[0]));
    SQUEEZE_EXPECTS(static_cast<std::size_t>(row_ptr.back()) == values.size(),
                    "frsz2::device_csr: row_ptr[rows] = " + std::to_string(row_ptr.back()) +
                        " but there are " + std::to_string(values.size()) + " entries");
    for (std::size_t r = 0; r + 1 < row_ptr.size(); ++r) {
      SQUEEZE_EXPECTS(row_ptr[r + 1] >= row_ptr[r],
                      "frsz2::device_csr: row_ptr decreases at row " + std::to_string(r));
    }
    for (std::size_t k = 0; k < col_idx.size(); ++k) {
      SQUEEZE_EXPECTS(col_idx[k] >= 0 && col_idx[k] < cols,
                      "frsz2::device_csr: col_idx[" + std::to_string(k) +
                          "] = " + std::to_string(col_idx[k]) + " is outside [0, " +
                          std::to_string(cols) + ")");
    }
    rows_ = static_cast<std::int32_t>(rows);
    cols_ = static_cast<std::int32_t>(cols);
    row_ptr_ = core::device_buffer<std::int32_t>{row_ptr.size(), stream};
    col_idx_ = core::device_buffer<std::int32_t>{col_idx.size(), stream};
    values_ = core::device_buffer<double>{values.size(), stream};
    row_ptr_.copy_from(row_ptr, stream);
    if (!values.empty()) {
      col_idx_.copy_from(col_idx, stream);
      values_.copy_from(values, stream);
    }
  }

  [[nodiscard]] csr_ref ref() const noexcept {
    return {rows_,           cols_,           static_cast<std::int64_t>(values_.size()),
            row_ptr_.data(), col_idx_.data(), values_.data()};
  }
  [[nodiscard]] std::int32_t rows() const noexcept { return rows_; }
  [[nodiscard]] std::int32_t cols() const noexcept { return cols_; }
  [[nodiscard]] std::int64_t nnz() const noexcept {
    return static_cast<std::int64_t>(values_.size());
  }

 private:
  std::int32_t rows_ = 0;
  std::int32_t cols_ = 0;
  core::device_buffer<std::int32_t> row_ptr_;
  core::device_buffer<std::int32_t> col_idx_;
  core::device_buffer<double> values_;
};

// ---- options, result, policy ----------------------------------------------------------------

/// An FRSZ2 format of fp64 values.
template <class S>
concept fp64_format = format_like<S> && std::is_same_v<typename S::float_type, double>;

/// Storage a CB-GMRES basis may use: a plain type, or an FRSZ2 format of fp64 values.
template <class S>
concept basis_storage = plain_storage<S> || fp64_format<S>;

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
};

/// The launch policy cb_gmres uses unless given one: cb_gmres_policy, with 3 blocks per SM
/// (80 registers) for 16-bit storage and 2 (up to 128) for the others. Measured on an H200
/// (2026-11-22, generated 108^3 matrix, ms per iteration at 2 / 3 blocks): float16 0.295 /
/// 0.274, frsz2_16 0.365 / 0.354, but frsz2_21 0.426 / 0.444, frsz2_32 0.434 / 0.451 (their
/// kernels spill under 80 registers), float64 0.599 / 0.596.
template <class S>
struct default_cb_gmres_policy : cb_gmres_policy {
  static constexpr int min_blocks_per_sm = storage_traits<S>::bits_per_value <= 17 ? 3 : 2;
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
template <class P>
constexpr bool policy_in_range() {
  return P::block_threads % 32 == 0 && P::block_threads >= 32 && P::block_threads <= 1024 &&
         P::tiles_per_warp >= 1 && P::tiles_per_warp <= 8 && P::columns_in_flight >= 1 &&
         P::columns_in_flight <= 8 && P::min_blocks_per_sm >= 1 &&
         P::min_blocks_per_sm * P::block_threads <= 2048 && P::max_blocks >= 0 &&
         P::max_batch >= 1 &&
         (P::block_threads / 32) * (P::max_batch + 1) * 8 <= 48 * 1024;  // multi-dot shared
}
}  // namespace detail

/// A launch policy like cb_gmres_policy: the six members, in range.
template <class P>
concept cb_gmres_policy_like = detail::policy_members<P> && detail::policy_in_range<P>();

// ---- device side ----------------------------------------------------------------------------

/// The basis as kernels see it: vector i is values [i * stride, i * stride + stride) of the
/// accessor handle `data` (stride a multiple of 128; the values past n are stored zeros).
template <basis_storage S>
struct basis_ref {
  typename accessor<S, double>::data_handle_type data{};
  std::size_t stride = 0;
};

namespace detail {

/// Rows each thread reads of a basis tile: 8 for 16-bit storage (one 16-byte load, which
/// halves the per-read work of the FRSZ2 decode: exponent, block test, scale), 4 otherwise.
/// A warp reads tiles of 32 x lane_rows rows (frsz2::tile_reader).
template <basis_storage S>
inline constexpr int lane_rows = storage_traits<S>::bits_per_value <= 17 ? 8 : 4;
template <basis_storage S>
inline constexpr int tile_rows = 32 * lane_rows<S>;

/// Tiles a warp keeps in registers: the policy's count of 128-row tiles, as tiles of S.
template <basis_storage S, class P>
inline constexpr int warp_tiles_of = std::max(1, P::tiles_per_warp * 128 / tile_rows<S>);

/// How a thread reads the basis: one tile_reader over the whole basis, made once per thread
/// (tile t of vector i is its tile i * vector_tiles + t).
template <basis_storage S>
struct basis_reader {
  tile_reader<S, double, lane_rows<S>> reader;
  std::size_t vector_tiles;
  SQUEEZE_DEVICE explicit basis_reader(const basis_ref<S>& v)
      : reader{v.data, threadIdx.x % 32}, vector_tiles{v.stride / tile_rows<S>} {}
  SQUEEZE_DEVICE auto read(std::size_t vec, std::size_t tile) const {
    return reader.read(vec * vector_tiles + tile);
  }
};

/// Reads U basis vectors' tiles (every load issued first), then decodes them one at a time
/// (tile_reader::decode_each: one test for rare blocks for the batch) and hands each to
/// use(u, k, values): only the raw words of the batch stay live.
template <int U, int T, basis_storage S, class Use>
SQUEEZE_DEVICE void warp_visit_columns(const basis_reader<S>& v, std::size_t vec0,
                                       const std::size_t (&tiles)[T], Use&& use) {
  decltype(v.read(0, 0)) raw[U * T];
#pragma unroll
  for (int u = 0; u < U; ++u) {
#pragma unroll
    for (int k = 0; k < T; ++k) raw[u * T + k] = v.read(vec0 + u, tiles[k]);
  }
  v.reader.decode_each(raw, [&](int j, const double(&b)[lane_rows<S>]) { use(j / T, j % T, b); });
}

/// This lane's V rows of tile `tile` (of 32 V rows) of x[0..n), 0 past n.
template <int V>
SQUEEZE_DEVICE void read_rows(const double* x, std::size_t n, std::size_t tile, double (&out)[V]) {
  const std::size_t row = (tile * 32 + threadIdx.x % 32) * V;
#pragma unroll
  for (int c = 0; c < V; ++c) out[c] = row + c < n ? x[row + c] : 0.0;
}

SQUEEZE_DEVICE double warp_sum(double s) {
#pragma unroll
  for (int d = 16; d > 0; d /= 2) s += __shfl_xor_sync(full_warp_mask, s, d);
  return s;  // the same in every lane (the butterfly adds the same pairs everywhere)
}

/// Slots of the per-step scalars in device memory (then h [m + 1], u [m + 1], y [m]).
enum scalar_slot : int { omega2 = 0, first2 = 1, final2 = 2, reorth = 3, scalar_slots = 4 };

/// y = A x, or y = b - A x when b is not null. `Width` lanes per row (2 .. 32), x read through
/// `Acc`. Warp-uniform loop, so the shuffles always see the full warp.
template <int Width, int Threads, class Acc>
SQUEEZE_KERNEL(Threads)
void spmv_kernel(csr_ref a, Acc acc, typename Acc::data_handle_type x, const double* b, double* y) {
  constexpr int rows_per_warp = 32 / Width;
  const unsigned lane = threadIdx.x % 32;
  const unsigned sub = lane % Width;
  const std::int64_t warp = (std::int64_t{blockIdx.x} * Threads + threadIdx.x) / 32;
  const std::int64_t warps = std::int64_t{gridDim.x} * (Threads / 32);
  for (std::int64_t base = warp * rows_per_warp; base < a.rows; base += warps * rows_per_warp) {
    const std::int64_t row = base + lane / Width;
    double s = 0.0;
    if (row < a.rows) {
      const std::int32_t end = a.row_ptr[row + 1];
      for (std::int32_t k = a.row_ptr[row] + static_cast<std::int32_t>(sub); k < end; k += Width) {
        s += a.values[k] * acc.load(x, static_cast<std::size_t>(a.col_idx[k]));
      }
    }
#pragma unroll
    for (int d = Width / 2; d > 0; d /= 2) s += __shfl_xor_sync(full_warp_mask, s, d);
    if (sub == 0 && row < a.rows) y[row] = b != nullptr ? b[row] - s : s;
  }
}

/// The tiles a warp owns in one round, clamped into the vector: a tile past the end reads
/// the last tile again (its rows of w and of the target read as 0, and are not written).
template <int T>
struct warp_tiles {
  std::size_t at[T];
  SQUEEZE_DEVICE warp_tiles(std::size_t t0, std::size_t tiles) {
#pragma unroll
    for (int k = 0; k < T; ++k) at[k] = t0 + k < tiles ? t0 + k : tiles - 1;
  }
};

/// Calls round(t0, tiles) for every round of T consecutive tiles (of `tiles`) this warp owns:
/// warp w of the grid takes tiles w T .., then strides by the grid's warps.
template <int T, int Warps, class Round>
SQUEEZE_DEVICE void for_warp_rounds(std::size_t tiles, Round&& round) {
  const std::size_t warp_id = std::size_t{blockIdx.x} * Warps + threadIdx.x / 32;
  const std::size_t stride = std::size_t{gridDim.x} * Warps * T;
  for (std::size_t t0 = warp_id * T; t0 < tiles; t0 += stride) round(t0, warp_tiles<T>{t0, tiles});
}

/// Calls batch.template operator()<N>(i) over columns [0, count): N = U while U columns are
/// left (their loads all in flight at once), then N = 1 for the rest.
template <int U, class Batch>
SQUEEZE_DEVICE void for_column_batches(int count, Batch&& batch) {
  int i = 0;
  for (; i + U <= count; i += U) batch.template operator()<U>(i);
  for (; i < count; ++i) batch.template operator()<1>(i);
}

/// mine[u] += V_{vec0 + u} . w over the warp's tiles, u < U; every load is issued first.
template <int U, int T, basis_storage S>
SQUEEZE_DEVICE void warp_dot_columns(const basis_reader<S>& v, std::size_t vec0,
                                     const warp_tiles<T>& tiles, const double (&w)[T][lane_rows<S>],
                                     double* mine) {
  double s[U] = {};
  warp_visit_columns<U>(v, vec0, tiles.at, [&](int u, int k, const double(&b)[lane_rows<S>]) {
#pragma unroll
    for (int c = 0; c < lane_rows<S>; ++c) s[u] += b[c] * w[k][c];
  });
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const double total = warp_sum(s[u]);
    if (threadIdx.x % 32 == 0) mine[u] += total;
  }
}

/// x += sum_u coeff[u] V_{vec0 + u} over the warp's tiles, u < U; every load is issued first.
template <int U, int T, basis_storage S>
SQUEEZE_DEVICE void warp_axpy_columns(const basis_reader<S>& v, std::size_t vec0,
                                      const double* coeff, double sign, const warp_tiles<T>& tiles,
                                      double (&x)[T][lane_rows<S>]) {
  double cu[U];
#pragma unroll
  for (int u = 0; u < U; ++u) cu[u] = sign * coeff[u];
  warp_visit_columns<U>(v, vec0, tiles.at, [&](int u, int k, const double(&b)[lane_rows<S>]) {
#pragma unroll
    for (int c = 0; c < lane_rows<S>; ++c) x[k][c] += cu[u] * b[c];
  });
}

/// Partials of out[i] = V_{first + i} . w for i < count, and of w . w when with_self:
/// partials[col][gridDim.x], col < count (+ 1), summed in a fixed order by
/// reduce_kernel (so the results are deterministic). w has n_w rows (read as 0 past them);
/// the basis vectors `tiles` tiles.
/// Returns at once when `guard` is set and *guard == 0.
template <basis_storage S, class P>
SQUEEZE_KERNEL_MIN_BLOCKS(P::block_threads, P::min_blocks_per_sm)
void multidot_kernel(basis_ref<S> v, std::size_t first, int count, const double* w, std::size_t n_w,
                     std::size_t tiles, bool with_self, const double* guard, double* partials) {
  if (guard != nullptr && *guard == 0.0) return;
  constexpr int warps = P::block_threads / 32;
  constexpr int T = warp_tiles_of<S, P>;
  constexpr int V = lane_rows<S>;
  constexpr int U = P::columns_in_flight;
  extern __shared__ double multidot_acc[];  // [warps][cols]
  const int cols = count + (with_self ? 1 : 0);
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int i = static_cast<int>(threadIdx.x); i < warps * cols; i += P::block_threads) {
    multidot_acc[i] = 0;
  }
  __syncthreads();
  double* mine = multidot_acc + warp * cols;
  const basis_reader<S> reader{v};
  for_warp_rounds<T, warps>(tiles, [&](std::size_t t0, const warp_tiles<T>& at) {
    double wr[T][V];
#pragma unroll
    for (int k = 0; k < T; ++k) read_rows(w, n_w, t0 + k, wr[k]);
    for_column_batches<U>(
        count, [&]<int N>(int i) { warp_dot_columns<N>(reader, first + i, at, wr, mine + i); });
    if (with_self) {
      double s = 0.0;
#pragma unroll
      for (int k = 0; k < T; ++k) {
#pragma unroll
        for (int c = 0; c < V; ++c) s += wr[k][c] * wr[k][c];
      }
      s = warp_sum(s);
      if (lane == 0) mine[count] += s;
    }
  });
  __syncthreads();
  for (int col = static_cast<int>(threadIdx.x); col < cols; col += P::block_threads) {
    double s = 0.0;
    for (int k = 0; k < warps; ++k) s += multidot_acc[k * cols + col];
    partials[std::size_t(col) * gridDim.x + blockIdx.x] = s;
  }
}

/// What a basis update does besides the update itself.
enum class update_kind : int {
  solution,     ///< x += V y; nothing else
  first_pass,   ///< w -= V h; then first2 = final2 = ||w||^2, reorth = ||w||^2 < eta^2 omega^2
  reorth_pass,  ///< skipped unless reorth; w -= V u; then final2 = ||w||^2, h += u
};

/// target -= sum_i coeffs[i] V_i over i < count (+= for update_kind::solution) on rows
/// [0, n_target), and, unless solution, this block's partial of ||target||^2 in
/// partials[blockIdx.x]. Each warp keeps its rows of the target in registers across all
/// vectors. Returns at once when `guard` is set and *guard == 0.
template <basis_storage S, class P>
SQUEEZE_KERNEL_MIN_BLOCKS(P::block_threads, P::min_blocks_per_sm)
void update_kernel(basis_ref<S> v, int count, const double* coeffs, double* target,
                   std::size_t n_target, std::size_t tiles, update_kind kind, const double* guard,
                   double* partials) {
  if (guard != nullptr && *guard == 0.0) return;
  constexpr int warps = P::block_threads / 32;
  constexpr int T = warp_tiles_of<S, P>;
  constexpr int V = lane_rows<S>;
  constexpr int U = P::columns_in_flight;
  const double sign = kind == update_kind::solution ? 1.0 : -1.0;
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  double squares = 0.0;
  const basis_reader<S> reader{v};
  for_warp_rounds<T, warps>(tiles, [&](std::size_t t0, const warp_tiles<T>& at) {
    double x[T][V];
#pragma unroll
    for (int k = 0; k < T; ++k) read_rows(target, n_target, t0 + k, x[k]);
    for_column_batches<U>(
        count, [&]<int N>(int i) { warp_axpy_columns<N>(reader, i, coeffs + i, sign, at, x); });
#pragma unroll
    for (int k = 0; k < T; ++k) {
      const std::size_t row = ((t0 + k) * 32 + lane) * V;
#pragma unroll
      for (int c = 0; c < V; ++c) {
        if (row + c < n_target) {
          target[row + c] = x[k][c];
          squares += x[k][c] * x[k][c];
        }
      }
    }
  });
  if (kind == update_kind::solution) return;
  __shared__ double warp_squares[warps];
  squares = warp_sum(squares);
  if (lane == 0) warp_squares[warp] = squares;
  __syncthreads();
  if (threadIdx.x == 0) {
    double s = 0.0;
    for (int k = 0; k < warps; ++k) s += warp_squares[k];
    partials[blockIdx.x] = s;
  }
}

/// The step's device scalars the reductions write.
struct arnoldi_ref {
  double* scalars = nullptr;  ///< [scalar_slots]
  double* h = nullptr;        ///< the Hessenberg column [count + 1]
  const double* u = nullptr;  ///< reorthogonalization coefficients [count]
  double eta2 = 0.0;
};

/// What reduce_kernel does with column sums.
enum class reduce_kind : int {
  columns,      ///< out[col] for col < count, *out_self for col == count (a multi-dot)
  first_pass,   ///< one column, ||w||^2: first2 = final2 = it, reorth = it < eta^2 omega^2
  reorth_pass,  ///< one column, ||w||^2: final2 = it, h += u
};

/// Block c sums partials[c][0 .. blocks) in a fixed order (so every run gives the same bits)
/// and finishes as `kind` says. Returns at once when `guard` is set and *guard == 0.
template <int Threads>
SQUEEZE_KERNEL(Threads)
void reduce_kernel(const double* partials, unsigned blocks, int count, reduce_kind kind,
                   const double* guard, double* out, double* out_self, arnoldi_ref step) {
  if (guard != nullptr && *guard == 0.0) return;
  constexpr int warps = Threads / 32;
  __shared__ double warp_sums[warps];
  const unsigned col = blockIdx.x;
  const double* p = partials + std::size_t{col} * blocks;
  double s = 0.0;
  for (unsigned b = threadIdx.x; b < blocks; b += Threads) s += p[b];
  s = warp_sum(s);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = s;
  __syncthreads();
  if (threadIdx.x != 0) {
    if (kind == reduce_kind::reorth_pass) {
      for (int i = static_cast<int>(threadIdx.x) - 1; i < count; i += Threads - 1)
        step.h[i] += step.u[i];
    }
    return;
  }
  s = 0.0;
  for (int k = 0; k < warps; ++k) s += warp_sums[k];
  switch (kind) {
    case reduce_kind::columns:
      if (static_cast<int>(col) < count)
        out[col] = s;
      else
        *out_self = s;
      break;
    case reduce_kind::first_pass:
      step.scalars[first2] = s;
      step.scalars[final2] = s;
      step.scalars[reorth] = s < step.eta2 * step.scalars[omega2] ? 1.0 : 0.0;
      break;
    case reduce_kind::reorth_pass: step.scalars[final2] = s; break;
  }
}

/// w /= sqrt(*norm2), unless *norm2 is 0 or not finite (a breakdown: the host ends the cycle
/// and never uses this vector).
template <int Threads>
SQUEEZE_KERNEL(Threads)
void normalize_kernel(double* w, std::size_t n, const double* norm2) {
  const double nn = *norm2;
  if (!(nn > 0.0) || !isfinite(nn)) return;
  const double norm = sqrt(nn);
  const std::size_t stride = std::size_t{gridDim.x} * Threads;
  for (std::size_t i = blockIdx.x * std::size_t{Threads} + threadIdx.x; i < n; i += stride) {
    w[i] = w[i] / norm;
  }
}

/// Lanes per row of the SpMV: the power of two in [2, 32] at or above the mean row length.
inline int spmv_width(const csr_ref& a) noexcept {
  const double mean = a.rows > 0 ? static_cast<double>(a.nnz) / a.rows : 0.0;
  int width = 2;
  while (width < 32 && width < mean) width *= 2;
  return width;
}

}  // namespace detail

// ---- the solver -----------------------------------------------------------------------------

/// CB-GMRES with its Krylov basis stored as `Basis` (double, float, __half, __nv_bfloat16 or
/// frsz2::format<l>). Owns its workspace (basis, vectors, reduction buffers) on one stream,
/// given at construction, which must outlive the solver; solve() may be called repeatedly. The
/// matrix behind `a` must stay alive and unchanged while the solver is used.
template <basis_storage Basis, cb_gmres_policy_like Policy = default_cb_gmres_policy<Basis>>
class cb_gmres {
 public:
  /// Checks `a` and `options` (squeeze::invalid_argument naming the problem), then allocates.
  cb_gmres(csr_ref a, cb_gmres_options options = {}, cudaStream_t stream = nullptr)
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
    // Vectors start on tile and block boundaries; the rows past n are stored zeros, so the
    // kernels read whole tiles without conditions.
    constexpr std::size_t align =
        std::max<std::size_t>(detail::tile_rows<Basis>, storage_traits<Basis>::block_size);
    stride_ = core::align_up(n_, align);
    tiles_ = stride_ / detail::tile_rows<Basis>;
    int device = 0;
    SQUEEZE_CUDA_TRY(cudaGetDevice(&device));
    SQUEEZE_CUDA_TRY(cudaDeviceGetAttribute(&sms_, cudaDevAttrMultiProcessorCount, device));
    const std::size_t max_cols = std::min<std::size_t>(Policy::max_batch, m_ + 1) + 1;
    multidot_grid_ =
        grid_for(detail::multidot_kernel<Basis, Policy>, max_cols * warps * sizeof(double));
    update_grid_ = grid_for(detail::update_kernel<Basis, Policy>, 0);

    basis_ = array<Basis>{(m_ + 1) * stride_, stream_};
    w_ = core::device_buffer<double>{stride_, stream_};
    SQUEEZE_CUDA_TRY(cudaMemsetAsync(w_.data(), 0, stride_ * sizeof(double), stream_));
    scalars_ = core::device_buffer<double>{scalar_count(), stream_};
    // fetch() copies a prefix of the scalars, slots not yet written included: zero them once
    // so that no uninitialized byte ever leaves the GPU.
    scalars_.fill_bytes(0, stream_);
    partials_ =
        core::device_buffer<double>{max_cols * std::max(multidot_grid_, update_grid_), stream_};
    host_ = core::pinned_buffer<double>{scalar_count()};
    best_x_ = core::device_buffer<double>{n_, stream_};
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
    const double eta2 = options_.eta * options_.eta;
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
      for (std::size_t j = 0;
           j < static_cast<std::size_t>(d.steps) && res.iterations < options_.max_iterations; ++j) {
        const int count = static_cast<int>(j + 1);
        const detail::arnoldi_ref step{scalars_.data(), slot(h_offset()), slot(u_offset()), eta2};
        const accessor<Basis, double> acc;
        spmv(acc, acc.offset(view().data, j * stride_), nullptr);
        multidot(count, w_.data(), stride_, true, nullptr, slot(h_offset()), slot(detail::omega2));
        update(count, slot(h_offset()), w_.data(), stride_, detail::update_kind::first_pass,
               nullptr, step);
        const double* reorth = slot(detail::reorth);  // the second pass runs when it is set
        multidot(count, w_.data(), stride_, false, reorth, slot(u_offset()), nullptr);
        update(count, slot(u_offset()), w_.data(), stride_, detail::update_kind::reorth_pass,
               reorth, step);
        normalize_and_store(j + 1);

        const double* s = fetch(h_offset() + j + 1);
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

  [[nodiscard]] const cb_gmres_options& options() const noexcept { return options_; }
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

  [[nodiscard]] basis_ref<Basis> view() const noexcept { return {basis_.handle(), stride_}; }

  static constexpr int warps = Policy::block_threads / 32;

  /// Blocks for a kernel over the tiles: as many as fit at once (Policy::max_blocks caps
  /// them), spread so every block gets the same number of rounds.
  template <class Kernel>
  unsigned grid_for(Kernel kernel, std::size_t shared_bytes) const {
    int per_sm = 0;
    SQUEEZE_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &per_sm, kernel, Policy::block_threads, shared_bytes));
    std::size_t cap = std::size_t(std::max(per_sm, 1)) * std::size_t(sms_);
    if (Policy::max_blocks > 0) cap = std::min<std::size_t>(cap, Policy::max_blocks);
    const std::size_t blocks =
        core::div_ceil(tiles_, std::size_t{warps} * detail::warp_tiles_of<Basis, Policy>);
    const std::size_t rounds = core::div_ceil(blocks, cap);
    return static_cast<unsigned>(core::div_ceil(blocks, rounds));
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
    multidot(0, w_.data(), stride_, true, nullptr, nullptr, slot(detail::final2));
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
    const auto blocks = static_cast<unsigned>(
        std::clamp<std::size_t>(core::div_ceil(n_, rows_per_block), 1, std::size_t(sms_) * 16));
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
  void multidot(int count, const double* w, std::size_t n_w, bool with_self, const double* guard,
                double* out, double* out_self) {
    int first = 0;
    do {
      const int batch = std::min(Policy::max_batch, count - first);
      const bool self = with_self && first == 0;
      const int cols = batch + (self ? 1 : 0);
      const std::size_t shared = std::size_t(warps) * cols * sizeof(double);
      detail::multidot_kernel<Basis, Policy>
          <<<multidot_grid_, Policy::block_threads, shared, stream_>>>(
              view(), static_cast<std::size_t>(first), batch, w, n_w, tiles_, self, guard,
              partials_.data());
      SQUEEZE_CHECK_LAUNCH();
      detail::reduce_kernel<reduce_threads><<<cols, reduce_threads, 0, stream_>>>(
          partials_.data(), multidot_grid_, batch, detail::reduce_kind::columns, guard,
          out == nullptr ? nullptr : out + first, out_self, {});
      SQUEEZE_CHECK_LAUNCH();
      first += batch;
    } while (first < count);
  }

  /// target (n_target rows) -= V coeffs, or += for the solution; then, for the Arnoldi
  /// passes, ||target||^2 and the step's scalars. Skipped on the device when *guard == 0.
  void update(int count, const double* coeffs, double* target, std::size_t n_target,
              detail::update_kind kind, const double* guard, detail::arnoldi_ref step) {
    detail::update_kernel<Basis, Policy><<<update_grid_, Policy::block_threads, 0, stream_>>>(
        view(), count, coeffs, target, n_target, tiles_, kind, guard, partials_.data());
    SQUEEZE_CHECK_LAUNCH();
    if (kind == detail::update_kind::solution) return;
    const auto reduce = kind == detail::update_kind::first_pass ? detail::reduce_kind::first_pass
                                                                : detail::reduce_kind::reorth_pass;
    detail::reduce_kernel<reduce_threads><<<1, reduce_threads, 0, stream_>>>(
        partials_.data(), update_grid_, count, reduce, guard, nullptr, nullptr, step);
    SQUEEZE_CHECK_LAUNCH();
  }

  /// w /= sqrt(final2) on the device, then stored as basis vector `vec`.
  void normalize_and_store(std::size_t vec) {
    constexpr int threads = 256;
    const auto blocks = static_cast<unsigned>(std::clamp<std::size_t>(
        core::div_ceil<std::size_t>(n_, threads), 1, std::size_t(sms_) * 8));
    detail::normalize_kernel<threads>
        <<<blocks, threads, 0, stream_>>>(w_.data(), n_, slot(detail::final2));
    SQUEEZE_CHECK_LAUNCH();
    basis_.store(vec * stride_, w_.data(), stride_, stream_, options_.mode);  // zeros past n
  }

  csr_ref a_;
  cb_gmres_options options_;
  cudaStream_t stream_;
  std::size_t n_ = 0;
  std::size_t m_ = 0;
  std::size_t stride_ = 0;
  std::size_t tiles_ = 0;
  int sms_ = 1;
  unsigned multidot_grid_ = 1;
  unsigned update_grid_ = 1;
  static constexpr int reduce_threads = 256;
  array<Basis> basis_;                    // [(m + 1) * stride]
  core::device_buffer<double> w_;         // [stride], zeros past n
  core::device_buffer<double> scalars_;   // [scalar_count()]
  core::device_buffer<double> partials_;  // [max_batch + 1][grid]
  core::pinned_buffer<double> host_;      // [scalar_count()], host mirror
  core::device_buffer<double> best_x_;    // [n], the best x of the current solve
};

/// One solve with a fresh solver (allocation included); see cb_gmres.
template <basis_storage Basis, cb_gmres_policy_like Policy = default_cb_gmres_policy<Basis>>
cb_gmres_result cb_gmres_solve(csr_ref a, std::span<const double> b, std::span<double> x,
                               const cb_gmres_options& options = {},
                               cudaStream_t stream = nullptr) {
  return cb_gmres<Basis, Policy>{a, options, stream}.solve(b, x);
}

}  // namespace squeeze::frsz2
