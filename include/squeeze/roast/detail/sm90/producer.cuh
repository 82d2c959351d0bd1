// SPDX-License-Identifier: Apache-2.0
// squeeze/roast/detail/sm90/producer.cuh: the producer warp of ROAST-MM's Hopper kernel:
// where each stage's B comes from in M, and the copies that fill the ring.
//
// Lane 0 issues every copy. Where a stage's B comes from takes a hash and a few divisions;
// all lanes work that out, source_batch stages at a time (each lane independent chains for
// stages lane, lane + 32, ...), into a table in shared memory, so it stays off lane 0's
// critical path (it was slower than the tensor cores at small sizes). The first batch of a
// block's first tile is worked out by all threads of the block before the warps split
// (hopper_gemm.cuh).
#pragma once

#include <cuda.h>

#include <cstdint>

#include "squeeze/core/config.hpp"
#include "squeeze/core/hopper.cuh"
#include "squeeze/roast/detail/sm90/config.cuh"
#include "squeeze/roast/detail/sm90/pipeline.cuh"
#include "squeeze/roast/detail/sm90/scheduler.cuh"

namespace squeeze::roast::detail::sm90 {

/// Where B comes from (forward, input). Forward: runs of 1 KiB atoms (8 output columns
/// each), one per tile the block's columns cross. Input: one 8 KiB run per bk output
/// columns. Memory: TMA boxes of X, no table.
template <class Config, class T, class Out, pass Pass>
struct b_sources {
  static constexpr int bk = 128 / static_cast<int>(sizeof(T));  ///< reduction per stage
  static constexpr int blocks64 = Config::block_n / bk;         ///< MN-major B: 8 KiB blocks
  static constexpr int per_stage = Pass == pass::input ? blocks64 : 1;  ///< table entries
  static constexpr std::uint32_t atom_values = 1024 / sizeof(T);
  static_assert(per_stage * 8 * Config::source_batch <= Config::source_bytes);

  const gemm_args<T, Out>& args;
  int k_tiles;
  std::uint32_t tile_k;
  std::uint32_t tile_n;
  std::uint32_t tile_groups;  ///< 8-column atom groups across a tile

  SQUEEZE_DEVICE b_sources(const gemm_args<T, Out>& a, int stages_per_tile)
      : args{a},
        k_tiles{stages_per_tile},
        tile_k{a.map.tile().k},
        tile_n{a.map.tile().n},
        tile_groups{a.map.tile().n / 8} {}

