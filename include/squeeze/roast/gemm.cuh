// SPDX-License-Identifier: Apache-2.0
// squeeze/roast/gemm.cuh: ROAST-MM, the GEMM whose weight matrix is read through the hash.
//
//   forward          Y[batch x N]  = X[batch x K] . W            (W = the module's view of M)
//   backward_input   dX[batch x K] = dY[batch x N] . W^T
//   backward_memory  dM[h(tile) + o] += scale * g * (X^T . dY)[tile element]   (fp32 dM)
//
// Operands are fp32 (TF32 tensor cores, or exact fp32 with `math::exact`), bf16 or fp16,
// always accumulated in fp32. Any batch, K and N, tails included.
//
// On Hopper (the device pass built for sm_90a) all three run on tensor cores (wgmma) fed by
// TMA and bulk copies from a warp-specialized producer (detail/hopper_gemm.cuh); M stores
// each hashed tile in the order wgmma reads it (mapping.hpp), so a hashed tile costs what a
// dense one does. TF32 wgmma cannot read tiles transposed, so fp32 dX and dM take the
// portable kernel, as does everything on other GPUs, `math::exact`, misaligned operands and
// sign hashes on tiles narrower than 64 (detail/simt_gemm.cuh). The block shape is a launch
// choice; the mapping never depends on it. Each entry point takes the tensor-core kernel's
// tuning as its first template argument, a hopper_gemm_policy (gemm_policy.hpp):
// roast::forward<roast::hopper_gemm_policy_n<128>>(...) fixes the block width, for example.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "squeeze/core/bits.hpp"
#include "squeeze/core/config.hpp"
#include "squeeze/core/cuda_error.hpp"
#include "squeeze/core/error.hpp"
#include "squeeze/roast/detail/hopper_gemm.cuh"
#include "squeeze/roast/detail/operand.cuh"
#include "squeeze/roast/detail/simt_gemm.cuh"
#include "squeeze/roast/fold.cuh"
#include "squeeze/roast/gemm_policy.hpp"
#include "squeeze/roast/mapping.hpp"

