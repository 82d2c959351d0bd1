// SPDX-License-Identifier: Apache-2.0
// squeeze/core/config.hpp: configuration macros shared by every header.
//
// Host-compilable: with g++ alone the device qualifiers vanish, so code written
// with SQUEEZE_HOST_DEVICE is unit-tested on the host and runs unchanged on the GPU.
#pragma once

#define SQUEEZE_VERSION_MAJOR 0
#define SQUEEZE_VERSION_MINOR 1
#define SQUEEZE_VERSION_PATCH 0

#if defined(__CUDACC__) || defined(__NVCC__)
#define SQUEEZE_CUDA_COMPILER 1
#else
#define SQUEEZE_CUDA_COMPILER 0
#endif

// True while compiling device code (the __CUDA_ARCH__ pass of nvcc).
#if defined(__CUDA_ARCH__)
#define SQUEEZE_DEVICE_PASS 1
#else
#define SQUEEZE_DEVICE_PASS 0
#endif

// The oldest GPU squeeze builds for: compute capability 8.0 (Ampere; warp reductions such as
// __reduce_max_sync, cp.async). ROAST's tensor-core path needs sm_90a (Hopper) on top.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "squeeze needs compute capability 8.0 or newer: build for sm_80 or later (CMake: -DCMAKE_CUDA_ARCHITECTURES=80 or 90; nvcc: -arch=sm_80 or -arch=sm_90)"
#endif

#if SQUEEZE_CUDA_COMPILER
#define SQUEEZE_HOST_DEVICE __host__ __device__ inline
#define SQUEEZE_DEVICE __device__ inline
#define SQUEEZE_FORCEINLINE __forceinline__
#else
#define SQUEEZE_HOST_DEVICE inline
#define SQUEEZE_DEVICE inline
#define SQUEEZE_FORCEINLINE inline __attribute__((always_inline))
#endif

#if defined(__GNUC__) || defined(__clang__)
#define SQUEEZE_HIDDEN __attribute__((visibility("hidden")))
#else
#define SQUEEZE_HIDDEN
#endif

// Declares a kernel: hidden visibility (a header-only library instantiates the same
// template kernel in many shared objects; hidden symbols keep each its own copy, as
// CUB does) and launch bounds, so the register budget is fixed where the kernel is.
// Visibility needs external linkage: declare such kernels in a named namespace, not an
// anonymous one (nvcc rejects the attribute there).
//   template <class Policy>
//   SQUEEZE_KERNEL(Policy::block_threads) void my_kernel(args...);
#define SQUEEZE_KERNEL(max_threads) __global__ SQUEEZE_HIDDEN __launch_bounds__(max_threads)
#define SQUEEZE_KERNEL_MIN_BLOCKS(max_threads, min_blocks) \
  __global__ SQUEEZE_HIDDEN __launch_bounds__(max_threads, min_blocks)

// `#pragma unroll` for loops in SQUEEZE_HOST_DEVICE code: the host compiler would warn about
// the pragma, so it is emitted in nvcc's device pass only.
#if SQUEEZE_DEVICE_PASS
#define SQUEEZE_UNROLL _Pragma("unroll")
#else
#define SQUEEZE_UNROLL
#endif

#define SQUEEZE_STRINGIFY_IMPL(x) #x
#define SQUEEZE_STRINGIFY(x) SQUEEZE_STRINGIFY_IMPL(x)

namespace squeeze {
/// Threads in a warp on every NVIDIA GPU squeeze supports.
inline constexpr int warp_threads = 32;
/// The full warp participation mask.
inline constexpr unsigned full_warp_mask = 0xffffffffu;
}  // namespace squeeze
