// SPDX-License-Identifier: Apache-2.0
// Fuzz target: FRSZ2 host vectors (frsz2/format.hpp) from outside: a format, a value count,
// payload words and exponent words. validate accepts a vector exactly when its sizes fit
// and every block keeps the format's rules (check_block), and refuses the rest with
// squeeze::format_error; decode then agrees with decode_at on every value, decode_at refuses
// what it cannot read (never reading outside the arrays: AddressSanitizer watches), the
// size arithmetic is exact or reported as not fitting, and the decoded values re-encode
// exactly where the format promises it. Values encoded from arbitrary floats validate and
// keep the format's promises (bounds, signs, zeros, infinities, NaN, exactness).
//
// Input: [format][flags][fields ...]; flags % 3 picks what the rest is:
//   0  a vector of at most 1024 values: its exponent words and payload (read cyclically)
//   1  a vector whose value count is any 64-bit size (near 2^64, near max_size, ...) and
//      whose arrays have sizes of their own
//   2  values to encode: raw floats, or picked from a table of special values
#include <squeeze/frsz2/format.hpp>

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <optional>
#include <type_traits>
#include <vector>

#include "fuzz/fuzz_support.hpp"

namespace frsz2 = squeeze::frsz2;

namespace {

__extension__ typedef unsigned __int128 u128;

/// Runs fn; true when it throws a squeeze::error, which must be an E.
template <class E, class Fn>
bool throws(Fn&& fn) {
  try {
    fn();
    return false;
  } catch (const squeeze::error& e) {
    SQUEEZE_FUZZ_ASSERT_TRUE(dynamic_cast<const E*>(&e) != nullptr);
    return true;
  }
}

/// The input: fields taken in order (zeros past the end), or bytes read cyclically.
struct input {
  const std::uint8_t* data;
  std::size_t size;
  std::size_t at = 0;
  template <class T>
  T take() {
    T v{};
    const std::size_t n = size - at < sizeof(T) ? size - at : sizeof(T);
    if (n > 0) std::memcpy(&v, data + at, n);
    at += n;
    return v;
  }
  /// The next byte of the rest, cyclically (0 when nothing is left).
  std::uint8_t cycle() {
    if (at >= size) return 0;
    const std::uint8_t b = data[at + cyc];
    cyc = at + cyc + 1 == size ? 0 : cyc + 1;
    return b;
  }
  std::uint64_t cycle_bits(int bits) {
    std::uint64_t v = 0;
    for (int done = 0; done < bits; done += 8) v |= std::uint64_t{cycle()} << done;
    return bits >= 64 ? v : v & ((std::uint64_t{1} << bits) - 1);
  }
  std::size_t cyc = 0;
};

template <class F>
typename F::bits_type bits(typename F::float_type x) {
  return std::bit_cast<typename F::bits_type>(x);
}

/// The size arithmetic for any n: exact_blocks exact, the checked counts exact or absent
/// exactly when they do not fit, the unchecked ones equal to them for n <= max_size.
template <class F>
void check_counts(std::size_t n) {
  const u128 blocks = (u128{n} + F::block_size - 1) / F::block_size;
  SQUEEZE_FUZZ_ASSERT_TRUE(u128{F::exact_blocks(n)} == blocks);
  const u128 words = blocks * F::words_per_block;
  const u128 bytes = words * 4 + blocks * 2;
  constexpr u128 most = std::numeric_limits<std::size_t>::max();
  const std::optional<std::size_t> cw = F::checked_payload_words(n);
  const std::optional<std::size_t> cb = F::checked_bytes(n);
  SQUEEZE_FUZZ_ASSERT_TRUE(cw ? u128{*cw} == words : words > most);
  SQUEEZE_FUZZ_ASSERT_TRUE(cb ? u128{*cb} == bytes : bytes > most);
  if (n <= F::max_size) {
    SQUEEZE_FUZZ_ASSERT_TRUE(cw && cb && F::blocks(n) == F::exact_blocks(n));
    SQUEEZE_FUZZ_ASSERT_TRUE(*cw == F::payload_words(n) && *cb == F::bytes(n));
  }
}

template <class F>
int count_in(const frsz2::host_vector<F>& v, std::size_t b) {
  const std::size_t first = b * F::block_size;
  return static_cast<int>(v.size - first < F::block_size ? v.size - first : F::block_size);
}

template <class F>
typename F::bits_type code_at(const frsz2::host_vector<F>& v, std::size_t i) {
  return frsz2::read_code<F>(v.payload.data() + i / F::block_size * F::words_per_block,
                             static_cast<std::uint32_t>(i % F::block_size));
}

/// Whether the format promises that block b of v re-encodes exactly (format.hpp).
template <class F>
bool reencodes_exactly(const frsz2::host_vector<F>& v, std::size_t b) {
  const std::uint16_t w = v.exponents[b];
  const std::uint32_t eb = w & F::exponent_field;
  if ((w & F::nonfinite_flag) == 0) return eb >= 1;
  if (eb < 2) return false;
  for (int k = 0; k < count_in(v, b); ++k) {
    const auto code = code_at(v, b * F::block_size + static_cast<std::size_t>(k));
    const auto q = code & F::q_max;
    const bool special = q == F::q_max || (q == 0 && (code & F::sign_bit) != 0);
    if (!special && q > F::q_top) return false;
  }
  return true;
}

/// A vector whose sizes are consistent (n <= 1024): validate's verdict is check_block's on
/// every block; decode, decode_at and the re-encoding agree with the reference.
template <class F>
void check_vector(const frsz2::host_vector<F>& v) {
  using T = typename F::float_type;
  const std::size_t nblocks = v.exponents.size();
  std::vector<bool> ok(nblocks);
  bool all_ok = true;
  for (std::size_t b = 0; b < nblocks; ++b) {
    ok[b] = frsz2::check_block<F>(v.exponents[b], v.payload.data() + b * F::words_per_block,
                                  count_in(v, b)) == frsz2::block_fault::none;
    all_ok = all_ok && ok[b];
  }
  SQUEEZE_FUZZ_ASSERT_TRUE(throws<squeeze::format_error>([&] { frsz2::validate(v); }) == !all_ok);
  // decode_at: value i, or a format_error for a value of a bad block (its first and last
  // value: a throw costs more than a decode); never past the end.
  for (std::size_t i = 0; i < v.size; ++i) {
    const std::size_t b = i / F::block_size, k = i % F::block_size;
    if (!ok[b] && k != 0 && k != F::block_size - 1 && i + 1 != v.size) continue;
    const auto want = bits<F>(frsz2::decode_value<F>(code_at(v, i), v.exponents[b]));
    T got{};
    SQUEEZE_FUZZ_ASSERT_TRUE(throws<squeeze::format_error>([&] { got = frsz2::decode_at(v, i); }) ==
                             !ok[b]);
    if (ok[b]) SQUEEZE_FUZZ_ASSERT_TRUE(bits<F>(got) == want);
  }
  for (const std::size_t i : {v.size, v.size + 1, std::numeric_limits<std::size_t>::max()}) {
    SQUEEZE_FUZZ_ASSERT_TRUE(
        throws<squeeze::invalid_argument>([&] { (void)frsz2::decode_at(v, i); }));
  }
  if (!all_ok) {
    SQUEEZE_FUZZ_ASSERT_TRUE(throws<squeeze::format_error>([&] { (void)frsz2::decode(v); }));
    return;
  }
  std::vector<T> y;
  SQUEEZE_FUZZ_ASSERT_TRUE(!throws<squeeze::error>([&] { y = frsz2::decode(v); }));
  SQUEEZE_FUZZ_ASSERT_TRUE(y.size() == v.size);
  for (std::size_t i = 0; i < v.size; ++i) {
    SQUEEZE_FUZZ_ASSERT_TRUE(bits<F>(y[i]) == bits<F>(frsz2::decode_value<F>(
                                                  code_at(v, i), v.exponents[i / F::block_size])));
  }
  // Re-encoding: the encoder's output validates; promised blocks decode to the same bits.
  for (const auto mode : {frsz2::rounding::nearest, frsz2::rounding::truncate}) {
    const auto v2 = frsz2::encode<F>(y, mode);
    std::vector<T> y2;
    SQUEEZE_FUZZ_ASSERT_TRUE(!throws<squeeze::error>([&] { y2 = frsz2::decode(v2); }));
    for (std::size_t i = 0; i < v.size; ++i) {
      if (reencodes_exactly(v, i / F::block_size))
        SQUEEZE_FUZZ_ASSERT_TRUE(bits<F>(y2[i]) == bits<F>(y[i]));
    }
  }
}

/// An exponent word from two input bytes: raw, with the rules' bits cleared (top: the
/// format's largest Eb), or from a table of exponents worth reaching. (Not a template, like
/// pick_size: the choice is one set of branches for every format, so a small corpus covers it.)
std::uint16_t exponent_word(std::uint16_t raw, std::uint8_t how, std::uint32_t top) {
  static constexpr std::uint16_t table[] = {0,    1,    2,    3,    31,   32,  33,   126,
                                            127,  128,  253,  254,  255,  256, 1022, 1023,
                                            1024, 2045, 2046, 2047, 2048, 4095};
  constexpr std::uint16_t flag = 0x8000, field = 0x0fff;
  switch (how & 3) {
    case 0: return raw;
    case 1: return static_cast<std::uint16_t>((raw & flag) | (raw & field) % (top + 1));
    default:
      return static_cast<std::uint16_t>(table[(raw & 0xff) % std::size(table)] | (raw & flag));
  }
}

/// A value count from a raw 64-bit field: as it is, near 2^64, near max_size, small, near the
/// largest multiple of the block size, or near a power of two.
std::size_t pick_size(std::uint64_t raw, std::uint8_t variant, std::size_t max_size,
                      std::size_t block_size) {
  constexpr std::size_t most = std::numeric_limits<std::size_t>::max();
  switch (variant % 6) {
    case 0: return raw;
    case 1: return most - (raw & 0xffff);
    case 2: return max_size - 128 + (raw & 0xff);
    case 3: return raw & 0x3ff;
    case 4: return most / block_size * block_size - (raw & 0xff);
    default: return (raw & 0xff) + (std::size_t{1} << ((raw >> 8) % 64));
  }
}

/// Fills v's exponent words (exponent_word) and payload from the input: raw words, or codes
/// (optionally kept below the clamp at the top exponent).
template <class F>
void fill(frsz2::host_vector<F>& v, input& in, std::uint8_t how) {
  for (auto& w : v.exponents) {
    const auto raw = static_cast<std::uint16_t>(in.cycle() | in.cycle() << 8);
    w = exponent_word(raw, how, F::exponent_all_ones);
  }
  if ((how & 4) == 0) {
    for (auto& word : v.payload) word = static_cast<std::uint32_t>(in.cycle_bits(32));
    return;
  }
  // codes; the last block's codes past n stay 0, as the encoder leaves them
  for (std::size_t i = 0; i < v.size && i < v.exponents.size() * F::block_size; ++i) {
    const std::size_t b = i / F::block_size;
    const std::uint16_t w = v.exponents[b];
    auto code = static_cast<typename F::bits_type>(in.cycle_bits(F::bits));
    const auto q = code & F::q_max;
    if ((how & 8) != 0 && (w & F::exponent_field) == F::exponent_all_ones && q > F::q_top &&
        !((w & F::nonfinite_flag) != 0 && q == F::q_max)) {
      code = (code & F::sign_bit) | (q & F::q_top);
    }
    if (b * F::words_per_block + F::words_per_block <= v.payload.size()) {
      frsz2::deposit_code<F>(v.payload.data() + b * F::words_per_block,
                             static_cast<std::uint32_t>(i % F::block_size), code);
    }
  }
}

template <class F>
void words_case(input& in, std::uint8_t flags) {
  frsz2::host_vector<F> v;
  v.size = in.take<std::uint16_t>() % 1025u;
  v.payload.assign(F::payload_words(v.size), 0u);
  v.exponents.assign(F::blocks(v.size), 0);
  fill(v, in, static_cast<std::uint8_t>(flags >> 2));
  check_vector(v);
}

template <class F>
void sizes_case(input& in, std::uint8_t flags) {
  const auto raw = in.take<std::uint64_t>();
  const auto words = in.take<std::uint16_t>() % 1025u;
  const auto exps = in.take<std::uint16_t>() % 257u;
  const std::size_t n =
      pick_size(raw, static_cast<std::uint8_t>(flags >> 2), F::max_size, F::block_size);
  check_counts<F>(n);
  frsz2::host_vector<F> v;
  v.size = n;
  v.payload.assign(words, 0u);
  v.exponents.assign(exps, 0);
  fill(v, in, static_cast<std::uint8_t>(flags >> 5));
  const bool sizes_fit = n <= F::max_size && F::payload_words(n) == v.payload.size() &&
                         F::blocks(n) == v.exponents.size();
  if (sizes_fit) {
    check_vector(v);
    return;
  }
  SQUEEZE_FUZZ_ASSERT_TRUE(throws<squeeze::format_error>([&] { frsz2::validate(v); }));
  SQUEEZE_FUZZ_ASSERT_TRUE(throws<squeeze::format_error>([&] { (void)frsz2::decode(v); }));
  for (const std::size_t i : {std::size_t{0}, n / 2, n - 1, n, static_cast<std::size_t>(raw)}) {
    SQUEEZE_FUZZ_ASSERT_TRUE(throws<squeeze::error>([&] { (void)frsz2::decode_at(v, i); }));
  }
}

/// Values from the input: raw floats, or (flags) special values from a table.
template <class T>
std::vector<T> values_from(input& in, bool table) {
  using L = std::numeric_limits<T>;
  std::vector<T> x;
  while (in.at < in.size && x.size() < 1024) {
    if (!table) {
      x.push_back(in.take<T>());
      continue;
    }
    const auto kind = in.take<std::uint8_t>();
    const auto arg = in.take<std::uint8_t>();
    const T s = (kind & 0x80) != 0 ? T{-1} : T{1};
    switch (kind % 12) {
      case 0: x.push_back(s * T{0}); break;
      case 1: x.push_back(s * L::infinity()); break;
      case 2: x.push_back(s * L::quiet_NaN()); break;
      case 3: x.push_back(s * L::max()); break;
      case 4: x.push_back(s * std::nextafter(L::max(), T{0}) * T(arg) / T{256}); break;
      case 5: x.push_back(s * L::denorm_min() * T(arg + 1)); break;
      case 6: x.push_back(s * L::min() * (T{1} + T(arg) / T{256})); break;
      case 7: x.push_back(s * std::ldexp(T{1} + T(arg) / T{256}, arg - 128)); break;
      case 8: x.push_back(s * std::ldexp(T{1}, L::max_exponent - 1 - arg % 4)); break;
      case 9: x.push_back(s * (T{2} - std::ldexp(T{1}, -(arg % (L::digits + 1))))); break;
      case 10: x.push_back(s * std::ldexp(T{1}, L::min_exponent - 1 - arg % L::digits)); break;
      default: x.push_back(in.take<T>()); break;
    }
  }
  return x;
}

template <class F>
void values_case(input& in, std::uint8_t flags) {
  using T = typename F::float_type;
  using B = typename F::bits_type;
  constexpr std::uint32_t top = F::exponent_all_ones;
  const std::vector<T> x = values_from<T>(in, (flags & 4) != 0);
  for (const auto mode : {frsz2::rounding::nearest, frsz2::rounding::truncate}) {
    const auto v = frsz2::encode<F>(x, mode);
    std::vector<T> y;
    SQUEEZE_FUZZ_ASSERT_TRUE(!throws<squeeze::error>([&] { y = frsz2::decode(v); }));
    SQUEEZE_FUZZ_ASSERT_TRUE(y.size() == x.size());
    for (std::size_t b = 0; b < v.exponents.size(); ++b) {
      const std::size_t first = b * F::block_size;
      const std::size_t last = std::min(x.size(), first + F::block_size);
      bool flagged = false;
      std::uint32_t emax = 0;
      for (std::size_t i = first; i < last; ++i) {
        const std::uint32_t e = frsz2::value_exponent(x[i]);
        if (e == top)
          flagged = true;
        else if (e > emax)
          emax = e;
      }
      const std::uint16_t w = v.exponents[b];
      const std::uint32_t eb = w & F::exponent_field;
      SQUEEZE_FUZZ_ASSERT_TRUE(((w & F::nonfinite_flag) != 0) == flagged &&
                               (w & F::reserved_bits) == 0);
      // Eb: emax + 1 with the flag; zero_block_exponent for zeros only; else emax, or emax + 1
      // when rounding to nearest carries.
      SQUEEZE_FUZZ_ASSERT_TRUE(
          flagged     ? eb == emax + 1
          : emax == 0 ? eb == F::zero_block_exponent
                      : eb == emax || (mode == frsz2::rounding::nearest && eb == emax + 1));
      const long double ulp = std::ldexp(1.0L, static_cast<int>(eb) - F::bias - (F::bits - 2));
      for (std::size_t i = first; i < last; ++i) {
        SQUEEZE_FUZZ_ASSERT_TRUE(bits<F>(frsz2::decode_at(v, i)) == bits<F>(y[i]));
        if (std::isnan(x[i])) {
          SQUEEZE_FUZZ_ASSERT_TRUE(bits<F>(y[i]) == bits<F>(std::numeric_limits<T>::quiet_NaN()));
          continue;
        }
        if (std::isinf(x[i])) {
          SQUEEZE_FUZZ_ASSERT_TRUE(bits<F>(y[i]) == bits<F>(x[i]));
          continue;
        }
        SQUEEZE_FUZZ_ASSERT_TRUE(std::isfinite(y[i]));
        if (flagged && (F::bits == 2 || y[i] == T{0})) {
          SQUEEZE_FUZZ_ASSERT_TRUE(bits<F>(y[i]) == B{0});  // zeros of a nonfinite block are +0
          continue;
        }
        SQUEEZE_FUZZ_ASSERT_TRUE(std::signbit(y[i]) == std::signbit(x[i]));
        if (eb >= top) continue;  // clamped near the top: no bound
        const long double err =
            std::fabs(static_cast<long double>(y[i]) - static_cast<long double>(x[i]));
        if (mode == frsz2::rounding::nearest) {
          SQUEEZE_FUZZ_ASSERT_TRUE(err <= ulp / 2);
        } else {
          SQUEEZE_FUZZ_ASSERT_TRUE(err < ulp && std::fabs(y[i]) <= std::fabs(x[i]));
        }
        const auto e = static_cast<int>(frsz2::value_exponent(x[i]));
        if (e >= 1 && F::bits - 2 >= F::mantissa_bits + (static_cast<int>(eb) - e)) {
          SQUEEZE_FUZZ_ASSERT_TRUE(bits<F>(y[i]) == bits<F>(x[i]));
        }
      }
    }
    check_vector(v);
  }
}

template <class F>
void run(input& in, std::uint8_t flags) {
  switch (flags % 3) {
    case 0: words_case<F>(in, static_cast<std::uint8_t>(flags / 3)); break;
    case 1: sizes_case<F>(in, static_cast<std::uint8_t>(flags / 3)); break;
    default: values_case<F>(in, static_cast<std::uint8_t>(flags / 3)); break;
  }
}

using runner = void (*)(input&, std::uint8_t);

constexpr runner formats[] = {
    // fp64: the shortest codes, the lengths that tile words (8, 16, 32), straddling codes
    // (21), three-word codes (64), and a block size other than 32 (partial blocks of 8)
    run<frsz2::format<2>>, run<frsz2::format<8>>, run<frsz2::format<16>>, run<frsz2::format<21>>,
    run<frsz2::format<32>>, run<frsz2::format<64>>, run<frsz2::format<21, double, 8>>,
    // fp32
    run<frsz2::format<8, float>>, run<frsz2::format<16, float>>, run<frsz2::format<21, float>>,
    run<frsz2::format<32, float>>};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  input in{data, size};
  const auto format = in.take<std::uint8_t>();
  const auto flags = in.take<std::uint8_t>();
  formats[format % std::size(formats)](in, flags);
  return 0;
}
