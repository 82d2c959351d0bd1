// squeeze/roast/gemm.cuh: ROAST-MM, the GEMM whose weight matrix is read through the hash.
//
//   forward          Y[batch x N]  = X[batch x K] . W            (W = the module's view of M)
//   backward_input   dX[batch x K] = dY[batch x N] . W^T
//   backward_memory  dM[h(tile) + o] += scale * g * (X^T . dY)[tile element]   (fp32 dM)
//
// Operands are fp32 (TF32 tensor cores, or exact fp32 with `math::exact`), bf16 or fp16,
// always accumulated in fp32. Any batch, K and N, tails included.
//
// On Hopper (the device pass built for sm_90a) the tensor-core path is a multi-stage
// cp.async pipeline feeding wgmma: a block of 2 warpgroups computes 128 x BN of the output;
// each stage copies a 128 x (128 bytes of k) slice of X, swizzled, and BN/8 atoms of hashed
// tiles, which M already stores in the order wgmma reads (mapping.hpp), so a hashed tile
// costs what a dense one does. The block shape (BN) is a launch choice; the mapping never
// depends on it. Everywhere else (other GPUs, `math::exact`, misaligned operands, sign
// hashes on tiles narrower than 64) a portable fp32 SIMT kernel computes the same result.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <type_traits>
#include <vector>

#include "squeeze/core/arch.cuh"
#include "squeeze/core/config.hpp"
#include "squeeze/core/cuda_error.hpp"
#include "squeeze/core/error.hpp"
#include "squeeze/core/hopper.cuh"
#include "squeeze/core/tensor_map.hpp"
#include "squeeze/core/wgmma.cuh"
#include "squeeze/roast/mapping.hpp"

