// SPDX-License-Identifier: Apache-2.0
// squeeze/roast/detail/sm90/epilogue.cuh: where ROAST-MM's Hopper kernel puts a finished
// tile: Y and dX leave through 2 KiB of shared memory per consumer warp as whole rows of
// 16-byte stores; the memory pass folds dW^T into dM (or a gradient_fold's workspace) with
// 16-byte reductions at each value's hashed place.
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

/// The memory pass: adds this thread's part of the tile (rows n of dW^T, columns k) to dM at
/// each value's place in M, times the tile's scale and sign, or stores it to the fold's
/// workspace.
template <class Config, class T, int IN>
__device__ SQUEEZE_FORCEINLINE void fold_into_memory(
    const float (&acc)[Config::block_n / IN][IN / 2], const gemm_args<T, float>& args,
    std::uint32_t row0, std::uint32_t n0, int lane) {
  namespace arch = core::arch;
  constexpr int BN = Config::block_n;
  const mapping& map = args.map;
  const float alpha = map.scale();
  const std::uint32_t tile_k = map.tile().k;
  const std::uint32_t tile_n = map.tile().n;
  // Lanes 2q and 2q + 1 of a quad hold columns k..k+3 of rows n and n + 8, two each;
  // one exchange gives the even lane row n and the odd lane row n + 8, 4 columns each:
  // 4 values adjacent in M (one 16-byte chunk), added with one 16-byte reduction or
  // stored to the fold's workspace. W's rows past K or columns past N have no place in
  // M.
  //
  // The in-tile order (mapping.hpp) for 16-bit operands: 64 values of k per 128-byte
  // atom row, so each 64-column block b of this block's BN columns lies in one tile,
  // one atom column, and the thread's values in it sit at
  //   atom * 512 + r * 64 + ((i8 ^ r) * 8) + c4,  i8 = the 8-column group in the block,
  // r = n mod 8, c4 = 0 or 4: the tile (hash, sign) is found once per block.
  static_assert(sizeof(T) == 2 && IN == BN, "the memory pass: 16-bit operands, no signs");
  const bool odd = (lane & 1) != 0;
  const std::uint32_t n = row0 + (odd ? 8u : 0u);
  const std::uint32_t r = n % 8;
  const std::uint32_t c4 = 4 * ((lane % 4) / 2);
  const std::uint32_t nb = n / tile_n;
  const std::uint32_t atom_n = (n % tile_n) / 8;
  const std::uint32_t blocks_per_tile = tile_k / 64;
  SQUEEZE_UNROLL
  for (int b = 0; b < BN / 64; ++b) {
    const std::uint32_t k64 = n0 / 64 + static_cast<std::uint32_t>(b);
    const std::uint32_t kb = k64 / blocks_per_tile;
    const std::uint32_t in_tile =
        ((k64 % blocks_per_tile) * (tile_n / 8) + atom_n) * 512 + r * 64 + c4;
    const bool row_in = n < args.rows;
    float* base = nullptr;
    float f = 0.0f;
    if (row_in) {
      f = alpha * map.tile_sign(kb, nb);
      base = args.workspace != nullptr
                 ? args.workspace +
                       ((std::uint64_t{kb} * map.tiles_n() + nb) * tile_k * tile_n -
                        args.workspace_base) +
                       in_tile
                 : reinterpret_cast<float*>(args.out) + map.tile_offset(kb, nb) + in_tile;
    }
    SQUEEZE_UNROLL
    for (int i8 = 0; i8 < 8; ++i8) {
      const float* v = &acc[0][4 * (b * 8 + i8)];
      const float send0 = odd ? v[0] : v[2];
      const float send1 = odd ? v[1] : v[3];
      const float got0 = __shfl_xor_sync(full_warp_mask, send0, 1);
      const float got1 = __shfl_xor_sync(full_warp_mask, send1, 1);
      float4 q = odd ? make_float4(got0, got1, v[2], v[3]) : make_float4(v[0], v[1], got0, got1);
      const std::uint32_t k = k64 * 64 + static_cast<std::uint32_t>(i8 * 8) + c4;
      if (!row_in || k >= args.cols) continue;
      q = make_float4(f * q.x, f * q.y, f * q.z, f * q.w);
      float* p = base + ((static_cast<std::uint32_t>(i8) ^ r) * 8);
      const bool store = args.workspace != nullptr;
      if (k + 3 < args.cols) {
        if (store) {
          *reinterpret_cast<float4*>(p) = q;
        } else {
          arch::red_add_v4(p, q);
        }
      } else {
        const float part[4] = {q.x, q.y, q.z, q.w};
        for (std::uint32_t e = 0; k + e < args.cols; ++e) {
          if (store) {
            p[e] = part[e];
          } else {
            atomicAdd(p + e, part[e]);
          }
        }
      }
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
  if constexpr (Pass == pass::memory) {
    fold_into_memory<Config, T, IN>(tile.acc, args, row0, n0, lane);
  } else {
    const float alpha = args.map.scale();
    const bool vectors =
        (args.ld_out * sizeof(Out)) % 16 == 0 && core::misalignment(args.out, 16) == 0;
    float scale[BN / IN];
    SQUEEZE_UNROLL
    for (int j = 0; j < BN / IN; ++j) scale[j] = tile.flipped[j] ? -alpha : alpha;
    store_rows_staged<Out, BN, IN>(
        static_cast<unsigned char*>(core::arch::shared_pointer(staging + warp * 2048)), tile.acc,
        scale, args.out, args.ld_out, args.rows, args.cols, row0 - lane / 4, n0, vectors, lane);
  }
}

}  // namespace squeeze::roast::detail::sm90
