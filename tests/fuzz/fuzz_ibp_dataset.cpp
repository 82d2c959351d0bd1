// SPDX-License-Identifier: Apache-2.0
// Fuzz target: ibp's compressed data sets (ibp/dataset.hpp) with one codebook or a
// clustered one (ibp/cluster.hpp), built field by field from the input. validate() must
// refuse a malformed set with a squeeze::error and accept exactly the sets decompress()
// accepts; on an accepted set every checked accessor (is_raw, stored_row, decompress_row,
// cluster_set::cluster_of / book) works within bounds and agrees with the reference
// decoder (ibp::decode_row on stored_row's bytes), and re-encoding the decoded rows is
// lossless. On any set, accessors given a row past the end throw, and whatever they return
// lies inside the set's arrays.
//
// Input, little-endian (missing bytes read as zero):
//   u8  flags   bit 0: condensed (else in place)   bit 1: clustered   bits 2-3: C = 1 << v
//               bit 4: array sizes from the fields (else given below)
//               bit 5: condensed offsets as u64 values (else u16 deltas from 0)
//               bit 6: the clusters' row count given apart (else the set's)
//               bit 7: id_bits given (else cluster_id_bits(k))
//   u16 L       u64 rows (u16 with bit 4)        u8 k (clusters)   u8 id_bits
//   u64 cluster rows (bit 6)                     u64 probe (a row index tried on every accessor)
//   sizes: u16 data, offsets, raw, ids, masks, bitvals (elements); with bit 4, the
//          condensed data's u16 alone (in place: none)
//   then masks, bitvals (bytes), ids, raw (u32), offsets, data (bytes)
#include <squeeze/ibp/cluster.hpp>
#include <squeeze/ibp/dataset.hpp>
#include <squeeze/ibp/format.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <vector>

#include "fuzz/fuzz_support.hpp"

namespace ibp = squeeze::ibp;

namespace {

struct input {
  const std::uint8_t* data;
  std::size_t size;

  template <class T>
  T take() {
    return squeeze::fuzz::take<T>(data, size);
  }
};

// Decoded sets are kept below this many bytes (rows x L); larger accepted ones are checked
// without a full decode.
constexpr std::uint64_t max_decoded = std::uint64_t{1} << 22;
// Arrays sized from the fields are kept below this many elements.
constexpr std::uint64_t max_elements = std::uint64_t{1} << 20;

// Whether span s lies inside the bytes of v.
bool inside(std::span<const std::byte> s, const std::vector<std::byte>& v) {
  if (s.empty()) return true;
  const auto* lo = v.data();
  return s.data() >= lo && s.data() + s.size() <= lo + v.size();
}

template <class F>
bool throws(F&& f) {
  try {
    f();
    return false;
  } catch (const squeeze::error&) {
    return true;
  }
}

// One codebook or k of them, as the rows are decoded.
struct books {
  const ibp::codebook* one = nullptr;
  const ibp::cluster_set* many = nullptr;

