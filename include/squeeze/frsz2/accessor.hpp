// SPDX-License-Identifier: Apache-2.0
// squeeze/frsz2/accessor.hpp: mdspan-style accessor policies that read a vector stored as
// float64, float32, float16, bfloat16 or FRSZ2 as one arithmetic type, so a solver changes
// its storage by changing one type.
//
//   accessor<Storage, Arithmetic>   (Storage: double, float, __half, __nv_bfloat16, one
//                                    of these const (read-only), or
//                                    frsz2::format<l, Float, BS>)
//     data_handle_type   plain: Storage*;  FRSZ2: compressed_handle<F> (payload, exponents,
//                        first index)
//     reference          plain: a proxy that converts on read and on assignment (assignable
//                        only as a temporary: m[i] = v, m[i] *= a);
//                        const plain and FRSZ2: Arithmetic (read-only; an FRSZ2 value's
//                        block must be rewritten as a whole, see frsz2/compress.cuh)
//     element_type       Arithmetic where writable, else const Arithmetic
//     access(p, i)       value i;  offset(p, i): the handle of value i
//     offset_policy      the accessor itself (with the above: cuda::std::mdspan's
//                        AccessorPolicy, see `accessor` below)
//     load_vector(p, i, v)  values i .. i + 3 into v[4] (a squeeze extension for streaming
//                        reads: one vector load of plain storage or of an FRSZ2 block's
//                        words, the block exponent read once; i + the handle's first index
//                        a multiple of 4); read_vector + decode_vector are its two halves
//
// FRSZ2 access decodes one value from its block's exponent and the one to three payload
// words that hold its code (32-bit index arithmetic inside the block, count-leading-zeros).
// Reads check nothing: on a vector that keeps the rules of frsz2/format.hpp (validate checks
// them on the host) every read equals decode_value bit for bit; on other words the result
// is unspecified (but reads stay inside the blocks that hold the values read).
// For fp64 values and l <= 32 the double is built from 32-bit integer operations.
//
// load_vector decodes fp64 codes of at most 32 bits in about five instructions a value: the
// code is moved to the top of a 32-bit word (sign at bit 31), the word without its sign
// (q << (32 - l)) is converted exactly to double and multiplied by the block's power of
// two 2^(Eb - bias - 30), and the sign is ORed in. Blocks with an infinity or NaN, or with
// Eb < 32 (nonzero values all below 2^-990, where that power of two nears the subnormals;
// the encoder gives a block of zeros Eb = 32), take decode_code instead.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
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
  static constexpr int block_size = 1;                       ///< values written together
  static constexpr double bits_per_value = 8.0 * sizeof(S);  ///< storage bits per value
  /// "float64", "float32", "float16" or "bfloat16".
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
/// An FRSZ2 format: written a block at a time; its 16-bit exponents count in its bits.
template <int Bits, class Float, int BlockSize>
struct storage_traits<format<Bits, Float, BlockSize>> {
  using F = format<Bits, Float, BlockSize>;     ///< the format
  static constexpr int block_size = BlockSize;  ///< values written together (a block)
  /// Storage bits per value, the block's exponent included.
  static constexpr double bits_per_value =
      (32.0 * F::words_per_block + 16.0) / static_cast<double>(BlockSize);
  /// "frsz2_<Bits>".
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
/// Not copyable or movable, and every assignment is &&-qualified (as Ginkgo's accessor
/// references are): only the temporary that access() (or mdspan's operator[]) returns can
/// be assigned to, so a proxy cannot outlive the expression that made it:
///
///   m[i] = v;  m[i] *= a;  m[i] = m[j];   // write through the temporary
///   double v = m[i];  auto&& r = m[i];    // read (r reads; `r = v` does not compile)
///
/// The qualifier is const&&, so a const rvalue assigns too (std::indirectly_writable asks
/// that of a proxy reference). An assignment returns the value now stored, as Arithmetic
/// (a value, never a reference to the proxy).
template <plain_storage S, class Arithmetic>
class plain_reference {
 public:
  SQUEEZE_HOST_DEVICE explicit plain_reference(S* p) noexcept : p_{p} {}
  plain_reference(const plain_reference&) = delete;
  SQUEEZE_HOST_DEVICE operator Arithmetic() const noexcept {  // NOLINT: a proxy converts
    return convert<Arithmetic>(*p_);
  }
  SQUEEZE_HOST_DEVICE Arithmetic operator=(Arithmetic v) const&& noexcept { return store(v); }
  /// m[i] = m[j] (another proxy of the same type: without this overload the copy assignment
  /// would be chosen, and it is the one assignment a proxy must not have).
  SQUEEZE_HOST_DEVICE Arithmetic operator=(const plain_reference& other) const&& noexcept {
    return store(static_cast<Arithmetic>(other));
  }
  SQUEEZE_HOST_DEVICE Arithmetic operator+=(Arithmetic v) const&& noexcept {
    return store(static_cast<Arithmetic>(*this) + v);
  }
  SQUEEZE_HOST_DEVICE Arithmetic operator-=(Arithmetic v) const&& noexcept {
    return store(static_cast<Arithmetic>(*this) - v);
  }
  SQUEEZE_HOST_DEVICE Arithmetic operator*=(Arithmetic v) const&& noexcept {
    return store(static_cast<Arithmetic>(*this) * v);
  }
  SQUEEZE_HOST_DEVICE Arithmetic operator/=(Arithmetic v) const&& noexcept {
    return store(static_cast<Arithmetic>(*this) / v);
  }

