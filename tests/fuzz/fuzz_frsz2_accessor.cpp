// SPDX-License-Identifier: Apache-2.0
// Fuzz target: FRSZ2's decoders on arbitrary exponent words and codes. For every block that
// check_block accepts (the rules of frsz2/format.hpp), every decoder gives decode_value's bits:
// the accessor's access() (decode_code for fp64 codes of at most 32 bits), load_vector,
// tile_reader (4 and 8 values a thread; read by read and through decode_each and, fp64,
// decode_each_scaled), decode_at, decode, and the per-code decoders the warp decoder uses
// (compress.cuh). validate accepts a vector exactly when every block passes check_block;
// decode and decode_at refuse the others with squeeze::format_error. A NaN is only the NaN
// code of a nonfinite block, with the canonical bits; every other accepted code decodes to a
// finite value or its infinity.
//
// Input: [format][flags][exponent words ...][codes or payload words ...], both parts read
// cyclically so that every input fills a vector of 256 values (whole tiles of both readers).
#include <squeeze/frsz2/accessor.hpp>

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>
#include <type_traits>
#include <vector>

#include "fuzz/fuzz_support.hpp"

namespace frsz2 = squeeze::frsz2;

namespace {

/// Bytes read cyclically from [data, data + size); zeros when empty.
struct cyclic {
  const std::uint8_t* data;
  std::size_t size;
  std::size_t at = 0;
  std::uint8_t next() {
    if (size == 0) return 0;
    const std::uint8_t b = data[at];
    at = at + 1 == size ? 0 : at + 1;
    return b;
  }
  std::uint64_t next_bits(int bits) {
    std::uint64_t v = 0;
    for (int done = 0; done < bits; done += 8) v |= std::uint64_t{next()} << done;
    return bits >= 64 ? v : v & ((std::uint64_t{1} << bits) - 1);
  }
};

constexpr std::size_t values = 256;  // whole tiles of tile_reader<., ., 4> and <., ., 8>

/// Exponents worth reaching often: around 0, the tiny-block threshold 32, 1 and the top.
constexpr std::uint16_t interesting_eb[] = {
    0,   1,   2,   3,   29,   30,   31,   32,   33,   34,   60,   100,  126,  127,  128,  200, 252,
    253, 254, 255, 256, 1000, 1022, 1023, 1024, 1050, 2043, 2044, 2045, 2046, 2047, 2048, 4095};

template <class F>
using bits_of = typename F::bits_type;

template <class F>
bits_of<F> bits(typename F::float_type x) {
  return std::bit_cast<bits_of<F>>(x);
}

template <class F>
void run(cyclic& exps, cyclic& codes, std::uint8_t flags) {
  using T = typename F::float_type;
  using B = bits_of<F>;
  constexpr std::size_t nblocks = F::blocks(values);
  frsz2::host_vector<F> v;
  v.size = values;
  v.payload.assign(F::payload_words(values), 0u);
  v.exponents.assign(nblocks, 0);

  // Exponent words: raw, raw with the rules' bits cleared, or from the table (1 byte each).
  const int exp_mode = flags & 3;
  for (auto& w : v.exponents) {
    if (exp_mode == 0) {
      w = static_cast<std::uint16_t>(exps.next() | exps.next() << 8);
    } else if (exp_mode == 1) {
      const auto raw = static_cast<std::uint16_t>(exps.next() | exps.next() << 8);
      const auto eb =
          static_cast<std::uint16_t>((raw & F::exponent_field) % (F::exponent_all_ones + 1));
      w = static_cast<std::uint16_t>((raw & F::nonfinite_flag) | eb);
    } else {
      const std::uint8_t b = exps.next();
      std::uint16_t eb = interesting_eb[(b & 0x7f) % std::size(interesting_eb)];
      if (exp_mode == 3 && eb > F::exponent_all_ones) eb = F::exponent_all_ones;
      w = static_cast<std::uint16_t>(eb | ((b & 0x80) != 0 ? F::nonfinite_flag : 0));
    }
  }
  // Payload: raw words (padding bits included), or codes; codes optionally kept below the
  // top clamp where Eb is the top (the infinity code stays).
  if ((flags & 4) == 0) {
    for (auto& word : v.payload) word = static_cast<std::uint32_t>(codes.next_bits(32));
  } else {
    const bool clamp = (flags & 8) != 0;
    for (std::size_t i = 0; i < values; ++i) {
      const std::size_t b = i / F::block_size;
      const std::uint16_t w = v.exponents[b];
      auto code = static_cast<B>(codes.next_bits(F::bits));
      const B q = code & F::q_max;
      if (clamp && (w & F::exponent_field) == F::exponent_all_ones && q > F::q_top &&
          !((w & F::nonfinite_flag) != 0 && q == F::q_max)) {
        code = static_cast<B>((code & F::sign_bit) | (q & F::q_top));
      }
      frsz2::deposit_code<F>(v.payload.data() + b * F::words_per_block,
                             static_cast<std::uint32_t>(i % F::block_size), code);
    }
  }

  // The reference, block by block.
  bool all_ok = true;
  std::vector<bool> ok(nblocks);
  std::vector<B> want(values);
  for (std::size_t b = 0; b < nblocks; ++b) {
    const std::uint32_t* words = v.payload.data() + b * F::words_per_block;
    ok[b] = frsz2::check_block<F>(v.exponents[b], words, F::block_size) == frsz2::block_fault::none;
    all_ok = all_ok && ok[b];
  }
  for (std::size_t i = 0; i < values; ++i) {
    const std::size_t b = i / F::block_size;
    const std::uint16_t w = v.exponents[b];
    const B code = frsz2::read_code<F>(v.payload.data() + b * F::words_per_block,
                                       static_cast<std::uint32_t>(i % F::block_size));
    const T ref = frsz2::decode_value<F>(code, w);
    want[i] = bits<F>(ref);
    if (!ok[b]) continue;
    // What an accepted code decodes to: NaN only from the NaN code, with canonical bits;
    // an infinity only from the infinity code; everything else finite.
    const B q = code & F::q_max;
    const bool flagged = (w & F::nonfinite_flag) != 0;
    const bool nan_code = flagged && q == 0 && (code & F::sign_bit) != 0;
    const bool inf_code = flagged && q == F::q_max;
    if (nan_code) {
      SQUEEZE_FUZZ_ASSERT_TRUE(want[i] == bits<F>(std::numeric_limits<T>::quiet_NaN()));
    } else if (inf_code) {
      SQUEEZE_FUZZ_ASSERT_TRUE(std::isinf(ref) && std::signbit(ref) == ((code & F::sign_bit) != 0));
    } else {
      SQUEEZE_FUZZ_ASSERT_TRUE(std::isfinite(ref));
    }
    // The per-code decoders of the warp decoder (compress.cuh's warp_decode).
    if constexpr (std::is_same_v<T, double> && F::bits <= 32) {
      SQUEEZE_FUZZ_ASSERT_TRUE(
          bits<F>(frsz2::detail::decode_code<F>(static_cast<std::uint32_t>(code), w)) == want[i]);
    } else if constexpr (std::is_same_v<T, float>) {
      if (w <= 254) {
        SQUEEZE_FUZZ_ASSERT_TRUE(bits<F>(frsz2::detail::decode_code_finite<F>(
                                     static_cast<std::uint32_t>(code), w)) == want[i]);
      }
    }
  }

  // The host decoders: accepted exactly when every block is, refused with format_error.
  try {
    frsz2::validate(v);
    SQUEEZE_FUZZ_ASSERT_TRUE(all_ok);
    const auto y = frsz2::decode(v);
    SQUEEZE_FUZZ_ASSERT_TRUE(y.size() == values);
    for (std::size_t i = 0; i < values; ++i) SQUEEZE_FUZZ_ASSERT_TRUE(bits<F>(y[i]) == want[i]);
  } catch (const squeeze::error& e) {
    SQUEEZE_FUZZ_ASSERT_TRUE(!all_ok && dynamic_cast<const squeeze::format_error*>(&e) != nullptr);
  }
  for (std::size_t i = 0; i < values; i += 1 + i % 7) {
    const std::size_t b = i / F::block_size;
    if (!ok[b] && i % F::block_size > 6) continue;  // (a throw costs more than a decode)
    try {
      SQUEEZE_FUZZ_ASSERT_TRUE(bits<F>(frsz2::decode_at(v, i)) == want[i]);
      SQUEEZE_FUZZ_ASSERT_TRUE(ok[b]);
    } catch (const squeeze::error& e) {
      SQUEEZE_FUZZ_ASSERT_TRUE(!ok[b] && dynamic_cast<const squeeze::format_error*>(&e) != nullptr);
    }
  }

  // The accessor: access(), offset(), load_vector.
  const frsz2::compressed_handle<F> h{v.payload.data(), v.exponents.data(), 0};
  const frsz2::accessor<F, T> acc;
  for (std::size_t i = 0; i < values; ++i) {
    if (ok[i / F::block_size]) SQUEEZE_FUZZ_ASSERT_TRUE(bits<F>(acc.access(h, i)) == want[i]);
  }
  const auto h12 = acc.offset(h, 12);
  for (std::size_t i = 0; i + 12 < values; i += 5) {
    if (ok[(i + 12) / F::block_size])
      SQUEEZE_FUZZ_ASSERT_TRUE(bits<F>(acc.access(h12, i)) == want[i + 12]);
  }
  for (const std::size_t first : {std::size_t{0}, std::size_t{4}}) {
    const auto hf = acc.offset(h, first);
    for (std::size_t i = 0; first + i + 4 <= values; i += 4) {
      T got[frsz2::vector_values];
      acc.load_vector(hf, i, got);
      for (std::size_t c = 0; c < 4; ++c) {
        const std::size_t at = first + i + c;
        if (ok[at / F::block_size]) SQUEEZE_FUZZ_ASSERT_TRUE(bits<F>(got[c]) == want[at]);
      }
    }
  }

  // tile_reader, 4 and 8 values a thread: read by read, and two reads by decode_each.
  auto tiles = [&](auto reader_tag) {
    using reader_type = decltype(reader_tag);
    constexpr int V = reader_type::values;
    constexpr std::size_t tile = reader_type::tile_values;
    constexpr std::size_t ntiles = values / tile;
    for (unsigned lane = 0; lane < 32; ++lane) {
      const reader_type reader{h, lane};
      auto check = [&](std::size_t t, const T(&got)[V]) {
        for (int c = 0; c < V; ++c) {
          const std::size_t at = tile * t + V * lane + static_cast<std::size_t>(c);
          if (ok[at / F::block_size]) SQUEEZE_FUZZ_ASSERT_TRUE(bits<F>(got[c]) == want[at]);
        }
      };
      typename reader_type::vector_type raw[ntiles];
      for (std::size_t t = 0; t < ntiles; ++t) {
        raw[t] = reader.read(t);
        T got[V];
        reader.decode(raw[t], got);
        check(t, got);
      }
      int calls = 0;
      reader.decode_each(raw, [&](int k, const T(&got)[V]) {
        SQUEEZE_FUZZ_ASSERT_TRUE(k == calls++);
        check(static_cast<std::size_t>(k), got);
      });
      SQUEEZE_FUZZ_ASSERT_TRUE(calls == static_cast<int>(ntiles));
      if constexpr (std::is_same_v<T, double>) {  // the values as q * scale
        calls = 0;
        reader.decode_each_scaled(raw, [&](int k, const double(&q)[V], double scale) {
          SQUEEZE_FUZZ_ASSERT_TRUE(k == calls++);
          double got[V];
          for (int c = 0; c < V; ++c) got[c] = scale == 1.0 ? q[c] : q[c] * scale;
          check(static_cast<std::size_t>(k), got);
        });
        SQUEEZE_FUZZ_ASSERT_TRUE(calls == static_cast<int>(ntiles));
      }
    }
  };
  tiles(frsz2::tile_reader<F, T, 4>{h, 0});
  tiles(frsz2::tile_reader<F, T, 8>{h, 0});
}

using runner = void (*)(cyclic&, cyclic&, std::uint8_t);

constexpr runner formats[] = {
    // fp64, blocks of 32: every path of the accessor (8/16/32 tiled loads, windows of
    // straddling codes, l > 32 through decode_value)
    run<frsz2::format<2>>, run<frsz2::format<3>>, run<frsz2::format<5>>, run<frsz2::format<7>>,
    run<frsz2::format<8>>, run<frsz2::format<11>>, run<frsz2::format<16>>, run<frsz2::format<21>>,
    run<frsz2::format<24>>, run<frsz2::format<31>>, run<frsz2::format<32>>, run<frsz2::format<33>>,
    run<frsz2::format<40>>, run<frsz2::format<64>>,
    // other block sizes (lean tile paths, and the fallbacks for BS < 4 and BS > the tile)
    run<frsz2::format<21, double, 4>>, run<frsz2::format<13, double, 8>>,
    run<frsz2::format<16, double, 8>>, run<frsz2::format<21, double, 2>>,
    run<frsz2::format<16, double, 64>>, run<frsz2::format<21, double, 256>>,
    // fp32
    run<frsz2::format<2, float>>, run<frsz2::format<8, float>>, run<frsz2::format<16, float>>,
    run<frsz2::format<21, float>>, run<frsz2::format<25, float>>, run<frsz2::format<32, float>>,
    run<frsz2::format<32, float, 64>>};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  const std::uint8_t format = data[0], flags = data[1];
  data += 2;
  size -= 2;
  // The first part (up to 2 bytes an exponent word of the largest vector) feeds the
  // exponent words, the rest the payload; a part that is empty reads as the other.
  const std::size_t exp_bytes = size < 256 ? size / 2 : 256;
  cyclic exps{data, exp_bytes};
  cyclic codes{data + exp_bytes, size - exp_bytes};
  if (exp_bytes == 0) exps = codes;
  if (size == exp_bytes) codes = cyclic{data, exp_bytes};
  formats[format % std::size(formats)](exps, codes, flags);
  return 0;
}