namespace squeeze::roast {

/// How fp32 operands are multiplied. 16-bit operands always use tensor cores.
enum class math {
  tensor_cores,  ///< TF32 tensor cores for fp32 (like cuBLAS's FAST_TF32), fp32 accumulate
  exact,         ///< fp32 FMA throughout
};

/// Run-time options of ROAST-MM's entry points (the tensor-core kernel's tuning is a policy,
/// gemm_policy.hpp).
struct gemm_options {
  math mode = math::tensor_cores;  ///< how fp32 operands are multiplied
  /// backward_memory: when set (built once for this module, fold.cuh), dM is added in a
  /// fixed order through the fold's workspace, so repeated runs give identical bits.
  gradient_fold* fold = nullptr;
};

namespace detail {

/// What every entry point checks about the module and the call.
inline void check_call(const mapping& map, std::size_t element_bytes, std::uint64_t batch,
                       const char* what) {
  SQUEEZE_EXPECTS(batch < (std::uint64_t{1} << 31),
                  std::string(what) + ": batch must be below 2^31");
  SQUEEZE_EXPECTS(map.rows() > 0, std::string(what) + ": the mapping is empty");
  SQUEEZE_EXPECTS(map.element_bytes() == element_bytes,
                  std::string(what) + ": the mapping was built for " +
                      std::to_string(map.element_bytes()) + "-byte elements but the operands are " +
                      std::to_string(element_bytes) + "-byte ones (the in-tile order differs)");
  SQUEEZE_EXPECTS(map.rows() < (std::uint64_t{1} << 31) && map.cols() < (std::uint64_t{1} << 31),
                  std::string(what) + ": K and N must be below 2^31");
}

/// M itself, for the passes that read it.
inline void check_memory(const void* memory, const char* what) {
  SQUEEZE_EXPECTS(memory != nullptr, std::string(what) + ": M is null");
  SQUEEZE_EXPECTS(core::misalignment(memory, 16) == 0,
                  std::string(what) + ": M must be 16-byte aligned");
}

}  // namespace detail

/// Y[batch x N] = X[batch x K] . W, W = the module `map` over M (`memory`, |M| elements of
/// T, in the mapping's layout). X rows are `ldx` elements apart, Y rows `ldy`. Out is float
/// or T. Asynchronous on `stream`.
template <hopper_gemm_tuning Policy = hopper_gemm_policy, operand T, class Out>
void forward(const T* x, std::uint64_t ldx, const T* memory, const mapping& map,
             std::uint64_t batch, Out* y, std::uint64_t ldy, cudaStream_t stream,
             const gemm_options& options = {}) {
  static_assert(std::is_same_v<Out, float> || std::is_same_v<Out, T>,
                "roast::forward: Y is float or the operand type");
  detail::check_call(map, sizeof(T), batch, "roast::forward");
  detail::check_memory(memory, "roast::forward");
  SQUEEZE_EXPECTS(ldx >= map.rows() && ldy >= map.cols(),
                  "roast::forward: ldx must be >= K and ldy >= N");
  if (batch == 0) return;
  SQUEEZE_EXPECTS(x != nullptr && y != nullptr, "roast::forward: X and Y must not be null");
  const bool tensor_cores = !std::is_same_v<T, float> || options.mode == math::tensor_cores;
  const bool signs_fit = !map.signs() || map.tile().n % 64 == 0;
  if (tensor_cores && signs_fit && detail::aligned16(x, ldx) && detail::wgmma_built()) {
    const auto b32 = static_cast<std::uint32_t>(batch);
    const detail::gemm_args<T, Out> args{memory,
                                         map,
                                         y,
                                         ldy,
                                         b32,
                                         static_cast<std::uint32_t>(map.cols()),
                                         static_cast<std::uint32_t>(map.rows())};
    detail::dispatch_hopper_gemm<Policy, T, Out, detail::pass::forward>({x, ldx, batch, map.rows()},
                                                                        {}, args, stream);
    return;
  }
  detail::launch_simt(detail::simt_forward<T, Out>{x, ldx, memory, map, y, ldy, batch}, stream);
}

/// dX[batch x K] = dY[batch x N] . W^T. Tensor cores for bf16 and fp16 (TF32 wgmma cannot
/// read W's tiles transposed: fp32 takes the portable kernel, which is exact, so no option
/// applies to dX today: `options` is taken for a signature like the other two passes').
template <hopper_gemm_tuning Policy = hopper_gemm_policy, operand T, class Out>
void backward_input(const T* dy, std::uint64_t lddy, const T* memory, const mapping& map,
                    std::uint64_t batch, Out* dx, std::uint64_t lddx, cudaStream_t stream,
                    [[maybe_unused]] const gemm_options& options = {}) {
  static_assert(std::is_same_v<Out, float> || std::is_same_v<Out, T>,
                "roast::backward_input: dX is float or the operand type");
  detail::check_call(map, sizeof(T), batch, "roast::backward_input");
  detail::check_memory(memory, "roast::backward_input");
  SQUEEZE_EXPECTS(lddy >= map.cols() && lddx >= map.rows(),
                  "roast::backward_input: lddy must be >= N and lddx >= K");
  if (batch == 0) return;
  SQUEEZE_EXPECTS(dy != nullptr && dx != nullptr,
                  "roast::backward_input: dY and dX must not be null");
  if constexpr (!std::is_same_v<T, float>) {
    // A stage reads 64 rows (n) of one tile: tiles as wide as a multiple of 64.
    if (map.tile().n % 64 == 0 && detail::aligned16(dy, lddy) && detail::wgmma_built()) {
      const detail::gemm_args<T, Out> args{memory,
                                           map,
                                           dx,
                                           lddx,
                                           static_cast<std::uint32_t>(batch),
                                           static_cast<std::uint32_t>(map.rows()),
                                           static_cast<std::uint32_t>(map.cols())};
      detail::dispatch_hopper_gemm<Policy, T, Out, detail::pass::input>(
          {dy, lddy, batch, map.cols()}, {}, args, stream);
      return;
    }
  }
  detail::launch_simt(detail::simt_backward_input<T, Out>{dy, lddy, memory, map, dx, lddx, batch},
                      stream);
}

/// dM += fold(scale * g * (X^T . dY)): the gradient of M (fp32, |M| values, same indices as
/// M) from this module. Accumulates: zero dM once per step, then call once per module.
/// Default: each tile is summed over the batch in fp32, then added to dM with 16-byte
/// atomics (no update lost; the order, and so the last bits, vary between runs; no memory
/// beyond dM). With `options.fold` (a gradient_fold built once for this module) the tiles'
/// sums are stored to the fold's workspace a strip at a time and one warp per 128-byte row
/// of M adds them in a fixed order: runs give identical bits, and at large K x N it is
/// faster than the atomics, whose throughput in L2 limits them.
/// Tensor cores for bf16 and fp16.
template <hopper_gemm_tuning Policy = hopper_gemm_policy, operand T>
void backward_memory(const T* x, std::uint64_t ldx, const T* dy, std::uint64_t lddy,
                     const mapping& map, std::uint64_t batch, float* dmemory, cudaStream_t stream,
                     const gemm_options& options = {}) {
  detail::check_call(map, sizeof(T), batch, "roast::backward_memory");
  SQUEEZE_EXPECTS(ldx >= map.rows() && lddy >= map.cols(),
                  "roast::backward_memory: ldx must be >= K and lddy >= N");
  SQUEEZE_EXPECTS(dmemory != nullptr, "roast::backward_memory: dM must not be null");
  SQUEEZE_EXPECTS(options.fold == nullptr || options.fold->map() == map,
                  "roast::backward_memory: options.fold was built for another mapping");
  if (batch == 0) return;
  SQUEEZE_EXPECTS(x != nullptr && dy != nullptr,
                  "roast::backward_memory: X and dY must not be null");
  // Without a fold: all of dW^T in one pass with atomics. With one: strip by strip, each
  // stored to the workspace and folded before the next.
  gradient_fold* fold = options.fold;
  const std::uint64_t strips = fold != nullptr ? fold->strips() : 1;
  const bool hopper = [&] {
    if constexpr (std::is_same_v<T, float>) {
      return false;
    } else {
      return detail::aligned16(x, ldx) && detail::aligned16(dy, lddy) &&
             core::misalignment(dmemory, 16) == 0 && detail::wgmma_built();
    }
  }();
  for (std::uint64_t i = 0; i < strips; ++i) {
    const gradient_fold::strip part =
        fold != nullptr ? fold->strip_at(i) : gradient_fold::strip{0, map.rows(), 0};
    float* workspace = fold != nullptr ? fold->workspace() : nullptr;
    if (hopper) {
      if constexpr (!std::is_same_v<T, float>) {
        const detail::gemm_args<T, float> args{nullptr,
                                               map,
                                               dmemory,
                                               0,
                                               static_cast<std::uint32_t>(map.cols()),
                                               static_cast<std::uint32_t>(part.k_end),
                                               static_cast<std::uint32_t>(batch),
                                               workspace,
                                               part.workspace_base,
                                               static_cast<std::uint32_t>(part.k_begin)};
        detail::dispatch_hopper_gemm<Policy, T, float, detail::pass::memory>(
            {dy, lddy, batch, map.cols()}, {x, ldx, batch, map.rows()}, args, stream);
      }
    } else {
      detail::launch_simt(
          detail::simt_backward_memory<T>{x, ldx, dy, lddy, map, dmemory, batch, part.k_begin,
                                          part.k_end, workspace, part.workspace_base},
          stream);
    }
    if (fold != nullptr) fold->fold_strip(i, dmemory, stream);
  }
}

}  // namespace squeeze::roast
