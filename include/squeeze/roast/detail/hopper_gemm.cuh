// squeeze/roast/detail/hopper_gemm.cuh: ROAST-MM on Hopper tensor cores (sm_90a).
//
// One kernel, three passes (the `pass` parameter, resolved with if constexpr):
//
//   pass       output (rows x cols)   reduction   A (smem)                 B (smem)
//   forward    Y  = X . W      b x N   K           X, K-major (TMA)         W tiles, K-major
//   input      dX = dY . W^T   b x K   N           dY, K-major (TMA)        W tiles, MN-major
//   memory     dW^T = dY^T . X N x K   batch       dY, MN-major (TMA)       X, MN-major (TMA)
//                folded into dM with 8-byte reductions: dM[h + o(k, n)] += scale * g * dW
//
// W's tiles are copied from M unchanged: an atom of M (8 rows n x 128 bytes of k, 128-byte
// swizzle, mapping.hpp) is a K-major atom of B for the forward pass and an MN-major atom of
// B (transposed, 16-bit types only) for dX. A block computes 128 x BN outputs with 2
// consumer warpgroups (64 rows each) and one producer warp; two blocks form a cluster
// (`cluster_layout`). In the forward and input passes, at BN >= 128 and where the output
// rows make whole pairs of blocks, the two lie one above the other and share B: each copies
// half of every B stage from M (half of each run, or in dX every other whole 8 KiB block),
// multicast to both, and reads its A whole. Otherwise they lie side by side and share A
// the same way. Sharing B leaves A, which every block of a row reads, in plain copies that
// the L2's request coalescer merges across blocks; it did not merge the plain copies of B
// that four blocks read (eighth round in docs/RESULTS.md).
// Stage s of the ring: A = 128 rows x 128 bytes (16 KiB), B = BN x 128 bytes; mbarriers
// `full` (expect-tx by the producer, completed by the copies) and `empty` (one arrival per
// consumer warp of both blocks). Y and dX leave through 2 KiB of shared memory per consumer
// warp (`store_rows_staged`), as whole rows of 16-byte stores.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <type_traits>
#include <vector>

#include "squeeze/core/arch.cuh"
#include "squeeze/core/bits.hpp"
#include "squeeze/core/config.hpp"
#include "squeeze/core/cuda_error.hpp"
#include "squeeze/core/hopper.cuh"
#include "squeeze/core/launch.hpp"
#include "squeeze/core/tensor_map.hpp"
#include "squeeze/core/wgmma.cuh"
#include "squeeze/roast/detail/operand.cuh"
#include "squeeze/roast/mapping.hpp"

