// SPDX-License-Identifier: Apache-2.0
// squeeze/roast/detail/hopper_gemm.cuh: ROAST-MM on Hopper tensor cores (sm_90a): the
// kernel, its launch, and the choice of instantiation.
//
// The kernel joins the pieces in sm90/ (config.cuh says what each pass computes from
// which operands): a warp-specialized block of one producer warp (producer.cuh: TMA and
// bulk copies of A and of W's tiles from M into a ring of stages, pipeline.cuh) and one
// consumer warpgroup per 64 output rows (consumer.cuh: wgmma over the stages; epilogue.cuh:
// the stores), persistent over the output tiles that scheduler.cuh deals to each cluster of
// two blocks.
// The tuning is a roast::hopper_gemm_policy (gemm_policy.hpp).
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "squeeze/core/arch.cuh"
#include "squeeze/core/bits.hpp"
#include "squeeze/core/config.hpp"
#include "squeeze/core/cuda_error.hpp"
#include "squeeze/core/hopper.cuh"
#include "squeeze/core/launch.hpp"
#include "squeeze/core/tensor_map.hpp"
#include "squeeze/core/wgmma.cuh"
#include "squeeze/roast/detail/operand.cuh"
#include "squeeze/roast/detail/sm90/config.cuh"
#include "squeeze/roast/detail/sm90/consumer.cuh"
#include "squeeze/roast/detail/sm90/epilogue.cuh"
#include "squeeze/roast/detail/sm90/pipeline.cuh"
#include "squeeze/roast/detail/sm90/producer.cuh"
#include "squeeze/roast/detail/sm90/scheduler.cuh"
#include "squeeze/roast/gemm_policy.hpp"
#include "squeeze/roast/mapping.hpp"

namespace squeeze::roast::detail {

/// BM, BN: output rows and columns per block; IN: columns per wgmma (a tile's sign applies
/// to whole instructions, so IN divides the tile's extent along the output columns when
/// Signs).
template <class T, class Out, pass Pass, int BM, int BN, int IN, bool Signs, class Policy>
SQUEEZE_KERNEL_MIN_BLOCKS((sm90::kernel_config<Policy, BM, BN>::threads), 1)
void hopper_gemm_kernel(const __grid_constant__ CUtensorMap a_map,
                        const __grid_constant__ CUtensorMap b_map, gemm_args<T, Out> args) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  namespace arch = core::arch;
  using config = sm90::kernel_config<Policy, BM, BN>;
  using sources_t = sm90::b_sources<config, T, Out, Pass>;
  extern __shared__ unsigned char smem_raw[];
  const auto shared = sm90::shared_layout<config>::at(smem_raw);
  const sm90::stage_ring<config> ring{shared.stages, shared.barriers};
  const auto table = static_cast<const T**>(arch::shared_pointer(shared.sources));
  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32;
  const int lane = tid % 32;
  const sm90::tile_scheduler<config, Pass> tiles{args.rows, args.cols, args.col0};
  const int k_tiles = static_cast<int>((args.depth + sources_t::bk - 1) / sources_t::bk);
  const sources_t src{args, k_tiles};

  if (tid == 0) ring.init();
  __syncthreads();

  // The peer's barriers must be initialized before the first multicast into it or arrival
  // on it: every warp waits for the cluster before that. In between, all threads work out
  // the sources of the first tile's first source_batch stages, a hash and a few divisions
  // each (the producer warp alone took about 1200 cycles for the forward pass, and has
  // twice the work for the input pass, two sources a stage). Launched after another kernel
  // with programmatic stream serialization, this all overlaps that kernel's end: no warp
  // touches global memory before wait_for_prerequisites. The next kernel may start as
  // early (it cannot take this block's SM before the block exits).
  arch::launch_dependents();
  arch::cluster_arrive();
  if (Pass != pass::memory && tiles.valid(tiles.first())) {
    std::uint32_t m0 = 0;
    std::uint32_t n0 = 0;
    tiles.origin(tiles.first(), m0, n0);
    const std::uint32_t b_units = src.units_at(n0);
    constexpr int sources = sources_t::per_stage;
    const int entries = min(config::source_batch, k_tiles) * sources;
    for (int e = tid; e < entries; e += config::threads) {
      table[e] = src.stage_source(n0, b_units, e / sources, e % sources);
    }
  }
  __syncthreads();

