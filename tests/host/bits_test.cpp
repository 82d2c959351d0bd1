// SPDX-License-Identifier: Apache-2.0
// core/bits.hpp on the host: every width and offset of the bit-field functions against a
// bit-by-bit reference, the counting functions against loops on random words.
#include <squeeze/core/bits.hpp>

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace core = squeeze::core;

namespace {

template <class W>
bool ref_bit(const std::vector<W>& words, std::uint64_t i) {
  constexpr unsigned bits = core::word_bits<W>;
  return ((words[i / bits] >> (i % bits)) & W{1}) != 0;
}

template <class W>
W ref_extract(const std::vector<W>& words, std::uint64_t offset, unsigned width) {
  W v = 0;
  for (unsigned b = 0; b < width; ++b) {
    if (ref_bit(words, offset + b)) v |= W{1} << b;
  }
  return v;
}

template <class W>
std::vector<W> random_words(std::mt19937_64& rng, std::size_t n) {
  std::vector<W> w(n);
  for (auto& x : w) x = static_cast<W>(rng());
  return w;
}

template <class W>
int ref_popcount(W x) {
  int n = 0;
  for (unsigned b = 0; b < core::word_bits<W>; ++b) n += static_cast<int>((x >> b) & 1u);
  return n;
}

template <class W>
int ref_clz(W x) {
  int n = 0;
  for (int b = static_cast<int>(core::word_bits<W>) - 1; b >= 0 && ((x >> b) & 1u) == 0; --b) ++n;
  return n;
}

template <class W>
int ref_ctz(W x) {
  int n = 0;
  for (unsigned b = 0; b < core::word_bits<W> && ((x >> b) & 1u) == 0; ++b) ++n;
  return n;
}

template <class W>
class BitsTest : public ::testing::Test {};
using WordTypes = ::testing::Types<std::uint32_t, std::uint64_t>;
TYPED_TEST_SUITE(BitsTest, WordTypes);

}  // namespace

TYPED_TEST(BitsTest, ExtractMatchesReferenceForEveryWidthAndOffset) {
  using W = TypeParam;
  constexpr unsigned bits = core::word_bits<W>;
  std::mt19937_64 rng{0x5eed0001};
  // Three words: every offset in the first two words and every width up to a full word,
  // so fields inside one word and fields straddling a boundary are all covered.
  for (int trial = 0; trial < 8; ++trial) {
    const auto words = random_words<W>(rng, 3);
    for (unsigned offset = 0; offset < 2 * bits; ++offset) {
      for (unsigned width = 0; width <= bits; ++width) {
        ASSERT_EQ(core::extract_bits(words.data(), offset, width),
                  ref_extract(words, offset, width))
            << "offset " << offset << " width " << width;
      }
    }
  }
}

// The array below is exactly one word, so a read past it would be out of bounds; GCC
// cannot see that the second-word branch is not taken and warns. The test is for the
// sanitizers and valgrind (tests/host run clean under `valgrind --error-exitcode=1`).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Warray-bounds"
TYPED_TEST(BitsTest, ExtractReadsOnlyTheWordsHoldingTheField) {
  using W = TypeParam;
  constexpr unsigned bits = core::word_bits<W>;
  // A field that ends exactly at the end of the array must not touch the word after it:
  // the array is exactly one word, so a read past it would be out of bounds (ASan/valgrind).
  const std::vector<W> one{static_cast<W>(0xA5A5A5A5A5A5A5A5ull)};
  for (unsigned offset = 0; offset < bits; ++offset) {
    const unsigned width = bits - offset;
    EXPECT_EQ(core::extract_bits(one.data(), offset, width), ref_extract(one, offset, width));
  }
}
#pragma GCC diagnostic pop

TYPED_TEST(BitsTest, DepositWritesTheFieldAndNothingElse) {
  using W = TypeParam;
  constexpr unsigned bits = core::word_bits<W>;
  std::mt19937_64 rng{0x5eed0002};
  for (int trial = 0; trial < 4; ++trial) {
    const auto before = random_words<W>(rng, 3);
    for (unsigned offset = 0; offset < 2 * bits; ++offset) {
      for (unsigned width = 0; width <= bits; ++width) {
        auto words = before;
        const W value = static_cast<W>(rng());
        core::deposit_bits(words.data(), offset, width, value);
        for (std::uint64_t i = 0; i < 3 * bits; ++i) {
          const bool inside = i >= offset && i < offset + width;
          const bool expected = inside ? ((value >> (i - offset)) & 1u) != 0 : ref_bit(before, i);
          ASSERT_EQ(ref_bit(words, i), expected)
              << "bit " << i << " offset " << offset << " width " << width;
        }
        ASSERT_EQ(core::extract_bits(words.data(), offset, width),
                  value & core::low_mask<W>(width));
      }
    }
  }
}