 private:
  SQUEEZE_HOST_DEVICE Arithmetic store(Arithmetic v) const noexcept {
    const S s = convert<S>(v);
    *p_ = s;
    return convert<Arithmetic>(s);
  }

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

/// Decodes a code of an fp32 format (codes of at most 32 bits) from a block without
/// infinities or NaN whose Eb is below 255: q converted to double and scaled by the block's
/// power of two (exact), then cut to float toward zero, which is decode_value's truncation
/// of the significand (and of a subnormal's fraction), the sign ORed in (so -0 stays).
/// Bit-identical to decode_value for such blocks; blocks with the nonfinite flag take
/// decode_value.
template <format_like F>
requires(std::is_same_v<typename F::float_type, float>) SQUEEZE_HOST_DEVICE
    float decode_code_finite(std::uint32_t code, std::uint16_t w) noexcept {
  const auto eb = static_cast<std::uint32_t>(w & F::exponent_field);
  const std::uint32_t q = code & static_cast<std::uint32_t>(F::q_max);
  const std::uint32_t sign = (code << (32 - F::bits)) & 0x80000000u;
  // 2^(eb - 127 - (l - 2)) as a double: its biased exponent eb + 896 - (l - 2) lies in
  // [1, 2046] for every eb < 4096 that a float block holds (eb <= 255).
  const double scale = core::bit_cast<double>(std::uint64_t{eb + 896u - (F::bits - 2)} << 52);
  const double v = static_cast<double>(q) * scale;
#if SQUEEZE_DEVICE_PASS
  const float f = __double2float_rz(v);
#else
  // toward zero on the host: the nearest float, stepped back when it rounded up
  float f = static_cast<float>(v);
  if (static_cast<double>(f) > v) f = std::nextafter(f, 0.0f);
#endif
  return core::bit_cast<float>(core::bit_cast<std::uint32_t>(f) | sign);
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

/// `Words` consecutive words at p (aligned to 4 * Words bytes): one vector load on the GPU.
template <int Words>
SQUEEZE_HOST_DEVICE void load_words(const std::uint32_t* p, std::uint32_t (&w)[Words]) noexcept {
#if SQUEEZE_DEVICE_PASS
  if constexpr (Words % 4 == 0) {
    SQUEEZE_UNROLL
    for (int k = 0; k < Words; k += 4) {
      const uint4 v = *reinterpret_cast<const uint4*>(p + k);
      w[k] = v.x, w[k + 1] = v.y, w[k + 2] = v.z, w[k + 3] = v.w;
    }
  } else if constexpr (Words == 2) {
    const uint2 v = *reinterpret_cast<const uint2*>(p);
    w[0] = v.x, w[1] = v.y;
  } else
#endif
  {
    for (int k = 0; k < Words; ++k) w[k] = p[k];
  }
}

/// Whether a block of exponent word w decodes by decode_top: no infinity or NaN, Eb >= 32.
template <format_like F>
SQUEEZE_HOST_DEVICE bool decodes_by_top(std::uint16_t w) noexcept {
  constexpr std::uint32_t tested = F::nonfinite_flag | (F::exponent_field & ~31u);
  return (w & tested) - 1u < F::nonfinite_flag - 1u;  // some bit of Eb >= 32 set, no flag
}

/// 2^(Eb - bias - Drop), exact for a block that decodes by decode_top (Eb >= 32 > Drop):
/// the factor decode_top scales q << (32 - l) by (Drop = 30) and decode_halves scales q by
/// (Drop = l - 2).
template <format_like F, unsigned Drop>
SQUEEZE_HOST_DEVICE double block_scale(std::uint16_t w) noexcept {
  static_assert(Drop < 32, "frsz2::detail::block_scale: Eb >= 32 keeps the scale normal");
  return core::bit_cast<double>(std::uint64_t{(w & F::exponent_field) - Drop} << 52);
}

/// v with bit 31 of s as its sign (v >= 0): the sign ORed in, so a zero keeps its sign.
SQUEEZE_HOST_DEVICE double with_sign(double v, std::uint32_t s) noexcept {
  return core::bit_cast<double>(core::bit_cast<std::uint64_t>(v) |
                                (std::uint64_t{s & 0x80000000u} << 32));
}

/// The value of a code held at the top of a word (sign at bit 31, q in the l - 1 bits below
/// it, zeros under q): q << (32 - l), the word without its sign, converted exactly, times
/// the block's block_scale<F, 30> (exact), with the sign ORed in. Masking the sign off rather than
/// shifting it out lets the compiler fold the mask into the one that cut the code from its
/// word.
SQUEEZE_HOST_DEVICE double decode_top(std::uint32_t top, double scale) noexcept {
  return with_sign(static_cast<double>(top & 0x7fffffffu) * scale, top);
}

/// The 2 N codes of l = 16 bits that N words hold (code 2m in the low half of word m), for a
/// block that decodes by decode_top: one mask clears both signs of a word, each q converts
/// from its half of the word (one I2F.F64.U16 with a half selector) and is scaled by the
/// block's block_scale<F, l - 2>, and the sign is ORed in: 4 instructions a value on sm_90
/// against 4.5 by decode_top (the low code of a word needs no cut of its own).
template <class Arithmetic, int N>
SQUEEZE_HOST_DEVICE void decode_halves(const std::uint32_t (&wd)[N], double scale,
                                       Arithmetic (&out)[2 * N]) noexcept {
  SQUEEZE_UNROLL
  for (int m = 0; m < N; ++m) {
    const std::uint32_t word = wd[m], q = word & 0x7fff7fffu;
    const double lo = static_cast<double>(static_cast<std::uint16_t>(q)) * scale;
    const double hi = static_cast<double>(static_cast<std::uint16_t>(q >> 16)) * scale;
    out[2 * m] = static_cast<Arithmetic>(with_sign(lo, word << 16));
    out[2 * m + 1] = static_cast<Arithmetic>(with_sign(hi, word));
  }
}

/// Whether codes tile the payload without padding, so value i's code is the (i * l / 32)th
/// word's piece and four codes are one aligned load (l = 8, 16, 32).
template <format_like F>
inline constexpr bool codes_tile_words = (F::bits == 8 || F::bits == 16 || F::bits == 32) &&
                                         (F::block_size * F::bits) % 32 == 0;

/// Words a window read of N codes of l bits loads: the codes start r0 < 32 bits into the
/// first word.
template <format_like F, int N = 4>
inline constexpr int window_words = (30 + N * F::bits) / 32 + 1;

/// The N codes of a window (wd[0] holds the first code's start at bit r0), each at the top
/// of a word: the window is shifted down by r0 once, after which code c lies at the fixed
/// bits [c l, c l + l) and comes out with one constant shift and a mask.
template <format_like F, int N = 4>
SQUEEZE_HOST_DEVICE void window_top_codes(const std::uint32_t (&wd)[window_words<F, N>],
                                          std::uint32_t r0, std::uint32_t (&top)[N]) noexcept {
  constexpr int window = window_words<F, N>;
  std::uint32_t sh[window];  // sh[m] = bits [r0 + 32 m, r0 + 32 m + 32) of the window
  SQUEEZE_UNROLL
  for (int m = 0; m + 1 < window; ++m) sh[m] = core::funnel_shift_right(wd[m], wd[m + 1], r0);
  sh[window - 1] = wd[window - 1] >> r0;
  constexpr std::uint32_t keep = ~core::low_mask<std::uint32_t>(32 - F::bits);
  SQUEEZE_UNROLL
  for (int c = 0; c < N; ++c) {
    const int e = F::bits * (c + 1);  // code c ends at bit e: take bits [e - 32, e)
    const int hi = e / 32, shift = e % 32;
    const std::uint32_t lo_word = hi > 0 ? sh[hi > 0 ? hi - 1 : 0] : 0u;
    const std::uint32_t hi_word = shift > 0 ? sh[hi < window ? hi : window - 1] : 0u;
    top[c] = (shift == 0 ? lo_word : core::funnel_shift_right(lo_word, hi_word, shift)) & keep;
  }
}

/// The N codes of an aligned group of N values when codes tile the words (l = 8, 16, 32),
/// from the words that hold them, each at the top of a word.
template <format_like F, int N>
requires codes_tile_words<F> SQUEEZE_HOST_DEVICE void tiled_top_codes(
    const std::uint32_t (&wd)[N * F::bits / 32], std::uint32_t (&top)[N]) noexcept {
  constexpr int per_word = 32 / F::bits;
  SQUEEZE_UNROLL
  for (int c = 0; c < N; ++c) {
    const std::uint32_t word = wd[c / per_word];
    const int at = (c % per_word) * F::bits;  // code c: bits [at, at + l) of its word
    top[c] = (word << (32 - F::bits - at)) & ~core::low_mask<std::uint32_t>(32 - F::bits);
  }
}

/// FRSZ2 formats whose vector reads load codes and decode them in 32-bit pieces: fp64
/// values, codes of at most 32 bits, blocks of a multiple of 4 values.
template <class F>
concept word_decoded_format =
    format_like<F> && std::is_same_v<typename F::float_type, double> && F::bits <= 32 &&
    F::block_size % 4 == 0;

/// Where the codes of N consecutive values of one block live (a word_decoded_format whose
/// block size N divides), worked out once from the first value's index: the block's exponent
/// word, the first word of the codes and their bit offset r0 in it. read(b) loads the codes
/// of the same values b blocks further on; decode() turns a read into values. Codes of
/// 8, 16 or 32 bits are one aligned load; other lengths load the window of words they touch,
/// whose last word alone can lie past the block (its bits are then unused): that one is read
/// from the block's last word instead.
template <word_decoded_format F, int N>
struct code_run {
  static_assert(F::block_size % N == 0, "frsz2::code_run: N values must lie in one block");
  static constexpr bool tiled = codes_tile_words<F>;
  static constexpr int words = tiled ? N * F::bits / 32 : window_words<F, N>;
  struct raw {
    std::uint32_t words[code_run::words];
    std::uint16_t w;  // the block's exponent word
  };

  const std::uint16_t* exponent = nullptr;
  const std::uint32_t* codes = nullptr;
  std::uint32_t r0 = 0;  // window: the first code's bit offset in codes[0]
  int last = words - 1;  // window: the offset of the last word read

  /// The run of values index .. index + N - 1 (index a multiple of N).
  SQUEEZE_HOST_DEVICE code_run(const compressed_handle<F>& p, std::size_t index) noexcept {
    const std::size_t block = index / F::block_size;
    const auto bit = static_cast<std::uint32_t>(index % F::block_size) * F::bits;
    exponent = p.exponents + block;
    codes = p.payload + block * F::words_per_block + bit / 32;
    if constexpr (!tiled) {
      r0 = bit % 32;
      const std::uint32_t ws = bit / 32;
      if (ws + words > static_cast<std::uint32_t>(F::words_per_block)) {
        last = static_cast<int>(F::words_per_block - 1 - ws);
      }
    }
  }

  /// Loads the run's codes `blocks_on` blocks further on, and their exponent word.
  SQUEEZE_HOST_DEVICE raw read(std::size_t blocks_on) const noexcept {
    raw r;
    r.w = exponent[blocks_on];
    const std::uint32_t* at = codes + blocks_on * F::words_per_block;
    if constexpr (tiled) {
      load_words<words>(at, r.words);
    } else {
      SQUEEZE_UNROLL
      for (int m = 0; m + 1 < words; ++m) r.words[m] = at[m];
      r.words[words - 1] = at[last];
    }
    return r;
  }

  /// Whether a read's block is ordinary (no infinity or NaN, Eb >= 32): the common case,
  /// which decode_ordinary() decodes.
  SQUEEZE_HOST_DEVICE static bool ordinary(const raw& r) noexcept { return decodes_by_top<F>(r.w); }

  /// The values of an ordinary() read, without a branch (r0: the run's bit offset; unused
  /// when codes tile the words).
  template <class Arithmetic>
  SQUEEZE_HOST_DEVICE static void decode_ordinary(const raw& r, std::uint32_t r0,
                                                  Arithmetic (&out)[N]) noexcept {
    if constexpr (tiled && F::bits == 16) {
      decode_halves(r.words, block_scale<F, F::bits - 2>(r.w), out);
    } else {
      std::uint32_t top[N];
      top_codes(r, r0, top);
      const double scale = block_scale<F, 30>(r.w);
      SQUEEZE_UNROLL
      for (int c = 0; c < N; ++c) out[c] = static_cast<Arithmetic>(decode_top(top[c], scale));
    }
  }

  /// decode_ordinary() without the block's scale: the values are out[c] times the returned
  /// power of two (exact), so a caller that sums or scales them can apply it once per read.
  SQUEEZE_HOST_DEVICE static double decode_ordinary_unscaled(const raw& r, std::uint32_t r0,
                                                             double (&out)[N]) noexcept {
    if constexpr (tiled && F::bits == 16) {
      decode_halves(r.words, 1.0, out);
      return block_scale<F, F::bits - 2>(r.w);
    } else {
      std::uint32_t top[N];
      top_codes(r, r0, top);
      SQUEEZE_UNROLL
      for (int c = 0; c < N; ++c) out[c] = decode_top(top[c], 1.0);
      return block_scale<F, 30>(r.w);
    }
  }

  /// The values of a read: decode_ordinary(), or decode_code for blocks with infinities,
  /// NaN or Eb < 32.
  template <class Arithmetic>
  SQUEEZE_HOST_DEVICE static void decode(const raw& r, std::uint32_t r0,
                                         Arithmetic (&out)[N]) noexcept {
    if (ordinary(r)) {
      decode_ordinary(r, r0, out);
    } else {
      std::uint32_t top[N];
      top_codes(r, r0, top);
      SQUEEZE_UNROLL
      for (int c = 0; c < N; ++c) {
        out[c] = static_cast<Arithmetic>(decode_code<F>(top[c] >> (32 - F::bits), r.w));
      }
    }
  }

 private:
  SQUEEZE_HOST_DEVICE static void top_codes(const raw& r, std::uint32_t r0,
                                            std::uint32_t (&top)[N]) noexcept {
    if constexpr (tiled)
      tiled_top_codes<F, N>(r.words, top);
    else
      window_top_codes<F, N>(r.words, r0, top);
  }
};

/// What read_vector fetches for four consecutive values, before decode_vector converts them:
/// kept apart so a loop can issue all its reads before it decodes any (a decode with a
/// branch between two reads would make the second wait for the first).
/// Plain storage: the stored values.
template <storage S, class Arithmetic>
struct raw_vector {
  S v[4];
};
/// word_decoded_format: the run's words and exponent word, and its bit offset.
template <word_decoded_format F, class Arithmetic>
struct raw_vector<F, Arithmetic> {
  typename code_run<F, 4>::raw codes;
  std::uint32_t r0;
};
/// Other FRSZ2 formats: the values, decoded by access() when read.
template <format_like F, class Arithmetic>
requires(!word_decoded_format<F>) struct raw_vector<F, Arithmetic> {
  Arithmetic v[4];
};

/// Reads values p.first + i .. + 3 of an FRSZ2 vector (the index a multiple of 4).
template <format_like F, class Arithmetic>
SQUEEZE_HOST_DEVICE raw_vector<F, Arithmetic> read_vector(const compressed_handle<F>& p,
                                                          std::size_t i) noexcept {
  if constexpr (word_decoded_format<F>) {
    const code_run<F, 4> run{p, p.first + i};
    return {run.read(0), run.r0};
  } else {
    raw_vector<F, Arithmetic> r;
    for (int c = 0; c < 4; ++c) r.v[c] = static_cast<Arithmetic>(access_value<F>(p, i + c));
    return r;
  }
}

/// Reads p[0 .. 3] of plain storage (p aligned to 4 values): one vector load on the GPU.
template <plain_storage S, class Arithmetic>
SQUEEZE_HOST_DEVICE raw_vector<S, Arithmetic> read_vector(const S* p) noexcept {
#if SQUEEZE_DEVICE_PASS
  struct alignas(4 * sizeof(S)) four {
    S v[4];
  };
  const four x = *reinterpret_cast<const four*>(p);
  raw_vector<S, Arithmetic> r;
#pragma unroll
  for (int c = 0; c < 4; ++c) r.v[c] = x.v[c];
  return r;
#else
  return {{p[0], p[1], p[2], p[3]}};
#endif
}

/// The four values of a raw_vector as Arithmetic.
template <storage S, class Arithmetic>
SQUEEZE_HOST_DEVICE void decode_vector(const raw_vector<S, Arithmetic>& r,
                                       Arithmetic (&out)[4]) noexcept {
  if constexpr (word_decoded_format<S>) {
    code_run<S, 4>::decode(r.codes, r.r0, out);
  } else if constexpr (format_like<S>) {
    for (int c = 0; c < 4; ++c) out[c] = r.v[c];
  } else {
    for (int c = 0; c < 4; ++c) out[c] = convert<Arithmetic>(r.v[c]);
  }
}

}  // namespace detail

/// Values each accessor::load_vector call reads.
inline constexpr int vector_values = 4;

/// What an accessor reads: a storage, or a plain storage behind const (read-only).
// (clang-format 14 mangles concept definitions)
// clang-format off
template <class T>
concept accessor_storage =
    storage<T> || (std::is_const_v<T> && plain_storage<std::remove_const_t<T>>);
// clang-format on

/// The mdspan accessor policy (cuda::std::mdspan's AccessorPolicy): reads Storage as
/// Arithmetic, and writes it through a proxy for plain, non-const Storage.
///
///   Storage               element_type        reference             data_handle_type
///   double, float,        Arithmetic          plain_reference       Storage*
///   __half, bfloat16                          (proxy: converts on read and on write)
///   const double, ...     const Arithmetic    Arithmetic (a value)  const Storage*
///   frsz2::format<...>    const Arithmetic    Arithmetic (a value)  compressed_handle<F>
///
/// offset_policy is the accessor itself; access(p, i) and offset(p, i) take the index
/// mdspan's layout mapping computes. So, e.g.,
///
///   cuda::std::mdspan<const double, cuda::std::dextents<int, 2>, cuda::std::layout_left,
///                     frsz2::accessor<frsz2::format<16>>> a{handle, rows, cols};
///
/// reads an FRSZ2 matrix stored column by column, and an mdspan over accessor<float, double>
/// (element_type double) converts to one over accessor<const float, double>.
template <accessor_storage Storage, class Arithmetic = double>
struct accessor;

/// The accessor of plain storage (double, float, __half, __nv_bfloat16, or one of them const).
template <accessor_storage Storage, class Arithmetic>
requires plain_storage<std::remove_const_t<Storage>>
struct accessor<Storage, Arithmetic> {
  /// Whether values may be written (through the proxy reference).
  static constexpr bool writable = !std::is_const_v<Storage>;
  using stored_type = std::remove_const_t<Storage>;  ///< Storage without const

