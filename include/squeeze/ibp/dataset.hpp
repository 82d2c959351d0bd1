// SPDX-License-Identifier: Apache-2.0
// squeeze/ibp/dataset.hpp: host reference of IBP over a whole data set: preprocessing
// (bit counters, Mask/Bitval for a threshold, the threshold sweep), compression into the
// in-place and condensed layouts, and decompression with full validation.
//
// Host-compilable. The GPU paths produce the same bytes; these functions are what they
// are tested against, and what small data sets can use directly.
//
//   data set      rows: [N, L bytes], row r at rows + r·L
//   in place      data: [N, L bytes], row r's stored bytes at data + r·L (S_r <= L)
//   condensed     data: concatenated stored rows; offsets: [N + 1], row r in
//                 [offsets[r], offsets[r+1])
//   both          raw: [ceil(N / 32) words], bit r set when row r is stored raw
//
// Rules a compressed set must follow (validate() checks them all; decompress() and every
// checked accessor refuse a set that breaks the ones they read): the arrays have the sizes
// above (sizes computed from N and L never wrap: a set whose N · L or N + 1 does not fit in
// 64 bits is malformed); a condensed row lies inside `data` and holds 1 .. L bytes, L
// exactly when its raw bit is set, and a compressed one holds exactly its stream's bytes
// (what the GPU decoder, ibp/decode.cuh, accepts); a compressed row decodes (ibp/format.hpp:
// no truncation, zero padding bits, shorter than L). In-place slots hold L bytes whatever
// their rows' stream lengths; bytes past a stream are not read.
//
// Accessors: compressed_set::is_raw and ibp::stored_row check the row index and the shape
// of what they read and throw (invalid_argument for an index past the rows, format_error
// for a malformed set); the unchecked_ forms are for loops over a set already checked.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "squeeze/core/checked.hpp"
#include "squeeze/core/error.hpp"
#include "squeeze/ibp/format.hpp"

namespace squeeze::ibp {

/// An owning codebook: Mask and Bitval for rows of tensor_bytes, cut in chunk_bytes.
struct codebook {
  std::vector<std::byte> mask;
  std::vector<std::byte> bitval;
  std::uint32_t tensor_bytes = 0;
  std::uint32_t chunk_bytes = 4;

