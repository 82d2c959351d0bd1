// SPDX-License-Identifier: Apache-2.0
// squeeze/frsz2/format.hpp: the FRSZ2 block-exponent format, its per-value codec (host and
// device) and the host reference encoder and decoder.
//
// A vector of n values (fp64 or fp32) is cut into blocks of BS values (BS = 32 by default).
// A block stores one 16-bit exponent word and BS codes of l bits (l = Bits):
//
//   exponents: [n_blocks] uint16, stored apart from the payload
//     bit 15      nonfinite flag: the block holds an infinity or a NaN (see below)
//     bits 12..14 reserved: 0
//     bits 0..11  Eb, the block's biased exponent (IEEE bias: 1023 for fp64, 127 for fp32),
//                 at most the all-ones exponent (2047 for fp64, 255 for fp32)
//   payload:   [n_blocks, words_per_block] uint32, words_per_block = ceil(BS * l / 32)
//     code k of a block occupies bits [k*l, k*l + l) of the block's words, LSB-first, so a
//     code straddles two words (three for l > 32 and fp64) when l does not divide 32:
//
//        word 0                            word 1
//       |31 ........................... 0|31 ........................... 0|
//       |  ...  code 1   |    code 0     |  ...  code 2    | code 1 (high)|   (l = 21)
//
//   code (l bits):  | sign (bit l-1) | q (bits l-2 .. 0) |
//     q is the magnitude in fixed point with one integer bit and l-2 fraction bits,
//     scaled by the block exponent:  |x| ~= q * 2^(Eb - bias - (l - 2)).
//
// Encoding a block (finite values):
//   1. e(x) = the biased exponent of x, 1 for subnormals, 0 for zero; emax = max e(x).
//   2. q(x) = |x| * 2^(l - 2 - (Eb - bias)), cut to an integer by the rounding mode:
//      `truncate` drops the bits below (as the original FRSZ2 does); `nearest` rounds to
//      nearest, ties away from zero.
//   3. Eb = emax, or emax + 1 when rounding carries a value of the block out of l - 1 bits
//      (so every code fits and the rounding bound holds for every value). A block of zeros
//      (emax = 0) takes Eb = 32 (zero_block_exponent): its codes are q = 0 whatever Eb is,
//      and 32 is the smallest Eb that the accessor's fast paths decode, so zero regions and
//      zero padding read as fast as other blocks.
// Decoding a code: sign and q, the leading one of q by count-leading-zeros, then the IEEE
// value built with integer operations. Random access: value i needs its block's exponent
// word and the one to three payload words that hold code i % BS.
//
// Error bounds, for blocks of finite values whose largest exponent is below the largest
// finite one, with ulp = 2^(Eb - bias - (l - 2)) and M = the block's largest magnitude:
//   nearest:  |x' - x| <= ulp / 2             (and <= 2^(2-l) * M)
//   truncate: |x' - x| <  ulp,  |x'| <= |x|    (and <  2^(2-l) * M)
// A value decodes exactly when l - 2 >= mantissa_bits + (Eb - e(x)): with fp64, l = 64
// keeps the values within 10 binades of the block's largest exactly (9 after a carry).
//
// Special values, defined:
//   * +0 and -0 round-trip exactly (q = 0 decodes to a signed zero, never to a tiny value;
//     the original FRSZ2 decodes 0 as 2^(e-32)). Values too small for the block's scale
//     decode to a zero of their sign.
//   * Subnormal inputs encode like any value (e = 1, no implicit bit) and decode exactly
//     when the block's scale allows; decoded values may be subnormal.
//   * A block holding +inf, -inf or NaN sets the nonfinite flag. Its Eb is the finite
//     values' emax + 1, and the largest code q = 2^(l-1) - 1 means infinity (with the
//     sign), the code "sign 1, q 0" means NaN (payloads are not kept), and finite values
//     keep their sign and q (a zero there decodes as +0). At l = 2 a nonfinite block keeps
//     only its infinities and NaNs; its finite values decode as +0.
//   * Near the top of the range (Eb = 2047 for fp64, 255 for fp32) codes are clamped so a
//     finite value never decodes to infinity: a finite code there has q < 2^(l-2) (the
//     infinity code of a nonfinite block keeps q = 2^(l-1) - 1); the bounds above do not
//     hold there.
//
// Rules of a stored vector (validate checks them and rejects what breaks them with a
// squeeze::format_error; decode and decode_at check what they read). The encoder never
// writes words that break them, and the decoders would not agree on such words (the
// accessor's fast paths scale in floating point, decode_value builds IEEE bits), so they
// are malformed rather than given a meaning:
//   1. n <= max_size (the most values a decoded vector can hold), the payload holds
//      exactly payload_words(n) words and the exponents blocks(n) words. Every count is
//      exact for such n; for a size from outside, checked_payload_words / checked_bytes.
//   2. An exponent word has bits 12..14 clear and Eb <= 2047 (fp64) or 255 (fp32): larger
//      Eb would overflow the IEEE exponent (decoders disagree: huge values, wrong signs).
//   3. At Eb = 2047 (fp64) or 255 (fp32), every code of a value the vector holds is either
//      finite with q < 2^(l-2), or the infinity code of a nonfinite block (q = 2^(l-1)-1).
//      (A finite q >= 2^(l-2) there lies past the largest finite value: decode_value made
//      it a NaN, the accessor +-inf.) Codes past n in the last block, and the bits after a
//      block's last code, are not read by decode and are not checked (the encoder writes 0).
// Every block these rules accept decodes to the same bits on every path: decode_value,
// decode, decode_at, the accessor's access(), load_vector and tile_reader (accessor.hpp),
// the warp decoder (compress.cuh). NaN is always the quiet NaN with a clear sign and the
// top fraction bit alone (0x7ff8000000000000 for fp64, 0x7fc00000 for fp32): payloads are
// not kept, and the bits match on every path (before any conversion to another type).
//
// Decoded values re-encode exactly: encode(decode(v)), with either rounding mode, decodes
// to decode(v) bit for bit in every block with Eb >= 1 without the nonfinite flag, and in
// every nonfinite block with Eb >= 2 whose finite codes all have q < 2^(l-2). (The encoder
// gives a block its values' largest exponent, counting subnormals as 1, plus one when the
// block is nonfinite, and 32 when it holds zeros only: a block outside these cases
// re-encodes with a coarser Eb and may lose a last bit.)
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "squeeze/core/bits.hpp"
#include "squeeze/core/checked.hpp"
#include "squeeze/core/config.hpp"
#include "squeeze/core/error.hpp"