  void validate_set(const ibp::compressed_set& set) const {
    if (one != nullptr) {
      ibp::validate(set, *one);
    } else {
      ibp::validate(set, *many);
    }
  }
  void decompress(const ibp::compressed_set& set, std::span<std::byte> out) const {
    if (one != nullptr) {
      ibp::decompress(set, *one, out);
    } else {
      ibp::decompress(set, *many, out);
    }
  }
  void decompress_row(const ibp::compressed_set& set, std::uint64_t r,
                      std::span<std::byte> out) const {
    if (one != nullptr) {
      ibp::decompress_row(set, *one, r, out);
    } else {
      ibp::decompress_row(set, *many, r, out);
    }
  }
  std::span<const std::byte> stored_row(const ibp::compressed_set& set, std::uint64_t r) const {
    if (one != nullptr) return ibp::stored_row(set, *one, r);
    return ibp::detail::stored_row(set, many->tensor_bytes, r);
  }
  // The codebook of row r of a validated set (checked accessors).
  ibp::codebook_ref book_of(std::uint64_t r) const {
    if (one != nullptr) return one->ref();
    return many->book(many->cluster_of(r));
  }
  ibp::compressed_set compress(std::span<const std::byte> rows, std::uint64_t n,
                               ibp::layout kind) const {
    if (one != nullptr) return ibp::compress(rows, n, *one, kind);
    return ibp::compress(rows, n, *many, kind);
  }
  std::uint32_t tensor_bytes() const {
    return one != nullptr ? one->tensor_bytes : many->tensor_bytes;
  }
};

// The reference: row r of an accepted set from stored_row's bytes alone.
std::vector<std::byte> reference_row(const ibp::compressed_set& set, const books& b,
                                     std::uint64_t r) {
  const ibp::codebook_ref cb = b.book_of(r);
  const std::span<const std::byte> in = b.stored_row(set, r);
  SQUEEZE_FUZZ_ASSERT_TRUE(inside(in, set.data));
  std::vector<std::byte> row(cb.tensor_bytes, std::byte{0});
  if (set.is_raw(r)) {
    SQUEEZE_FUZZ_ASSERT_TRUE(in.size() >= cb.tensor_bytes);
    std::copy_n(in.begin(), cb.tensor_bytes, row.begin());
  } else {
    SQUEEZE_FUZZ_ASSERT_TRUE(ibp::decode_row(in.data(), in.size(), cb, row.data()) ==
                             squeeze::status::ok);
  }
  return row;
}

// Accessors on any set, accepted or not: past-the-end rows throw; what they return lies
// inside the set.
void probe_accessors(const ibp::compressed_set& set, const books& b, std::uint64_t probe) {
  const std::uint64_t l = b.tensor_bytes();
  std::vector<std::byte> row(l == 0 ? 1 : l);
  const std::uint64_t tries[] = {probe, set.rows, set.rows + 1, ~std::uint64_t{0}, 0, set.rows - 1};
  for (const std::uint64_t r : tries) {
    const bool past = r >= set.rows;
    // is_raw: throws exactly when r is past the rows or the bitmask is malformed.
    const bool bad_bitmask = set.raw.size() != ibp::raw_words(set.rows);
    SQUEEZE_FUZZ_ASSERT_TRUE(throws([&] { (void)set.is_raw(r); }) == (past || bad_bitmask));
    bool threw = throws([&] {
      const std::span<const std::byte> in = b.stored_row(set, r);
      SQUEEZE_FUZZ_ASSERT_TRUE(inside(in, set.data));
    });
    if (past) SQUEEZE_FUZZ_ASSERT_TRUE(threw);
    threw = throws([&] { b.decompress_row(set, r, row); });
    if (past) SQUEEZE_FUZZ_ASSERT_TRUE(threw);
    if (b.many != nullptr) {
      threw = throws([&] { (void)b.many->cluster_of(r); });
      if (r >= b.many->rows) SQUEEZE_FUZZ_ASSERT_TRUE(threw);
    }
  }
  if (b.many != nullptr) {
    const std::uint32_t k = b.many->clusters;
    for (const std::uint32_t c : {std::uint32_t{0}, k - 1, k, static_cast<std::uint32_t>(probe)}) {
      const bool threw = throws([&] {
        const ibp::codebook_ref cb = b.many->book(c);
        // the codebook lies inside masks and bitvals
        const auto at = static_cast<std::size_t>(cb.mask - b.many->masks.data());
        SQUEEZE_FUZZ_ASSERT_TRUE(at + cb.tensor_bytes <= b.many->masks.size());
        SQUEEZE_FUZZ_ASSERT_TRUE(at + cb.tensor_bytes <= b.many->bitvals.size());
      });
      if (c >= k) SQUEEZE_FUZZ_ASSERT_TRUE(threw);
    }
  }
}

// An accepted set: every row reads through the checked accessors, and they agree with the
// reference; `whole` (when the set was small enough to decode at once) is decompress's
// output. Nothing here may throw.
void check_accepted(const ibp::compressed_set& set, const books& b,
                    std::span<const std::byte> whole) {
  const std::uint64_t l = b.tensor_bytes();
  const std::uint64_t rows = whole.empty() && set.rows > 64 ? 64 : set.rows;
  std::vector<std::byte> row(l);
  for (std::uint64_t r = 0; r < rows; ++r) {
    SQUEEZE_FUZZ_ASSERT_TRUE(set.is_raw(r) == set.unchecked_is_raw(r));
    std::fill(row.begin(), row.end(), std::byte{0x5A});
    b.decompress_row(set, r, row);
    const std::vector<std::byte> ref = reference_row(set, b, r);
    SQUEEZE_FUZZ_ASSERT_TRUE(ref == row);
    if (!whole.empty())
      SQUEEZE_FUZZ_ASSERT_TRUE(std::equal(row.begin(), row.end(), whole.begin() + r * l));
    if (b.many != nullptr) SQUEEZE_FUZZ_ASSERT_TRUE(b.many->cluster_of(r) < b.many->clusters);
  }
  if (whole.empty()) return;
  // Re-encoding the decoded rows (either layout) is lossless, and the result is valid.
  for (const ibp::layout kind : {ibp::layout::in_place, ibp::layout::condensed}) {
    const ibp::compressed_set again = b.compress(whole, set.rows, kind);
    b.validate_set(again);
    std::vector<std::byte> back(whole.size());
    b.decompress(again, back);
    SQUEEZE_FUZZ_ASSERT_TRUE(std::equal(back.begin(), back.end(), whole.begin()));
  }
}

void check(const ibp::compressed_set& set, const books& b, std::uint64_t probe) {
  probe_accessors(set, b, probe);
  if (b.many != nullptr) {
    // measure_savings reads every row: it refuses or finishes.
    (void)throws([&] { (void)ibp::measure_savings(set, *b.many); });
  }
  const bool valid = !throws([&] { b.validate_set(set); });
  const std::uint64_t l = b.tensor_bytes();
  const auto total = squeeze::core::checked_mul<std::uint64_t>(set.rows, l);
  std::vector<std::byte> out;
  if (total && *total <= max_decoded) {
    out.assign(static_cast<std::size_t>(*total) + 1, std::byte{0xA5});
    // decompress accepts exactly what validate accepts, and writes nothing past its rows.
    const bool decoded =
        !throws([&] { b.decompress(set, std::span<std::byte>{out}.first(*total)); });
    SQUEEZE_FUZZ_ASSERT_TRUE(decoded == valid);
    SQUEEZE_FUZZ_ASSERT_TRUE(out.back() == std::byte{0xA5});
    out.pop_back();
  }
  if (valid) SQUEEZE_FUZZ_ASSERT_TRUE(!throws([&] { check_accepted(set, b, out); }));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  input in{data, size};
  const auto flags = in.take<std::uint8_t>();
  const bool condensed = (flags & 1u) != 0;
  const bool clustered = (flags & 2u) != 0;
  const auto chunk = std::uint32_t{1} << ((flags >> 2) & 3u);
  const bool derived = (flags & 16u) != 0;
  const bool offsets_u64 = (flags & 32u) != 0;
  const bool cluster_rows_apart = (flags & 64u) != 0;
  const bool id_bits_given = (flags & 128u) != 0;

  const std::uint32_t l = in.take<std::uint16_t>();
  const std::uint64_t rows = derived ? in.take<std::uint16_t>() : in.take<std::uint64_t>();
  const std::uint32_t k = in.take<std::uint8_t>();
  const std::uint32_t given_id_bits = in.take<std::uint8_t>();
  const std::uint64_t cluster_rows = cluster_rows_apart ? in.take<std::uint64_t>() : rows;
  const auto probe = in.take<std::uint64_t>();
  const std::uint32_t id_bits = id_bits_given ? given_id_bits : ibp::cluster_id_bits(k);
  const std::uint32_t books_count = clustered ? k : 1;

  std::uint64_t n_data = 0, n_offsets = 0, n_raw = 0, n_ids = 0, n_masks = 0, n_bitvals = 0;
  if (derived) {
    n_raw = ibp::raw_words(rows);
    n_offsets = condensed ? rows + 1 : 0;
    n_data = condensed ? in.take<std::uint16_t>() : rows * l;
    n_ids = clustered ? ibp::cluster_id_words(cluster_rows, id_bits > 32 ? 32 : id_bits) : 0;
    n_masks = n_bitvals = std::uint64_t{books_count} * l;
    if (n_data > max_elements || n_ids > max_elements || n_masks > max_elements) return 0;
  } else {
    n_data = in.take<std::uint16_t>();
    n_offsets = in.take<std::uint16_t>();
    n_raw = in.take<std::uint16_t>();
    n_ids = in.take<std::uint16_t>();
    n_masks = in.take<std::uint16_t>();
    n_bitvals = in.take<std::uint16_t>();
  }

  const auto bytes = [&](std::uint64_t n) {
    std::vector<std::byte> v(static_cast<std::size_t>(n));
    for (auto& x : v) x = std::byte{in.take<std::uint8_t>()};
    return v;
  };
  const auto words = [&](std::uint64_t n) {
    std::vector<std::uint32_t> v(static_cast<std::size_t>(n));
    for (auto& x : v) x = in.take<std::uint32_t>();
    return v;
  };

  std::vector<std::byte> masks = bytes(n_masks);
  std::vector<std::byte> bitvals = bytes(n_bitvals);
  if (derived) {  // keep Bitval inside Mask, so the codebooks are valid more often
    for (std::size_t i = 0; i < bitvals.size(); ++i) bitvals[i] &= masks[i];
  }
  std::vector<std::uint32_t> ids = words(n_ids);

  ibp::compressed_set set;
  set.kind = condensed ? ibp::layout::condensed : ibp::layout::in_place;
  set.rows = rows;
  set.raw = words(n_raw);
  set.offsets.resize(static_cast<std::size_t>(n_offsets));
  for (std::size_t i = 0; i < set.offsets.size(); ++i) {  // u64 values, or 0 then u16 deltas
    if (offsets_u64) {
      set.offsets[i] = in.take<std::uint64_t>();
    } else {
      set.offsets[i] = i == 0 ? 0 : set.offsets[i - 1] + in.take<std::uint16_t>();
    }
  }
  set.data = bytes(n_data);

  ibp::codebook one;
  ibp::cluster_set many;
  books b;
  if (clustered) {
    many.tensor_bytes = l;
    many.chunk_bytes = chunk;
    many.clusters = k;
    many.id_bits = id_bits;
    many.rows = cluster_rows;
    many.masks = std::move(masks);
    many.bitvals = std::move(bitvals);
    many.ids = std::move(ids);
    b.many = &many;
    const bool valid = !throws([&] { ibp::validate(many); });
    if (valid) {  // every id of an accepted set reads, and names a cluster
      SQUEEZE_FUZZ_ASSERT_TRUE(!throws([&] {
        for (std::uint64_t r = 0; r < many.rows && r < 4096; ++r)
          SQUEEZE_FUZZ_ASSERT_TRUE(many.cluster_of(r) < many.clusters);
      }));
    }
  } else {
    one.tensor_bytes = l;
    one.chunk_bytes = chunk;
    one.mask = std::move(masks);
    one.bitval = std::move(bitvals);
    b.one = &one;
  }
  try {
    check(set, b, probe);
  } catch (const squeeze::error&) {
  }
  return 0;
}

#ifdef SQUEEZE_FUZZ_WRITE_SEEDS
// The seed corpus: small sets made by the reference encoders, written in the input format
// above, plus edge cases. Regenerate from the checkout's root with
//   g++ -std=c++20 -DSQUEEZE_FUZZ_WRITE_SEEDS -Iinclude -Itests -o /tmp/ibp_dataset_seeds
//       tests/fuzz/fuzz_ibp_dataset.cpp && /tmp/ibp_dataset_seeds tests/fuzz/corpus/ibp_dataset
#include <cstdio>
#include <random>
#include <string>

namespace {

struct writer {
  std::vector<std::uint8_t> bytes;
  template <class T>
  void put(T v) {
    const auto* p = reinterpret_cast<const std::uint8_t*>(&v);
    bytes.insert(bytes.end(), p, p + sizeof v);
  }
};

unsigned chunk_code(std::uint32_t c) {
  return c == 1 ? 0 : c == 2 ? 1 : c == 4 ? 2 : 3;
}

// The input that rebuilds `set` with `one` (clustered: `many`) field by field.
std::vector<std::uint8_t> encode(const ibp::compressed_set& set, const ibp::codebook* one,
                                 const ibp::cluster_set* many, std::uint64_t probe) {
  const std::uint32_t l = one != nullptr ? one->tensor_bytes : many->tensor_bytes;
  const std::uint32_t c = one != nullptr ? one->chunk_bytes : many->chunk_bytes;
  bool deltas = set.offsets.empty() || set.offsets[0] == 0;
  for (std::size_t i = 1; i < set.offsets.size(); ++i) {
    deltas = deltas && set.offsets[i] >= set.offsets[i - 1] &&
             set.offsets[i] - set.offsets[i - 1] <= 0xFFFF;
  }
  const bool apart = many != nullptr && many->rows != set.rows;
  writer w;
  w.put(static_cast<std::uint8_t>((set.kind == ibp::layout::condensed ? 1u : 0u) |
                                  (many != nullptr ? 2u : 0u) | (chunk_code(c) << 2) |
                                  (deltas ? 0u : 32u) | (apart ? 64u : 0u) | 128u));
  w.put(static_cast<std::uint16_t>(l));
  w.put(set.rows);
  w.put(static_cast<std::uint8_t>(many != nullptr ? many->clusters : 0));
  w.put(static_cast<std::uint8_t>(many != nullptr ? many->id_bits : 0));
  if (apart) w.put(many->rows);
  w.put(probe);
  const std::vector<std::byte>& masks = one != nullptr ? one->mask : many->masks;
  const std::vector<std::byte>& bitvals = one != nullptr ? one->bitval : many->bitvals;
  const std::vector<std::uint32_t> no_ids;
  const std::vector<std::uint32_t>& ids = many != nullptr ? many->ids : no_ids;
  for (const std::size_t n : {set.data.size(), set.offsets.size(), set.raw.size(), ids.size(),
                              masks.size(), bitvals.size()}) {
    w.put(static_cast<std::uint16_t>(n));
  }
  for (const std::byte x : masks) w.put(static_cast<std::uint8_t>(x));
  for (const std::byte x : bitvals) w.put(static_cast<std::uint8_t>(x));
  for (const std::uint32_t x : ids) w.put(x);
  for (const std::uint32_t x : set.raw) w.put(x);
  for (std::size_t i = 0; i < set.offsets.size(); ++i) {
    if (deltas) {
      if (i + 1 < set.offsets.size())
        w.put(static_cast<std::uint16_t>(set.offsets[i + 1] - set.offsets[i]));
    } else {
      w.put(set.offsets[i]);
    }
  }
  for (const std::byte x : set.data) w.put(static_cast<std::uint8_t>(x));
  return w.bytes;
}

// Rows of small integers (compressible), some noise rows (raw).
std::vector<std::byte> make_rows(std::size_t rows, std::size_t l, std::mt19937_64& rng) {
  std::vector<std::byte> v(rows * l);
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t j = 0; j < l; ++j) {
      const bool noise = r % 5 == 4;
      v[r * l + j] = static_cast<std::byte>(noise ? rng() : (j % 4 == 0 ? rng() % 7 : 0));
    }
  }
  return v;
}