  if (warp == config::consumer_warps) {
    sm90::produce<config, T, Out, Pass>(a_map, b_map, tiles, ring, src, table, lane);
  } else {
    arch::cluster_wait();
    arch::wait_for_prerequisites();
    const int wg = warp / 4;
    typename sm90::stage_ring<config>::position at{};  // the next iteration's
    for (std::uint32_t ct = tiles.first(); tiles.valid(ct); ct += tiles.stride()) {
      std::uint32_t m0 = 0;
      std::uint32_t n0 = 0;
      tiles.origin(ct, m0, n0);
      sm90::accumulators<BN, IN> tile;
      sm90::mainloop<config, T, Pass, IN, Signs>(ring, args.map, n0, k_tiles, at, wg, lane, tile);
      sm90::store_tile<config, T, Out, Pass, IN>(tile, args, shared.staging, m0, n0, wg, warp,
                                                 lane);
    }
  }
  // No cluster-wide barrier at the end: the producer warp stays until both blocks'
  // consumers have released every stage (stage_ring::drain), after which no copy into this
  // block's shared memory or signal of its barriers is in flight, and the consumers leave as
  // soon as their stores are issued. (A final cluster barrier made every thread wait for its
  // stores and dM reductions first: 17 % of the memory pass's stall samples at K = N = 1024.)
#else
  (void)a_map, (void)b_map, (void)args;
#endif
}

/// Never launched: an image built with sm_90a's features carries 16 bytes of static shared
/// memory, any other none, and cudaFuncGetAttributes reports the image the device would run.
template <int = 0>
SQUEEZE_KERNEL(32)
void probe_wgmma_kernel(int* built) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  __shared__ int mark[4];
  mark[threadIdx.x % 4] = 1;
  __syncthreads();
  *built = mark[(threadIdx.x + 1) % 4];
#else
  *built = 0;
#endif
}