  using offset_policy = accessor;  ///< mdspan: the accessor of an offset handle
  /// mdspan: Arithmetic, const when read-only.
  using element_type = std::conditional_t<writable, Arithmetic, const Arithmetic>;
  using data_handle_type = Storage*;  ///< mdspan: a pointer to the stored values
  /// mdspan: a proxy that converts on read and on assignment; a value when read-only.
  using reference =
      std::conditional_t<writable, detail::plain_reference<stored_type, Arithmetic>, Arithmetic>;

  accessor() = default;
  /// The read-only accessor from the writable one (as mdspan's conversion to const needs).
  template <class Other>
  requires(!writable && std::is_same_v<Other, stored_type>) SQUEEZE_HOST_DEVICE
      constexpr accessor(const accessor<Other, Arithmetic>&) noexcept {}

  /// mdspan: value i (a proxy when writable).
  SQUEEZE_HOST_DEVICE reference access(data_handle_type p, std::size_t i) const noexcept {
    if constexpr (writable)
      return reference{p + i};
    else
      return detail::convert<Arithmetic>(p[i]);
  }
  /// mdspan: the handle of value i.
  SQUEEZE_HOST_DEVICE data_handle_type offset(data_handle_type p, std::size_t i) const noexcept {
    return p + i;
  }
  /// Value i, converted (no proxy).
  SQUEEZE_HOST_DEVICE Arithmetic load(const stored_type* p, std::size_t i) const noexcept {
    return detail::convert<Arithmetic>(p[i]);
  }
  /// Values i .. i + 3, converted, by one vector load: p + i must be aligned to 4 values
  /// (i a multiple of 4 from an allocation's start).
  SQUEEZE_HOST_DEVICE void load_vector(const stored_type* p, std::size_t i,
                                       Arithmetic (&out)[vector_values]) const noexcept {
    decode_vector(read_vector(p, i), out);
  }
  /// load_vector in two steps: read_vector issues the load, decode_vector converts.
  using vector_type = detail::raw_vector<stored_type, Arithmetic>;
  /// Loads values i .. i + 3 (the first half of load_vector).
  SQUEEZE_HOST_DEVICE vector_type read_vector(const stored_type* p, std::size_t i) const noexcept {
    return detail::read_vector<stored_type, Arithmetic>(p + i);
  }
  /// Converts what read_vector loaded (the second half of load_vector).
  SQUEEZE_HOST_DEVICE void decode_vector(const vector_type& r,
                                         Arithmetic (&out)[vector_values]) const noexcept {
    detail::decode_vector(r, out);
  }
};

/// The accessor of FRSZ2 storage: read-only (a block is written whole, frsz2/compress.cuh).
template <accessor_storage F, class Arithmetic>
requires format_like<F>
struct accessor<F, Arithmetic> {
  using offset_policy = accessor;                 ///< mdspan: the accessor of an offset handle
  using element_type = const Arithmetic;          ///< mdspan: read-only values
  using data_handle_type = compressed_handle<F>;  ///< mdspan: payload, exponents, first index
  using reference = Arithmetic;                   ///< read-only: writes go through whole blocks
  /// mdspan: value i, decoded.
  SQUEEZE_HOST_DEVICE reference access(const data_handle_type& p, std::size_t i) const noexcept {
    return static_cast<Arithmetic>(detail::access_value<F>(p, i));
  }
  /// mdspan: the handle of value i.
  SQUEEZE_HOST_DEVICE data_handle_type offset(data_handle_type p, std::size_t i) const noexcept {
    p.first += i;
    return p;
  }
  /// Value i, decoded (as access).
  SQUEEZE_HOST_DEVICE Arithmetic load(const data_handle_type& p, std::size_t i) const noexcept {
    return access(p, i);
  }
  /// Values i .. i + 3 (p.first + i a multiple of 4): for fp64 codes of at most 32 bits in
  /// blocks of a multiple of 4 values, the block's exponent is read once and the four codes
  /// by one vector load (l = 8, 16, 32) or from the words they touch; otherwise four access().
  SQUEEZE_HOST_DEVICE void load_vector(const data_handle_type& p, std::size_t i,
                                       Arithmetic (&out)[vector_values]) const noexcept {
    decode_vector(read_vector(p, i), out);
  }
  /// load_vector in two steps, so a loop can issue all its reads before the first decode:
  /// read_vector loads the exponent word and the codes, decode_vector converts them.
  using vector_type = detail::raw_vector<F, Arithmetic>;
  /// Loads the exponent word and the codes of values i .. i + 3.
  SQUEEZE_HOST_DEVICE vector_type read_vector(const data_handle_type& p,
                                              std::size_t i) const noexcept {
    return detail::read_vector<F, Arithmetic>(p, i);
  }
  /// Decodes what read_vector loaded.
  SQUEEZE_HOST_DEVICE void decode_vector(const vector_type& r,
                                         Arithmetic (&out)[vector_values]) const noexcept {
    detail::decode_vector(r, out);
  }
};

namespace detail {
/// The code_run a tile_reader keeps: code_run<S, V> on its lean path, nothing otherwise.
struct no_run {};
template <class S, int V, bool Lean>
struct tile_run {
  using type = no_run;
};
template <class S, int V>
struct tile_run<S, V, true> {
  using type = code_run<S, V>;
};
}  // namespace detail

/// Reads a vector by tiles of 32 x Values values, Values (4 or 8) per thread: in tile t the
/// thread in lane j (of the warp that reads the tile together) gets values
/// t * tile_values + j * Values .. + Values - 1 of the handle. What depends only on the lane
/// (its block within the tile, the words its codes start in, their bit offset) is computed
/// once, so a read costs an address and its loads. As with accessor::read_vector, read()
/// only loads and decode() converts, so a loop can have all its loads in flight first;
/// decode_each() converts such a batch of reads with one test for rare blocks. The
/// handle's first index must be a multiple of tile_values. FRSZ2 fp64 formats with l <= 32
/// and a block size that divides the tile and holds a thread's values take the lean path
/// (8 values of l = 16 are one 16-byte load); other storage reads through
/// accessor::read_vector.
template <storage S, class Arithmetic = double, int Values = vector_values>
class tile_reader {
  static_assert(Values == 4 || Values == 8, "frsz2::tile_reader: 4 or 8 values per thread");
  using acc = accessor<S, Arithmetic>;