namespace squeeze::frsz2 {

/// How an encoder cuts a significand to l - 1 bits.
enum class rounding {
  nearest,   ///< to nearest, ties away from zero: error <= ulp / 2
  truncate,  ///< toward zero, as the original FRSZ2: error < ulp
};

/// IEEE facts of the two input types.
template <class Float>
struct ieee;
/// binary64.
template <>
struct ieee<double> {
  using bits_type = std::uint64_t;                          ///< an unsigned integer of its size
  static constexpr int mantissa_bits = 52;                  ///< stored fraction bits
  static constexpr int exponent_bits = 11;                  ///< exponent bits
  static constexpr int bias = 1023;                         ///< exponent bias
  static constexpr std::uint32_t exponent_all_ones = 2047;  ///< infinities and NaN
};
/// binary32.
template <>
struct ieee<float> {
  using bits_type = std::uint32_t;                         ///< an unsigned integer of its size
  static constexpr int mantissa_bits = 23;                 ///< stored fraction bits
  static constexpr int exponent_bits = 8;                  ///< exponent bits
  static constexpr int bias = 127;                         ///< exponent bias
  static constexpr std::uint32_t exponent_all_ones = 255;  ///< infinities and NaN
};

/// The FRSZ2 format: `Bits` bits per value (sign and significand) of `Float` values, in
/// blocks of `BlockSize` values sharing an exponent. Bits in [2, 64] for double and [2, 32]
/// for float; BlockSize a power of two in [1, 256].
template <int Bits, class Float = double, int BlockSize = 32>
struct format {
  static_assert(std::is_same_v<Float, double> || std::is_same_v<Float, float>,
                "frsz2::format: Float must be double or float");
  static_assert(Bits >= 2 && Bits <= 8 * static_cast<int>(sizeof(Float)),
                "frsz2::format: Bits must be in [2, 64] for double and [2, 32] for float");
  static_assert(BlockSize >= 1 && BlockSize <= 256 && (BlockSize & (BlockSize - 1)) == 0,
                "frsz2::format: BlockSize must be a power of two in [1, 256]");