  [[nodiscard]] codebook_ref ref() const noexcept {
    return {mask.data(), bitval.data(), tensor_bytes, chunk_bytes};
  }
};

/// Throws squeeze::invalid_argument / format_error unless the codebook is well formed.
inline void validate(const codebook& cb) {
  SQUEEZE_EXPECTS(cb.tensor_bytes > 0, "ibp codebook: tensor_bytes must be positive");
  SQUEEZE_EXPECTS(
      valid_chunk_bytes(cb.chunk_bytes),
      "ibp codebook: chunk_bytes must be 1, 2, 4 or 8, got " + std::to_string(cb.chunk_bytes));
  if (cb.mask.size() != cb.tensor_bytes || cb.bitval.size() != cb.tensor_bytes) {
    throw format_error{"ibp codebook: mask and bitval must hold tensor_bytes = " +
                       std::to_string(cb.tensor_bytes) + " bytes each, got " +
                       std::to_string(cb.mask.size()) + " and " + std::to_string(cb.bitval.size())};
  }
  for (std::size_t b = 0; b < cb.tensor_bytes; ++b) {
    if ((cb.bitval[b] & ~cb.mask[b]) != std::byte{0}) {
      throw format_error{"ibp codebook: bitval has bits outside the mask at byte " +
                         std::to_string(b)};
    }
  }
}

// ---- preprocessing ------------------------------------------------------------------

/// Per bit position, how many of the `rows` rows have it set: [8 · tensor_bytes].
inline std::vector<std::uint64_t> count_set_bits(std::span<const std::byte> data, std::size_t rows,
                                                 std::uint32_t tensor_bytes) {
  const auto need = core::checked_mul<std::uint64_t>(rows, tensor_bytes);
  SQUEEZE_EXPECTS(need && data.size() >= *need,
                  "ibp::count_set_bits: data holds fewer than rows x tensor_bytes bytes");
  std::vector<std::uint64_t> counts(8 * std::size_t{tensor_bytes}, 0);
  for (std::size_t r = 0; r < rows; ++r) {
    const std::byte* row = data.data() + r * tensor_bytes;
    for (std::size_t b = 0; b < tensor_bytes; ++b) {
      const auto byte = static_cast<unsigned>(row[b]);
      for (unsigned bit = 0; bit < 8; ++bit) counts[8 * b + bit] += (byte >> bit) & 1u;
    }
  }
  return counts;
}

/// Mask and Bitval for threshold T over N rows: a bit is invariant 1 when more than T
/// rows have it set, invariant 0 when fewer than N - T do (the rule of Kamath et al.,
/// EuroSys 2026, §4.1).
inline codebook make_codebook(std::span<const std::uint64_t> counts, std::uint64_t rows,
                              std::uint64_t threshold, std::uint32_t chunk_bytes) {
  SQUEEZE_EXPECTS(counts.size() % 8 == 0 && !counts.empty(),
                  "ibp::make_codebook: counts must hold 8 per byte of a row");
  SQUEEZE_EXPECTS(counts.size() / 8 <= std::numeric_limits<std::uint32_t>::max(),
                  "ibp::make_codebook: rows longer than 4 GiB");
  SQUEEZE_EXPECTS(valid_chunk_bytes(chunk_bytes),
                  "ibp::make_codebook: chunk_bytes must be 1, 2, 4 or 8");
  SQUEEZE_EXPECTS(threshold <= rows, "ibp::make_codebook: threshold must not exceed the row count");
  codebook cb;
  cb.tensor_bytes = static_cast<std::uint32_t>(counts.size() / 8);
  cb.chunk_bytes = chunk_bytes;
  cb.mask.assign(cb.tensor_bytes, std::byte{0});
  cb.bitval.assign(cb.tensor_bytes, std::byte{0});
  for (std::size_t b = 0; b < cb.tensor_bytes; ++b) {
    unsigned m = 0, v = 0;
    for (unsigned bit = 0; bit < 8; ++bit) {
      const std::uint64_t ones = counts[8 * b + bit];
      if (ones > threshold) {
        m |= 1u << bit;
        v |= 1u << bit;
      } else if (ones < rows - threshold) {
        m |= 1u << bit;
      }
    }
    cb.mask[b] = static_cast<std::byte>(m);
    cb.bitval[b] = static_cast<std::byte>(v);
  }
  return cb;
}

/// Total stored bytes of the rows under a codebook (raw rows count L).
inline std::uint64_t stored_total(std::span<const std::byte> data, std::size_t rows,
                                  const codebook& cb) {
  validate(cb);
  const auto need = core::checked_mul<std::uint64_t>(rows, cb.tensor_bytes);
  SQUEEZE_EXPECTS(need && data.size() >= *need,
                  "ibp::stored_total: data holds fewer than rows x tensor_bytes bytes");
  std::uint64_t total = 0;
  const codebook_ref ref = cb.ref();
  for (std::size_t r = 0; r < rows; ++r)
    total += stored_bytes(data.data() + r * cb.tensor_bytes, ref);
  return total;
}

struct sweep_result {
  codebook best;
  std::uint64_t threshold = 0;
  std::uint64_t stored_bytes = 0;  ///< total over the rows, raw rows included
};

/// The sweep itself: for steps + 1 thresholds T evenly spaced from 0.70·N to N (N =
/// rows), builds the codebooks from `counts` and asks `totals_of(codebooks)` for the rows'
/// total stored bytes under each (a vector in the same order); keeps the smallest (ties:
/// the larger T). The host and the GPU sweeps differ only in how they measure the totals
/// (the GPU measures all of them in one pass over the rows).
template <class TotalsOf>
sweep_result sweep_thresholds_batched(std::span<const std::uint64_t> counts, std::size_t rows,
                                      std::uint32_t chunk_bytes, int steps, TotalsOf&& totals_of) {
  SQUEEZE_EXPECTS(rows > 0, "ibp threshold sweep: needs at least one row");
  SQUEEZE_EXPECTS(steps >= 1, "ibp threshold sweep: steps must be positive");
  const auto lo = static_cast<std::uint64_t>(0.70 * static_cast<double>(rows));
  std::vector<codebook> books;
  std::vector<std::uint64_t> thresholds;
  for (int s = steps; s >= 0; --s) {
    const std::uint64_t t =
        lo + (rows - lo) * static_cast<std::uint64_t>(s) / static_cast<std::uint64_t>(steps);
    books.push_back(make_codebook(counts, rows, t, chunk_bytes));
    thresholds.push_back(t);
  }
  const std::vector<std::uint64_t> totals = totals_of(std::span<const codebook>{books});
  SQUEEZE_EXPECTS(totals.size() == books.size(),
                  "ibp threshold sweep: totals_of must measure every codebook");
  std::size_t best = 0;
  for (std::size_t i = 1; i < totals.size(); ++i) {
    if (totals[i] < totals[best]) best = i;
  }
  return {std::move(books[best]), thresholds[best], totals[best]};
}

/// The sweep with one codebook measured at a time: total_of(codebook) -> stored bytes.
template <class TotalOf>
sweep_result sweep_thresholds(std::span<const std::uint64_t> counts, std::size_t rows,
                              std::uint32_t chunk_bytes, int steps, TotalOf&& total_of) {
  return sweep_thresholds_batched(counts, rows, chunk_bytes, steps,
                                  [&](std::span<const codebook> books) {
                                    std::vector<std::uint64_t> totals;
                                    for (const codebook& cb : books) totals.push_back(total_of(cb));
                                    return totals;
                                  });
}

/// The sweep on the host (counts from count_set_bits over the same rows).
inline sweep_result sweep_threshold(std::span<const std::byte> data, std::size_t rows,
                                    std::span<const std::uint64_t> counts,
                                    std::uint32_t chunk_bytes, int steps = 16) {
  return sweep_thresholds(counts, rows, chunk_bytes, steps,
                          [&](const codebook& cb) { return stored_total(data, rows, cb); });
}

// ---- compressed data sets -------------------------------------------------------------

enum class layout { in_place, condensed };

/// Words of the raw-row bitmask of `rows` rows: ceil(rows / 32), without wrapping.
constexpr std::uint64_t raw_words(std::uint64_t rows) noexcept {
  return rows / 32 + (rows % 32 != 0 ? 1 : 0);
}

/// A compressed data set on the host.
struct compressed_set {
  layout kind = layout::condensed;
  std::uint64_t rows = 0;
  std::vector<std::byte> data;         ///< see the layouts at the top of this file
  std::vector<std::uint64_t> offsets;  ///< condensed only: [rows + 1]
  std::vector<std::uint32_t> raw;      ///< [ceil(rows / 32)], bit r: row r stored raw

