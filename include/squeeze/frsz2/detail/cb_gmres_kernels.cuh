// SPDX-License-Identifier: Apache-2.0
// squeeze/frsz2/detail/cb_gmres_kernels.cuh: CB-GMRES's kernels and their device helpers
// (SpMV through the basis accessor, the fused multi-dot and update over tiles of the basis,
// each finishing with its fixed-order cross-block sum). Internal: frsz2/cb_gmres.cuh launches
// them.
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
/// use(u, k, values), or, Scaled, to use(u, k, q, scale) with the values q[c] * scale
/// (tile_reader::decode_each_scaled): only the raw words of the batch stay live.
template <int U, bool Scaled = false, int T, basis_storage S, class Use>
SQUEEZE_DEVICE void warp_visit_columns(const basis_reader<S>& v, std::size_t vec0,
                                       const std::size_t (&tiles)[T], Use&& use) {
  decltype(v.read(0, 0)) raw[U * T];
#pragma unroll
  for (int u = 0; u < U; ++u) {
#pragma unroll
    for (int k = 0; k < T; ++k) raw[u * T + k] = v.read(vec0 + u, tiles[k]);
  }
  if constexpr (Scaled) {
    v.reader.decode_each_scaled(raw, [&](int j, const double(&q)[lane_rows<S>], double scale) {
      use(j / T, j % T, q, scale);
    });
  } else {
    v.reader.decode_each(raw, [&](int j, const double(&b)[lane_rows<S>]) { use(j / T, j % T, b); });
  }
}

/// Whether the vector kernels take S's values with the scale apart (FRSZ2's lean reads): a
/// dot product or an axpy then multiplies by a block's scale once a read, not once a value
/// (an iteration 1-2.5 % faster for frsz2_16 and frsz2_32 from 10^5 to 4 x 10^6 rows; H200,
/// 2026-11-28).
template <basis_storage S>
inline constexpr bool scaled_reads = decltype(basis_reader<S>::reader)::splits_scale;

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

/// Calls round(t0, active) for every round of the block over `tiles` tiles. The block's warps
/// form Warps / groups owners of T consecutive tiles each (warps o groups .. o groups +
/// groups - 1 share owner o's tiles and split the basis vectors between them); round r of
/// block b gives its owners the tiles from (r gridDim.x + b) (Warps / groups) T on. Every warp
/// of a block runs the same rounds, so a round may end in __syncthreads(); `active` is false
/// for an owner whose tiles start past the end.
template <int T, int Warps, class Round>
SQUEEZE_DEVICE void for_block_rounds(std::size_t tiles, int groups, Round&& round) {
  const std::size_t per_block = std::size_t(Warps / groups) * T;
  const std::size_t mine = (threadIdx.x / 32) / groups * std::size_t{T};
  for (std::size_t base = blockIdx.x * per_block; base < tiles; base += gridDim.x * per_block) {
    round(base + mine, base + mine < tiles);
  }
}

/// Calls batch.template operator()<N>(i) over this warp's share of columns [0, count): the
/// group's contiguous part [count g / groups, count (g + 1) / groups), in batches of N = U
/// columns (their loads all in flight at once) and one last batch of the N < U left. Shares
/// differ by at most one column, and each takes ceil(share / U) round trips to memory (chunks
/// of U dealt out in turn gave one group the short last chunk as single columns: at 51
/// vectors and 4 groups, 6 round trips where 4 do).
template <int U, class Batch>
SQUEEZE_DEVICE void for_column_batches(int count, int group, int groups, Batch&& batch) {
  const int end = count * (group + 1) / groups;
  int i = count * group / groups;
  for (; i + U <= end; i += U) batch.template operator()<U>(i);
  const auto last = [&]<int N>(auto&& self) {
    if constexpr (N > 0) {
      if (end - i == N) {
        batch.template operator()<N>(i);
      } else {
        self.template operator()<N - 1>(self);
      }
    }
  };
  last.template operator()<U - 1>(last);
}

