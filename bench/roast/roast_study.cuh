// SPDX-License-Identifier: Apache-2.0
// bench/roast/roast_study.cuh: what the ROAST bench and the tour share: cuBLAS baselines on
// the materialized W (same precision, same run), fills, the cross-checks, and the tour's
// section (batch 512, K = N = 8192, |M| = 4 MB: Table 7 of Desai et al., ICML 2023).
#pragma once

#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "common/report.hpp"
#include "squeeze/core/buffer.hpp"
#include "squeeze/core/cuda_error.hpp"
#include "squeeze/core/timer.hpp"
#include "squeeze/roast/gemm.cuh"

namespace squeeze::bench::roast_study {

namespace core = squeeze::core;
namespace roast = squeeze::roast;

inline constexpr std::uint64_t batch = 512;
inline constexpr roast::tile_shape tile{64, 256};

#define CUBLAS_TRY(call)                                                               \
  do {                                                                                 \
    const cublasStatus_t s_ = (call);                                                  \
    if (s_ != CUBLAS_STATUS_SUCCESS)                                                   \
      throw std::runtime_error(std::string{#call} + " failed: " + std::to_string(s_)); \
  } while (false)

template <class T>
__global__ void fill_uniform(T* out, std::uint64_t n, std::uint64_t seed, float range) {
  for (std::uint64_t i = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::uint64_t{gridDim.x} * blockDim.x) {
    const std::uint64_t r = roast::detail::mix64(i ^ seed);
    const float u = static_cast<float>(r >> 40) * 0x1p-24f * 2.0f - 1.0f;
    out[i] = roast::detail::from_float<T>(u * range);
  }
}

/// W[k][n] from M, row-major K x N: what cuBLAS multiplies.
template <class T>
__global__ void materialize_kernel(roast::mapping map, const T* memory, T* w) {
  const std::uint64_t total = map.rows() * map.cols();
  for (std::uint64_t i = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; i < total;
       i += std::uint64_t{gridDim.x} * blockDim.x) {
    const std::uint64_t k = i / map.cols();
    const std::uint64_t n = i % map.cols();
    w[i] = roast::detail::from_float<T>(map.element_factor(k, n) *
                                        roast::detail::to_float(memory[map.element_offset(k, n)]));
  }
}

template <class T>
void fill(core::device_buffer<T>& b, std::uint64_t seed, float range) {
  fill_uniform<<<1024, 256>>>(b.data(), b.size(), seed, range);
  SQUEEZE_CHECK_LAUNCH();
}

/// The stream the timed calls run on, cuBLAS's included. Times are per call from CUDA graph
/// replays (core::time_graph): one call between two events also counts the host's work
/// before its launch while the GPU sits idle, and cuBLAS spends ~13 us there per GEMM on
/// the H200 (ROAST ~7 us), more than the whole GEMM at the small sizes. The stream is
/// created (the legacy stream cannot be captured) and blocking, so the fills and checks on
/// the legacy stream stay ordered with it.
inline cudaStream_t timing_stream() {
  static const cudaStream_t s = [] {
    cudaStream_t created = nullptr;
    SQUEEZE_CUDA_TRY(cudaStreamCreate(&created));
    return created;
  }();
  return s;
}

/// The cuBLAS handle of the baselines, on timing_stream().
inline cublasHandle_t cublas() {
  static cublasHandle_t h = [] {
    cublasHandle_t handle;
    CUBLAS_TRY(cublasCreate(&handle));
    CUBLAS_TRY(cublasSetStream(handle, timing_stream()));
    return handle;
  }();
  return h;
}

/// Y (batch x N) = X (batch x K) . W (K x N), all row-major: in cuBLAS's column-major view
/// Y^T = W^T . X^T with no transposes.
template <class T>
void cublas_forward(const T* x, const T* w, T* y, std::uint64_t k, std::uint64_t n) {
  const float one = 1.0f;
  const float zero = 0.0f;
  const cudaDataType_t type = std::is_same_v<T, float> ? CUDA_R_32F : CUDA_R_16BF;
  const cublasComputeType_t compute =
      std::is_same_v<T, float> ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  CUBLAS_TRY(cublasGemmEx(cublas(), CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(n),
                          static_cast<int>(batch), static_cast<int>(k), &one, w, type,
                          static_cast<int>(n), x, type, static_cast<int>(k), &zero, y, type,
                          static_cast<int>(n), compute, CUBLAS_GEMM_DEFAULT));
}

/// dX (batch x K) = dY (batch x N) . W^T: column-major dX^T = op_T(W^T) . dY^T.
template <class T>
void cublas_backward_input(const T* dy, const T* w, T* dx, std::uint64_t k, std::uint64_t n) {
  const float one = 1.0f;
  const float zero = 0.0f;
  CUBLAS_TRY(cublasGemmEx(cublas(), CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(k),
                          static_cast<int>(batch), static_cast<int>(n), &one, w, CUDA_R_16BF,
                          static_cast<int>(n), dy, CUDA_R_16BF, static_cast<int>(n), &zero, dx,
                          CUDA_R_16BF, static_cast<int>(k), CUBLAS_COMPUTE_32F,
                          CUBLAS_GEMM_DEFAULT));
}

/// dW (K x N, fp32) = X^T . dY: column-major dW^T = dY^T . X.
template <class T>
void cublas_backward_weight(const T* x, const T* dy, float* dw, std::uint64_t k, std::uint64_t n) {
  const float one = 1.0f;
  const float zero = 0.0f;
  CUBLAS_TRY(cublasGemmEx(cublas(), CUBLAS_OP_N, CUBLAS_OP_T, static_cast<int>(n),
                          static_cast<int>(k), static_cast<int>(batch), &one, dy, CUDA_R_16BF,
                          static_cast<int>(n), x, CUDA_R_16BF, static_cast<int>(k), &zero, dw,
                          CUDA_R_32F, static_cast<int>(n), CUBLAS_COMPUTE_32F,
                          CUBLAS_GEMM_DEFAULT));
}

/// dM_ref += fold(dW): the reference gradient of M from cuBLAS's dense dW.
__global__ void fold_dense_gradient(roast::mapping map, const float* dw, float* dm) {
  const std::uint64_t total = map.rows() * map.cols();
  for (std::uint64_t i = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; i < total;
       i += std::uint64_t{gridDim.x} * blockDim.x) {
    const std::uint64_t k = i / map.cols();
    const std::uint64_t n = i % map.cols();
    atomicAdd(dm + map.element_offset(k, n), map.element_factor(k, n) * dw[i]);
  }
}

template <class T>
std::vector<float> host_copy(const core::device_buffer<T>& b) {
  std::vector<T> h(b.size());
  b.copy_to(std::span<T>{h}, nullptr);
  SQUEEZE_CUDA_TRY(cudaDeviceSynchronize());
  std::vector<float> out(h.size());
  for (std::size_t i = 0; i < h.size(); ++i) out[i] = roast::detail::to_float(h[i]);
  return out;
}

/// Largest |a - b| over the largest |b|, both on the device; infinity when a value of
/// either is not finite or b is all zero (std::max would skip a NaN and pass the check).
template <class A, class B>
double relative_difference(const core::device_buffer<A>& a, const core::device_buffer<B>& b) {
  const auto x = host_copy(a);
  const auto y = host_copy(b);
  double diff = 0;
  double scale = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (!std::isfinite(x[i]) || !std::isfinite(y[i])) return HUGE_VAL;
    diff = std::max(diff, static_cast<double>(std::fabs(x[i] - y[i])));
    scale = std::max(scale, static_cast<double>(std::fabs(y[i])));
  }
  return scale > 0 ? diff / scale : HUGE_VAL;
}

void require_close(double relative, double limit, const std::string& what) {
  if (!(relative <= limit)) {
    std::fprintf(stderr, "MISMATCH %s: max difference %.3g of the largest value (limit %.3g)\n",
                 what.c_str(), relative, limit);
    std::exit(3);
  }
}

/// The tour: forward (TF32, bf16), dX and one layer's training step (bf16) at 8192, each
/// against cuBLAS on the same W, after a cross-check of ROAST's Y against cuBLAS's.
inline void tour_section(report_table& table, const tour_context& context) {
  if (!context.has_gpu()) {
    table.add_note("roast: no GPU, nothing to run (the mapping is covered by the host tests)");
    return;
  }
  constexpr std::uint64_t d = 8192;
  const core::timing_options timing{.warmup = 3, .repeats = 15};
  // Device time per call, from graph replays (timing_stream()).
  const auto per_call = [&](auto&& work) {
    return core::time_graph(timing_stream(), timing, 20, work).median_ms;
  };
  const auto add = [&](const std::string& what, double t, double t_base, double max_ratio) {
    comparison c;
    c.family = "roast";
    c.measurement = what;
    c.value = 1.0 / t;
    c.baseline = 1.0 / t_base;
    c.unit = "1/ms";
    c.min_ratio = 1.0 / max_ratio;
    table.add(c);
  };
  const auto forward = [&]<class T>(const char* type) {
    core::device_buffer<T> x{batch * d}, y{batch * d}, y_dense{batch * d}, w{d * d};
    const std::uint64_t values = 4000000 / sizeof(T);
    core::device_buffer<T> memory{values};
    fill(x, 3, 1.0f);
    fill(memory, 5, 1.0f);
    const roast::mapping map{roast::module_desc{d, d, tile, roast::gms_scale(1.0, d), 17}, values,
                             sizeof(T)};
    materialize_kernel<<<2048, 256>>>(map, memory.data(), w.data());
    SQUEEZE_CHECK_LAUNCH();
    const cudaStream_t s = timing_stream();
    const auto run = [&] {
      roast::forward(x.data(), d, memory.data(), map, batch, y.data(), d, s);
    };
    const auto dense = [&] { cublas_forward(x.data(), w.data(), y_dense.data(), d, d); };
    run();
    dense();
    const double diff = relative_difference(y, y_dense);
    if (!(diff <= (std::is_same_v<T, float> ? 5e-3 : 2e-2))) {
      throw verification_error{std::string{"roast forward "} + type + " differs from cuBLAS by " +
                               std::to_string(diff)};
    }
    add(std::string{"forward 512x8192x8192 "} + type + " vs cuBLAS (time ratio <= 1.10)",
        per_call(run), per_call(dense), 1.10);
    if constexpr (!std::is_same_v<T, float>) {
      core::device_buffer<T> dy{batch * d}, dx{batch * d}, dx_dense{batch * d};
      core::device_buffer<float> dw{d * d}, dm{values};
      fill(dy, 7, 1.0f);
      dm.fill_bytes(0, nullptr);
      const auto dx_run = [&] {
        roast::backward_input(dy.data(), d, memory.data(), map, batch, dx.data(), d, s);
      };
      const auto dx_base = [&] {
        cublas_backward_input(dy.data(), w.data(), dx_dense.data(), d, d);
      };
      dx_run();
      dx_base();
      const double dx_diff = relative_difference(dx, dx_dense);
      if (!(dx_diff <= 2e-2)) {
        throw verification_error{"roast dX differs from cuBLAS by " + std::to_string(dx_diff)};
      }
      add("dX 512x8192x8192 bf16 vs cuBLAS (<= 1.2)", per_call(dx_run), per_call(dx_base), 1.2);
      add("training step (fwd + dX + dM) bf16 vs cuBLAS fwd + dX + dW (<= 1.3)", per_call([&] {
            run();
            dx_run();
            roast::backward_memory(x.data(), d, dy.data(), d, map, batch, dm.data(), s);
          }),
          per_call([&] {
            dense();
            dx_base();
            cublas_backward_weight(x.data(), dy.data(), dw.data(), d, d);
          }),
          1.3);
    }
  };
  forward.template operator()<float>("tf32");
  forward.template operator()<__nv_bfloat16>("bf16");
  table.add_note(
      "roast: batch 512, K = N = 8192, |M| = 4 MB, tile 64x256; baseline cuBLAS on the "
      "materialized W, same precision");
}

}  // namespace squeeze::bench::roast_study
