// SPDX-License-Identifier: Apache-2.0
// squeeze/frsz2/detail/cb_gmres_kernels.cuh: CB-GMRES's kernels and their device helpers
// (SpMV through the basis accessor, the fused multi-dot and update over tiles of the basis,
// the fixed-order reductions). Internal: frsz2/cb_gmres.cuh launches them.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "squeeze/core/bits.hpp"
#include "squeeze/core/config.hpp"
#include "squeeze/frsz2/accessor.hpp"
#include "squeeze/frsz2/basis.cuh"
#include "squeeze/frsz2/csr.cuh"

namespace squeeze::frsz2 {
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

}  // namespace squeeze::frsz2