  using float_type = Float;                           ///< the values' type
  using bits_type = typename ieee<Float>::bits_type;  ///< holds one code
  static constexpr int bits = Bits;                   ///< l: bits of a code
  static constexpr int block_size = BlockSize;        ///< BS: values sharing an exponent
  static constexpr int words_per_block = (BlockSize * Bits + 31) / 32;  ///< payload words
  static constexpr int mantissa_bits = ieee<Float>::mantissa_bits;      ///< of Float
  static constexpr int bias = ieee<Float>::bias;                        ///< of Float
  /// Float's exponent of infinities and NaN.
  static constexpr std::uint32_t exponent_all_ones = ieee<Float>::exponent_all_ones;
  static constexpr std::uint16_t nonfinite_flag = 0x8000;  ///< exponent word: bit 15
  static constexpr std::uint16_t reserved_bits = 0x7000;   ///< bits 12..14: must be 0
  static constexpr std::uint16_t exponent_field = 0x0fff;  ///< exponent word: Eb, bits 0..11
  /// Eb of a block of zeros: the smallest that the accessor's fast paths decode (codes are
  /// q = 0 at any Eb).
  static constexpr std::uint16_t zero_block_exponent = 32;
  static constexpr bits_type q_max = (bits_type{1} << (Bits - 1)) - 1;  ///< largest magnitude
  static constexpr bits_type sign_bit = bits_type{1} << (Bits - 1);     ///< a code's sign
  /// The largest q of a finite code at Eb = exponent_all_ones: 2^(l-2) - 1.
  static constexpr bits_type q_top = (bits_type{1} << (Bits - 2)) - 1;
  /// The most values a vector may hold: the most a decoded std::vector<Float> can hold
  /// (PTRDIFF_MAX / sizeof(Float)). blocks, payload_words and bytes are exact (never wrap)
  /// for n <= max_size; validate refuses larger sizes.
  static constexpr std::size_t max_size =
      static_cast<std::size_t>(std::numeric_limits<std::ptrdiff_t>::max()) / sizeof(Float);
  // bytes(max_size) = blocks * (4 words_per_block + 2) fits, so no count of n <= max_size
  // wraps (true of every format: at most 10 bytes a value).
  static_assert(max_size / BlockSize + 1 <=
                    std::numeric_limits<std::size_t>::max() / (4 * words_per_block + 2),
                "frsz2::format: the counts of max_size values must fit in size_t");