namespace squeeze::roast::detail {

enum class pass { forward, input, memory };

inline constexpr int wg_block_m = 128;  // 2 warpgroups x 64 rows
inline constexpr int wg_consumers = 256;
inline constexpr int wg_threads = wg_consumers + 32;  // + the producer warp
inline constexpr int wg_cluster = 2;                  // blocks of a cluster sharing A or B

/// How the blocks of a cluster pair up and how many cluster tiles cover `rows` x `cols`
/// outputs (cols counted from the first column of a strip).
struct cluster_layout {
  bool along_rows;  ///< one above the other, sharing B; else side by side, sharing A
  std::uint32_t row_blocks;
  std::uint32_t tiles;
};

template <pass Pass, int BN>
SQUEEZE_HOST_DEVICE cluster_layout layout_for(std::uint64_t rows, std::uint64_t cols) {
  const auto row_blocks = static_cast<std::uint32_t>((rows + wg_block_m - 1) / wg_block_m);
  // A stage's own L2 reads: 128 rows of A and BN / 2 of B one above the other, against 64
  // and BN side by side; at BN = 64 that is more, so those stay side by side.
  const bool along_rows = Pass != pass::memory && BN >= 128 && row_blocks % 2 == 0;
  const auto col_blocks = static_cast<std::uint32_t>((cols + BN - 1) / BN);
  return {along_rows, row_blocks,
          along_rows ? row_blocks / 2 * col_blocks : row_blocks * ((col_blocks + 1) / 2)};
}

template <class T, class Out>
struct gemm_args {
  const T* memory;  ///< M (forward, input)
  mapping map;
  Out* out;  ///< Y, dX, or dM (memory pass; Out = float)
  std::uint64_t ld_out;
  std::uint32_t rows;   ///< output rows: batch, or N for the memory pass
  std::uint32_t cols;   ///< output columns: N, K, K
  std::uint32_t depth;  ///< reduction: K, N, batch
  /// Memory pass: when set, each tile's sums are stored here at mapping::workspace_offset
  /// minus workspace_base (a gradient_fold's strip) instead of added to dM.
  float* workspace = nullptr;
  std::uint64_t workspace_base = 0;
  /// The first output column: blocks cover [col0, cols) (a strip of a gradient_fold).
  std::uint32_t col0 = 0;
};

/// Pipeline depth: 192 KiB of stages (48 KiB each at BN = 256, 32 KiB at 128, 24 KiB at 64).
template <int BN>
inline constexpr int wg_stages = BN == 256   ? 4
                                 : BN == 128 ? 6
                                             : 8;

/// The epilogue's staging area: 16 rows x 128 bytes (2 KiB) per consumer warp.
inline constexpr int wg_staging_bytes = (wg_consumers / 32) * 2048;

/// The producer works out B's sources this many stages at a time, into a table of up to 4
/// pointers a stage.
inline constexpr int wg_source_batch = 64;
inline constexpr int wg_source_bytes = wg_source_batch * 4 * 8;

template <int BN>
inline constexpr int wg_smem_bytes = wg_stages<BN>*(wg_block_m + BN) * 128 + 1024 + wg_staging_bytes
                                     + 2 * wg_stages<BN> * 8 + wg_source_bytes;

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

/// BN: output columns per block; IN: columns per wgmma (a tile's sign applies to whole
/// instructions, so IN divides the tile's extent along the output columns when Signs).
template <class T, class Out, pass Pass, int BN, int IN, bool Signs>
SQUEEZE_KERNEL_MIN_BLOCKS(wg_threads, 1)
void hopper_gemm_kernel(const __grid_constant__ CUtensorMap a_map,
                        const __grid_constant__ CUtensorMap b_map, gemm_args<T, Out> args) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  namespace arch = core::arch;
  using tag = typename operand_traits<T>::tag;
  constexpr bool k_major_a = Pass != pass::memory;
  constexpr bool k_major_b = Pass == pass::forward;
  static_assert(std::is_same_v<T, float> ? (k_major_a && k_major_b) : true,
                "TF32 wgmma takes K-major operands only");
  constexpr int stages = wg_stages<BN>;
  constexpr int bk = 128 / static_cast<int>(sizeof(T));  // reduction per stage: 128 bytes
  constexpr int a_bytes = wg_block_m * 128;
  constexpr int stage_bytes = a_bytes + BN * 128;
  constexpr int k_steps = bk / operand_traits<T>::k_step;
  constexpr int blocks64 = BN / bk;  // MN-major B: 8 KiB blocks of bk output columns
  // Per k-step, the descriptors move 32 bytes along a K-major row, or 2 row groups (2 KiB)
  // down an MN-major stack.
  constexpr std::uint32_t a_step = k_major_a ? 32 : 2048;
  constexpr std::uint32_t b_step = k_major_b ? 32 : 2048;
  constexpr auto swizzle = core::arch::smem_swizzle::bytes128;
  static_assert(BN % IN == 0 && (k_major_b || IN % bk == 0), "instruction shape");

  extern __shared__ unsigned char smem_raw[];
  const std::uint32_t smem = (arch::shared_address(smem_raw) + 1023) & ~1023u;
  const std::uint32_t staging = smem + stages * stage_bytes;  // wg_staging_bytes
  const std::uint32_t bars = staging + wg_staging_bytes;
  const auto full = [&](int s) { return bars + static_cast<std::uint32_t>(s) * 8; };
  const auto empty = [&](int s) { return bars + static_cast<std::uint32_t>(stages + s) * 8; };
  const std::uint32_t source_table = bars + 2 * stages * 8;  // wg_source_bytes

