// SPDX-License-Identifier: Apache-2.0
// Fuzz target: ibp's wire messages (ibp/wire_format.hpp) as a decoder of n floats or
// doubles receives them. The header checks (check_wire_header, the layout they give) and
// the reference decoder must refuse a malformed message (a wire_fault; wire_decode_values:
// a squeeze::format_error) and never read past it or write past the output; an accepted
// header puts every section inside the message; an accepted message's values, encoded
// again, decode to the same bits (the format is lossless).
//
// Input, little-endian (missing bytes read as zero):
//   u8  flags   bit 0: double (else float)   bit 1: n is a u64 (else a u16)
//               bit 2: n is the header's value count (the n field is skipped)
//               bit 3: the header's check word is recomputed (so header fields can vary)
//               bit 4: the header's sizes are recomputed from its n, V and L as a writer
//                      would, wrapping (raw: P = n·V, total = 64 + P; compressed: R and
//                      total = payload offset + P), before the check word
//   n   (u16 or u64, unless bit 2)
//   the message: every byte left
#include <squeeze/ibp/wire_format.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "fuzz/fuzz_support.hpp"

namespace ibp = squeeze::ibp;
using ibp::wire_fault;

namespace {

__extension__ typedef unsigned __int128 u128;  // sizes checked without wrapping

// Values decoded at most (n · V bytes) when the header does not bound them itself.
constexpr std::uint64_t max_decoded = std::uint64_t{1} << 22;

// The invariants of an accepted header, in 128-bit arithmetic (nothing wraps).
void check_accepted_header(const ibp::wire_header& h, std::uint64_t bytes, std::uint64_t n,
                           std::uint32_t v, const ibp::wire_layout& w) {
  const u128 data = u128{n} * v;
  SQUEEZE_FUZZ_ASSERT_TRUE(h.total_bytes <= bytes);
  // n · V is bounded by the message: 512 bytes of values per payload byte at most.
  SQUEEZE_FUZZ_ASSERT_TRUE(data <= u128{512} * bytes);
  if (h.kind == ibp::wire_raw) {
    SQUEEZE_FUZZ_ASSERT_TRUE(u128{ibp::wire_header_bytes} + data == h.total_bytes);
    SQUEEZE_FUZZ_ASSERT_TRUE(h.payload_bytes == data);
    return;
  }
  SQUEEZE_FUZZ_ASSERT_TRUE(h.kind == ibp::wire_compressed);
  const ibp::wire_layout want = ibp::wire_layout::of(n, v, h.row_bytes);
  SQUEEZE_FUZZ_ASSERT_TRUE(w.payload == want.payload && w.rows == want.rows &&
                           w.row_bytes == want.row_bytes);
  SQUEEZE_FUZZ_ASSERT_TRUE(w.data_bytes == data && w.rows >= 1 && h.row_bytes >= v &&
                           h.row_bytes % v == 0);
  SQUEEZE_FUZZ_ASSERT_TRUE(u128{w.rows} * w.row_bytes >= data &&
                           u128{w.rows - 1} * w.row_bytes < data);
  SQUEEZE_FUZZ_ASSERT_TRUE(w.last_row_bytes >= 1 && w.last_row_bytes <= w.row_bytes);
  SQUEEZE_FUZZ_ASSERT_TRUE(ibp::wire_header_bytes <= w.mask && w.mask <= w.bitval &&
                           w.bitval <= w.bases && w.bases <= w.raw && w.raw <= w.sizes &&
                           w.sizes <= w.payload);
  SQUEEZE_FUZZ_ASSERT_TRUE(u128{w.bases} + 8 * (u128{w.tiles} + 1) <= w.raw);
  SQUEEZE_FUZZ_ASSERT_TRUE(u128{w.raw} + 4 * u128{w.tiles} <= w.sizes);
  SQUEEZE_FUZZ_ASSERT_TRUE(u128{w.sizes} + 2 * u128{w.rows} <= w.payload);
  SQUEEZE_FUZZ_ASSERT_TRUE(u128{w.payload} + h.payload_bytes == h.total_bytes);
  SQUEEZE_FUZZ_ASSERT_TRUE(h.payload_bytes >= w.rows && h.payload_bytes <= data);
}

template <class T>
void run(std::span<const std::byte> message, std::uint64_t n) {
  constexpr std::uint32_t v = sizeof(T);
  // The size of the largest message of n values never wraps: 2^64 - 1 when it cannot exist.
  const std::uint64_t max_bytes = ibp::wire_max_bytes(n, v);
  if (max_bytes != ~std::uint64_t{0})
    SQUEEZE_FUZZ_ASSERT_TRUE(max_bytes >= u128{n} * v + ibp::wire_header_bytes);

  wire_fault header = wire_fault::short_message;
  if (message.size() >= ibp::wire_header_bytes) {
    ibp::wire_header h;
    std::memcpy(&h, message.data(), sizeof h);
    ibp::wire_layout w;
    header = ibp::check_wire_header(h, message.size(), n, v, w);
    if (header == wire_fault::none) check_accepted_header(h, message.size(), n, v, w);
  }

  const u128 data = u128{n} * v;
  if (header != wire_fault::none && data > max_decoded) {
    // The output cannot be allocated here: an output too small is an invalid argument.
    std::vector<std::byte> small(16);
    bool threw = false;
    try {
      (void)ibp::wire_decode(message, n, v, small);
    } catch (const squeeze::invalid_argument&) {
      threw = true;
    }
    SQUEEZE_FUZZ_ASSERT_TRUE(threw);
    threw = false;
    try {
      (void)ibp::wire_decode_values<T>(message, n);
    } catch (const squeeze::format_error&) {
      threw = true;
    }
    SQUEEZE_FUZZ_ASSERT_TRUE(threw);
    return;
  }

  // An exact output (the sanitizer sees a write past it), decoded by both entry points.
  const auto bytes = static_cast<std::size_t>(data);
  std::vector<std::byte> out(bytes);
  squeeze::status row = squeeze::status::ok;
  const wire_fault f = ibp::wire_decode(message, n, v, out, &row);
  if (header != wire_fault::none)
    SQUEEZE_FUZZ_ASSERT_TRUE(f == header);  // the header's fault comes first
  if (f != wire_fault::row_stream) SQUEEZE_FUZZ_ASSERT_TRUE(row == squeeze::status::ok);
  std::vector<T> values;
  bool refused = false;
  try {
    values = ibp::wire_decode_values<T>(message, n);
  } catch (const squeeze::format_error&) {
    refused = true;
  }
  SQUEEZE_FUZZ_ASSERT_TRUE(refused == (f != wire_fault::none));
  if (refused) return;
  SQUEEZE_FUZZ_ASSERT_TRUE(values.size() == n &&
                           (bytes == 0 || std::memcmp(values.data(), out.data(), bytes) == 0));

  // Lossless: the values encoded again decode to the same bytes, within the size bounds.
  const std::vector<std::byte> again = ibp::wire_encode(out, v);
  SQUEEZE_FUZZ_ASSERT_TRUE(again.size() <= ibp::wire_header_bytes + bytes &&
                           again.size() <= max_bytes);
  std::vector<std::byte> back(bytes + 1, std::byte{0xA5});
  SQUEEZE_FUZZ_ASSERT_TRUE(ibp::wire_decode(again, n, v, std::span<std::byte>{back}.first(bytes)) ==
                           wire_fault::none);
  SQUEEZE_FUZZ_ASSERT_TRUE(std::equal(out.begin(), out.end(), back.begin()) &&
                           back.back() == std::byte{0xA5});
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::uint8_t flags = 0;
  if (size > 0) {
    flags = data[0];
    ++data;
    --size;
  }
  const bool doubles = (flags & 1u) != 0;
  const bool wide = (flags & 2u) != 0;
  const bool from_header = (flags & 4u) != 0;
  const bool fix_check = (flags & 8u) != 0;
  const bool fix_sizes = (flags & 16u) != 0;
  std::uint64_t n = 0;
  if (!from_header) {
    const std::size_t width = wide ? 8 : 2;
    const std::size_t take = size < width ? size : width;
    if (take > 0) std::memcpy(&n, data, take);  // little-endian hosts (wire_format.hpp)
    data += take;
    size -= take;
  }
  std::vector<std::byte> message(size);
  if (size > 0) std::memcpy(message.data(), data, size);
  if (message.size() >= ibp::wire_header_bytes) {
    ibp::wire_header h;
    std::memcpy(&h, message.data(), sizeof h);
    if (from_header) n = h.values;
    if (fix_sizes && h.kind == ibp::wire_raw) {
      h.payload_bytes = h.values * h.value_bytes;
      h.total_bytes = ibp::wire_header_bytes + h.payload_bytes;
    } else if (fix_sizes && h.value_bytes != 0 && h.row_bytes >= h.value_bytes) {
      const ibp::wire_layout w = ibp::wire_layout::of(h.values, h.value_bytes, h.row_bytes);
      h.rows = w.rows;
      h.total_bytes = w.payload + h.payload_bytes;
    }
    if (fix_check || fix_sizes) {
      h.check = ibp::wire_check_word(h);
      std::memcpy(message.data(), &h, sizeof h);
    }
  }
  try {
    if (doubles) {
      run<double>(message, n);
    } else {
      run<float>(message, n);
    }
  } catch (const squeeze::error&) {
  }
  return 0;
}

#ifdef SQUEEZE_FUZZ_WRITE_SEEDS
// The seed corpus: messages of the reference encoder (compressed and raw, floats and
// doubles, short and multi-tile), plus edge cases. Regenerate from the checkout's root with
//   g++ -std=c++20 -DSQUEEZE_FUZZ_WRITE_SEEDS -Iinclude -Itests -o /tmp/ibp_wire_seeds
//       tests/fuzz/fuzz_ibp_wire.cpp && /tmp/ibp_wire_seeds tests/fuzz/corpus/ibp_wire
#include <cmath>
#include <cstdio>
#include <random>
#include <string>

namespace {

int written = 0;
void save(const char* dir, const std::string& name, std::uint8_t flags, std::uint64_t n,
          const std::vector<std::byte>& message) {
  std::vector<std::uint8_t> bytes{flags};
  if ((flags & 4u) == 0) {
    const std::size_t width = (flags & 2u) != 0 ? 8 : 2;
    for (std::size_t i = 0; i < width; ++i)
      bytes.push_back(static_cast<std::uint8_t>(n >> (8 * i)));
  }
  for (const std::byte b : message) bytes.push_back(static_cast<std::uint8_t>(b));
  if (squeeze::fuzz::write_seed(dir, name, bytes)) ++written;
}

template <class T>
std::vector<std::byte> values(std::size_t n, int kind, std::mt19937_64& rng) {
  std::vector<T> v(n);
  std::normal_distribution<double> normal{0.0, 1e-3};
  for (std::size_t i = 0; i < n; ++i) {
    switch (kind) {
      case 0: v[i] = static_cast<T>(1.5); break;                                 // constant
      case 1: v[i] = static_cast<T>(normal(rng)); break;                         // gradient-like
      case 2: v[i] = static_cast<T>(static_cast<double>(i % 17) * 0.25); break;  // few values
      default: {                                                                 // random bits
        const std::uint64_t bits = rng();
        std::memcpy(&v[i], &bits, sizeof(T));
        if (std::isnan(static_cast<double>(v[i]))) v[i] = T{};
      }
    }
  }
  std::vector<std::byte> out(n * sizeof(T));
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

void put_header(std::vector<std::byte>& m, const ibp::wire_header& h) {
  if (m.size() < sizeof h) m.resize(sizeof h);
  std::memcpy(m.data(), &h, sizeof h);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  const char* dir = argv[1];
  std::mt19937_64 rng{0x1B9E};
  const char* kinds[] = {"constant", "gradient", "few", "random"};
  for (const std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{33},
                              std::size_t{200}, std::size_t{700}}) {
    for (int kind = 0; kind < 4; ++kind) {
      if (kind == 3 && n > 33) continue;
      const auto f = values<float>(n, kind, rng);
      save(dir, "seed-float-" + std::string{kinds[kind]} + "-" + std::to_string(n), 0, n,
           ibp::wire_encode(f, 4));
      if (n <= 200) {
        const auto d = values<double>(n, kind, rng);
        save(dir, "seed-double-" + std::string{kinds[kind]} + "-" + std::to_string(n), 1, n,
             ibp::wire_encode(d, 8));
      }
    }
  }
  // A compressed message with n taken from its header, and with the check word repaired.
  {
    const auto f = values<float>(300, 2, rng);
    const auto m = ibp::wire_encode(f, 4);
    save(dir, "seed-float-n-from-header", 4, 0, m);
    save(dir, "seed-float-fixed-check", 8 | 2, 300, m);
    save(dir, "seed-float-fixed-sizes", 16 | 4, 0, m);
    const auto r = values<double>(20, 3, rng);
    save(dir, "seed-double-raw-fixed-sizes", 16 | 4 | 1, 0, ibp::wire_encode(r, 8));
  }
  // Edge: a raw header claiming 2^62 floats (n · 4 wraps to 0) in 64 bytes.
  {
    const std::uint64_t n = std::uint64_t{1} << 62;
    const ibp::wire_header h = ibp::make_raw_wire_header(n, 4);  // payload 0, total 64
    std::vector<std::byte> m;
    put_header(m, h);
    save(dir, "repro-wire-values-times-v-wraps", 2, n, m);
  }
  // Edge: a compressed header whose payload offset + payload_bytes wraps to a small total:
  // n = 2^62 - 1 floats in rows of 4 bytes, total 4096.
  {
    const std::uint64_t n = (std::uint64_t{1} << 62) - 1;
    const ibp::wire_layout w = ibp::wire_layout::of(n, 4, 4);
    const std::uint64_t total = 4096;
    ibp::wire_header h = ibp::make_wire_header(w, 90, 0 - w.payload + total);
    h.total_bytes = total;
    h.check = ibp::wire_check_word(h);
    std::vector<std::byte> m(total);
    put_header(m, h);
    save(dir, "repro-wire-total-bytes-wraps", 2, n, m);
  }
  std::printf("wrote %d seeds to %s\n", written, dir);
  return 0;
}
#endif
