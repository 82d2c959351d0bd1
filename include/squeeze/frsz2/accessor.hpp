// squeeze/frsz2/accessor.hpp: mdspan-style accessor policies that read a vector stored as
// float64, float32, float16, bfloat16 or FRSZ2 as one arithmetic type, so a solver changes
// its storage by changing one type.
//
//   accessor<Storage, Arithmetic>   (Storage: double, float, __half, __nv_bfloat16, or
//                                    frsz2::format<l, Float, BS>)
//     data_handle_type   plain: Storage*;  FRSZ2: compressed_handle<F> (payload, exponents,
//                        first index)
//     reference          plain: a proxy that converts on read and on assignment;
//                        FRSZ2: Arithmetic (read-only: a value's block must be rewritten
//                        as a whole, see frsz2/compress.cuh)
//     access(p, i)       value i;  offset(p, i): the handle of value i
//
// FRSZ2 access decodes one value from its block's exponent and the one to three payload
// words that hold its code (32-bit index arithmetic inside the block, count-leading-zeros).
// For fp64 values and l <= 32 the double is built from 32-bit integer operations.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "squeeze/core/bits.hpp"
#include "squeeze/core/config.hpp"
#include "squeeze/frsz2/format.hpp"

namespace squeeze::frsz2 {

/// The storage types a plain accessor converts from and to.
template <class T>
concept plain_storage = std::is_same_v<T, double> || std::is_same_v<T, float> ||
    std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>;

/// Any storage an accessor reads: a plain type or an FRSZ2 format.
template <class T>
concept storage = plain_storage<T> || format_like<T>;

/// Where FRSZ2 value `first` of a compressed vector lives; offset() moves `first`.
template <format_like F>
struct compressed_handle {
  const std::uint32_t* payload = nullptr;    ///< [blocks, words_per_block]
  const std::uint16_t* exponents = nullptr;  ///< [blocks]
  std::size_t first = 0;                     ///< index of the value this handle names
};

/// What a storage type is: a name for reports, bytes per value, and the granularity of
/// writes (values per block; 1 for plain types).
template <storage S>
struct storage_traits {
  static constexpr int block_size = 1;
  static constexpr double bits_per_value = 8.0 * sizeof(S);
  static constexpr const char* name() noexcept {
    if constexpr (std::is_same_v<S, double>)
      return "float64";
    else if constexpr (std::is_same_v<S, float>)
      return "float32";
    else if constexpr (std::is_same_v<S, __half>)
      return "float16";
    else
      return "bfloat16";
  }
};
template <int Bits, class Float, int BlockSize>
struct storage_traits<format<Bits, Float, BlockSize>> {
  using F = format<Bits, Float, BlockSize>;
  static constexpr int block_size = BlockSize;
  static constexpr double bits_per_value =
      (32.0 * F::words_per_block + 16.0) / static_cast<double>(BlockSize);
  static constexpr const char* name() noexcept {
    constexpr const char* names[] = {
        "frsz2_0",  "frsz2_1",  "frsz2_2",  "frsz2_3",  "frsz2_4",  "frsz2_5",  "frsz2_6",
        "frsz2_7",  "frsz2_8",  "frsz2_9",  "frsz2_10", "frsz2_11", "frsz2_12", "frsz2_13",
        "frsz2_14", "frsz2_15", "frsz2_16", "frsz2_17", "frsz2_18", "frsz2_19", "frsz2_20",
        "frsz2_21", "frsz2_22", "frsz2_23", "frsz2_24", "frsz2_25", "frsz2_26", "frsz2_27",
        "frsz2_28", "frsz2_29", "frsz2_30", "frsz2_31", "frsz2_32", "frsz2_33", "frsz2_34",
        "frsz2_35", "frsz2_36", "frsz2_37", "frsz2_38", "frsz2_39", "frsz2_40", "frsz2_41",
        "frsz2_42", "frsz2_43", "frsz2_44", "frsz2_45", "frsz2_46", "frsz2_47", "frsz2_48",
        "frsz2_49", "frsz2_50", "frsz2_51", "frsz2_52", "frsz2_53", "frsz2_54", "frsz2_55",
        "frsz2_56", "frsz2_57", "frsz2_58", "frsz2_59", "frsz2_60", "frsz2_61", "frsz2_62",
        "frsz2_63", "frsz2_64"};
    return names[Bits];
  }
};

namespace detail {

template <class To, class From>
SQUEEZE_HOST_DEVICE To convert(From x) noexcept {
  if constexpr (std::is_same_v<From, __half>) {
    return static_cast<To>(__half2float(x));
  } else if constexpr (std::is_same_v<From, __nv_bfloat16>) {
    return static_cast<To>(__bfloat162float(x));
  } else if constexpr (std::is_same_v<To, __half>) {
    if constexpr (std::is_same_v<From, double>)
      return __double2half(x);
    else
      return __float2half_rn(static_cast<float>(x));
  } else if constexpr (std::is_same_v<To, __nv_bfloat16>) {
    if constexpr (std::is_same_v<From, double>)
      return __double2bfloat16(x);
    else
      return __float2bfloat16_rn(static_cast<float>(x));
  } else {
    return static_cast<To>(x);
  }
}

/// A proxy for one stored value: converts to Arithmetic on read, encodes on assignment.
/// Not copyable, so it cannot outlive the expression that made it.
template <plain_storage S, class Arithmetic>
class plain_reference {
 public:
  SQUEEZE_HOST_DEVICE explicit plain_reference(S* p) noexcept : p_{p} {}
  plain_reference(const plain_reference&) = delete;
  plain_reference& operator=(const plain_reference&) = delete;
  SQUEEZE_HOST_DEVICE operator Arithmetic() const noexcept {  // NOLINT: a proxy converts
    return convert<Arithmetic>(*p_);
  }
  SQUEEZE_HOST_DEVICE const plain_reference& operator=(Arithmetic v) const noexcept {
    *p_ = convert<S>(v);
    return *this;
  }