  const mapping& map = args.map;
  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32;
  const int lane = tid % 32;
  // Persistent: cluster c (blockIdx.x) takes the cluster tiles c, c + gridDim.x, ...; a
  // cluster tile is 2 x 128 output rows by BN columns (along_rows) or 128 rows by 2 x BN
  // columns, block rank r (blockIdx.y) taking the r-th half. Both blocks of a cluster walk
  // the same tiles, so the multicast stays paired, and the producer runs ahead into the next
  // tile while the consumers store this one. Stages and barrier phases count on across
  // tiles.
  const cluster_layout layout = layout_for<Pass, BN>(args.rows, args.cols - args.col0);
  const std::uint32_t row_blocks = layout.row_blocks;
  const std::uint32_t cluster_tiles = layout.tiles;
  const auto origin = [&](std::uint32_t ct, std::uint32_t& m0, std::uint32_t& n0) {
    if (layout.along_rows) {
      const std::uint32_t pairs = row_blocks / 2;
      m0 = ((ct % pairs) * wg_cluster + blockIdx.y) * wg_block_m;
      n0 = args.col0 + (ct / pairs) * BN;
    } else {
      m0 = (ct % row_blocks) * wg_block_m;
      n0 = args.col0 + ((ct / row_blocks) * wg_cluster + blockIdx.y) * BN;
    }
  };
  const int k_tiles = static_cast<int>((args.depth + bk - 1) / bk);
  const std::uint32_t tile_k = map.tile().k;
  const std::uint32_t tile_n = map.tile().n;

  if (tid == 0) {
    for (int s = 0; s < stages; ++s) {
      arch::mbarrier_init(full(s), 1);
      arch::mbarrier_init(empty(s), wg_cluster * (wg_consumers / 32));
    }
    arch::fence_mbarrier_init();
  }
  __syncthreads();

  // Where B comes from (forward, input). Forward: runs of 1 KiB atoms (8 output columns
  // each), one per tile the block's columns cross. Input: one 8 KiB run per bk output
  // columns. Memory: TMA boxes.
  constexpr std::uint32_t atom_values = 1024 / sizeof(T);
  constexpr int sources = Pass == pass::input ? blocks64 : 1;  // table entries a stage
  const std::uint32_t tile_groups = tile_n / 8;
  // The atoms (forward) or 8 KiB blocks (input) of B that exist for the block at column n0.
  const auto b_units_at = [&](std::uint32_t n0) -> std::uint32_t {
    if (n0 >= args.cols) return 0u;
    if constexpr (Pass == pass::forward) {
      return min(static_cast<std::uint32_t>(BN / 8), (args.cols - n0 + 7) / 8);
    } else if constexpr (Pass == pass::input) {
      return min(static_cast<std::uint32_t>(blocks64), (args.cols - n0 + bk - 1) / bk);
    } else {
      return 0u;
    }
  };
  // Forward: the source of atom g at reduction offset r0 (g's tile and the atoms after it).
  const auto forward_source = [&](std::uint32_t n0, std::uint32_t r0, std::uint32_t g) {
    const std::uint32_t col = n0 + g * 8;
    return args.memory + map.tile_offset(r0 / tile_k, col / tile_n) +
           ((r0 % tile_k) / bk * tile_groups + (col % tile_n) / 8) * atom_values;
  };
  // Input: the 8 KiB run of output columns [n0 + i*bk, +bk) and reduction rows [r0, +bk):
  // 8 consecutive atoms (row groups) of one column block of tile (k / Z1, r0 / Z2).
  const auto input_source = [&](std::uint32_t n0, std::uint32_t r0, std::uint32_t i) {
    const std::uint32_t k = n0 + i * bk;
    return args.memory + map.tile_offset(k / tile_k, r0 / tile_n) +
           ((k % tile_k) / bk * tile_groups + (r0 % tile_n) / 8) * atom_values;
  };
  // Table entry i of stage kt for the block at column n0 (M itself where there is none).
  const auto stage_source = [&](std::uint32_t n0, std::uint32_t b_units, int kt,
                                int i) -> const T* {
    const auto r0 = static_cast<std::uint32_t>(kt) * bk;
    if (kt >= k_tiles || static_cast<std::uint32_t>(i) >= b_units) return args.memory;
    if constexpr (Pass == pass::forward) {
      return forward_source(n0, r0, 0);
    } else if constexpr (Pass == pass::input) {
      return input_source(n0, r0, static_cast<std::uint32_t>(i));
    } else {
      return args.memory;
    }
  };
  static_assert(sources * 8 * wg_source_batch <= wg_source_bytes);
  const auto table = static_cast<const T**>(arch::shared_pointer(source_table));

