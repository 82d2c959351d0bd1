// SPDX-License-Identifier: Apache-2.0
// squeeze/roast/detail/sm90/epilogue.cuh: where ROAST-MM's Hopper kernel puts a finished
// tile: Y and dX leave through 2 KiB of shared memory per consumer warp as whole rows of
// 16-byte stores; the memory pass folds dW^T into dM (or a gradient_fold's workspace) through
// the same 2 KiB, an atom of M at a time, as 16-byte reductions of whole lines at each atom's
// hashed place.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "squeeze/core/arch.cuh"
#include "squeeze/core/bits.hpp"
#include "squeeze/core/config.hpp"
#include "squeeze/core/hopper.cuh"
#include "squeeze/roast/detail/sm90/config.cuh"
#include "squeeze/roast/detail/sm90/consumer.cuh"

namespace squeeze::roast::detail::sm90 {

/// Stores one warp's 16 rows x BN columns of accumulators (m64nINk fragments: lane l holds
/// rows l/4 and l/4 + 8, columns 8i + 2(l%4) + {0, 1} of each IN-column block j, to be
/// multiplied by scale[j]) at out[row0.., col0..], guarded by the shape. Written straight
/// from the fragments, each store instruction would put 8- or 16-byte pieces into eight
/// rows; instead 128 bytes of columns at a time go through the warp's 2 KiB of shared
/// memory (`staging`, 16-byte chunks swizzled by row so that the reads do not conflict on
/// banks) and leave as whole 128-byte rows of 16-byte stores (element stores where the rows
/// are not 16-byte aligned or the shape ends inside a chunk).
template <class Out, int BN, int IN>
SQUEEZE_DEVICE void store_rows_staged(unsigned char* staging, const float (&acc)[BN / IN][IN / 2],
                                      const float (&scale)[BN / IN], Out* out, std::uint64_t ld,
                                      std::uint32_t rows, std::uint32_t cols, std::uint32_t row0,
                                      std::uint32_t col0, bool vectors, int lane) {
  constexpr int row_bytes = 128;
  constexpr int chunks = row_bytes / 16;  // 16-byte chunks per staged row
  constexpr int per_chunk = 16 / static_cast<int>(sizeof(Out));
  constexpr int span = row_bytes / static_cast<int>(sizeof(Out));  // columns per pass
  const int r = lane / 4;
  const auto put = [&](int row, int byte, float v0, float v1) {
    unsigned char* p = staging + row * row_bytes + (((byte / 16) ^ (row % 8)) * 16) + byte % 16;
    if constexpr (std::is_same_v<Out, float>) {
      *reinterpret_cast<float2*>(p) = make_float2(v0, v1);
    } else if constexpr (std::is_same_v<Out, __nv_bfloat16>) {
      *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(v0, v1);
    } else {
      *reinterpret_cast<__half2*>(p) = __floats2half2_rn(v0, v1);
    }
  };
  SQUEEZE_UNROLL
  for (int c = 0; c < BN / span; ++c) {
    SQUEEZE_UNROLL
    for (int g = 0; g < span / 8; ++g) {
      const int col = span * c + 8 * g;  // this group's first column in the tile
      const int j = col / IN;
      const int i = (col % IN) / 8;
      const int byte = (8 * g + 2 * (lane % 4)) * static_cast<int>(sizeof(Out));
      put(r, byte, scale[j] * acc[j][4 * i], scale[j] * acc[j][4 * i + 1]);
      put(r + 8, byte, scale[j] * acc[j][4 * i + 2], scale[j] * acc[j][4 * i + 3]);
    }
    __syncwarp();
#pragma unroll 2  // fully unrolled, BN = 256 reaches the 168-register cap
    for (int k = 0; k < 16 * chunks / 32; ++k) {
      const int v = lane + 32 * k;
      const int row = v / chunks;
      const int q = v % chunks;
      const uint4 data =
          *reinterpret_cast<const uint4*>(staging + row * row_bytes + ((q ^ (row % 8)) * 16));
      const std::uint32_t out_row = row0 + static_cast<std::uint32_t>(row);
      const std::uint32_t out_col = col0 + static_cast<std::uint32_t>(span * c + q * per_chunk);
      if (out_row >= rows || out_col >= cols) continue;
      Out* p = out + out_row * ld + out_col;
      if (vectors && out_col + per_chunk <= cols) {
        *reinterpret_cast<uint4*>(p) = data;
      } else {
        const Out* e = reinterpret_cast<const Out*>(&data);
        SQUEEZE_UNROLL
        for (int t = 0; t < per_chunk; ++t) {
          if (out_col + static_cast<std::uint32_t>(t) < cols) p[t] = e[t];
        }
      }
    }
    __syncwarp();  // the next pass overwrites the staging area
  }
}

/// The memory pass: adds this warp's 16 rows of the tile (rows n of dW^T, columns k) to dM
/// at each value's place in M, times the tile's scale and sign, or stores them to the fold's
/// workspace (Store: args.workspace). `staging`: the warp's 2 KiB; `warp_row0`: its first row
/// (a multiple of 16).
///
/// The in-tile order (mapping.hpp) for 16-bit operands has 64 values of k per 128-byte atom
/// row, so each 64-column block of this block's BN columns lies in one tile and one atom
/// column, and 8 rows n of it are one atom: 512 values adjacent in M (2 KiB of dM's floats),
/// one tile's hash and sign. Each atom goes through `staging`, written there in M's own
/// order, and leaves as 4 warp-wide 16-byte reductions (or stores) of 512 contiguous bytes.
/// Reduced straight from the accumulator fragments, each instruction would touch 16
/// sectors of 16 different lines, and L2 takes those at about 60 % of the rate of whole
/// lines (2.1 against 3.4 TB/s on an H200). W's rows past K or columns past N have no place
/// in M.
template <class Config, class T, int IN, bool Store>
__device__ SQUEEZE_FORCEINLINE void fold_into_memory(
    float* staging, const float (&acc)[Config::block_n / IN][IN / 2],
    const gemm_args<T, float>& args, std::uint32_t warp_row0, std::uint32_t n0, int lane) {
  namespace arch = core::arch;
  constexpr int BN = Config::block_n;
  static_assert(sizeof(T) == 2 && IN == BN, "the memory pass: 16-bit operands, no signs");
  const mapping& map = args.map;
  const std::uint32_t tile_k = map.tile().k;
  const std::uint32_t tile_n = map.tile().n;
  const std::uint32_t blocks_per_tile = tile_k / 64;
  // Writing: the fragment puts rows lane / 4 and lane / 4 + 8 of the warp, columns
  // 8 i + 2 (lane % 4) + {0, 1} of each 8-column group i. Reading: lane l takes values
  // 4 l + 128 j (j < 4) of the atom, in row 2 j + l / 16, at k = 8 ((l % 16) / 2 ^ row)
  // + 4 (l % 2) of the 64-column block.
  const std::uint32_t put_row = static_cast<std::uint32_t>(lane) / 4;
  const std::uint32_t put_col = 2 * (static_cast<std::uint32_t>(lane) % 4);
  // Adds q to p[0..3] (or stores it there, into the workspace).
  const auto put4 = [](float* p, float4 q) {
    if constexpr (Store) {
      *reinterpret_cast<float4*>(p) = q;
    } else {
      arch::red_add_v4(p, q);
    }
  };
  // Where each of the warp's 2 x BN / 64 atoms goes and its factor (scale x sign): a hash
  // and a 64-bit product or two each, worked out once, lane j for atom j, and handed out by
  // shuffles. With every lane working out the places of its own values, the pass took 190
  // against 165 us at K = N = 8192 (H200; Nsight Compute: issue and dependency stalls).
  constexpr int atoms = 2 * (BN / 64);
  static_assert(atoms <= 32, "an atom a lane");
  float* my_base = nullptr;
  float my_factor = 0.0f;
  if (lane < atoms) {
    const std::uint32_t k64 = n0 / 64 + static_cast<std::uint32_t>(lane / 2);
    const std::uint32_t atom_row0 = warp_row0 + 8u * static_cast<std::uint32_t>(lane % 2);
    if (atom_row0 < args.rows && k64 * 64 < args.cols) {
      const std::uint32_t kb = k64 / blocks_per_tile;
      const std::uint32_t nb = atom_row0 / tile_n;
      const std::uint32_t atom = (k64 % blocks_per_tile) * (tile_n / 8) + (atom_row0 % tile_n) / 8;
      my_base =
          (Store ? args.workspace + ((std::uint64_t{kb} * map.tiles_n() + nb) * tile_k * tile_n -
                                     args.workspace_base)
                 : args.out + map.tile_offset(kb, nb)) +
          atom * 512;
      my_factor = map.scale() * map.tile_sign(kb, nb);
    }
  }
  SQUEEZE_UNROLL
  for (int b = 0; b < BN / 64; ++b) {
    const std::uint32_t k64 = n0 / 64 + static_cast<std::uint32_t>(b);
    SQUEEZE_UNROLL
    for (int half = 0; half < 2; ++half) {
      const std::uint32_t atom_row0 = warp_row0 + 8u * static_cast<std::uint32_t>(half);
      if (atom_row0 >= args.rows) break;  // the warp's remaining rows are past N: warp-uniform
      SQUEEZE_UNROLL
      for (int i8 = 0; i8 < 8; ++i8) {
        const float* v = &acc[0][4 * (b * 8 + i8) + 2 * half];
        *reinterpret_cast<float2*>(staging + put_row * 64 +
                                   ((static_cast<std::uint32_t>(i8) ^ put_row) * 8) + put_col) =
            make_float2(v[0], v[1]);
      }
      __syncwarp();
      float* const base = reinterpret_cast<float*>(
          __shfl_sync(full_warp_mask, reinterpret_cast<std::uintptr_t>(my_base), 2 * b + half));
      const float f = __shfl_sync(full_warp_mask, my_factor, 2 * b + half);
      if (atom_row0 + 8 <= args.rows && (k64 + 1) * 64 <= args.cols) {
        // The whole atom lies inside W (every atom but those on its last rows or columns):
        // no bounds, 4 reductions (or stores) a lane.
        SQUEEZE_UNROLL
        for (int j = 0; j < 4; ++j) {
          const std::uint32_t at = 4 * static_cast<std::uint32_t>(lane) + 128u * j;
          const float4 q = *reinterpret_cast<const float4*>(staging + at);
          put4(base + at, make_float4(f * q.x, f * q.y, f * q.z, f * q.w));
        }
      } else {
        SQUEEZE_UNROLL
        for (int j = 0; j < 4; ++j) {
          const std::uint32_t at = 4 * static_cast<std::uint32_t>(lane) + 128u * j;
          const std::uint32_t row = at / 64;
          const std::uint32_t k = k64 * 64 + (((at % 64) / 8) ^ row) * 8 + at % 8;
          float4 q = *reinterpret_cast<const float4*>(staging + at);
          if (atom_row0 + row >= args.rows || k >= args.cols) continue;
          q = make_float4(f * q.x, f * q.y, f * q.z, f * q.w);
          float* p = base + at;
          if (k + 3 < args.cols) {
            put4(p, q);
          } else {
            const float part[4] = {q.x, q.y, q.z, q.w};
            for (std::uint32_t e = 0; k + e < args.cols; ++e) {
              if constexpr (Store) {
                p[e] = part[e];
              } else {
                atomicAdd(p + e, part[e]);
              }
            }
          }
        }
      }
      __syncwarp();  // the next atom overwrites the staging area
    }
  }
}

/// Puts this consumer warp's 16 rows of the finished tile at (m0, n0) where they belong.
/// `staging`: the kernel's staging area (2 KiB per consumer warp).
template <class Config, class T, class Out, pass Pass, int IN>
__device__ SQUEEZE_FORCEINLINE void store_tile(const accumulators<Config::block_n, IN>& tile,
                                               const gemm_args<T, Out>& args, std::uint32_t staging,
                                               std::uint32_t m0, std::uint32_t n0, int wg, int warp,
                                               int lane) {
  constexpr int BN = Config::block_n;
  // Accumulator fragment of m64nINk: warp w of the warpgroup holds rows 16w..16w+15;
  // lane l holds rows l/4 and l/4 + 8, columns 8i + 2(l%4) + {0, 1}.
  const std::uint32_t row0 = m0 + static_cast<std::uint32_t>(wg * 64 + (warp % 4) * 16 + lane / 4);
  void* const warp_staging = core::arch::shared_pointer(staging + warp * 2048);
  if constexpr (Pass == pass::memory) {
    // A kernel folds into one of the two for all its tiles: two copies of the pass, each
    // without the other's branch (a branch in its loop took 2-4 % at K = N = 8192).
    if (args.workspace != nullptr) {
      fold_into_memory<Config, T, IN, true>(static_cast<float*>(warp_staging), tile.acc, args,
                                            row0 - lane / 4, n0, lane);
    } else {
      fold_into_memory<Config, T, IN, false>(static_cast<float*>(warp_staging), tile.acc, args,
                                             row0 - lane / 4, n0, lane);
    }
  } else {
    const float alpha = args.map.scale();
    const bool vectors =
        (args.ld_out * sizeof(Out)) % 16 == 0 && core::misalignment(args.out, 16) == 0;
    float scale[BN / IN];
    SQUEEZE_UNROLL
    for (int j = 0; j < BN / IN; ++j) scale[j] = tile.flipped[j] ? -alpha : alpha;
    store_rows_staged<Out, BN, IN>(static_cast<unsigned char*>(warp_staging), tile.acc, scale,
                                   args.out, args.ld_out, args.rows, args.cols, row0 - lane / 4, n0,
                                   vectors, lane);
  }
}

}  // namespace squeeze::roast::detail::sm90