 private:
  S* p_;
};

/// Decodes a code of at most 32 bits of an fp64 format without a branch (so a loop of
/// reads keeps all its loads in flight): q converted to double and scaled by the block's
/// power of two (exact: every decoded value is a double), the sign ORed in (so -0 stays),
/// infinities and NaN selected for nonfinite blocks. Blocks so small that the scale is
/// subnormal are scaled in two exact steps. Bit-identical to decode_value.
template <format_like F>
requires(std::is_same_v<typename F::float_type, double>&& F::bits <= 32) SQUEEZE_HOST_DEVICE
    double decode_code(std::uint32_t code, std::uint16_t w) noexcept {
  const auto eb = static_cast<std::uint32_t>(w & F::exponent_field);
  const std::uint32_t q = code & static_cast<std::uint32_t>(F::q_max);
  const std::uint32_t sign = (code << (32 - F::bits)) & 0x80000000u;
  // value = 2q * 2^(eb - bias - (l - 1)): the scale's biased exponent eb - (l - 1) stays
  // below 2047 even for l = 2 (and 2q < 2^32 converts exactly).
  const bool tiny = eb < static_cast<std::uint32_t>(F::bits);
  const std::uint32_t scale_exponent = eb + (tiny ? 64u : 0u) - (F::bits - 1);
  const double scale = core::bit_cast<double>(std::uint64_t{scale_exponent} << 52);
  const double v = static_cast<double>(q << 1) * scale * (tiny ? 0x1p-64 : 1.0);
  std::uint64_t bits = core::bit_cast<std::uint64_t>(v) | (std::uint64_t{sign} << 32);
  if ((w & F::nonfinite_flag) != 0) {
    if (q == static_cast<std::uint32_t>(F::q_max)) {
      bits = (std::uint64_t{sign} << 32) | 0x7ff0000000000000ull;
    }
    if (q == 0 && sign != 0) bits = 0x7ff8000000000000ull;
  }
  return core::bit_cast<double>(bits);
}

/// Value i of an FRSZ2 vector.
template <format_like F>
SQUEEZE_HOST_DEVICE typename F::float_type access_value(const compressed_handle<F>& p,
                                                        std::size_t i) noexcept {
  const std::size_t index = p.first + i;
  const std::size_t block = index / F::block_size;
  const auto k = static_cast<std::uint32_t>(index % F::block_size);
  const std::uint32_t* words = p.payload + block * F::words_per_block;
  const std::uint16_t w = p.exponents[block];
  if constexpr (std::is_same_v<typename F::float_type, double> && F::bits <= 32) {
    // The code: one word, or two when it straddles (the second clamped into the block so
    // the read never leaves it; its bits are then unused).
    const std::uint32_t bit = k * F::bits;
    const std::uint32_t word = bit >> 5, shift = bit & 31;
    std::uint32_t code;
    // Codes of 8, 16 or 32 bits tile the payload without padding: code i is element i.
    if constexpr (F::bits == 32) {
      code = p.payload[index];
    } else if constexpr (F::bits == 16 && F::block_size % 2 == 0) {
      code = reinterpret_cast<const std::uint16_t*>(p.payload)[index];
    } else if constexpr (F::bits == 8 && F::block_size % 4 == 0) {
      code = reinterpret_cast<const std::uint8_t*>(p.payload)[index];
    } else if constexpr (32 % F::bits == 0) {
      code = (words[word] >> shift) & core::low_mask<std::uint32_t>(F::bits);
    } else {
      const std::uint32_t next = word + 1 < F::words_per_block ? word + 1 : word;
      code = core::funnel_shift_right(words[word], words[next], shift) &
             core::low_mask<std::uint32_t>(F::bits);
    }
    return decode_code<F>(code, w);
  } else {
    return decode_value<F>(read_code<F>(words, k), w);
  }
}

}  // namespace detail

/// The mdspan accessor policy: reads Storage as Arithmetic (and writes, for plain types).
template <storage Storage, class Arithmetic = double>
struct accessor;

template <plain_storage Storage, class Arithmetic>
struct accessor<Storage, Arithmetic> {
  using offset_policy = accessor;
  using element_type = Arithmetic;
  using data_handle_type = Storage*;
  using reference = detail::plain_reference<Storage, Arithmetic>;
  SQUEEZE_HOST_DEVICE reference access(data_handle_type p, std::size_t i) const noexcept {
    return reference{p + i};
  }
  SQUEEZE_HOST_DEVICE data_handle_type offset(data_handle_type p, std::size_t i) const noexcept {
    return p + i;
  }
  /// Value i, converted (no proxy).
  SQUEEZE_HOST_DEVICE Arithmetic load(const Storage* p, std::size_t i) const noexcept {
    return detail::convert<Arithmetic>(p[i]);
  }
};

template <format_like F, class Arithmetic>
struct accessor<F, Arithmetic> {
  using offset_policy = accessor;
  using element_type = const Arithmetic;
  using data_handle_type = compressed_handle<F>;
  using reference = Arithmetic;  // read-only: writes go through whole blocks
  SQUEEZE_HOST_DEVICE reference access(const data_handle_type& p, std::size_t i) const noexcept {
    return static_cast<Arithmetic>(detail::access_value<F>(p, i));
  }
  SQUEEZE_HOST_DEVICE data_handle_type offset(data_handle_type p, std::size_t i) const noexcept {
    p.first += i;
    return p;
  }
  SQUEEZE_HOST_DEVICE Arithmetic load(const data_handle_type& p, std::size_t i) const noexcept {
    return access(p, i);
  }
};

}  // namespace squeeze::frsz2