  // The peer's barriers must be initialized before the first multicast into it or arrival
  // on it: every warp waits for the cluster before that. In between, all threads work out
  // the sources of the first tile's first wg_source_batch stages, a hash and a few
  // divisions each (the producer warp alone took about 1200 cycles for the forward pass,
  // and has twice the work for the input pass, two sources a stage). Launched after
  // another kernel with programmatic stream serialization, this all overlaps that kernel's
  // end: no warp touches global memory before wait_for_prerequisites. The next kernel may
  // start as early (it cannot take this block's SM before the block exits).
  arch::launch_dependents();
  arch::cluster_arrive();
  if (Pass != pass::memory && blockIdx.x < cluster_tiles) {
    std::uint32_t m0 = 0;
    std::uint32_t n0 = 0;
    origin(blockIdx.x, m0, n0);
    const std::uint32_t b_units = b_units_at(n0);
    const int entries = min(wg_source_batch, k_tiles) * sources;
    for (int e = tid; e < entries; e += wg_threads) {
      table[e] = stage_source(n0, b_units, e / sources, e % sources);
    }
  }
  __syncthreads();

  if (warp == wg_consumers / 32) {
    // ---- producer warp: lane 0 issues every copy. Where a stage's B comes from takes a
    // hash and a few divisions: past the first batch (above), all lanes work that out,
    // wg_source_batch stages at a time (each lane independent chains for stages lane,
    // lane + 32, ...), into the table in shared memory, so it stays off lane 0's critical
    // path (it was slower than the tensor cores at small sizes) ----
    bool cluster_ready = false;
    const std::uint32_t cy = arch::cluster_rank();
    constexpr auto pair_mask = static_cast<std::uint16_t>((1u << wg_cluster) - 1);
    int done = 0;  // stages issued before this tile
    for (std::uint32_t ct = blockIdx.x; ct < cluster_tiles; ct += gridDim.x, done += k_tiles) {
      std::uint32_t m0 = 0;
      std::uint32_t n0 = 0;
      origin(ct, m0, n0);
      const std::uint32_t b_units = b_units_at(n0);
      const std::uint32_t stage_tx =
          a_bytes + (Pass == pass::forward ? b_units * 1024
                     : Pass == pass::input ? b_units * 8192
                                           : static_cast<std::uint32_t>(BN) * 128);
      const std::uint32_t first_run =
          Pass == pass::forward ? min(b_units, tile_groups - (n0 % tile_n) / 8) : 0u;
      // dX sharing B: block rank r copies the stage's 8 KiB blocks i with i % 2 = r whole
      // (half as many copies as half of each), where the stage has an even number of them.
      const bool alternate_blocks =
          Pass == pass::input && layout.along_rows && sources % 2 == 0 && b_units == sources;
      for (int base = 0; base < k_tiles; base += wg_source_batch) {
        if (ct != blockIdx.x || base != 0) {  // the first batch: worked out by all threads
          SQUEEZE_UNROLL
          for (int h = 0; h < wg_source_batch / 32; ++h) {
            if (base + 32 * h >= k_tiles) break;  // warp-uniform
            const int kt = base + 32 * h + lane;
            SQUEEZE_UNROLL
            for (int i = 0; i < sources; ++i) {
              table[(32 * h + lane) * sources + i] = stage_source(n0, b_units, kt, i);
            }
          }
        }
        if (!cluster_ready) {
          arch::cluster_wait();
          arch::wait_for_prerequisites();
          cluster_ready = true;
        }
        __syncwarp();
        const int count = min(wg_source_batch, k_tiles - base);
        for (int t = 0; lane == 0 && t < count; ++t) {
          const T* source[sources];
          SQUEEZE_UNROLL
          for (int i = 0; i < sources; ++i) source[i] = table[t * sources + i];
          const int kt = base + t;
          const int it = done + kt;
          const int s = it % stages;
          if (it >= stages) arch::mbarrier_wait(empty(s), ((it / stages) - 1) & 1);
          arch::mbarrier_arrive_expect_tx(full(s), stage_tx);
          const std::uint32_t stage = smem + s * stage_bytes;
          const std::uint32_t b_stage = stage + a_bytes;
          const auto r0 = static_cast<std::uint32_t>(kt) * bk;
          // B's runs: this block's half of each, multicast to both blocks, when they share B.
          const auto copy_b = [&](std::uint32_t dst, const T* src, std::uint32_t bytes) {
            if (layout.along_rows) {
              const std::uint32_t half = bytes / 2;  // runs are whole 1 KiB atoms
              arch::bulk_copy_multicast(dst + cy * half,
                                        reinterpret_cast<const unsigned char*>(src) + cy * half,
                                        half, full(s), pair_mask);
            } else {
              arch::bulk_copy(dst, src, bytes, full(s));
            }
          };
          // A: the block's own 128 rows, or its half, multicast to both blocks.
          if constexpr (k_major_a) {  // 64 output rows x 128 bytes of reduction
            if (layout.along_rows) {
              arch::tensor_load_2d(stage, &a_map, static_cast<int>(r0), static_cast<int>(m0),
                                   full(s));
              arch::tensor_load_2d(stage + 8192, &a_map, static_cast<int>(r0),
                                   static_cast<int>(m0 + 64), full(s));
            } else {
              arch::tensor_load_2d_multicast(stage + cy * 8192, &a_map, static_cast<int>(r0),
                                             static_cast<int>(m0 + cy * 64), full(s), pair_mask);
            }
          } else {  // 128 bytes of output rows x 64 reduction rows (MN-major)
            arch::tensor_load_2d_multicast(stage + cy * 8192, &a_map,
                                           static_cast<int>(m0 + cy * bk), static_cast<int>(r0),
                                           full(s), pair_mask);
          }
          if constexpr (Pass == pass::forward) {
            if (b_units > 0) {
              copy_b(b_stage, source[0], first_run * 1024);
            }
            for (std::uint32_t g = first_run; g < b_units;) {  // tiles narrower than BN
              const std::uint32_t run = min(b_units - g, tile_groups);
              copy_b(b_stage + g * 1024, forward_source(n0, r0, g), run * 1024);
              g += run;
            }
          } else if constexpr (Pass == pass::input) {
            SQUEEZE_UNROLL
            for (int i = 0; i < sources; ++i) {
              if (static_cast<std::uint32_t>(i) >= b_units) continue;
              if (!alternate_blocks) {
                copy_b(b_stage + i * 8192, source[i], 8192);
              } else if (static_cast<std::uint32_t>(i % 2) == cy) {
                arch::bulk_copy_multicast(b_stage + i * 8192, source[i], 8192, full(s), pair_mask);
              }
            }
          } else {
            SQUEEZE_UNROLL
            for (int i = 0; i < blocks64; ++i) {
              arch::tensor_load_2d(b_stage + i * 8192, &b_map, static_cast<int>(n0 + i * bk),
                                   static_cast<int>(r0), full(s));
            }
          }
        }
        __syncwarp();  // lane 0 has read the table before the next batch overwrites it
      }
    }
    if (!cluster_ready) arch::cluster_wait();
  } else {
    // ---- consumers: 2 warpgroups of wgmma ----
    arch::cluster_wait();
    arch::wait_for_prerequisites();
    const int wg = warp / 4;
    int done = 0;  // stages consumed before this tile
    for (std::uint32_t ct = blockIdx.x; ct < cluster_tiles; ct += gridDim.x, done += k_tiles) {
      std::uint32_t m0 = 0;
      std::uint32_t n0 = 0;
      origin(ct, m0, n0);
      float acc[BN / IN][IN / 2];
      SQUEEZE_UNROLL
      for (int j = 0; j < BN / IN; ++j) {
        SQUEEZE_UNROLL
        for (int i = 0; i < IN / 2; ++i) acc[j][i] = 0.0f;
      }
      bool flipped[BN / IN] = {};
      for (int kt = 0; kt < k_tiles; ++kt) {
        const int it = done + kt;
        const int s = it % stages;
        arch::mbarrier_wait(full(s), (it / stages) & 1);
        const std::uint32_t a_s = smem + s * stage_bytes;
        const std::uint32_t b_s = a_s + a_bytes;
        SQUEEZE_UNROLL
        for (int j = 0; j < BN / IN; ++j) arch::wgmma_fence_operands(acc[j]);
        if constexpr (Signs) {
          // The accumulator of column block j holds sign[j] * (the true sum); when a tile's
          // sign differs from it, flip it (the wgmma of the last stage has finished), so every
          // wgmma adds with +1: a run-time choice of the instruction's B scale would make the
          // compiler serialize every wgmma.
          const auto r0 = static_cast<std::uint32_t>(kt) * bk;
          SQUEEZE_UNROLL
          for (int j = 0; j < BN / IN; ++j) {
            const std::uint32_t col = n0 + static_cast<std::uint32_t>(j * IN);
            const bool negative = Pass == pass::forward
                                      ? map.tile_sign(r0 / tile_k, col / tile_n) < 0
                                      : map.tile_sign(col / tile_k, r0 / tile_n) < 0;
            if (negative != flipped[j]) {  // warp-uniform
              flipped[j] = negative;
              SQUEEZE_UNROLL
              for (int i = 0; i < IN / 2; ++i) acc[j][i] = -acc[j][i];
            }
            arch::wgmma_fence_operands(acc[j]);
          }
        }
        arch::wgmma_fence();
        SQUEEZE_UNROLL
        for (int ks = 0; ks < k_steps; ++ks) {
          const std::uint64_t da = arch::smem_descriptor(a_s + wg * 8192 + ks * a_step,
                                                         k_major_a ? 16 : 8192, 1024, swizzle);
          SQUEEZE_UNROLL
          for (int j = 0; j < BN / IN; ++j) {
            const std::uint32_t b_j = k_major_b ? j * IN * 128 : j * (IN / bk) * 8192;
            const std::uint64_t db = arch::smem_descriptor(b_s + b_j + ks * b_step,
                                                           k_major_b ? 16 : 8192, 1024, swizzle);
            arch::wgmma_ss<tag, IN, 1, k_major_a ? 0 : 1, k_major_b ? 0 : 1>(acc[j], da, db);
          }
        }
        arch::wgmma_commit();
        // Finish this stage's wgmma and hand the stage back at once: the copies are the
        // bottleneck, and a stage more in flight is worth more than overlapping the next
        // wgmma issue, which the other warpgroup covers. Lane r signals block r.
        arch::wgmma_wait<0>();
        SQUEEZE_UNROLL
        for (int j = 0; j < BN / IN; ++j) arch::wgmma_fence_operands(acc[j]);
        __syncwarp();
        if (lane < wg_cluster)
          arch::mbarrier_arrive_cluster(empty(s), static_cast<std::uint32_t>(lane));
      }

      // Accumulator fragment of m64nINk: warp w of the warpgroup holds rows 16w..16w+15;
      // lane l holds rows l/4 and l/4 + 8, columns 8i + 2(l%4) + {0, 1}.
      const float alpha = map.scale();
      const std::uint32_t row0 =
          m0 + static_cast<std::uint32_t>(wg * 64 + (warp % 4) * 16 + lane / 4);
      if constexpr (Pass == pass::memory) {
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
            float4 q =
                odd ? make_float4(got0, got1, v[2], v[3]) : make_float4(v[0], v[1], got0, got1);
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
      } else {
        const bool vectors =
            (args.ld_out * sizeof(Out)) % 16 == 0 && core::misalignment(args.out, 16) == 0;
        float scale[BN / IN];
        SQUEEZE_UNROLL
        for (int j = 0; j < BN / IN; ++j) scale[j] = flipped[j] ? -alpha : alpha;
        store_rows_staged<Out, BN, IN>(
            static_cast<unsigned char*>(arch::shared_pointer(staging + warp * 2048)), acc, scale,
            args.out, args.ld_out, args.rows, args.cols, row0 - lane / 4, n0, vectors, lane);
      }
    }
  }
  // No block leaves while its peer may still copy into its shared memory or signal it.
  arch::cluster_sync();
#else
  (void)a_map, (void)b_map, (void)args;
#endif
}

