// SPDX-License-Identifier: Apache-2.0
// squeeze/roast/detail/operand.cuh: the operand types ROAST-MM takes and their conversions.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "squeeze/core/config.hpp"
#include "squeeze/core/wgmma.cuh"

namespace squeeze::roast {
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

}  // namespace detail

/// The element types ROAST's GEMMs take (X, W's memory, dY): float, bf16 and fp16.
template <class T>
concept operand =
    std::is_same_v<T, float> || std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half>;

}  // namespace squeeze::roast