  /// Blocks that hold n values; n <= max_size (else checked_payload_words). (Kept as the
  /// device code had it: device callers size arrays that exist.)
  SQUEEZE_HOST_DEVICE static constexpr std::size_t blocks(std::size_t n) noexcept {
    return (n + BlockSize - 1) / BlockSize;
  }
  /// Payload words for n values (whole blocks); n <= max_size (else checked_payload_words).
  SQUEEZE_HOST_DEVICE static constexpr std::size_t payload_words(std::size_t n) noexcept {
    return blocks(n) * words_per_block;
  }
  /// Bytes of payload and exponents for n values; n <= max_size (else checked_bytes).
  SQUEEZE_HOST_DEVICE static constexpr std::size_t bytes(std::size_t n) noexcept {
    return payload_words(n) * 4 + blocks(n) * 2;
  }
  /// payload_words(n) for any n (a size from outside), or nothing when it does not fit.
  /// (Host only, like core/checked.hpp under nvcc without --expt-relaxed-constexpr.)
  static constexpr std::optional<std::size_t> checked_payload_words(std::size_t n) noexcept {
    return core::checked_mul<std::size_t>(exact_blocks(n), std::size_t{words_per_block});
  }
  /// bytes(n) for any n (a size from outside), or nothing when it does not fit. (Host only.)
  static constexpr std::optional<std::size_t> checked_bytes(std::size_t n) noexcept {
    const std::optional<std::size_t> words = checked_payload_words(n);
    if (!words) return std::nullopt;
    const std::optional<std::size_t> payload = core::checked_mul<std::size_t>(*words, 4);
    const std::optional<std::size_t> exponents = core::checked_mul<std::size_t>(exact_blocks(n), 2);
    if (!payload || !exponents) return std::nullopt;
    return core::checked_add<std::size_t>(*payload, *exponents);
  }
  /// blocks(n) for any n (it does not wrap near 2^64).
  static constexpr std::size_t exact_blocks(std::size_t n) noexcept {
    return n / BlockSize + (n % BlockSize != 0 ? 1 : 0);
  }
};

template <class T>
struct is_format : std::false_type {};
template <int Bits, class Float, int BlockSize>
struct is_format<format<Bits, Float, BlockSize>> : std::true_type {};
/// Satisfied by frsz2::format<...>.
template <class T>
concept format_like = is_format<T>::value;

/// The exponent a value contributes to its block's maximum: 0 for zero, 1 for a subnormal,
/// the biased exponent otherwise (exponent_all_ones for infinities and NaN).
template <class Float>
SQUEEZE_HOST_DEVICE constexpr std::uint32_t value_exponent(Float x) noexcept {
  using B = typename ieee<Float>::bits_type;
  const B b = core::bit_cast<B>(x);
  const auto e = static_cast<std::uint32_t>((b >> ieee<Float>::mantissa_bits) &
                                            ieee<Float>::exponent_all_ones);
  const B frac = b & ((B{1} << ieee<Float>::mantissa_bits) - 1);
  if (e == 0) return frac != 0 ? 1u : 0u;
  return e;
}

/// |x| in units of the block's ulp, cut by `mode`, for finite x in a block of biased
/// exponent eb >= value_exponent(x). Below 2^(l-1), or equal to it when rounding carries.
template <format_like F>
SQUEEZE_HOST_DEVICE constexpr typename F::bits_type quantize(typename F::float_type x,
                                                             std::uint32_t eb, rounding mode) {
  using B = typename F::bits_type;
  constexpr int mb = F::mantissa_bits;
  const B b = core::bit_cast<B>(x);
  const auto e = static_cast<std::uint32_t>((b >> mb) & F::exponent_all_ones);
  B m = b & ((B{1} << mb) - 1);
  if (e != 0) m |= B{1} << mb;
  const std::uint32_t e_eff = e == 0 ? 1u : e;  // (m == 0 gives q == 0 whatever the shift)
  // q = m * 2^s, s = (l - 2 - mb) - (eb - e_eff) <= l - 2 - mb, so m << s < 2^(l-1).
  const int s = (F::bits - 2 - mb) - static_cast<int>(eb - e_eff);
  if (s >= 0) return m << s;
  const int r = -s;
  if (r > mb + 1) return B{0};  // m < 2^(mb+1) <= 2^(r-1): below half a unit
  B q = m >> r;
  if (mode == rounding::nearest) q += (m >> (r - 1)) & B{1};
  return q;
}

/// The code of finite x in a block of biased exponent eb: sign, then q clamped to q_cap.
template <format_like F>
SQUEEZE_HOST_DEVICE constexpr typename F::bits_type encode_value(typename F::float_type x,
                                                                 std::uint32_t eb, rounding mode,
                                                                 typename F::bits_type q_cap) {
  using B = typename F::bits_type;
  const B sign = core::bit_cast<B>(x) >> (8 * sizeof(B) - 1);
  const B q = quantize<F>(x, eb, mode);
  return (sign << (F::bits - 1)) | (q > q_cap ? q_cap : q);
}

/// The largest q a block of exponent word `w` may store for a finite value.
template <format_like F>
SQUEEZE_HOST_DEVICE constexpr typename F::bits_type finite_cap(std::uint16_t w) noexcept {
  using B = typename F::bits_type;
  const std::uint32_t eb = w & F::exponent_field;
  B cap = F::q_max;
  if ((w & F::nonfinite_flag) != 0) cap = F::q_max - 1;
  // At the top exponent a q of 2^(l-2) or more would decode past the largest finite value.
  if (eb >= F::exponent_all_ones) {
    const B top = (B{1} << (F::bits - 2)) - 1;
    if (top < cap) cap = top;
  }
  return cap;
}

/// A block's exponent word from the largest value_exponent of its finite values, whether
/// it holds an infinity or NaN, and whether rounding at emax carries out of l - 1 bits
/// (zero_block_exponent for a block of zeros).
template <format_like F>
SQUEEZE_HOST_DEVICE constexpr std::uint16_t exponent_word(std::uint32_t emax, bool nonfinite,
                                                          bool carries) noexcept {
  if (emax == 0 && !nonfinite) return F::zero_block_exponent;  // zeros only: never carries
  const std::uint32_t eb = emax + ((nonfinite || carries) ? 1u : 0u);
  return static_cast<std::uint16_t>(eb | (nonfinite ? F::nonfinite_flag : 0u));
}

/// The code of x in a block of exponent word w.
template <format_like F>
SQUEEZE_HOST_DEVICE constexpr typename F::bits_type encode_in_block(typename F::float_type x,
                                                                    std::uint16_t w,
                                                                    rounding mode) noexcept {
  using B = typename F::bits_type;
  const B b = core::bit_cast<B>(x);
  if (value_exponent(x) == F::exponent_all_ones) {
    const bool is_nan = (b & ((B{1} << F::mantissa_bits) - 1)) != 0;
    return is_nan ? F::sign_bit : (((b >> (8 * sizeof(B) - 1)) << (F::bits - 1)) | F::q_max);
  }
  const B code = encode_value<F>(x, w & F::exponent_field, mode, finite_cap<F>(w));
  // In a nonfinite block the code "sign 1, q 0" means NaN: zeros there lose their sign.
  return ((w & F::nonfinite_flag) != 0 && (code & ~F::sign_bit) == 0) ? B{0} : code;
}

/// Ors `code` into bit k * l of a block's words (LSB-first), in 32-bit pieces.
template <format_like F>
SQUEEZE_HOST_DEVICE constexpr void deposit_code(std::uint32_t* words, std::uint32_t k,
                                                typename F::bits_type code) noexcept {
  const std::uint32_t bit = k * F::bits;
  std::uint32_t word = bit / 32, shift = bit % 32;
  for (int done = 0;; ++word) {
    words[word] |= static_cast<std::uint32_t>(code << shift);
    const int taken = 32 - static_cast<int>(shift);
    if (taken >= F::bits - done) break;
    done += taken;
    code >>= taken;
    shift = 0;
  }
}

/// Encodes one block: `count` values x[0..count) (count <= BlockSize; the rest of the block
/// encodes as +0) into the block's words (words_per_block, overwritten) and returns the
/// block's exponent word.
template <format_like F>
SQUEEZE_HOST_DEVICE constexpr std::uint16_t encode_block(const typename F::float_type* x, int count,
                                                         rounding mode,
                                                         std::uint32_t* words) noexcept {
  std::uint32_t emax = 0;
  bool nonfinite = false;
  for (int k = 0; k < count; ++k) {
    const std::uint32_t e = value_exponent(x[k]);
    if (e == F::exponent_all_ones)
      nonfinite = true;
    else
      emax = e > emax ? e : emax;
  }
  bool carries = false;
  if (!nonfinite && mode == rounding::nearest) {
    for (int k = 0; k < count && !carries; ++k) carries = quantize<F>(x[k], emax, mode) > F::q_max;
  }
  const std::uint16_t w = exponent_word<F>(emax, nonfinite, carries);
  for (int i = 0; i < F::words_per_block; ++i) words[i] = 0;
  for (int k = 0; k < count; ++k) {
    deposit_code<F>(words, static_cast<std::uint32_t>(k), encode_in_block<F>(x[k], w, mode));
  }
  return w;
}

/// The code of value k (k < BlockSize) of a block whose words start at `words`. Reads only
/// the words that hold it.
template <format_like F>
SQUEEZE_HOST_DEVICE constexpr typename F::bits_type read_code(const std::uint32_t* words,
                                                              std::uint32_t k) noexcept {
  using B = typename F::bits_type;
  const std::uint32_t bit = k * F::bits;
  const std::uint32_t word = bit / 32, shift = bit % 32;
  if constexpr (F::bits <= 32) {
    std::uint32_t lo = words[word] >> shift;
    if (shift + F::bits > 32) lo |= words[word + 1] << (32 - shift);
    return static_cast<B>(lo & core::low_mask<std::uint32_t>(F::bits));
  } else {
    std::uint64_t v = std::uint64_t{words[word]} >> shift;
    v |= std::uint64_t{words[word + 1]} << (32 - shift);
    if (shift + F::bits > 64) v |= std::uint64_t{words[word + 2]} << (64 - shift);
    return static_cast<B>(v & core::low_mask<std::uint64_t>(F::bits));
  }
}

/// Decodes one code of a block with exponent word w.
template <format_like F>
SQUEEZE_HOST_DEVICE constexpr typename F::float_type decode_value(typename F::bits_type code,
                                                                  std::uint16_t w) noexcept {
  using B = typename F::bits_type;
  using T = typename F::float_type;
  constexpr int mb = F::mantissa_bits;
  constexpr int width = 8 * sizeof(B);
  const B sign = (code >> (F::bits - 1)) << (width - 1);
  const B q = code & F::q_max;
  if ((w & F::nonfinite_flag) != 0) {
    if (q == F::q_max) return core::bit_cast<T>(sign | (B{F::exponent_all_ones} << mb));
    if (q == 0 && sign != 0) {
      return core::bit_cast<T>((B{F::exponent_all_ones} << mb) | (B{1} << (mb - 1)));  // NaN
    }
  }
  if (q == 0) return core::bit_cast<T>(sign);
  const int eb = static_cast<int>(w & F::exponent_field);
  const int p = width - 1 - core::countl_zero(q);  // leading one of q
  const int e = eb - (F::bits - 2) + p;            // the value's biased exponent
  if (e >= 1) {
    const B mant = p >= mb ? q >> (p - mb) : q << (mb - p);
    return core::bit_cast<T>(sign | (B(e) << mb) | (mant & ((B{1} << mb) - 1)));
  }
  const int t = eb - F::bits + 1 + mb;  // subnormal: q * 2^t units of the smallest subnormal
  const B frac = t >= 0 ? q << t : (-t >= width ? B{0} : q >> -t);
  return core::bit_cast<T>(sign | frac);
}

/// What breaks the rules of a stored vector (file comment) in one block.
enum class block_fault : std::uint8_t {
  none,            ///< the block keeps the rules
  reserved_bits,   ///< rule 2: bits 12..14 of the exponent word are set
  exponent_range,  ///< rule 2: Eb above exponent_all_ones
  top_code,        ///< rule 3: at Eb = exponent_all_ones, a finite code with q >= 2^(l-2)
};

/// Checks rules 2 and 3 for a block of exponent word w whose codes start at `words`, for
/// its first `count` codes (the values the vector holds, at most BlockSize). Reads the
/// block's words only when Eb = exponent_all_ones.
template <format_like F>
SQUEEZE_HOST_DEVICE constexpr block_fault check_block(std::uint16_t w, const std::uint32_t* words,
                                                      int count) noexcept {
  if ((w & F::reserved_bits) != 0) return block_fault::reserved_bits;
  const std::uint32_t eb = w & F::exponent_field;
  if (eb > F::exponent_all_ones) return block_fault::exponent_range;
  if (eb == F::exponent_all_ones) {
    const bool nonfinite = (w & F::nonfinite_flag) != 0;
    for (int k = 0; k < count; ++k) {
      const typename F::bits_type q = read_code<F>(words, static_cast<std::uint32_t>(k)) & F::q_max;
      if (q > F::q_top && !(nonfinite && q == F::q_max)) return block_fault::top_code;
    }
  }
  return block_fault::none;
}

/// An FRSZ2-compressed vector on the host: the reference encoder's output.
template <format_like F>
struct host_vector {
  std::size_t size = 0;                  ///< values
  std::vector<std::uint32_t> payload;    ///< [blocks, words_per_block]
  std::vector<std::uint16_t> exponents;  ///< [blocks]
};

/// Host reference encoder.
template <format_like F>
host_vector<F> encode(std::span<const typename F::float_type> x,
                      rounding mode = rounding::nearest) {
  // x exists, so x.size() <= max_size and every count below is exact.
  host_vector<F> out;
  out.size = x.size();
  out.payload.assign(F::payload_words(x.size()), 0u);
  out.exponents.assign(F::blocks(x.size()), 0);
  for (std::size_t b = 0; b < out.exponents.size(); ++b) {
    const std::size_t first = b * F::block_size;
    const int count = static_cast<int>(std::min<std::size_t>(F::block_size, x.size() - first));
    out.exponents[b] =
        encode_block<F>(x.data() + first, count, mode, out.payload.data() + b * F::words_per_block);
  }
  return out;
}

namespace detail {

inline std::string fp_name(bool fp64) { return fp64 ? "fp64" : "fp32"; }

/// Rule 1: throws squeeze::format_error unless v.size <= max_size and v's arrays have the
/// sizes it calls for (the counts compared are exact: format's static_assert on max_size).
template <format_like F>
void validate_sizes(const host_vector<F>& v) {
  constexpr bool fp64 = std::is_same_v<typename F::float_type, double>;
  if (v.size > F::max_size) {
    throw format_error{"frsz2: a vector of " + std::to_string(v.size) +
                       " values cannot exist: a decoded vector holds at most " +
                       std::to_string(F::max_size) + " " + fp_name(fp64) + " values"};
  }
  if (v.payload.size() != F::payload_words(v.size) || v.exponents.size() != F::blocks(v.size)) {
    throw format_error{"frsz2: a vector of " + std::to_string(v.size) + " values needs " +
                       std::to_string(F::payload_words(v.size)) + " payload words and " +
                       std::to_string(F::blocks(v.size)) + " exponents, has " +
                       std::to_string(v.payload.size()) + " and " +
                       std::to_string(v.exponents.size())};
  }
}

/// Rules 2 and 3 for block b of a vector whose sizes validate_sizes accepted.
template <format_like F>
void validate_block(const host_vector<F>& v, std::size_t b) {
  const std::size_t first = b * F::block_size;
  const int count = static_cast<int>(std::min<std::size_t>(F::block_size, v.size - first));
  const std::uint16_t w = v.exponents[b];
  const block_fault fault = check_block<F>(w, v.payload.data() + b * F::words_per_block, count);
  if (fault == block_fault::none) return;
  constexpr bool fp64 = std::is_same_v<typename F::float_type, double>;
  char word[8];
  std::snprintf(word, sizeof word, "0x%04x", static_cast<unsigned>(w));
  std::string what = "frsz2: block " + std::to_string(b) + " has the exponent word " + word;
  const std::string top = std::to_string(F::exponent_all_ones);
  switch (fault) {
    case block_fault::reserved_bits:
      what += ", whose reserved bits 12..14 are set";
      break;
    case block_fault::exponent_range:
      what += ": Eb " + std::to_string(w & F::exponent_field) + " is above " + top +
              ", the largest exponent of " + fp_name(fp64);
      break;
    default:
      what += " (Eb " + top + ", the top) and a finite code of magnitude 2^" +
              std::to_string(F::bits - 2) + " or more, past the largest finite value";
      break;
  }
  throw format_error{what};
}

/// Value i of a vector: no checks (decode and decode_at make them).
template <format_like F>
typename F::float_type value_at(const host_vector<F>& v, std::size_t i) noexcept {
  const std::size_t b = i / F::block_size;
  return decode_value<F>(read_code<F>(v.payload.data() + b * F::words_per_block,
                                      static_cast<std::uint32_t>(i % F::block_size)),
                         v.exponents[b]);
}

}  // namespace detail

/// Throws squeeze::format_error unless v keeps the rules of a stored vector (file comment):
/// its arrays have the sizes its value count calls for, and every block's exponent word and
/// codes are ones the format allows.
template <format_like F>
void validate(const host_vector<F>& v) {
  detail::validate_sizes(v);
  for (std::size_t b = 0; b < v.exponents.size(); ++b) detail::validate_block(v, b);
}

/// Value i of a host vector (random access). Checks what value i needs, so it never reads
/// outside v's arrays: their sizes and value i's block (squeeze::format_error, as validate),
/// and i < v.size (squeeze::invalid_argument).
template <format_like F>
typename F::float_type decode_at(const host_vector<F>& v, std::size_t i) {
  detail::validate_sizes(v);
  if (i >= v.size) {
    throw invalid_argument{"frsz2::decode_at: value " + std::to_string(i) +
                           " of a vector of " + std::to_string(v.size)};
  }
  detail::validate_block(v, i / F::block_size);
  return detail::value_at(v, i);
}

/// Host reference decoder. Throws squeeze::format_error where validate does.
template <format_like F>
std::vector<typename F::float_type> decode(const host_vector<F>& v) {
  validate(v);
  std::vector<typename F::float_type> out(v.size);  // v.size <= max_size
  for (std::size_t i = 0; i < v.size; ++i) out[i] = detail::value_at(v, i);
  return out;
}

}  // namespace squeeze::frsz2