template <int = 0>
SQUEEZE_KERNEL(1)
void probe_wgmma_kernel(int* built) {
  *built = core::arch::wgmma_available ? 1 : 0;
}

/// A non-negative number worked out by `compute(device)` the first time it is asked for
/// on the current device, then kept (`known`: by device ordinal, -1 until computed).
template <class Compute>
int once_per_device(std::mutex& lock, std::vector<int>& known, Compute&& compute) {
  int device = 0;
  SQUEEZE_CUDA_TRY(cudaGetDevice(&device));
  const std::lock_guard guard{lock};
  if (known.size() <= static_cast<std::size_t>(device)) known.resize(device + 1, -1);
  if (known[device] < 0) known[device] = compute(device);
  return known[device];
}

/// Whether this translation unit's kernels were built with wgmma for the current device
/// (the device pass targeted sm_90a and the device runs it). Probed once per device. (A
/// template like its probe kernel: compiled only where a GEMM is.)
template <int = 0>
bool wgmma_built() {
  const auto probe = [](int device) {
    int major = 0;
    SQUEEZE_CUDA_TRY(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    int built = 0;
    if (major != 9) return built;
    cudaFuncAttributes attributes{};
    if (cudaFuncGetAttributes(&attributes, probe_wgmma_kernel<>) != cudaSuccess) {
      (void)cudaGetLastError();  // no image for this device: not built
      return built;
    }
    int* flag = nullptr;
    SQUEEZE_CUDA_TRY(cudaMalloc(&flag, sizeof(int)));
    probe_wgmma_kernel<><<<1, 1>>>(flag);
    const cudaError_t launched = cudaGetLastError();
    const cudaError_t copied = cudaMemcpy(&built, flag, sizeof(int), cudaMemcpyDeviceToHost);
    cudaFree(flag);
    SQUEEZE_CUDA_TRY(launched);
    SQUEEZE_CUDA_TRY(copied);
    return built;
  };
  static std::mutex lock;
  static std::vector<int> known;
  return once_per_device(lock, known, probe) == 1;
}

/// A row-major operand a TMA box or a 16-byte copy can read: base and row pitch 16-byte
/// aligned.
template <class T>
bool aligned16(const T* p, std::uint64_t ld) {
  return core::misalignment(p, 16) == 0 && (ld * sizeof(T)) % 16 == 0;
}

template <class T>
CUtensorMapDataType tensor_type() {
  if constexpr (std::is_same_v<T, float>) {
    return CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  } else {
    return CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  }
}

/// A row-major matrix operand: `rows` x `cols` elements, rows `ld` apart.
template <class T>
struct dense_operand {
  const T* data;
  std::uint64_t ld;
  std::uint64_t rows;
  std::uint64_t cols;
};

template <class T, class Out, pass Pass, int BN, int IN, bool Signs>
void launch_hopper_gemm(const dense_operand<T>& a, const dense_operand<T>& b,
                        const gemm_args<T, Out>& args, cudaStream_t stream) {
  auto kernel = hopper_gemm_kernel<T, Out, Pass, BN, IN, Signs>;
  constexpr int smem = wg_smem_bytes<BN>;
  constexpr auto box = static_cast<std::uint32_t>(128 / sizeof(T));  // 128 bytes
  // K-major A: 64 rows x 128 bytes per block; MN-major A and B: 64 reduction rows x 128
  // bytes of outputs. Either way a 64 x 128-byte box.
  const CUtensorMap a_map = core::tensor_map_2d_swizzled(a.data, tensor_type<T>(), a.rows, a.cols,
                                                         a.ld * sizeof(T), 64, box);
  const CUtensorMap b_map = b.data != nullptr
                                ? core::tensor_map_2d_swizzled(b.data, tensor_type<T>(), b.rows,
                                                               b.cols, b.ld * sizeof(T), 64, box)
                                : a_map;
  cudaLaunchConfig_t config{};
  config.blockDim = dim3(wg_threads);
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  cudaLaunchAttribute attributes[2]{};
  attributes[0].id = cudaLaunchAttributeClusterDimension;
  attributes[0].val.clusterDim.x = 1;
  attributes[0].val.clusterDim.y = wg_cluster;
  attributes[0].val.clusterDim.z = 1;
  // Its set-up may overlap the end of the kernel before it in the stream (see the kernel).
  attributes[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attributes[1].val.programmaticStreamSerializationAllowed = 1;
  config.attrs = attributes;
  config.numAttrs = 1;  // the occupancy query below takes the cluster shape alone
  // Persistent: as many clusters as fit on the GPU at once, none more than there are
  // cluster tiles. Once per device and instantiation: allow the shared memory, count them.
  static std::mutex lock;
  static std::vector<int> resident;
  const int fit = once_per_device(lock, resident, [&](int) {
    SQUEEZE_CUDA_TRY(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    config.gridDim = dim3(1, wg_cluster);
    int clusters = 0;
    SQUEEZE_CUDA_TRY(cudaOccupancyMaxActiveClusters(&clusters, kernel, &config));
    return std::max(clusters, 1);
  });
  const std::uint64_t tiles = layout_for<Pass, BN>(args.rows, args.cols - args.col0).tiles;
  config.gridDim = dim3(static_cast<unsigned>(std::min<std::uint64_t>(tiles, fit)), wg_cluster);
  config.numAttrs = 2;
  SQUEEZE_CUDA_TRY(cudaLaunchKernelEx(&config, kernel, a_map, b_map, args));
}

/// Picks the instantiation: BN by the shape (or the caller's block_n), IN by the sign hash
/// and the tile's extent along the output columns. Measured on the H200: clusters of 2
/// sharing A beat none; clusters of 4 or 8 (sharing B too) were slower, as not all of them
/// fit on the GPU at once with 193 KiB of shared memory per block. On an H100, pairs
/// sharing B (`cluster_layout`) beat pairs sharing A by 7-16 % at K = N = 4096, BN = 128.
template <class T, class Out, pass Pass>
void dispatch_hopper_gemm(const dense_operand<T>& a, const dense_operand<T>& b,
                          const gemm_args<T, Out>& args, int block_n, cudaStream_t stream) {
  // The widest block that still gives 90 % of the SMs a block (BN = 64: more, smaller
  // blocks where the output is small, e.g. 512 x 2048).
  const std::uint64_t row_blocks = (args.rows + wg_block_m - 1) / wg_block_m;
  const auto blocks_at = [&](std::uint64_t bn) {
    return row_blocks * ((args.cols - args.col0 + bn - 1) / bn);
  };
  const std::uint64_t enough = static_cast<std::uint64_t>(core::sm_count()) * 9 / 10;
  const int bn = block_n != 0               ? block_n
                 : blocks_at(256) >= enough ? 256
                 : blocks_at(128) >= enough ? 128
                                            : 64;
  const std::uint32_t extent = Pass == pass::forward ? args.map.tile().n : args.map.tile().k;
  const bool signs = args.map.signs();
  const auto go = [&]<int BN>() {
    if constexpr (Pass == pass::memory) {  // signs are applied in the epilogue
      launch_hopper_gemm<T, Out, Pass, BN, BN, false>(a, b, args, stream);
    } else if (!signs) {
      launch_hopper_gemm<T, Out, Pass, BN, BN, false>(a, b, args, stream);
    } else if (extent % BN == 0) {
      launch_hopper_gemm<T, Out, Pass, BN, BN, true>(a, b, args, stream);
    } else {
      launch_hopper_gemm<T, Out, Pass, BN, 64, true>(a, b, args, stream);
    }
  };
  if (bn == 256) {
    go.template operator()<256>();
  } else if (bn == 128) {
    go.template operator()<128>();
  } else {
    go.template operator()<64>();
  }
}

}  // namespace squeeze::roast::detail