TYPED_TEST(BitsTest, CountingMatchesLoops) {
  using W = TypeParam;
  std::mt19937_64 rng{0x5eed0003};
  std::vector<W> values{0, 1, static_cast<W>(~W{0}), W{1} << (core::word_bits<W> - 1)};
  for (int i = 0; i < 2000; ++i) {
    // Random words with random density, so leading/trailing zero counts vary widely.
    W x = static_cast<W>(rng());
    x >>= rng() % core::word_bits<W>;
    x <<= rng() % core::word_bits<W>;
    values.push_back(x);
  }
  for (const W x : values) {
    EXPECT_EQ(core::popcount(x), ref_popcount(x)) << x;
    EXPECT_EQ(core::countl_zero(x), ref_clz(x)) << x;
    EXPECT_EQ(core::countr_zero(x), ref_ctz(x)) << x;
  }
}

TYPED_TEST(BitsTest, FieldsInARegister) {
  using W = TypeParam;
  constexpr unsigned bits = core::word_bits<W>;
  std::mt19937_64 rng{0x5eed0004};
  for (int trial = 0; trial < 50; ++trial) {
    const W x = static_cast<W>(rng());
    const W v = static_cast<W>(rng());
    for (unsigned pos = 0; pos < bits; ++pos) {
      for (unsigned width = 0; pos + width <= bits; ++width) {
        const std::vector<W> word{x};
        ASSERT_EQ(core::bit_field(x, pos, width), ref_extract(word, pos, width));
        const W y = core::insert_field(x, v, pos, width);
        const std::vector<W> out{y};
        ASSERT_EQ(ref_extract(out, pos, width), v & core::low_mask<W>(width));
        const W outside = ~(core::low_mask<W>(width) << pos);
        ASSERT_EQ(y & outside, x & outside);
      }
    }
  }
}

TEST(Bits, LowMaskCoversEveryWidth) {
  for (unsigned w = 0; w <= 32; ++w) {
    EXPECT_EQ(core::popcount(core::low_mask<std::uint32_t>(w)), static_cast<int>(w));
  }
  for (unsigned w = 0; w <= 64; ++w) {
    EXPECT_EQ(core::popcount(core::low_mask<std::uint64_t>(w)), static_cast<int>(w));
  }
}

TEST(Bits, FunnelShiftTakesTheMiddleOfTwoWords) {
  std::mt19937_64 rng{0x5eed0005};
  for (int trial = 0; trial < 200; ++trial) {
    const auto lo = static_cast<std::uint32_t>(rng());
    const auto hi = static_cast<std::uint32_t>(rng());
    const std::vector<std::uint32_t> both{lo, hi};
    for (unsigned s = 0; s <= 32; ++s) {
      ASSERT_EQ(core::funnel_shift_right(lo, hi, s), ref_extract(both, s, 32)) << s;
    }
  }
}

TEST(Bits, BitCastRoundTripsAndIsConstexpr) {
  static_assert(core::bit_cast<std::uint32_t>(1.0f) == 0x3f800000u);
  static_assert(core::bit_cast<std::uint64_t>(-2.0) == 0xc000000000000000ull);
  std::mt19937_64 rng{0x5eed0006};
  for (int i = 0; i < 1000; ++i) {
    const auto bits = rng();
    const double d = core::bit_cast<double>(bits);
    EXPECT_EQ(core::bit_cast<std::uint64_t>(d), bits);
    std::uint64_t via_memcpy = 0;
    std::memcpy(&via_memcpy, &d, sizeof d);
    EXPECT_EQ(via_memcpy, bits);
  }
}

TEST(Bits, ConstantEvaluationAgreesWithRuntime) {
  static_assert(core::popcount(0xF00Fu) == 8);
  static_assert(core::countl_zero(std::uint32_t{0}) == 32);
  static_assert(core::countl_zero(std::uint64_t{1}) == 63);
  static_assert(core::countr_zero(std::uint64_t{0}) == 64);
  static_assert(core::countr_zero(std::uint32_t{0x80}) == 7);
  static_assert(core::funnel_shift_right(0x89abcdefu, 0x01234567u, 8) == 0x6789abcdu);
  constexpr std::array<std::uint32_t, 2> words{0xF0000000u, 0x0000000Fu};
  static_assert(core::extract_bits(words.data(), 28, 8) == 0xFFu);
  volatile std::uint32_t x = 0xF00Fu;  // force the runtime path
  EXPECT_EQ(core::popcount(static_cast<std::uint32_t>(x)), 8);
}