namespace squeeze::roast {

/// How fp32 operands are multiplied. 16-bit operands always use tensor cores.
enum class math {
  tensor_cores,  ///< TF32 tensor cores for fp32 (like cuBLAS's FAST_TF32), fp32 accumulate
  exact,         ///< fp32 FMA throughout
};

struct gemm_options {
  math mode = math::tensor_cores;
  /// backward_memory: add into dM in a fixed order, so repeated runs give identical bits.
  bool deterministic = false;
  /// Output columns per block of the tensor-core kernels: 128, 256, or 0 to choose by the
  /// shape. A tuning knob only: results never depend on it beyond rounding.
  int block_n = 0;
};

namespace detail {

template <class T>
SQUEEZE_HOST_DEVICE float to_float(T v) {
  if constexpr (std::is_same_v<T, float>) {
    return v;
  } else {
    return static_cast<float>(v);
  }
}

template <class T>
SQUEEZE_HOST_DEVICE T from_float(float v) {
  if constexpr (std::is_same_v<T, float>) {
    return v;
  } else {
    return T(v);
  }
}

template <class T>
struct operand_traits;
template <>
struct operand_traits<float> {
  using tag = core::arch::tf32_tag;
  static constexpr int k_step = 8;
};
template <>
struct operand_traits<__nv_bfloat16> {
  using tag = core::arch::bf16_tag;
  static constexpr int k_step = 16;
};
template <>
struct operand_traits<__half> {
  using tag = core::arch::f16_tag;
  static constexpr int k_step = 16;
};

template <class T>
concept operand =
    std::is_same_v<T, float> || std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half>;

// ---- the portable path: fp32 SIMT, one 64 x 64 output tile per 256-thread block -------
//
// A Problem supplies a(row, r) and b(r, col) as floats (0 outside the shape) and store(row,
// col, value). Used for exact fp32, GPUs without wgmma and operands wgmma cannot take.

inline constexpr int simt_tile = 64;
inline constexpr int simt_depth = 16;

template <class Problem>
SQUEEZE_KERNEL(256)
void simt_gemm_kernel(Problem p) {
  __shared__ float as[simt_depth][simt_tile + 4];
  __shared__ float bs[simt_depth][simt_tile + 4];
  const int tx = static_cast<int>(threadIdx.x % 16);
  const int ty = static_cast<int>(threadIdx.x / 16);
  const std::uint64_t row0 = std::uint64_t{blockIdx.y} * simt_tile;
  const std::uint64_t col0 = std::uint64_t{blockIdx.x} * simt_tile;
  float acc[4][4] = {};
  for (std::uint64_t r0 = 0; r0 < p.depth(); r0 += simt_depth) {
    for (int e = static_cast<int>(threadIdx.x); e < simt_depth * simt_tile; e += 256) {
      const int d = e / simt_tile;
      const int i = e % simt_tile;
      const std::uint64_t r = r0 + d;
      const bool in_depth = r < p.depth();
      as[d][i] = in_depth && row0 + i < p.rows() ? p.a(row0 + i, r) : 0.0f;
      bs[d][i] = in_depth && col0 + i < p.cols() ? p.b(r, col0 + i) : 0.0f;
    }
    __syncthreads();
    SQUEEZE_UNROLL
    for (int d = 0; d < simt_depth; ++d) {
      float av[4];
      float bv[4];
      SQUEEZE_UNROLL
      for (int i = 0; i < 4; ++i) {
        av[i] = as[d][ty + 16 * i];
        bv[i] = bs[d][tx + 16 * i];
      }
      SQUEEZE_UNROLL
      for (int i = 0; i < 4; ++i) {
        SQUEEZE_UNROLL
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
      }
    }
    __syncthreads();
  }
  SQUEEZE_UNROLL
  for (int i = 0; i < 4; ++i) {
    SQUEEZE_UNROLL
    for (int j = 0; j < 4; ++j) {
      const std::uint64_t row = row0 + ty + 16 * i;
      const std::uint64_t col = col0 + tx + 16 * j;
      if (row < p.rows() && col < p.cols()) p.store(row, col, acc[i][j]);
    }
  }
}

template <class Problem>
void launch_simt(const Problem& p, cudaStream_t stream) {
  const auto tiles = [](std::uint64_t n) {
    return static_cast<unsigned>((n + simt_tile - 1) / simt_tile);
  };
  if (p.rows() == 0 || p.cols() == 0) return;
  simt_gemm_kernel<<<dim3(tiles(p.cols()), tiles(p.rows())), 256, 0, stream>>>(p);
  SQUEEZE_CHECK_LAUNCH();
}

/// W[k][n] as a float: scale * g * M[offset].
template <class T>
SQUEEZE_DEVICE float weight(const mapping& map, const T* memory, std::uint64_t k, std::uint64_t n) {
  return map.element_factor(k, n) * to_float(memory[map.element_offset(k, n)]);
}

template <class T, class Out>
struct simt_forward {
  const T* x;
  std::uint64_t ldx;
  const T* memory;
  mapping map;
  Out* y;
  std::uint64_t ldy;
  std::uint64_t batch;
  SQUEEZE_HOST_DEVICE std::uint64_t rows() const { return batch; }
  SQUEEZE_HOST_DEVICE std::uint64_t cols() const { return map.cols(); }
  SQUEEZE_HOST_DEVICE std::uint64_t depth() const { return map.rows(); }
  SQUEEZE_DEVICE float a(std::uint64_t m, std::uint64_t k) const {
    return to_float(x[m * ldx + k]);
  }
  SQUEEZE_DEVICE float b(std::uint64_t k, std::uint64_t n) const {
    return weight(map, memory, k, n);
  }
  SQUEEZE_DEVICE void store(std::uint64_t m, std::uint64_t n, float v) const {
    y[m * ldy + n] = from_float<Out>(v);
  }
};

template <class T, class Out>
struct simt_backward_input {
  const T* dy;
  std::uint64_t lddy;
  const T* memory;
  mapping map;
  Out* dx;
  std::uint64_t lddx;
  std::uint64_t batch;
  SQUEEZE_HOST_DEVICE std::uint64_t rows() const { return batch; }
  SQUEEZE_HOST_DEVICE std::uint64_t cols() const { return map.rows(); }
  SQUEEZE_HOST_DEVICE std::uint64_t depth() const { return map.cols(); }
  SQUEEZE_DEVICE float a(std::uint64_t m, std::uint64_t n) const {
    return to_float(dy[m * lddy + n]);
  }
  SQUEEZE_DEVICE float b(std::uint64_t n, std::uint64_t k) const {
    return weight(map, memory, k, n);
  }
  SQUEEZE_DEVICE void store(std::uint64_t m, std::uint64_t k, float v) const {
    dx[m * lddx + k] = from_float<Out>(v);
  }
};

/// (X^T . dY)[k][n] folded into dM with atomics.
template <class T>
struct simt_backward_memory {
  const T* x;
  std::uint64_t ldx;
  const T* dy;
  std::uint64_t lddy;
  mapping map;
  float* dmemory;
  std::uint64_t batch;
  SQUEEZE_HOST_DEVICE std::uint64_t rows() const { return map.rows(); }
  SQUEEZE_HOST_DEVICE std::uint64_t cols() const { return map.cols(); }
  SQUEEZE_HOST_DEVICE std::uint64_t depth() const { return batch; }
  SQUEEZE_DEVICE float a(std::uint64_t k, std::uint64_t m) const {
    return to_float(x[m * ldx + k]);
  }
  SQUEEZE_DEVICE float b(std::uint64_t m, std::uint64_t n) const {
    return to_float(dy[m * lddy + n]);
  }
  SQUEEZE_DEVICE void store(std::uint64_t k, std::uint64_t n, float v) const {
    atomicAdd(dmemory + map.element_offset(k, n), map.element_factor(k, n) * v);
  }
};

// ---- the Hopper path: TMA and bulk copies, warp-specialized, wgmma ----------------------
//
// A block computes 128 x BN of Y with 2 consumer warpgroups (64 rows each) and one
// producer warp. Two blocks side by side along N form a cluster and share X's rows: each
// copies half of a stage's X rows, multicast to both. Stage s of the ring holds
//   A: 128 rows x 128 bytes of X, 128-byte swizzle (one TMA box of 64 rows per block)
//   B: BN/8 atoms of 1 KiB, copied unchanged from M by 1-D bulk copies (one run of atoms
//      per tile the block's columns cross), already in the order wgmma reads (mapping.hpp)
// and two mbarriers: `full` (the producer's expect-tx, completed by the copies of both
// blocks) and `empty` (one arrival per consumer warp of both blocks).

inline constexpr int wg_block_m = 128;  // 2 warpgroups x 64 rows
inline constexpr int wg_consumers = 256;
inline constexpr int wg_threads = wg_consumers + 32;  // + the producer warp

template <class T, class Out>
struct forward_args {
  const T* memory;
  mapping map;
  Out* y;
  std::uint64_t ldy;
  std::uint32_t batch;
};

/// Pipeline depth: 192 KiB of stages (48 KiB each at BN = 256, 32 KiB at BN = 128).
template <int BN>
inline constexpr int forward_stages = BN == 256 ? 4 : 6;

template <int BN>
inline constexpr int forward_smem_bytes = forward_stages<BN>*(wg_block_m + BN) * 128 + 1024 +
                                          2 * forward_stages<BN> * 8;

/// Stores two adjacent outputs (col, col + 1) of one row, guarded by the shape.
template <class Out>
SQUEEZE_DEVICE void store_pair(Out* out, std::uint64_t ld, std::uint32_t rows, std::uint32_t cols,
                               std::uint32_t row, std::uint32_t col, float v0, float v1,
                               bool pairs_aligned) {
  if (row >= rows || col >= cols) return;
  Out* p = out + row * ld + col;
  if (pairs_aligned && col + 1 < cols) {
    if constexpr (std::is_same_v<Out, float>) {
      *reinterpret_cast<float2*>(p) = make_float2(v0, v1);
    } else if constexpr (std::is_same_v<Out, __nv_bfloat16>) {
      *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(v0, v1);
    } else {
      *reinterpret_cast<__half2*>(p) = __floats2half2_rn(v0, v1);
    }
    return;
  }
  p[0] = from_float<Out>(v0);
  if (col + 1 < cols) p[1] = from_float<Out>(v1);
}

/// Y = X . W on tensor cores. BN: output columns per block; IN: columns per wgmma (a tile's
/// sign applies to whole instructions, so IN divides the tile width when signs are on);
/// CN: blocks along N in a cluster, sharing X's rows.
template <class T, class Out, int BN, int IN, bool Signs, int CN>
SQUEEZE_KERNEL_MIN_BLOCKS(wg_threads, 1)
void forward_wgmma_kernel(const __grid_constant__ CUtensorMap x_map, forward_args<T, Out> args) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  namespace arch = core::arch;
  using tag = typename operand_traits<T>::tag;
  constexpr int stages = forward_stages<BN>;
  constexpr int bk = 128 / static_cast<int>(sizeof(T));  // one 128-byte atom column
  constexpr int a_bytes = wg_block_m * 128;
  constexpr int stage_bytes = a_bytes + BN * 128;
  constexpr int k_steps = bk / operand_traits<T>::k_step;
  constexpr int groups = BN / 8;  // atoms of B per stage
  constexpr int cluster = CN;
  static_assert(wg_block_m % CN == 0, "the cluster must split X's rows");