 public:
  static constexpr int values = Values;                     ///< values a thread reads per tile
  static constexpr int tile_values = 32 * Values;           ///< values a warp reads per tile
  using data_handle_type = typename acc::data_handle_type;  ///< the accessor's handle

 private:
  static constexpr bool lean = [] {
    if constexpr (detail::word_decoded_format<S>)
      return S::block_size % Values == 0 && tile_values % S::block_size == 0;
    else
      return false;
  }();
  struct fallback {  // other storage: Values / 4 accessor::read_vector reads
    /// What read() loads for other storage: Values / 4 accessor::read_vector reads.
    struct raw {
      typename acc::vector_type v[Values / vector_values];  ///< the reads
    };
  };
  using run_type = typename detail::tile_run<S, Values, lean>::type;

 public:
  /// What read() returns and decode() converts.
  using vector_type = typename std::conditional_t<lean, run_type, fallback>::raw;

  /// The reader of thread `lane` (0 .. 31) of the warps that read the vector behind `p`.
  SQUEEZE_HOST_DEVICE tile_reader(const data_handle_type& p, unsigned lane) noexcept
      : p_{p}, lane_{lane}, run_{make_run(p, lane)} {}

  /// Loads this thread's values of tile t.
  SQUEEZE_HOST_DEVICE vector_type read(std::size_t t) const noexcept {
    if constexpr (lean) {
      return run_.read(t * (tile_values / S::block_size));
    } else {
      vector_type r;
      SQUEEZE_UNROLL
      for (int h = 0; h < Values / vector_values; ++h) {
        r.v[h] = acc{}.read_vector(p_, t * tile_values + Values * lane_ + vector_values * h);
      }
      return r;
    }
  }

