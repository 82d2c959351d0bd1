// SPDX-License-Identifier: Apache-2.0
// squeeze/core/bits.hpp: bit utilities for host and device.
//
// Each function compiles to the hardware intrinsic on the GPU (__popc, __clz, __ffs,
// __funnelshift_r, BFE), to a compiler builtin on the host, and to portable code during
// constant evaluation, so formats built on them are tested on the host and on the GPU
// with the same source.
//
// Bit fields in a word array are LSB-first (little-endian, as the GPU loads them):
//
//   words:     |  word 0 (bits 0..31)  |  word 1 (bits 32..63) | ...
//   field at bit_offset = 28, width = 8:
//              bit 28..31 of word 0 hold field bits 0..3,
//              bit  0..3  of word 1 hold field bits 4..7   (the field straddles the words)
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "squeeze/core/config.hpp"

namespace squeeze::core {

template <class T>
concept bit_word = std::is_same_v<T, std::uint32_t> || std::is_same_v<T, std::uint64_t>;

/// Reinterprets the bits of `from` as a `To` of the same size.
template <class To, class From>
requires(sizeof(To) == sizeof(From) && std::is_trivially_copyable_v<To> &&
         std::is_trivially_copyable_v<From>) SQUEEZE_HOST_DEVICE constexpr To
    bit_cast(const From& from) noexcept {
  return __builtin_bit_cast(To, from);
}

/// Number of bits in a word type.
template <bit_word W>
inline constexpr unsigned word_bits = std::numeric_limits<W>::digits;

/// A word whose low `width` bits are set; width in [0, word_bits<W>].
template <bit_word W>
SQUEEZE_HOST_DEVICE constexpr W low_mask(unsigned width) noexcept {
  return width >= word_bits<W> ? ~W{0} : (W{1} << width) - W{1};
}

/// Number of set bits.
template <bit_word W>
SQUEEZE_HOST_DEVICE constexpr int popcount(W x) noexcept {
  if (!__builtin_is_constant_evaluated()) {
#if SQUEEZE_DEVICE_PASS
    if constexpr (sizeof(W) == 4)
      return __popc(x);
    else
      return __popcll(x);
#else
    if constexpr (sizeof(W) == 4)
      return __builtin_popcount(x);
    else
      return __builtin_popcountll(x);
#endif
  }
  int n = 0;
  for (; x != 0; x &= x - 1) ++n;
  return n;
}

/// Number of zero bits above the highest set bit; word_bits<W> for x == 0.
template <bit_word W>
SQUEEZE_HOST_DEVICE constexpr int countl_zero(W x) noexcept {
  if (!__builtin_is_constant_evaluated()) {
#if SQUEEZE_DEVICE_PASS
    if constexpr (sizeof(W) == 4)
      return __clz(x);
    else
      return __clzll(x);
#else
    if (x == 0) return word_bits<W>;
    if constexpr (sizeof(W) == 4)
      return __builtin_clz(x);
    else
      return __builtin_clzll(x);
#endif
  }
  int n = 0;
  for (W probe = W{1} << (word_bits<W> - 1); probe != 0 && (x & probe) == 0; probe >>= 1) ++n;
  return n;
}

/// Number of zero bits below the lowest set bit; word_bits<W> for x == 0.
template <bit_word W>
SQUEEZE_HOST_DEVICE constexpr int countr_zero(W x) noexcept {
  if (x == 0) return word_bits<W>;
  if (!__builtin_is_constant_evaluated()) {
#if SQUEEZE_DEVICE_PASS
    if constexpr (sizeof(W) == 4)
      return __ffs(static_cast<int>(x)) - 1;
    else
      return __ffsll(static_cast<long long>(x)) - 1;
#else
    if constexpr (sizeof(W) == 4)
      return __builtin_ctz(x);
    else
      return __builtin_ctzll(x);
#endif
  }
  int n = 0;
  for (; (x & W{1}) == 0; x >>= 1) ++n;
  return n;
}

/// Bits [shift, shift + 32) of the 64-bit value hi:lo; shift in [0, 32].
SQUEEZE_HOST_DEVICE constexpr std::uint32_t funnel_shift_right(std::uint32_t lo, std::uint32_t hi,
                                                               unsigned shift) noexcept {
#if SQUEEZE_DEVICE_PASS
  if (!__builtin_is_constant_evaluated()) return __funnelshift_rc(lo, hi, shift);
#endif
  const std::uint64_t both = (std::uint64_t{hi} << 32) | lo;
  return static_cast<std::uint32_t>(shift >= 32 ? hi : both >> shift);
}

/// Bits [pos, pos + width) of x, right-aligned; pos + width <= word_bits<W>.
template <bit_word W>
SQUEEZE_HOST_DEVICE constexpr W bit_field(W x, unsigned pos, unsigned width) noexcept {
  return pos >= word_bits<W> ? W{0} : (x >> pos) & low_mask<W>(width);
}

/// x with bits [pos, pos + width) replaced by the low `width` bits of value.
template <bit_word W>
SQUEEZE_HOST_DEVICE constexpr W insert_field(W x, W value, unsigned pos, unsigned width) noexcept {
  if (pos >= word_bits<W> || width == 0) return x;
  const W mask = low_mask<W>(width) << pos;
  return (x & ~mask) | ((value << pos) & mask);
}

/// Reads the `width`-bit field starting at bit `bit_offset` of the LSB-first word
/// array `words` (width in [0, word_bits<W>]). Touches only the words that hold the
/// field: one word, or two when it straddles a boundary.
template <bit_word W>
SQUEEZE_HOST_DEVICE constexpr W extract_bits(const W* words, std::uint64_t bit_offset,
                                             unsigned width) noexcept {
  if (width == 0) return W{0};
  constexpr unsigned bits = word_bits<W>;
  const std::uint64_t index = bit_offset / bits;
  const unsigned shift = static_cast<unsigned>(bit_offset % bits);
  W value = words[index] >> shift;
  if (shift + width > bits) value |= words[index + 1] << (bits - shift);
  return value & low_mask<W>(width);
}

/// Writes the low `width` bits of `value` into bits [bit_offset, bit_offset + width)
/// of `words`, leaving every other bit unchanged. Not atomic: callers that share a
/// word between threads combine their fields first.
template <bit_word W>
SQUEEZE_HOST_DEVICE constexpr void deposit_bits(W* words, std::uint64_t bit_offset, unsigned width,
                                                W value) noexcept {
  if (width == 0) return;
  constexpr unsigned bits = word_bits<W>;
  const std::uint64_t index = bit_offset / bits;
  const unsigned shift = static_cast<unsigned>(bit_offset % bits);
  const W field = value & low_mask<W>(width);
  const W low_part_mask = low_mask<W>(width) << shift;
  words[index] = (words[index] & ~low_part_mask) | (field << shift);
  if (shift + width > bits) {
    const unsigned spill = shift + width - bits;  // bits that land in the next word
    const W high_mask = low_mask<W>(spill);
    words[index + 1] = (words[index + 1] & ~high_mask) | (field >> (bits - shift));
  }
}

/// The bits of x at the positions set in `mask`, packed into the low bits in order of
/// position (BMI2's pext). Loops once per set bit of the mask.
SQUEEZE_HOST_DEVICE constexpr std::uint64_t pext(std::uint64_t x, std::uint64_t mask) noexcept {
  std::uint64_t out = 0;
  for (std::uint64_t bit = 1; mask != 0; mask &= mask - 1, bit <<= 1) {
    if ((x & mask & (~mask + 1)) != 0) out |= bit;
  }
  return out;
}

/// The low bits of x placed, in order, at the positions set in `mask` (BMI2's pdep).
SQUEEZE_HOST_DEVICE constexpr std::uint64_t pdep(std::uint64_t x, std::uint64_t mask) noexcept {
  std::uint64_t out = 0;
  for (std::uint64_t bit = 1; mask != 0; mask &= mask - 1, bit <<= 1) {
    if ((x & bit) != 0) out |= mask & (~mask + 1);
  }
  return out;
}

/// Reads the `width`-bit field (width in [0, 64]) starting at bit `bit_offset` of the
/// LSB-first byte array `bytes`. Touches only the bytes that hold the field.
SQUEEZE_HOST_DEVICE constexpr std::uint64_t read_bits(const std::byte* bytes,
                                                      std::uint64_t bit_offset,
                                                      unsigned width) noexcept {
  std::uint64_t value = 0;
  unsigned done = 0;
  while (done < width) {
    const std::uint64_t at = bit_offset + done;
    const unsigned shift = static_cast<unsigned>(at % 8);
    const unsigned take = (8 - shift) < (width - done) ? (8 - shift) : (width - done);
    const auto byte = static_cast<std::uint64_t>(bytes[at / 8]);
    value |= ((byte >> shift) & low_mask<std::uint64_t>(take)) << done;
    done += take;
  }
  return value;
}

/// Writes the low `width` bits (width in [0, 64]) of `value` at bit `bit_offset` of the
/// LSB-first byte array `bytes`, leaving every other bit unchanged. Touches only the
/// bytes that hold the field.
SQUEEZE_HOST_DEVICE constexpr void write_bits(std::byte* bytes, std::uint64_t bit_offset,
                                              unsigned width, std::uint64_t value) noexcept {
  unsigned done = 0;
  while (done < width) {
    const std::uint64_t at = bit_offset + done;
    const unsigned shift = static_cast<unsigned>(at % 8);
    const unsigned take = (8 - shift) < (width - done) ? (8 - shift) : (width - done);
    const auto field_mask = static_cast<unsigned>(low_mask<std::uint64_t>(take) << shift);
    const auto field =
        static_cast<unsigned>(((value >> done) & low_mask<std::uint64_t>(take)) << shift);
    auto& byte = bytes[at / 8];
    byte = static_cast<std::byte>((static_cast<unsigned>(byte) & ~field_mask) | field);
    done += take;
  }
}

// ---- integer and pointer alignment -------------------------------------------------

/// Whether x is a power of two (0 is not).
template <class T>
requires std::is_unsigned_v<T> SQUEEZE_HOST_DEVICE constexpr bool is_pow2(T x) noexcept {
  return x != 0 && (x & (x - 1)) == 0;
}

/// ceil(a / b) for b > 0.
template <class T>
requires std::is_integral_v<T> SQUEEZE_HOST_DEVICE constexpr T div_ceil(T a, T b) noexcept {
  return (a + b - 1) / b;
}

/// Largest multiple of `alignment` (a power of two) not above x.
template <class T>
requires std::is_unsigned_v<T> SQUEEZE_HOST_DEVICE constexpr T align_down(T x,
                                                                          T alignment) noexcept {
  return x & ~(alignment - 1);
}

/// Smallest multiple of `alignment` (a power of two) not below x.
template <class T>
requires std::is_unsigned_v<T> SQUEEZE_HOST_DEVICE constexpr T align_up(T x, T alignment) noexcept {
  return (x + alignment - 1) & ~(alignment - 1);
}

/// Offset of `p` past the previous multiple of `alignment` (a power of two).
SQUEEZE_HOST_DEVICE std::size_t misalignment(const void* p, std::size_t alignment) noexcept {
  return reinterpret_cast<std::uintptr_t>(p) & (alignment - 1);
}

}  // namespace squeeze::core