  extern __shared__ unsigned char smem_raw[];
  const std::uint32_t smem = (arch::shared_address(smem_raw) + 1023) & ~1023u;
  const std::uint32_t bars = smem + stages * stage_bytes;
  const auto full = [&](int s) { return bars + static_cast<std::uint32_t>(s) * 8; };
  const auto empty = [&](int s) { return bars + static_cast<std::uint32_t>(stages + s) * 8; };

  const mapping& map = args.map;
  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32;
  const int lane = tid % 32;
  const std::uint32_t m0 = blockIdx.x * wg_block_m;
  const std::uint32_t n0 = blockIdx.y * BN;
  const auto K = static_cast<std::uint32_t>(map.rows());
  const auto N = static_cast<std::uint32_t>(map.cols());
  const int k_tiles = static_cast<int>((K + bk - 1) / bk);
  // Atoms of B that hold columns below N (the same for every block of a cluster row).
  const std::uint32_t valid_groups =
      n0 < N ? min(static_cast<std::uint32_t>(groups), (N - n0 + 7) / 8) : 0u;

  if (tid == 0) {
    for (int s = 0; s < stages; ++s) {
      arch::mbarrier_init(full(s), 1);
      arch::mbarrier_init(empty(s), cluster * (wg_consumers / 32));
    }
    arch::fence_mbarrier_init();
  }
  __syncthreads();
  arch::cluster_sync();