/// Where a kernel's cross-block sums go: each block writes its partial of column c to
/// partials[c gridDim.x + block]; the block that finishes last adds them up in a fixed order
/// (so every run gives the same bits) and finishes the kernel's reduction.
struct grid_sum {
  double* partials = nullptr;   ///< [columns][gridDim.x]
  unsigned* counter = nullptr;  ///< blocks done; 0 between launches (the last block resets it)
};

/// Called by every thread after its block's partials are written: true in every thread of
/// the block that finishes last, which may then read every block's partials (with __ldcg:
/// they were written on other SMs). That block resets the counter for the next launch
/// (launches on one stream run one after another).
SQUEEZE_DEVICE bool last_block_done(unsigned* counter) {
  __shared__ bool last;
  __threadfence();  // this thread's partials reach the device before its block's ticket
  __syncthreads();
  if (threadIdx.x == 0) {
    last = atomicAdd(counter, 1u) == gridDim.x - 1;
    if (last) {
      *counter = 0;
      __threadfence();  // the others' partials, ordered by their tickets, before the reads
    }
  }
  __syncthreads();
  return last;
}

/// sums[k] = p[k n] + ... + p[k n + n - 1] for k < K (columns past `columns` read as 0),
/// added in a fixed order, in every lane of the calling warp. The lanes split each column's n
/// values; all K columns' loads of a lane are issued together, so the sums take
/// ceil(n / 32) round trips to L2, not K times as many.
template <int K>
SQUEEZE_DEVICE void warp_sums_of(const double* p, unsigned n, int columns, double (&sums)[K]) {
#pragma unroll
  for (int k = 0; k < K; ++k) sums[k] = 0.0;
  for (unsigned i = threadIdx.x % 32; i < n; i += 32) {
    double v[K];
#pragma unroll
    for (int k = 0; k < K; ++k) v[k] = k < columns ? __ldcg(p + std::size_t(k) * n + i) : 0.0;
#pragma unroll
    for (int k = 0; k < K; ++k) sums[k] += v[k];
  }
#pragma unroll
  for (int k = 0; k < K; ++k) sums[k] = warp_sum(sums[k]);
}

/// mine[u] += V_{vec0 + u} . w over the warp's tiles, u < U; every load is issued first.
template <int U, int T, basis_storage S>
SQUEEZE_DEVICE void warp_dot_columns(const basis_reader<S>& v, std::size_t vec0,
                                     const warp_tiles<T>& tiles, const double (&w)[T][lane_rows<S>],
                                     double* mine) {
  double s[U] = {};
  if constexpr (scaled_reads<S>) {
    warp_visit_columns<U, true>(v, vec0, tiles.at,
                                [&](int u, int k, const double(&q)[lane_rows<S>], double scale) {
                                  double t = q[0] * w[k][0];
#pragma unroll
                                  for (int c = 1; c < lane_rows<S>; ++c) t += q[c] * w[k][c];
                                  s[u] += t * scale;
                                });
  } else {
    warp_visit_columns<U>(v, vec0, tiles.at, [&](int u, int k, const double(&b)[lane_rows<S>]) {
#pragma unroll
      for (int c = 0; c < lane_rows<S>; ++c) s[u] += b[c] * w[k][c];
    });
  }
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
  if constexpr (scaled_reads<S>) {
    // cu[u] * scale is exact (a power of two; unless it underflows), so each product rounds
    // as before.
    warp_visit_columns<U, true>(v, vec0, tiles.at,
                                [&](int u, int k, const double(&q)[lane_rows<S>], double scale) {
                                  const double f = cu[u] * scale;
#pragma unroll
                                  for (int c = 0; c < lane_rows<S>; ++c) x[k][c] += f * q[c];
                                });
  } else {
    warp_visit_columns<U>(v, vec0, tiles.at, [&](int u, int k, const double(&b)[lane_rows<S>]) {
#pragma unroll
      for (int c = 0; c < lane_rows<S>; ++c) x[k][c] += cu[u] * b[c];
    });
  }
}