  /// Whether row r is stored raw. Throws invalid_argument unless r < rows, format_error
  /// unless the raw-row bitmask holds the ceil(rows / 32) words the rows call for.
  [[nodiscard]] bool is_raw(std::uint64_t r) const;
  /// is_raw without the checks, for loops over a set whose shape was checked (r < rows).
  [[nodiscard]] bool unchecked_is_raw(std::uint64_t r) const noexcept {
    return ((raw[r / 32] >> (r % 32)) & 1u) != 0;
  }
};

namespace detail {

/// Throws format_error unless the raw-row bitmask has ceil(rows / 32) words.
inline void check_raw_bitmask(const compressed_set& set) {
  if (set.raw.size() != raw_words(set.rows)) {
    throw format_error{"ibp: the raw-row bitmask has " + std::to_string(set.raw.size()) +
                       " words, expected " + std::to_string(raw_words(set.rows)) + " for " +
                       std::to_string(set.rows) + " rows"};
  }
}

/// Throws invalid_argument unless r names a row of the set; `who` names the caller.
inline void check_row_index(const compressed_set& set, std::uint64_t r, const char* who) {
  if (r >= set.rows) {
    throw invalid_argument{std::string{who} + ": row " + std::to_string(r) +
                           " is outside the set's " + std::to_string(set.rows) + " rows"};
  }
}

/// Throws format_error unless the set's layout is known and its raw-row bitmask, in-place
/// data or condensed offsets have the sizes its row count and tensor_bytes call for (sizes
/// that do not fit in 64 bits cannot: such a set is malformed too). O(1).
inline void check_set_shape(const compressed_set& set, std::uint32_t tensor_bytes) {
  SQUEEZE_EXPECTS(tensor_bytes > 0, "ibp: tensor_bytes must be positive");
  const std::uint64_t l = tensor_bytes;
  if (set.kind != layout::in_place && set.kind != layout::condensed) {
    throw format_error{"ibp: unknown set layout " +
                       std::to_string(static_cast<unsigned long long>(set.kind))};
  }
  check_raw_bitmask(set);
  if (set.kind == layout::in_place) {
    const auto bytes = core::checked_mul<std::uint64_t>(set.rows, l);
    if (!bytes || set.data.size() != *bytes) {
      throw format_error{"ibp: an in-place set of " + std::to_string(set.rows) + " rows of " +
                         std::to_string(l) + " B must hold " +
                         (bytes ? std::to_string(*bytes) : std::string{"more than 2^64"}) +
                         " bytes, holds " + std::to_string(set.data.size())};
    }
  } else {
    const auto count = core::checked_add<std::uint64_t>(set.rows, 1);
    if (!count || set.offsets.size() != *count) {
      throw format_error{"ibp: a condensed set of " + std::to_string(set.rows) + " rows needs " +
                         (count ? std::to_string(*count) : std::string{"2^64"}) + " offsets, has " +
                         std::to_string(set.offsets.size())};
    }
  }
}

/// Bytes available to row r of a set of rows of `tensor_bytes`: its slot (in place) or its
/// offset range (condensed). Checks the set's shape and r (invalid_argument unless
/// r < rows); throws format_error on a malformed shape or on offsets that are not monotone
/// or leave the data.
inline std::span<const std::byte> stored_row(const compressed_set& set, std::uint32_t tensor_bytes,
                                             std::uint64_t r) {
  check_set_shape(set, tensor_bytes);
  check_row_index(set, r, "ibp::stored_row");
  if (set.kind == layout::in_place) {
    return {set.data.data() + r * tensor_bytes, tensor_bytes};  // r < rows: inside the data
  }
  const std::uint64_t begin = set.offsets[r];
  const std::uint64_t end = set.offsets[r + 1];
  if (begin > end || end > set.data.size()) {
    throw format_error{"ibp: offsets of row " + std::to_string(r) + " are [" +
                       std::to_string(begin) + ", " + std::to_string(end) + "), outside the " +
                       std::to_string(set.data.size()) + " data bytes"};
  }
  return {set.data.data() + begin, end - begin};
}

/// Row r's stored bytes as its decoder reads them (stored_row), checked against the rules
/// of the set's layout (the top of this file) but not decoded: a condensed row holds 1 .. L
/// bytes, L exactly when its raw bit is set, and a compressed one no bytes past its stream.
inline std::span<const std::byte> checked_row(const compressed_set& set, std::uint64_t r,
                                              const codebook_ref& cb) {
  const std::uint32_t l = cb.tensor_bytes;
  const std::span<const std::byte> in = stored_row(set, l, r);  // checks the shape and r
  const bool raw = set.unchecked_is_raw(r);
  if (set.kind == layout::in_place) return in;
  if (raw && in.size() < l) {
    throw format_error{"ibp: raw row " + std::to_string(r) + " has " + std::to_string(in.size()) +
                       " bytes, needs " + std::to_string(l)};
  }
  if (in.empty() || in.size() > l) {
    throw format_error{"ibp: condensed row " + std::to_string(r) + " stores " +
                       std::to_string(in.size()) + " bytes, outside [1, " + std::to_string(l) +
                       "]"};
  }
  if (!raw && in.size() == l) {
    throw format_error{"ibp: row " + std::to_string(r) + " stores " + std::to_string(l) +
                       " bytes, as many as a raw row, but its raw bit is clear"};
  }
  if (!raw && 8 * std::uint64_t{in.size()} >= cb.chunks()) {
    const std::uint64_t need = (stream_bits(in.data(), cb) + 7) / 8;
    if (need < in.size()) {
      throw format_error{"ibp: row " + std::to_string(r) + "'s stream ends after " +
                         std::to_string(need) + " of its " + std::to_string(in.size()) +
                         " stored bytes"};
    }
  }
  return in;
}

/// Decodes row r of the set with codebook cb (already validated) into dst[0, tensor_bytes):
/// checked_row, then a copy (raw) or the reference decoder. Throws format_error, naming
/// the row, on anything malformed; writes dst only on success.
inline void decode_stored_row(const compressed_set& set, std::uint64_t r, const codebook_ref& cb,
                              std::byte* dst) {
  const std::span<const std::byte> in = checked_row(set, r, cb);
  if (set.unchecked_is_raw(r)) {
    std::copy_n(in.begin(), cb.tensor_bytes, dst);
    return;
  }
  const status st = decode_row(in.data(), in.size(), cb, dst);
  if (st != status::ok) {
    throw format_error{"ibp: row " + std::to_string(r) + " is " + to_string(st) + " (" +
                       std::to_string(in.size()) + " stored bytes)"};
  }
}

/// The reference encoder over a data set: row r is compressed with the codebook
/// `book_of(r)` (a codebook_ref of `tensor_bytes`, already validated). One codebook for
/// every row (ibp::compress) and one per cluster (ibp/cluster.hpp) share this loop.
template <class BookOf>
compressed_set compress_rows(std::span<const std::byte> data, std::size_t rows,
                             std::uint32_t tensor_bytes, layout kind, BookOf&& book_of) {
  const std::size_t l = tensor_bytes;
  const auto need = core::checked_mul<std::uint64_t>(rows, l);
  SQUEEZE_EXPECTS(need && data.size() >= *need,
                  "ibp::compress: data holds fewer than rows x tensor_bytes bytes");
  SQUEEZE_EXPECTS(kind == layout::in_place || kind == layout::condensed,
                  "ibp::compress: unknown layout");
  compressed_set out;
  out.kind = kind;
  out.rows = rows;
  out.raw.assign(raw_words(rows), 0);
  if (kind == layout::in_place)
    out.data.assign(rows * l, std::byte{0});
  else
    out.offsets.assign(rows + 1, 0);
  std::vector<std::byte> stream(l);
  for (std::size_t r = 0; r < rows; ++r) {
    const std::byte* row = data.data() + r * l;
    const codebook_ref ref = book_of(std::uint64_t{r});
    const std::uint32_t s = stored_bytes(row, ref);
    const bool raw = s == l;
    if (raw) {
      out.raw[r / 32] |= 1u << (r % 32);
      std::copy_n(row, l, stream.begin());
    } else {
      encode_row(row, ref, stream.data());
    }
    if (kind == layout::in_place) {
      std::copy_n(stream.begin(), s, out.data.begin() + static_cast<std::ptrdiff_t>(r * l));
    } else {
      out.data.insert(out.data.end(), stream.begin(), stream.begin() + s);
      out.offsets[r + 1] = out.data.size();
    }
  }
  return out;
}

/// Throws invalid_argument unless out holds the set's rows x tensor_bytes bytes.
inline void check_output(const compressed_set& set, std::uint32_t tensor_bytes,
                         std::span<std::byte> out, const char* who) {
  const auto need = core::checked_mul<std::uint64_t>(set.rows, tensor_bytes);
  if (!need || out.size() < *need) {
    throw invalid_argument{std::string{who} + ": output holds fewer than rows x tensor_bytes = " +
                           (need ? std::to_string(*need) : std::string{"more than 2^64"}) +
                           " bytes (violated: out.size() >= set.rows * tensor_bytes)"};
  }
}

/// The reference decoder over a data set: row r is decoded with `book_of(r)` (as in
/// compress_rows). Checks the set's shape first; throws format_error, naming the row, on
/// anything malformed; writes nothing past out's rows.
template <class BookOf>
void decompress_rows(const compressed_set& set, std::uint32_t tensor_bytes,
                     std::span<std::byte> out, BookOf&& book_of) {
  check_output(set, tensor_bytes, out, "ibp::decompress");
  check_set_shape(set, tensor_bytes);
  for (std::uint64_t r = 0; r < set.rows; ++r) {
    decode_stored_row(set, r, book_of(r), out.data() + r * tensor_bytes);
  }
}

/// What decompress_rows checks, without an output: every row decodes with book_of(r).
template <class BookOf>
void validate_rows(const compressed_set& set, std::uint32_t tensor_bytes, BookOf&& book_of) {
  check_set_shape(set, tensor_bytes);
  std::vector<std::byte> scratch(tensor_bytes);
  for (std::uint64_t r = 0; r < set.rows; ++r)
    decode_stored_row(set, r, book_of(r), scratch.data());
}

}  // namespace detail

inline bool compressed_set::is_raw(std::uint64_t r) const {
  detail::check_row_index(*this, r, "ibp::compressed_set::is_raw");
  detail::check_raw_bitmask(*this);
  return unchecked_is_raw(r);
}

/// Compresses `rows` rows of cb.tensor_bytes each (reference encoder).
inline compressed_set compress(std::span<const std::byte> data, std::size_t rows,
                               const codebook& cb, layout kind) {
  validate(cb);
  const codebook_ref ref = cb.ref();
  return detail::compress_rows(data, rows, cb.tensor_bytes, kind,
                               [ref](std::uint64_t) { return ref; });
}

/// Bytes available to row r: its slot (in place) or its offset range (condensed). Checks
/// the set's shape (for rows of cb.tensor_bytes) and r: throws invalid_argument unless
/// r < set.rows, format_error on a malformed shape or on offsets that are not monotone or
/// leave the data.
inline std::span<const std::byte> stored_row(const compressed_set& set, const codebook& cb,
                                             std::uint64_t r) {
  return detail::stored_row(set, cb.tensor_bytes, r);
}

/// Throws format_error (naming the row) unless the set is well formed for the codebook:
/// every rule at the top of this file, every row decoded (into scratch space). Accepts
/// exactly the sets decompress accepts.
inline void validate(const compressed_set& set, const codebook& cb) {
  validate(cb);
  const codebook_ref ref = cb.ref();
  detail::validate_rows(set, cb.tensor_bytes, [ref](std::uint64_t) { return ref; });
}

/// Decompresses row r alone into out[0, tensor_bytes). Checks the codebook, the set's shape
/// and r (invalid_argument unless r < set.rows and out holds a row); throws format_error,
/// naming the row, when it is malformed; writes out only on success.
inline void decompress_row(const compressed_set& set, const codebook& cb, std::uint64_t r,
                           std::span<std::byte> out) {
  validate(cb);
  SQUEEZE_EXPECTS(out.size() >= cb.tensor_bytes,
                  "ibp::decompress_row: output holds fewer than tensor_bytes bytes");
  detail::decode_stored_row(set, r, cb.ref(), out.data());
}

/// Decompresses the whole set into out ([rows, tensor_bytes]). Throws format_error,
/// naming the row, on anything malformed; writes nothing past out's rows.
inline void decompress(const compressed_set& set, const codebook& cb, std::span<std::byte> out) {
  validate(cb);
  const codebook_ref ref = cb.ref();
  detail::decompress_rows(set, cb.tensor_bytes, out, [ref](std::uint64_t) { return ref; });
}

}  // namespace squeeze::ibp