int written = 0;
void save(const char* dir, const std::string& name, const std::vector<std::uint8_t>& bytes) {
  if (squeeze::fuzz::write_seed(dir, name, bytes)) ++written;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  const char* dir = argv[1];
  std::mt19937_64 rng{0x5EED};
  for (const std::uint32_t c : {1u, 2u, 4u, 8u}) {
    for (const std::size_t l : {std::size_t{3}, std::size_t{8}, std::size_t{37}}) {
      const std::size_t rows = l == 37 ? 12 : 20;
      const auto data = make_rows(rows, l, rng);
      const auto cb = ibp::make_codebook(
          ibp::count_set_bits(data, rows, static_cast<std::uint32_t>(l)), rows, rows * 9 / 10, c);
      for (const auto kind : {ibp::layout::in_place, ibp::layout::condensed}) {
        const auto set = ibp::compress(data, rows, cb, kind);
        const std::string tag =
            std::string{kind == ibp::layout::condensed ? "condensed" : "inplace"} + "-c" +
            std::to_string(c) + "-l" + std::to_string(l);
        save(dir, "seed-" + tag, encode(set, &cb, nullptr, rows / 2));
      }
      ibp::cluster_options opt;
      opt.clusters = l == 8 ? 2 : 3;
      const auto cs = ibp::make_clusters(data, rows, static_cast<std::uint32_t>(l), c, opt);
      for (const auto kind : {ibp::layout::in_place, ibp::layout::condensed}) {
        const auto set = ibp::compress(data, rows, cs, kind);
        const std::string tag =
            std::string{kind == ibp::layout::condensed ? "condensed" : "inplace"} + "-c" +
            std::to_string(c) + "-l" + std::to_string(l);
        save(dir, "seed-clustered-" + tag, encode(set, nullptr, &cs, rows + 3));
      }
    }
  }
  // Edge cases: no rows; one row of one byte; a row count near 2^64 with empty arrays; a
  // clustered set whose rows x id_bits wraps (the ids look empty); non-monotone offsets.
  {
    ibp::codebook cb{std::vector<std::byte>(4), std::vector<std::byte>(4), 4, 4};
    ibp::compressed_set empty;
    empty.offsets = {0};
    save(dir, "edge-no-rows", encode(empty, &cb, nullptr, 0));
    ibp::compressed_set huge;
    huge.rows = ~std::uint64_t{0};
    save(dir, "edge-rows-2e64", encode(huge, &cb, nullptr, 5));
    huge.kind = ibp::layout::in_place;
    huge.rows = std::uint64_t{1} << 62;  // rows x 4 wraps to 0
    save(dir, "edge-inplace-rows-times-l-wraps", encode(huge, &cb, nullptr, 5));
    ibp::codebook one_byte{std::vector<std::byte>{std::byte{0xF0}},
                           std::vector<std::byte>{std::byte{0x30}}, 1, 1};
    const std::vector<std::byte> data{std::byte{0x3A}};
    save(dir, "edge-one-byte",
         encode(ibp::compress(data, 1, one_byte, ibp::layout::condensed), &one_byte, nullptr, 0));
  }
  {
    const std::size_t rows = 10, l = 16;
    const auto data = make_rows(rows, l, rng);
    const auto cb = ibp::make_codebook(ibp::count_set_bits(data, rows, l), rows, rows - 1, 4);
    auto set = ibp::compress(data, rows, cb, ibp::layout::condensed);
    std::swap(set.offsets[3], set.offsets[4]);
    save(dir, "edge-offsets-not-monotone", encode(set, &cb, nullptr, 3));
    set = ibp::compress(data, rows, cb, ibp::layout::condensed);
    set.data.push_back(std::byte{0});  // a trailing byte on the last row
    set.offsets.back() += 1;
    save(dir, "edge-trailing-byte", encode(set, &cb, nullptr, 9));
  }
  {
    // k = 3 (2-bit ids), rows = 2^63: rows x id_bits = 2^64 wraps to 0 id words.
    std::vector<ibp::codebook> books(
        3, ibp::codebook{std::vector<std::byte>(4), std::vector<std::byte>(4), 4, 4});
    ibp::cluster_set cs = ibp::make_cluster_set(books, std::vector<std::uint32_t>{});
    cs.rows = std::uint64_t{1} << 63;
    ibp::compressed_set set;
    set.rows = 1;
    set.offsets = {0, 4};
    set.data.resize(4);
    set.raw = {1};
    save(dir, "repro-cluster-id-words-wrap", encode(set, nullptr, &cs, 0));
  }
  std::printf("wrote %d seeds to %s\n", written, dir);
  return 0;
}
#endif