/// Whether this translation unit's kernels were built with wgmma for the current device
/// (the device pass targeted sm_90a and the device runs it): read from the attributes of
/// the probe's image, once per device, with no launch, copy or synchronization (so the
/// first call may be captured into a CUDA graph). A template like its probe kernel:
/// compiled only where a GEMM is.
template <int = 0>
bool wgmma_built() {
  return core::once_per_device([](int device) {
           int major = 0;
           SQUEEZE_CUDA_TRY(
               cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
           if (major != 9) return 0;
           cudaFuncAttributes attributes{};
           if (cudaFuncGetAttributes(&attributes, probe_wgmma_kernel<>) != cudaSuccess) {
             (void)cudaGetLastError();  // no image for this device: not built
             return 0;
           }
           return attributes.sharedSizeBytes >= 4 * sizeof(int) ? 1 : 0;
         }) == 1;
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

template <class T, class Out, pass Pass, int BM, int BN, int IN, bool Signs, class Policy>
void launch_hopper_gemm(const dense_operand<T>& a, const dense_operand<T>& b,
                        const gemm_args<T, Out>& args, cudaStream_t stream) {
  using config = sm90::kernel_config<Policy, BM, BN>;
  auto kernel = hopper_gemm_kernel<T, Out, Pass, BM, BN, IN, Signs, Policy>;
  constexpr int smem = config::smem_bytes;
  constexpr auto box = static_cast<std::uint32_t>(128 / sizeof(T));  // 128 bytes
  // K-major A: 64 rows x 128 bytes per block; MN-major A and B: 64 reduction rows x 128
  // bytes of outputs. Either way a 64 x 128-byte box.
  const CUtensorMap a_map = core::tensor_map_2d_swizzled(a.data, tensor_type<T>(), a.rows, a.cols,
                                                         a.ld * sizeof(T), 64, box);
  const CUtensorMap b_map = b.data != nullptr
                                ? core::tensor_map_2d_swizzled(b.data, tensor_type<T>(), b.rows,
                                                               b.cols, b.ld * sizeof(T), 64, box)
                                : a_map;
  cudaLaunchConfig_t launch{};
  launch.blockDim = dim3(config::threads);
  launch.dynamicSmemBytes = smem;
  launch.stream = stream;
  cudaLaunchAttribute attributes[2]{};
  attributes[0].id = cudaLaunchAttributeClusterDimension;
  attributes[0].val.clusterDim.x = 1;
  attributes[0].val.clusterDim.y = config::cluster;
  attributes[0].val.clusterDim.z = 1;
  // Its set-up may overlap the end of the kernel before it in the stream (see the kernel).
  attributes[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attributes[1].val.programmaticStreamSerializationAllowed = 1;
  launch.attrs = attributes;
  launch.numAttrs = 1;  // the occupancy query below takes the cluster shape alone
  // Persistent: as many clusters as fit on the GPU at once, none more than there are
  // cluster tiles. Once per device and instantiation: allow the shared memory, count them.
  const int fit = core::once_per_device([&](int) {
    SQUEEZE_CUDA_TRY(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    launch.gridDim = dim3(1, config::cluster);
    int clusters = 0;
    SQUEEZE_CUDA_TRY(cudaOccupancyMaxActiveClusters(&clusters, kernel, &launch));
    return std::max(clusters, 1);
  });
  const std::uint64_t tiles =
      sm90::layout_for<config, Pass>(args.rows, args.cols - args.col0).tiles;
  launch.gridDim =
      dim3(static_cast<unsigned>(std::min<std::uint64_t>(tiles, fit)), config::cluster);
  launch.numAttrs = 2;
  SQUEEZE_CUDA_TRY(cudaLaunchKernelEx(&launch, kernel, a_map, b_map, args));
}

/// Picks the instantiation: BM and BN by the policy, or by the shape where the policy
/// leaves them open (0), IN by the sign hash and the tile's extent along the output columns.
/// Measured on the H200: clusters of 2 sharing A beat none; clusters of 4 or 8 (sharing B
/// too) were slower, as not all of them fit on the GPU at once with 193 KiB of shared
/// memory per block (30 clusters of 4 fit on 132 SMs). Where all fit (K = N = 1792 and
/// 1920), 2 x 2 clusters, which halve each block's reads from L2, took 0.97-1.03 x the
/// time of pairs; pairs that split each tile's reduction and added the halves through
/// distributed shared memory took 1.17-1.30 x at 1024-2048 (2026-11-28). On an H100, pairs
/// sharing B (sm90/scheduler.cuh) beat pairs sharing A by 7-16 % at K = N = 4096, BN = 128.
template <class Policy, class T, class Out, pass Pass>
void dispatch_hopper_gemm(const dense_operand<T>& a, const dense_operand<T>& b,
                          const gemm_args<T, Out>& args, cudaStream_t stream) {
  const std::uint32_t extent = Pass == pass::forward ? args.map.tile().n : args.map.tile().k;
  const bool signs = args.map.signs();
  const auto go = [&]<int BM, int BN>() {
    if constexpr (Pass == pass::memory) {  // signs are applied in the epilogue
      launch_hopper_gemm<T, Out, Pass, BM, BN, BN, false, Policy>(a, b, args, stream);
    } else if (!signs) {
      launch_hopper_gemm<T, Out, Pass, BM, BN, BN, false, Policy>(a, b, args, stream);
    } else if (extent % BN == 0) {
      launch_hopper_gemm<T, Out, Pass, BM, BN, BN, true, Policy>(a, b, args, stream);
    } else {
      launch_hopper_gemm<T, Out, Pass, BM, BN, 64, true, Policy>(a, b, args, stream);
    }
  };
  // Block width: the widest of 256, 128 and 64 columns whose blocks (of 128 rows, or the
  // policy's block_m) still give fill_percent % of the SMs a block (more, narrower blocks
  // where the output is small: 512 x 2048 outputs fill an H100 only at 64). Block height:
  // 128, or 64 where blocks of 128 rows would give fewer than a quarter of the SMs one.
  // Measured on an H200 (bf16, batch 512, 2026-11-28): at K = N = 512 (32 blocks of
  // 128 x 64) blocks of 64 x 64 took forward 1.00 x cuBLAS against 1.09 and dX 0.96
  // against 1.10; at 1024 (64 blocks) they were slower, 1.45 against 1.28; the memory pass
  // at 512 took 4.03 against 4.41 us (2026-11-28). A side the policy fixes keeps its value.
  const std::uint64_t sms = static_cast<std::uint64_t>(core::sm_count());
  const auto blocks = [&](std::uint64_t bm, std::uint64_t bn) {
    return (args.rows + bm - 1) / bm * ((args.cols - args.col0 + bn - 1) / bn);
  };
  constexpr int fixed_m = Policy::block_m;
  constexpr int fixed_n = Policy::block_n;
  const auto at_width = [&]<int BN>() {
    if constexpr (fixed_m != 0) {
      go.template operator()<fixed_m, BN>();
    } else if constexpr (fixed_n == 0 && BN != 64) {
      go.template operator()<128, BN>();  // chosen only where 128-row blocks fill the SMs
    } else if (blocks(128, BN) * 4 < sms) {
      go.template operator()<64, BN>();
    } else {
      go.template operator()<128, BN>();
    }
  };
  if constexpr (fixed_n != 0) {
    at_width.template operator()<fixed_n>();
  } else {
    const std::uint64_t enough = sms * Policy::fill_percent / 100;
    const std::uint64_t bm = fixed_m != 0 ? fixed_m : 128;
    if (blocks(bm, 256) >= enough) {
      at_width.template operator()<256>();
    } else if (blocks(bm, 128) >= enough) {
      at_width.template operator()<128>();
    } else {
      at_width.template operator()<64>();
    }
  }
}

}  // namespace squeeze::roast::detail