TEST(Bits, Alignment) {
  EXPECT_EQ(core::align_up<std::size_t>(0, 128), 0u);
  EXPECT_EQ(core::align_up<std::size_t>(1, 128), 128u);
  EXPECT_EQ(core::align_up<std::size_t>(128, 128), 128u);
  EXPECT_EQ(core::align_down<std::size_t>(255, 128), 128u);
  EXPECT_EQ(core::div_ceil(10, 3), 4);
  EXPECT_EQ(core::div_ceil(9, 3), 3);
  EXPECT_TRUE(core::is_pow2(64u));
  EXPECT_FALSE(core::is_pow2(0u));
  EXPECT_FALSE(core::is_pow2(96u));
  alignas(128) std::array<std::byte, 256> buf{};
  for (std::size_t i = 0; i < 128; ++i) EXPECT_EQ(core::misalignment(buf.data() + i, 128), i);
}

namespace {

std::uint64_t ref_pext(std::uint64_t x, std::uint64_t m) {
  std::uint64_t out = 0;
  int k = 0;
  for (int b = 0; b < 64; ++b) {
    if ((m >> b) & 1u) out |= ((x >> b) & 1u) << k++;
  }
  return out;
}

std::uint64_t ref_pdep(std::uint64_t x, std::uint64_t m) {
  std::uint64_t out = 0;
  int k = 0;
  for (int b = 0; b < 64; ++b) {
    if ((m >> b) & 1u) out |= ((x >> k++) & 1u) << b;
  }
  return out;
}

}  // namespace

TEST(Bits, PextPdepMatchBitLoopsAndInvertEachOther) {
  std::mt19937_64 rng{0x5eed0007};
  std::vector<std::uint64_t> masks{0, ~std::uint64_t{0}, 1, std::uint64_t{1} << 63,
                                   0xF0F0F0F0F0F0F0F0ull};
  for (int i = 0; i < 3000; ++i) masks.push_back(rng() & rng());  // sparse and dense masks
  for (const std::uint64_t m : masks) {
    const std::uint64_t x = rng();
    ASSERT_EQ(core::pext(x, m), ref_pext(x, m)) << std::hex << x << " " << m;
    ASSERT_EQ(core::pdep(x, m), ref_pdep(x, m)) << std::hex << x << " " << m;
    ASSERT_EQ(core::pdep(core::pext(x, m), m), x & m);
  }
  static_assert(core::pext(0b1011'0110u, 0b1111'0000u) == 0b1011u);
  static_assert(core::pdep(0b1011u, 0b1111'0000u) == 0b1011'0000u);
}

TEST(Bits, ByteArrayFieldsEveryWidthAndOffset) {
  std::mt19937_64 rng{0x5eed0008};
  for (int trial = 0; trial < 4; ++trial) {
    std::vector<std::byte> before(20);
    for (auto& b : before) b = static_cast<std::byte>(rng());
    // The same bits seen as 64-bit words: the reference for reads.
    std::vector<std::uint64_t> words(3, 0);
    std::memcpy(words.data(), before.data(), before.size());
    for (unsigned offset = 0; offset < 80; ++offset) {
      for (unsigned width = 0; width <= 64; ++width) {
        ASSERT_EQ(core::read_bits(before.data(), offset, width), ref_extract(words, offset, width))
            << "offset " << offset << " width " << width;
        auto after = before;
        const std::uint64_t value = rng();
        core::write_bits(after.data(), offset, width, value);
        std::vector<std::uint64_t> got(3, 0);
        std::memcpy(got.data(), after.data(), after.size());
        for (unsigned bit = 0; bit < 160; ++bit) {
          const bool inside = bit >= offset && bit < offset + width;
          const bool want = inside ? ((value >> (bit - offset)) & 1u) != 0 : ref_bit(words, bit);
          ASSERT_EQ(ref_bit(got, bit), want)
              << "bit " << bit << " offset " << offset << " width " << width;
        }
      }
    }
  }
}

TEST(Bits, ByteArrayFieldsTouchOnlyTheirBytes) {
  // A field ending exactly at the end of the array must not touch the byte after it.
  std::vector<std::byte> buf(3, std::byte{0x5A});
  core::write_bits(buf.data(), 5, 19, 0x7FFFF);  // bits 5..23: the last bit of byte 2
  EXPECT_EQ(core::read_bits(buf.data(), 5, 19), 0x7FFFFu);
  EXPECT_EQ(static_cast<unsigned>(buf[0]) & 0x1Fu, 0x1Au);
}
