// SPDX-License-Identifier: Apache-2.0
// squeeze/core/reduce_op.hpp: the element-wise reductions a collective applies.
//
// Host+device. Shared by coll:: (the collectives) and by codecs that decode straight into a
// reduction (frsz2's and ibp's wire codecs), which must not include coll:: themselves.
#pragma once

#include <cstdint>

#include "squeeze/core/bits.hpp"
#include "squeeze/core/config.hpp"

namespace squeeze::core {

/// Element-wise reduction of two values.
enum class reduce_op : std::uint8_t { sum, min, max };

/// "sum", "min" or "max".
[[nodiscard]] SQUEEZE_HOST_DEVICE constexpr const char* to_string(reduce_op op) noexcept {
  switch (op) {
    case reduce_op::sum: return "sum";
    case reduce_op::min: return "min";
    case reduce_op::max: return "max";
  }
  return "unknown reduce_op";
}

namespace detail {
template <class T>
SQUEEZE_HOST_DEVICE constexpr bool negative_bit(T x) noexcept {
  if constexpr (sizeof(T) == 8) {
    return (core::bit_cast<std::uint64_t>(x) >> 63) != 0;
  } else {
    return (core::bit_cast<std::uint32_t>(x) >> 31) != 0;
  }
}
}  // namespace detail

/// op(a, b) for float or double. min and max return the other operand when one is NaN
/// (fmin/fmax rules) and order -0 below +0, so every op gives the same bits for (a, b) and
/// (b, a) (NaN payloads aside): that keeps the ranks of a collective identical.
template <class T>
[[nodiscard]] SQUEEZE_HOST_DEVICE constexpr T apply(reduce_op op, T a, T b) noexcept {
  if (op == reduce_op::sum) return a + b;
  if (a != a) return b;
  if (b != b) return a;
  if (a == b) {  // equal, or zeros of different signs
    const bool pick_negative = op == reduce_op::min;
    return detail::negative_bit(a) == pick_negative ? a : b;
  }
  return (op == reduce_op::min) == (a < b) ? a : b;
}

}  // namespace squeeze::core