  /// decode() of reads r[0 .. K), handing each read's values to use(k, values) in order.
  /// Blocks off the common path (infinities, NaN, Eb < 32) are tested for once for all K
  /// reads, so in the common case the K decodes run with no branch between them and their
  /// values need no merging with another path's (sm_90, the bench's read loop of 4 reads of
  /// 8 values: 6.9 instructions a value for l = 16 against 7.8 with a decode() per read).
  template <int K, class Use>
  SQUEEZE_HOST_DEVICE void decode_each(const vector_type (&r)[K], Use&& use) const {
    decode_batch<false>(r, use);
  }

  /// Whether decode_each_scaled() hands out each ordinary block's values and its scale apart
  /// (the lean path); otherwise it hands out the values with a scale of 1.
  static constexpr bool splits_scale = lean;

  /// decode_each() for a caller that can apply a read's scale once: use(k, q, scale) with
  /// the values of read k equal to q[c] * scale (exactly: q[c] is the code's integer with its
  /// sign, scale the block's power of two; 1 off the lean path and for rare blocks). A dot
  /// product then takes one multiply a read instead of one a value (fp64 only, as a scale
  /// may lie outside float's range where the values do not).
  template <int K, class Use>
  SQUEEZE_HOST_DEVICE void decode_each_scaled(const vector_type (&r)[K], Use&& use) const {
    static_assert(std::is_same_v<Arithmetic, double>,
                  "frsz2::tile_reader::decode_each_scaled: fp64 values");
    decode_batch<true>(r, use);
  }