/// out[i] = V_{first + i} . w for i < count, and *out_self = w . w when with_self. w has n_w
/// rows (read as 0 past them), the basis vectors `tiles` tiles; `groups` warps share a tile
/// (for_block_rounds). Each block sums its warps' products, the last block the blocks'
/// (grid_sum: partials[col][gridDim.x], col < count (+ 1)). Returns at once when `guard` is
/// set and *guard == 0.
template <basis_storage S, class P>
SQUEEZE_KERNEL_MIN_BLOCKS(P::block_threads, P::min_blocks_per_sm)
void multidot_kernel(basis_ref<S> v, std::size_t first, int count, const double* w, std::size_t n_w,
                     std::size_t tiles, int groups, bool with_self, const double* guard,
                     grid_sum sum, double* out, double* out_self) {
  if (guard != nullptr && *guard == 0.0) return;
  constexpr int warps = P::block_threads / 32;
  constexpr int T = warp_tiles_of<S, P>;
  constexpr int V = lane_rows<S>;
  constexpr int U = P::columns_in_flight;
  extern __shared__ double multidot_acc[];  // [warps][cols]
  const int cols = count + (with_self ? 1 : 0);
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int group = static_cast<int>(warp) % groups;
  for (int i = static_cast<int>(threadIdx.x); i < warps * cols; i += P::block_threads) {
    multidot_acc[i] = 0;
  }
  __syncthreads();
  double* mine = multidot_acc + warp * cols;  // a group's warps write disjoint columns
  const basis_reader<S> reader{v};
  for_block_rounds<T, warps>(tiles, groups, [&](std::size_t t0, bool active) {
    if (!active) return;
    const warp_tiles<T> at{t0, tiles};
    double wr[T][V];
#pragma unroll
    for (int k = 0; k < T; ++k) read_rows(w, n_w, t0 + k, wr[k]);
    for_column_batches<U>(count, group, groups, [&]<int N>(int i) {
      warp_dot_columns<N>(reader, first + i, at, wr, mine + i);
    });
    if (with_self && group == 0) {
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
    sum.partials[std::size_t(col) * gridDim.x + blockIdx.x] = s;
  }
  if (!last_block_done(sum.counter)) return;
  constexpr int K = 8;  // columns a warp sums at once
  for (int col = static_cast<int>(warp) * K; col < cols; col += warps * K) {
    double s[K];
    warp_sums_of(sum.partials + std::size_t(col) * gridDim.x, gridDim.x, cols - col, s);
    if (lane < K && col + static_cast<int>(lane) < cols) {
      double mine = s[0];
#pragma unroll
      for (int k = 1; k < K; ++k) mine = lane == static_cast<unsigned>(k) ? s[k] : mine;
      const int c = col + static_cast<int>(lane);
      if (c < count)
        out[c] = mine;
      else
        *out_self = mine;
    }
  }
}

/// What a basis update does besides the update itself.
enum class update_kind : int {
  solution,     ///< x += V y; nothing else
  first_pass,   ///< w -= V h; then first2 = final2 = ||w||^2, reorth = ||w||^2 < eta^2 omega^2
  reorth_pass,  ///< skipped unless reorth; w -= V u; then final2 = ||w||^2, h += u
};

/// The step's device scalars an Arnoldi pass of update_kernel writes, and the host memory
/// (mapped) that receives them: mirror[0 .. scalar_slots) the scalars, mirror[scalar_slots +
/// i] = h[i] for i < count.
struct arnoldi_ref {
  double* scalars = nullptr;  ///< [scalar_slots]
  double* h = nullptr;        ///< the Hessenberg column [count + 1]
  const double* u = nullptr;  ///< reorthogonalization coefficients [count]
  double eta2 = 0.0;
  double* mirror = nullptr;  ///< mapped host memory [scalar_slots + count]
};

/// target -= sum_i coeffs[i] V_i over i < count (+= for update_kind::solution) on rows
/// [0, n_target); then, unless solution, ||target||^2 (each block's partial, the last block's
/// sum: grid_sum) and the step's scalars as `kind` says, copied with the Hessenberg column to
/// step.mirror, where the host reads them once the kernel is done. With groups == 1 a warp keeps
/// its rows of the target in registers across all vectors; with more, the `groups` warps of a tile
/// each add up their share of the vectors, and the first adds the shares, in group order, to
/// the target. Returns at once when `guard` is set and *guard == 0.
template <basis_storage S, class P>
SQUEEZE_KERNEL_MIN_BLOCKS(P::block_threads, P::min_blocks_per_sm)
void update_kernel(basis_ref<S> v, int count, const double* coeffs, double* target,
                   std::size_t n_target, std::size_t tiles, int groups, update_kind kind,
                   const double* guard, grid_sum sum, arnoldi_ref step) {
  if (guard != nullptr && *guard == 0.0) return;
  constexpr int warps = P::block_threads / 32;
  constexpr int T = warp_tiles_of<S, P>;
  constexpr int V = lane_rows<S>;
  constexpr int U = P::columns_in_flight;
  __shared__ double shares[warps][T][V][32];  // a warp's share of a round, with groups > 1
  const double sign = kind == update_kind::solution ? 1.0 : -1.0;
  const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int group = static_cast<int>(warp) % groups;
  double squares = 0.0;
  const basis_reader<S> reader{v};
  for_block_rounds<T, warps>(tiles, groups, [&](std::size_t t0, bool active) {
    double x[T][V] = {};
    if (active) {
      if (groups == 1) {
#pragma unroll
        for (int k = 0; k < T; ++k) read_rows(target, n_target, t0 + k, x[k]);
      }
      const warp_tiles<T> at{t0, tiles};
      for_column_batches<U>(count, group, groups, [&]<int N>(int i) {
        warp_axpy_columns<N>(reader, i, coeffs + i, sign, at, x);
      });
    }
    if (groups > 1) {
#pragma unroll
      for (int k = 0; k < T; ++k) {
#pragma unroll
        for (int c = 0; c < V; ++c) shares[warp][k][c][lane] = x[k][c];
      }
      __syncthreads();
      if (active && group == 0) {
#pragma unroll
        for (int k = 0; k < T; ++k) read_rows(target, n_target, t0 + k, x[k]);
        for (int g = 0; g < groups; ++g) {
#pragma unroll
          for (int k = 0; k < T; ++k) {
#pragma unroll
            for (int c = 0; c < V; ++c) x[k][c] += shares[warp + g][k][c][lane];
          }
        }
      }
      __syncthreads();  // the shares are read before the next round writes them
    }
    if (!active || group != 0) return;
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
    sum.partials[blockIdx.x] = s;
  }
  if (!last_block_done(sum.counter)) return;
  for (int i = static_cast<int>(threadIdx.x); i < count; i += P::block_threads) {
    const double h = kind == update_kind::reorth_pass ? step.h[i] + step.u[i] : step.h[i];
    if (kind == update_kind::reorth_pass) step.h[i] = h;
    step.mirror[scalar_slots + i] = h;
  }
  if (warp != 0) return;
  double s[1];
  warp_sums_of(sum.partials, gridDim.x, 1, s);
  if (lane != 0) return;
  double* const scalars = step.scalars;
  if (kind == update_kind::first_pass) {
    scalars[first2] = s[0];
    scalars[reorth] = s[0] < step.eta2 * scalars[omega2] ? 1.0 : 0.0;
  }
  scalars[final2] = s[0];
  for (int k = 0; k < scalar_slots; ++k) step.mirror[k] = scalars[k];
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
