// SPDX-License-Identifier: Apache-2.0
// squeeze/xfer/bounds.hpp: the arithmetic of aligned reads, host+device.
//
//   segment_bytes   the aligned read unit (a coalesced transaction, a PCIe read request)
//   granule_bytes   what one lane loads at a time
//   bounded_length  how far a bounded read goes
//   window_bytes    the shared memory an asynchronous load of n bytes may occupy
#pragma once

#include <cstddef>
#include <cstdint>

#include "squeeze/core/bits.hpp"
#include "squeeze/core/config.hpp"

namespace squeeze::xfer {

/// The aligned read unit: a warp load instruction covers whole segments of this size.
inline constexpr std::size_t segment_bytes = 128;
/// What one lane loads at a time.
inline constexpr std::size_t granule_bytes = 16;

/// Where a read may go. A copy of [src, src + n) reads exactly those bytes by default;
/// given a wider readable range (the whole table a row comes from, the whole buffer a
/// stream lies in), it also reads the rest of the 16-byte granules at its edges when they
/// lie inside that range, which saves a warp instruction and its memory requests per
/// misaligned edge. Bytes outside [src, src + n) are never written.
struct readable_range {
  std::uintptr_t begin = 0;  ///< the first readable address
  std::uintptr_t end = 0;    ///< one past the last

  /// The range [p, p + bytes).
  SQUEEZE_HOST_DEVICE static readable_range of(const void* p, std::size_t bytes) noexcept {
    const auto b = reinterpret_cast<std::uintptr_t>(p);
    return {b, b + bytes};
  }
  /// Whether the 16-byte granule at address g lies wholly inside the range.
  SQUEEZE_HOST_DEVICE constexpr bool holds_granule(std::uintptr_t g) const noexcept {
    return g >= begin && g + granule_bytes <= end;
  }
};

/// Bytes a bounded read from address `src` covers: at least `lower` (when lower <= upper),
/// at most `upper`, and as many more as reach the next segment boundary of the source,
/// so that the next read, from src + result, starts segment-aligned.
SQUEEZE_HOST_DEVICE constexpr std::size_t bounded_length(std::uintptr_t src, std::size_t lower,
                                                         std::size_t upper) noexcept {
  const std::size_t to_boundary = core::align_up<std::uintptr_t>(src + lower, segment_bytes) - src;
  return to_boundary < upper ? to_boundary : upper;
}
/// bounded_length of the address src.
SQUEEZE_HOST_DEVICE std::size_t bounded_length(const void* src, std::size_t lower,
                                               std::size_t upper) noexcept {
  return bounded_length(reinterpret_cast<std::uintptr_t>(src), lower, upper);
}

/// Shared-memory bytes an asynchronous load of n bytes may occupy, whatever the source
/// alignment: the range lands at offset src mod 16, so n + 15 rounded up to 16.
SQUEEZE_HOST_DEVICE constexpr std::size_t window_bytes(std::size_t n) noexcept {
  return core::align_up<std::size_t>(n + granule_bytes - 1, granule_bytes);
}

/// Number of 16-byte granules that hold a byte of a range of n bytes starting at src.
SQUEEZE_HOST_DEVICE constexpr std::size_t granules_touched(std::uintptr_t src,
                                                           std::size_t n) noexcept {
  return n == 0 ? 0 : (src % granule_bytes + n + granule_bytes - 1) / granule_bytes;
}

}  // namespace squeeze::xfer