  if (warp == wg_consumers / 32) {
    // ---- producer warp: lane 0 issues every copy; all lanes work out where B comes from,
    // 32 stages at a time (a hash and a few divisions per stage would otherwise sit on one
    // thread's critical path, slower than the tensor cores at small sizes) ----
    const std::uint32_t cy = arch::cluster_rank();
    constexpr auto a_mask = static_cast<std::uint16_t>((1u << CN) - 1);  // every block
    const auto b_mask = static_cast<std::uint16_t>(1u << cy);            // this block
    constexpr std::uint32_t a_rows = wg_block_m / CN;
    const std::uint32_t tile_k = map.tile().k;
    const std::uint32_t tile_n = map.tile().n;
    const std::uint32_t tile_groups = tile_n / 8;
    constexpr std::uint32_t atom_values = 1024 / sizeof(T);
    const std::uint32_t stage_tx = a_bytes + valid_groups * 1024;
    // B of a stage: runs of atoms, one per tile the block's columns cross.
    const std::uint32_t first_run = min(valid_groups, tile_groups - (n0 % tile_n) / 8);
    const auto run_source = [&](std::uint32_t k0, std::uint32_t g) {
      const std::uint32_t col = n0 + g * 8;
      return args.memory + map.tile_offset(k0 / tile_k, col / tile_n) +
             ((k0 % tile_k) / bk * tile_groups + (col % tile_n) / 8) * atom_values;
    };
    for (int base = 0; base < k_tiles; base += 32) {
      const int mine = base + lane;
      const T* my_source = mine < k_tiles && valid_groups > 0
                               ? run_source(static_cast<std::uint32_t>(mine) * bk, 0)
                               : args.memory;
      const int count = min(32, k_tiles - base);
      for (int i = 0; i < count; ++i) {
        const auto source = reinterpret_cast<const T*>(
            __shfl_sync(full_warp_mask, reinterpret_cast<std::uintptr_t>(my_source), i));
        if (lane == 0) {
          const int kt = base + i;
          const int s = kt % stages;
          if (kt >= stages) arch::mbarrier_wait(empty(s), ((kt / stages) - 1) & 1);
          arch::mbarrier_arrive_expect_tx(full(s), stage_tx);
          const std::uint32_t stage = smem + s * stage_bytes;
          const std::uint32_t k0 = static_cast<std::uint32_t>(kt) * bk;
          arch::tensor_load_2d_multicast(
              stage + cy * a_rows * 128, &x_map, static_cast<std::int32_t>(k0),
              static_cast<std::int32_t>(m0 + cy * a_rows), full(s), a_mask);
          if (valid_groups > 0) {
            arch::bulk_copy_multicast(stage + a_bytes, source, first_run * 1024, full(s), b_mask);
          }
          for (std::uint32_t g = first_run; g < valid_groups;) {  // tiles narrower than BN
            const std::uint32_t run = min(valid_groups - g, tile_groups);
            arch::bulk_copy_multicast(stage + a_bytes + g * 1024, run_source(k0, g), run * 1024,
                                      full(s), b_mask);
            g += run;
          }
        }
        __syncwarp();
      }
    }
  } else {
    // ---- consumers: 2 warpgroups of wgmma ----
    const int wg = warp / 4;
    const std::uint32_t tile_n = map.tile().n;
    const std::uint32_t tile_k = map.tile().k;
    float acc[BN / IN][IN / 2];
    SQUEEZE_UNROLL
    for (int j = 0; j < BN / IN; ++j) {
      SQUEEZE_UNROLL
      for (int i = 0; i < IN / 2; ++i) acc[j][i] = 0.0f;
    }
    bool flipped[BN / IN] = {};
    // Frees stage s in every block of the cluster (lane r signals block r).
    const auto release = [&](int s) {
      __syncwarp();
      if (lane < cluster) arch::mbarrier_arrive_cluster(empty(s), static_cast<std::uint32_t>(lane));
    };
    for (int kt = 0; kt < k_tiles; ++kt) {
      const int s = kt % stages;
      arch::mbarrier_wait(full(s), (kt / stages) & 1);
      const std::uint32_t a_s = smem + s * stage_bytes;
      const std::uint32_t b_s = a_s + a_bytes;
      SQUEEZE_UNROLL
      for (int j = 0; j < BN / IN; ++j) arch::wgmma_fence_operands(acc[j]);
      if constexpr (Signs) {
        // The accumulator of column block j holds sign[j] * (the true sum); when a tile's
        // sign differs, finish the wgmma in flight and flip the accumulator, so every
        // wgmma adds with +1 (a run-time choice of the instruction's B scale would make
        // the compiler serialize every wgmma). The other warpgroup keeps the tensor cores
        // busy meanwhile.
        const std::uint32_t kb = static_cast<std::uint32_t>(kt) * bk / tile_k;
        bool change = false;
        bool negative[BN / IN];
        SQUEEZE_UNROLL
        for (int j = 0; j < BN / IN; ++j) {
          negative[j] = map.tile_sign(kb, (n0 + j * IN) / tile_n) < 0;
          change |= negative[j] != flipped[j];
        }
        if (change) {
          arch::wgmma_wait<0>();
          SQUEEZE_UNROLL
          for (int j = 0; j < BN / IN; ++j) {
            arch::wgmma_fence_operands(acc[j]);
            const float f = negative[j] != flipped[j] ? -1.0f : 1.0f;
            flipped[j] = negative[j];
            SQUEEZE_UNROLL
            for (int i = 0; i < IN / 2; ++i) acc[j][i] *= f;
            arch::wgmma_fence_operands(acc[j]);
          }
        }
      }
      arch::wgmma_fence();
      SQUEEZE_UNROLL
      for (int ks = 0; ks < k_steps; ++ks) {
        const std::uint64_t da = arch::smem_descriptor(a_s + wg * 64 * 128 + ks * 32, 16, 1024,
                                                       arch::smem_swizzle::bytes128);
        SQUEEZE_UNROLL
        for (int j = 0; j < BN / IN; ++j) {
          const std::uint64_t db = arch::smem_descriptor(b_s + j * IN * 128 + ks * 32, 16, 1024,
                                                         arch::smem_swizzle::bytes128);
          arch::wgmma_ss<tag, IN, 1>(acc[j], da, db);
        }
      }
      arch::wgmma_commit();
      // Finish this stage's wgmma and hand the stage back at once: the copies are the
      // bottleneck, and one more stage in flight is worth more than overlapping the next
      // wgmma issue, which the other warpgroup covers anyway.
      arch::wgmma_wait<0>();
      SQUEEZE_UNROLL
      for (int j = 0; j < BN / IN; ++j) arch::wgmma_fence_operands(acc[j]);
      release(s);
    }
    arch::wgmma_wait<0>();
    SQUEEZE_UNROLL
    for (int j = 0; j < BN / IN; ++j) arch::wgmma_fence_operands(acc[j]);

    // Accumulator fragment of m64nINk: warp w of the warpgroup holds rows 16w..16w+15;
    // lane l holds rows l/4 and l/4 + 8, columns 8i + 2(l%4) + {0, 1}.
    const float alpha = map.scale();
    const std::uint32_t row = m0 + static_cast<std::uint32_t>(wg * 64 + (warp % 4) * 16 + lane / 4);
    const bool pairs_aligned =
        args.ldy % 2 == 0 && reinterpret_cast<std::uintptr_t>(args.y) % (2 * sizeof(Out)) == 0;
    SQUEEZE_UNROLL
    for (int j = 0; j < BN / IN; ++j) {
      const float a = flipped[j] ? -alpha : alpha;
      SQUEEZE_UNROLL
      for (int i = 0; i < IN / 8; ++i) {
        const std::uint32_t col = n0 + static_cast<std::uint32_t>(j * IN + i * 8 + 2 * (lane % 4));
        store_pair(args.y, args.ldy, args.batch, N, row, col, a * acc[j][4 * i],
                   a * acc[j][4 * i + 1], pairs_aligned);
        store_pair(args.y, args.ldy, args.batch, N, row + 8, col, a * acc[j][4 * i + 2],
                   a * acc[j][4 * i + 3], pairs_aligned);
      }
    }
  }
  // No block leaves while a peer may still copy into its shared memory or signal it.
  arch::cluster_sync();
#else
  (void)x_map, (void)args;
#endif
}

template <int = 0>
SQUEEZE_KERNEL(1)
void probe_wgmma_kernel(int* built) {
  *built = core::arch::wgmma_available ? 1 : 0;
}

/// Whether this translation unit's kernels were built with wgmma for the current device
/// (the device pass targeted sm_90a and the device runs it). Probed once per device.
inline bool wgmma_built() {
  static std::mutex lock;
  static std::vector<int> known;  // -1 unknown, 0 no, 1 yes; by device ordinal
  int device = 0;
  SQUEEZE_CUDA_TRY(cudaGetDevice(&device));
  const std::lock_guard guard{lock};
  if (known.size() <= static_cast<std::size_t>(device)) known.resize(device + 1, -1);
  if (known[device] < 0) {
    int major = 0;
    SQUEEZE_CUDA_TRY(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    int built = 0;
    if (major == 9) {
      cudaFuncAttributes attributes{};
      if (cudaFuncGetAttributes(&attributes, probe_wgmma_kernel<>) == cudaSuccess) {
        int* flag = nullptr;
        SQUEEZE_CUDA_TRY(cudaMalloc(&flag, sizeof(int)));
        probe_wgmma_kernel<><<<1, 1>>>(flag);
        const cudaError_t launched = cudaGetLastError();
        const cudaError_t copied = cudaMemcpy(&built, flag, sizeof(int), cudaMemcpyDeviceToHost);
        cudaFree(flag);
        SQUEEZE_CUDA_TRY(launched);
        SQUEEZE_CUDA_TRY(copied);
      } else {
        (void)cudaGetLastError();  // no image for this device: not built
      }
    }
    known[device] = built;
  }
  return known[device] == 1;
}

inline int multiprocessors() {
  int device = 0;
  int sms = 0;
  SQUEEZE_CUDA_TRY(cudaGetDevice(&device));
  SQUEEZE_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return sms;
}

template <class T>
bool aligned16(const T* p, std::uint64_t ld) {
  return reinterpret_cast<std::uintptr_t>(p) % 16 == 0 && (ld * sizeof(T)) % 16 == 0;
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

template <class T, class Out, int BN, int IN, bool Signs, int CN>
void launch_forward_wgmma(const T* x, std::uint64_t ldx, const forward_args<T, Out>& args,
                          cudaStream_t stream) {
  auto kernel = forward_wgmma_kernel<T, Out, BN, IN, Signs, CN>;
  constexpr int smem = forward_smem_bytes<BN>;
  SQUEEZE_CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const CUtensorMap x_map =
      core::tensor_map_2d_swizzled(x, tensor_type<T>(), args.batch, args.map.rows(),
                                   ldx * sizeof(T), wg_block_m / CN, 128 / sizeof(T));
  const auto blocks = [](std::uint64_t n, std::uint64_t per, std::uint64_t multiple) {
    return static_cast<unsigned>(((n + per - 1) / per + multiple - 1) / multiple * multiple);
  };
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(blocks(args.batch, wg_block_m, 1), blocks(args.map.cols(), BN, CN));
  config.blockDim = dim3(wg_threads);
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeClusterDimension;
  attribute.val.clusterDim.x = 1;
  attribute.val.clusterDim.y = CN;
  attribute.val.clusterDim.z = 1;
  config.attrs = &attribute;
  config.numAttrs = 1;
  SQUEEZE_CUDA_TRY(cudaLaunchKernelEx(&config, kernel, x_map, args));
}

/// Picks the instantiation: IN by the sign hash and the tile width. Clusters are 2 blocks
/// along N sharing X (measured on the H200: sharing B across 2 or 4 row blocks instead, or
/// clusters of 4 or 8, were slower; clusters of 4+ do not all fit at once with 193 KiB of
/// shared memory per block).
template <class T, class Out, int BN>
void dispatch_forward_wgmma(const T* x, std::uint64_t ldx, const forward_args<T, Out>& args,
                            cudaStream_t stream) {
  if (!args.map.signs()) {
    launch_forward_wgmma<T, Out, BN, BN, false, 2>(x, ldx, args, stream);
  } else if (args.map.tile().n % BN == 0) {
    launch_forward_wgmma<T, Out, BN, BN, true, 2>(x, ldx, args, stream);
  } else {
    launch_forward_wgmma<T, Out, BN, 64, true, 2>(x, ldx, args, stream);
  }
}

template <class T>
void check_operands(const mapping& map, const T* memory, const char* what) {
  SQUEEZE_EXPECTS(map.rows() > 0, std::string(what) + ": the mapping is empty");
  SQUEEZE_EXPECTS(map.element_bytes() == sizeof(T),
                  std::string(what) + ": the mapping was built for " +
                      std::to_string(map.element_bytes()) + "-byte elements but M holds " +
                      std::to_string(sizeof(T)) + "-byte ones (the in-tile order differs)");
  SQUEEZE_EXPECTS(memory != nullptr, std::string(what) + ": M is null");
  SQUEEZE_EXPECTS(map.rows() < (std::uint64_t{1} << 31) && map.cols() < (std::uint64_t{1} << 31),
                  std::string(what) + ": K and N must be below 2^31");
  SQUEEZE_EXPECTS(reinterpret_cast<std::uintptr_t>(memory) % 16 == 0,
                  std::string(what) + ": M must be 16-byte aligned");
}

}  // namespace detail

/// Y[batch x N] = X[batch x K] . W, W = the module `map` over M (`memory`, |M| elements of
/// T, in the mapping's layout). X rows are `ldx` elements apart, Y rows `ldy`. Out is float
/// or T. Asynchronous on `stream`.
template <detail::operand T, class Out>
void forward(const T* x, std::uint64_t ldx, const T* memory, const mapping& map,
             std::uint64_t batch, Out* y, std::uint64_t ldy, cudaStream_t stream = nullptr,
             const gemm_options& options = {}) {
  static_assert(std::is_same_v<Out, float> || std::is_same_v<Out, T>,
                "roast::forward: Y is float or the operand type");
  detail::check_operands(map, memory, "roast::forward");
  SQUEEZE_EXPECTS(options.block_n == 0 || options.block_n == 128 || options.block_n == 256,
                  "roast::forward: options.block_n must be 0, 128 or 256");
  SQUEEZE_EXPECTS(batch < (std::uint64_t{1} << 31), "roast::forward: batch must be below 2^31");
  SQUEEZE_EXPECTS(ldx >= map.rows() && ldy >= map.cols(),
                  "roast::forward: ldx must be >= K and ldy >= N");
  if (batch == 0) return;
  SQUEEZE_EXPECTS(x != nullptr && y != nullptr, "roast::forward: X and Y must not be null");
  const bool tensor_cores = !std::is_same_v<T, float> || options.mode == math::tensor_cores;
  const bool signs_fit = !map.signs() || map.tile().n % 64 == 0;
  if (tensor_cores && signs_fit && detail::aligned16(x, ldx) && detail::wgmma_built()) {
    const detail::forward_args<T, Out> args{memory, map, y, ldy, static_cast<std::uint32_t>(batch)};
    const std::uint64_t row_blocks = (batch + detail::wg_block_m - 1) / detail::wg_block_m;
    const bool wide = options.block_n != 0
                          ? options.block_n == 256
                          : row_blocks * ((map.cols() + 255) / 256) >=
                                static_cast<std::uint64_t>(detail::multiprocessors()) * 9 / 10;
    if (wide) {
      detail::dispatch_forward_wgmma<T, Out, 256>(x, ldx, args, stream);
    } else {
      detail::dispatch_forward_wgmma<T, Out, 128>(x, ldx, args, stream);
    }
    return;
  }
  detail::launch_simt(detail::simt_forward<T, Out>{x, ldx, memory, map, y, ldy, batch}, stream);
}

/// dX[batch x K] = dY[batch x N] . W^T. (This version: the portable kernel.)
template <detail::operand T, class Out>
void backward_input(const T* dy, std::uint64_t lddy, const T* memory, const mapping& map,
                    std::uint64_t batch, Out* dx, std::uint64_t lddx, cudaStream_t stream = nullptr,
                    const gemm_options& options = {}) {
  static_assert(std::is_same_v<Out, float> || std::is_same_v<Out, T>,
                "roast::backward_input: dX is float or the operand type");
  (void)options;
  detail::check_operands(map, memory, "roast::backward_input");
  SQUEEZE_EXPECTS(lddy >= map.cols() && lddx >= map.rows(),
                  "roast::backward_input: lddy must be >= N and lddx >= K");
  if (batch == 0) return;
  SQUEEZE_EXPECTS(dy != nullptr && dx != nullptr,
                  "roast::backward_input: dY and dX must not be null");
  detail::launch_simt(detail::simt_backward_input<T, Out>{dy, lddy, memory, map, dx, lddx, batch},
                      stream);
}

/// dM += fold(scale * g * (X^T . dY)): the gradient of M (fp32, |M| values, same indices as
/// M) from this module. Accumulates: zero dM once per step, then call once per module.
template <detail::operand T>
void backward_memory(const T* x, std::uint64_t ldx, const T* dy, std::uint64_t lddy,
                     const mapping& map, std::uint64_t batch, float* dmemory,
                     cudaStream_t stream = nullptr, const gemm_options& options = {}) {
  SQUEEZE_EXPECTS(map.rows() > 0, "roast::backward_memory: the mapping is empty");
  SQUEEZE_EXPECTS(ldx >= map.rows() && lddy >= map.cols(),
                  "roast::backward_memory: ldx must be >= K and lddy >= N");
  SQUEEZE_EXPECTS(dmemory != nullptr, "roast::backward_memory: dM must not be null");
  SQUEEZE_EXPECTS(!options.deterministic,
                  "roast::backward_memory: the deterministic mode is not built yet");
  if (batch == 0) return;
  SQUEEZE_EXPECTS(x != nullptr && dy != nullptr,
                  "roast::backward_memory: X and dY must not be null");
  detail::launch_simt(detail::simt_backward_memory<T>{x, ldx, dy, lddy, map, dmemory, batch},
                      stream);
}

}  // namespace squeeze::roast