  /// The values of a read.
  SQUEEZE_HOST_DEVICE void decode(const vector_type& r, Arithmetic (&out)[Values]) const noexcept {
    if constexpr (lean) {
      run_type::decode(r, run_.r0, out);
    } else {
      SQUEEZE_UNROLL
      for (int h = 0; h < Values / vector_values; ++h) {
        Arithmetic part[vector_values];
        acc{}.decode_vector(r.v[h], part);
        SQUEEZE_UNROLL
        for (int c = 0; c < vector_values; ++c) out[vector_values * h + c] = part[c];
      }
    }
  }

 private:
  /// decode_each (use(k, values)) or, Scaled, decode_each_scaled (use(k, q, scale)).
  template <bool Scaled, int K, class Use>
  SQUEEZE_HOST_DEVICE void decode_batch(const vector_type (&r)[K], Use& use) const {
    if constexpr (lean) {
      bool ordinary = true;
      SQUEEZE_UNROLL
      for (int k = 0; k < K; ++k) ordinary = ordinary & run_type::ordinary(r[k]);
      if (ordinary) {
        SQUEEZE_UNROLL
        for (int k = 0; k < K; ++k) {
          Arithmetic v[Values];
          if constexpr (Scaled) {
            use(k, v, run_type::decode_ordinary_unscaled(r[k], run_.r0, v));
          } else {
            run_type::decode_ordinary(r[k], run_.r0, v);
            use(k, v);
          }
        }
        return;
      }
    }
    SQUEEZE_UNROLL
    for (int k = 0; k < K; ++k) {
      Arithmetic v[Values];
      decode(r[k], v);
      if constexpr (Scaled) {
        use(k, v, Arithmetic{1});
      } else {
        use(k, v);
      }
    }
  }

  SQUEEZE_HOST_DEVICE static run_type make_run(const data_handle_type& p, unsigned lane) noexcept {
    if constexpr (lean)
      return run_type{p, p.first + Values * lane};  // the lane's values in tile 0
    else
      return {};
  }

  data_handle_type p_;
  unsigned lane_;
  run_type run_;
};

}  // namespace squeeze::frsz2
