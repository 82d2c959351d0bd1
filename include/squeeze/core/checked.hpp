// SPDX-License-Identifier: Apache-2.0
// squeeze/core/checked.hpp: size arithmetic on numbers that come from outside (file
// headers, message fields): a result that does not fit is reported, never wrapped.
//
//   const auto bytes = core::checked_mul<std::uint64_t>(rows, row_bytes);
//   if (!bytes || *bytes > file_bytes) throw format_error{"..."};
//
// Host code (constexpr, no builtins): the readers and validators of outside data run on the
// host. (std::optional's members are host functions, so these are not __device__.)
#pragma once

#include <concepts>
#include <limits>
#include <optional>

namespace squeeze::core {

/// a + b, or nothing when it does not fit in T.
template <std::integral T>
[[nodiscard]] constexpr std::optional<T> checked_add(T a, T b) noexcept {
  if constexpr (std::is_unsigned_v<T>) {
    if (a > std::numeric_limits<T>::max() - b) return std::nullopt;
  } else {
    if ((b > 0 && a > std::numeric_limits<T>::max() - b) ||
        (b < 0 && a < std::numeric_limits<T>::min() - b)) {
      return std::nullopt;
    }
  }
  return static_cast<T>(a + b);
}

/// a * b, or nothing when it does not fit in T.
template <std::integral T>
[[nodiscard]] constexpr std::optional<T> checked_mul(T a, T b) noexcept {
  if (a == 0 || b == 0) return T{0};
  if constexpr (std::is_unsigned_v<T>) {
    if (a > std::numeric_limits<T>::max() / b) return std::nullopt;
  } else {
    constexpr T hi = std::numeric_limits<T>::max(), lo = std::numeric_limits<T>::min();
    const bool fits = a > 0 ? (b > 0 ? a <= hi / b : b >= lo / a)
                            : (b > 0 ? a >= lo / b : a >= hi / b);
    if (!fits) return std::nullopt;
  }
  return static_cast<T>(a * b);
}

/// The product of all `factors`, or nothing when a partial product does not fit in T.
template <std::integral T, std::convertible_to<T>... U>
[[nodiscard]] constexpr std::optional<T> checked_product(T first, U... rest) noexcept {
  std::optional<T> p{first};
  ((p = p ? checked_mul<T>(*p, static_cast<T>(rest)) : std::nullopt), ...);
  return p;
}

}  // namespace squeeze::core