  /// The atoms (forward) or 8 KiB blocks (input) of B that exist for the block at column n0.
  SQUEEZE_DEVICE std::uint32_t units_at(std::uint32_t n0) const {
    if (n0 >= args.cols) return 0u;
    if constexpr (Pass == pass::forward) {
      return min(static_cast<std::uint32_t>(Config::block_n / 8), (args.cols - n0 + 7) / 8);
    } else if constexpr (Pass == pass::input) {
      return min(static_cast<std::uint32_t>(blocks64), (args.cols - n0 + bk - 1) / bk);
    } else {
      return 0u;
    }
  }
  /// Forward: the source of atom g at reduction offset r0 (g's tile and the atoms after it).
  SQUEEZE_DEVICE const T* forward_source(std::uint32_t n0, std::uint32_t r0,
                                         std::uint32_t g) const {
    const std::uint32_t col = n0 + g * 8;
    return args.memory + args.map.tile_offset(r0 / tile_k, col / tile_n) +
           ((r0 % tile_k) / bk * tile_groups + (col % tile_n) / 8) * atom_values;
  }
  /// Input: the 8 KiB run of output columns [n0 + i*bk, +bk) and reduction rows [r0, +bk):
  /// 8 consecutive atoms (row groups) of one column block of tile (k / Z1, r0 / Z2).
  SQUEEZE_DEVICE const T* input_source(std::uint32_t n0, std::uint32_t r0, std::uint32_t i) const {
    const std::uint32_t k = n0 + i * bk;
    return args.memory + args.map.tile_offset(k / tile_k, r0 / tile_n) +
           ((k % tile_k) / bk * tile_groups + (r0 % tile_n) / 8) * atom_values;
  }
  /// Table entry i of stage kt for the block at column n0 (M itself where there is none).
  SQUEEZE_DEVICE const T* stage_source(std::uint32_t n0, std::uint32_t b_units, int kt,
                                       int i) const {
    const auto r0 = static_cast<std::uint32_t>(kt) * bk;
    if (kt >= k_tiles || static_cast<std::uint32_t>(i) >= b_units) return args.memory;
    if constexpr (Pass == pass::forward) {
      return forward_source(n0, r0, 0);
    } else if constexpr (Pass == pass::input) {
      return input_source(n0, r0, static_cast<std::uint32_t>(i));
    } else {
      return args.memory;
    }
  }
};

/// The producer warp's loop over this block's tiles: every stage's copies of A and B.
/// `table` holds the first batch of the first tile already (worked out by the whole block).
template <class Config, class T, class Out, pass Pass>
__device__ SQUEEZE_FORCEINLINE void produce(const CUtensorMap& a_map, const CUtensorMap& b_map,
                                            const tile_scheduler<Config, Pass>& tiles,
                                            const stage_ring<Config>& ring,
                                            const b_sources<Config, T, Out, Pass>& src,
                                            const T** table, int lane) {
  namespace arch = core::arch;
  using sources_t = b_sources<Config, T, Out, Pass>;
  constexpr int bk = sources_t::bk;
  constexpr int blocks64 = sources_t::blocks64;
  constexpr int sources = sources_t::per_stage;
  constexpr int batch = Config::source_batch;
  constexpr bool k_major_a = Pass != pass::memory;
  const int k_tiles = src.k_tiles;
  bool cluster_ready = false;
  const std::uint32_t cy = arch::cluster_rank();
  constexpr auto pair_mask = static_cast<std::uint16_t>((1u << Config::cluster) - 1);
  typename stage_ring<Config>::position at{};  // the next iteration's (lane 0's)
  for (std::uint32_t ct = tiles.first(); tiles.valid(ct); ct += tiles.stride()) {
    std::uint32_t m0 = 0;
    std::uint32_t n0 = 0;
    tiles.origin(ct, m0, n0);
    const std::uint32_t b_units = src.units_at(n0);
    const std::uint32_t stage_tx =
        Config::a_bytes + (Pass == pass::forward ? b_units * 1024
                           : Pass == pass::input
                               ? b_units * 8192
                               : static_cast<std::uint32_t>(Config::block_n) * 128);
    const std::uint32_t first_run =
        Pass == pass::forward ? min(b_units, src.tile_groups - (n0 % src.tile_n) / 8) : 0u;
    // dX sharing B: block rank r copies the stage's 8 KiB blocks i with i % 2 = r whole
    // (half as many copies as half of each), where the stage has an even number of them.
    const bool alternate_blocks =
        Pass == pass::input && tiles.layout.along_rows && sources % 2 == 0 && b_units == sources;
    for (int base = 0; base < k_tiles; base += batch) {
      if (ct != tiles.first() || base != 0) {  // the first batch: worked out by all threads
        SQUEEZE_UNROLL
        for (int h = 0; h < batch / 32; ++h) {
          if (base + 32 * h >= k_tiles) break;  // warp-uniform
          const int kt = base + 32 * h + lane;
          SQUEEZE_UNROLL
          for (int i = 0; i < sources; ++i) {
            table[(32 * h + lane) * sources + i] = src.stage_source(n0, b_units, kt, i);
          }
        }
      }
      if (!cluster_ready) {
        arch::cluster_wait();
        arch::wait_for_prerequisites();
        cluster_ready = true;
      }
      __syncwarp();
      const int count = min(batch, k_tiles - base);
      for (int t = 0; lane == 0 && t < count; ++t) {
        const T* source[sources];
        SQUEEZE_UNROLL
        for (int i = 0; i < sources; ++i) source[i] = table[t * sources + i];
        const int kt = base + t;
        const int s = at.stage();
        ring.acquire(at, stage_tx);
        const std::uint32_t full = ring.full(s);
        const std::uint32_t stage = ring.a(s);
        const std::uint32_t b_stage = ring.b(s);
        const auto r0 = static_cast<std::uint32_t>(kt) * bk;
        // B's runs: this block's half of each, multicast to both blocks, when they share B.
        const auto copy_b = [&](std::uint32_t dst, const T* from, std::uint32_t bytes) {
          if (tiles.layout.along_rows) {
            const std::uint32_t half = bytes / 2;  // runs are whole 1 KiB atoms
            arch::bulk_copy_multicast(dst + cy * half,
                                      reinterpret_cast<const unsigned char*>(from) + cy * half,
                                      half, full, pair_mask);
          } else {
            arch::bulk_copy(dst, from, bytes, full);
          }
        };
        // A: the block's own rows (64 or 128), or its half of 128, multicast to both blocks.
        if constexpr (k_major_a && Config::block_m == 64) {  // 64 rows x 128 bytes, not shared
          arch::tensor_load_2d(stage, &a_map, static_cast<int>(r0), static_cast<int>(m0), full);
        } else if constexpr (k_major_a) {  // 64 output rows x 128 bytes of reduction
          if (tiles.layout.along_rows) {
            arch::tensor_load_2d(stage, &a_map, static_cast<int>(r0), static_cast<int>(m0), full);
            arch::tensor_load_2d(stage + 8192, &a_map, static_cast<int>(r0),
                                 static_cast<int>(m0 + 64), full);
          } else {
            arch::tensor_load_2d_multicast(stage + cy * 8192, &a_map, static_cast<int>(r0),
                                           static_cast<int>(m0 + cy * 64), full, pair_mask);
          }
        } else if constexpr (Config::block_m == 64) {  // MN-major: 64 output rows x 64, own
          arch::tensor_load_2d(stage, &a_map, static_cast<int>(m0), static_cast<int>(r0), full);
        } else {  // MN-major, 128 bytes of output rows x 64 reduction rows: half of 128 rows
          arch::tensor_load_2d_multicast(stage + cy * 8192, &a_map, static_cast<int>(m0 + cy * bk),
                                         static_cast<int>(r0), full, pair_mask);
        }
        if constexpr (Pass == pass::forward) {
          if (b_units > 0) copy_b(b_stage, source[0], first_run * 1024);
          for (std::uint32_t g = first_run; g < b_units;) {  // tiles narrower than BN
            const std::uint32_t run = min(b_units - g, src.tile_groups);
            copy_b(b_stage + g * 1024, src.forward_source(n0, r0, g), run * 1024);
            g += run;
          }
        } else if constexpr (Pass == pass::input) {
          SQUEEZE_UNROLL
          for (int i = 0; i < sources; ++i) {
            if (static_cast<std::uint32_t>(i) >= b_units) continue;
            if (!alternate_blocks) {
              copy_b(b_stage + i * 8192, source[i], 8192);
            } else if (static_cast<std::uint32_t>(i % 2) == cy) {
              arch::bulk_copy_multicast(b_stage + i * 8192, source[i], 8192, full, pair_mask);
            }
          }
        } else {
          SQUEEZE_UNROLL
          for (int i = 0; i < blocks64; ++i) {
            arch::tensor_load_2d(b_stage + i * 8192, &b_map, static_cast<int>(n0 + i * bk),
                                 static_cast<int>(r0), full);
          }
        }
        at.advance();
      }
      __syncwarp();  // lane 0 has read the table before the next batch overwrites it
    }
  }
  if (!cluster_ready) arch::cluster_wait();
  if (lane == 0) ring.drain(at);  // no block leaves while its peer may signal or read it
}

}  // namespace squeeze::roast::detail::sm90
