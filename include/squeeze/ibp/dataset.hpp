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
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

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
  SQUEEZE_EXPECTS(data.size() >= rows * std::size_t{tensor_bytes},
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
/// rows have it set, invariant 0 when fewer than N - T do (the paper's rule, §4.1).
inline codebook make_codebook(std::span<const std::uint64_t> counts, std::uint64_t rows,
                              std::uint64_t threshold, std::uint32_t chunk_bytes) {
  SQUEEZE_EXPECTS(counts.size() % 8 == 0 && !counts.empty(),
                  "ibp::make_codebook: counts must hold 8 per byte of a row");
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

/// A compressed data set on the host.
struct compressed_set {
  layout kind = layout::condensed;
  std::uint64_t rows = 0;
  std::vector<std::byte> data;         ///< see the layouts at the top of this file
  std::vector<std::uint64_t> offsets;  ///< condensed only: [rows + 1]
  std::vector<std::uint32_t> raw;      ///< [ceil(rows / 32)], bit r: row r stored raw

  [[nodiscard]] bool is_raw(std::uint64_t r) const { return ((raw[r / 32] >> (r % 32)) & 1u) != 0; }
};

namespace detail {

/// Bytes available to row r of a set of rows of `tensor_bytes`: its slot (in place) or its
/// offset range (condensed). Throws format_error on offsets that are not monotone or leave
/// the data.
inline std::span<const std::byte> stored_row(const compressed_set& set, std::uint32_t tensor_bytes,
                                             std::uint64_t r) {
  if (set.kind == layout::in_place) {
    return {set.data.data() + r * tensor_bytes, tensor_bytes};
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

/// Throws format_error unless the set's raw-row bitmask, in-place data or condensed
/// offsets have the sizes its row count and tensor_bytes call for.
inline void check_set_shape(const compressed_set& set, std::uint32_t tensor_bytes) {
  const std::size_t l = tensor_bytes;
  if (set.raw.size() != (set.rows + 31) / 32) {
    throw format_error{"ibp: the raw-row bitmask has " + std::to_string(set.raw.size()) +
                       " words, expected " + std::to_string((set.rows + 31) / 32)};
  }
  if (set.kind == layout::in_place && set.data.size() != set.rows * l) {
    throw format_error{"ibp: an in-place set of " + std::to_string(set.rows) + " rows of " +
                       std::to_string(l) + " B must hold " + std::to_string(set.rows * l) +
                       " bytes, holds " + std::to_string(set.data.size())};
  }
  if (set.kind == layout::condensed && set.offsets.size() != set.rows + 1) {
    throw format_error{"ibp: a condensed set of " + std::to_string(set.rows) + " rows needs " +
                       std::to_string(set.rows + 1) + " offsets, has " +
                       std::to_string(set.offsets.size())};
  }
}

/// The reference encoder over a data set: row r is compressed with the codebook
/// `book_of(r)` (a codebook_ref of `tensor_bytes`, already validated). One codebook for
/// every row (ibp::compress) and one per cluster (ibp/cluster.hpp) share this loop.
template <class BookOf>
compressed_set compress_rows(std::span<const std::byte> data, std::size_t rows,
                             std::uint32_t tensor_bytes, layout kind, BookOf&& book_of) {
  const std::size_t l = tensor_bytes;
  SQUEEZE_EXPECTS(data.size() >= rows * l,
                  "ibp::compress: data holds fewer than rows x tensor_bytes bytes");
  compressed_set out;
  out.kind = kind;
  out.rows = rows;
  out.raw.assign((rows + 31) / 32, 0);
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

/// The reference decoder over a data set: row r is decoded with `book_of(r)` (as in
/// compress_rows). Checks the set's shape first; throws format_error, naming the row, on
/// anything malformed; writes nothing past out's rows.
template <class BookOf>
void decompress_rows(const compressed_set& set, std::uint32_t tensor_bytes,
                     std::span<std::byte> out, BookOf&& book_of) {
  const std::size_t l = tensor_bytes;
  SQUEEZE_EXPECTS(out.size() >= set.rows * l,
                  "ibp::decompress: output holds fewer than rows x tensor_bytes bytes");
  check_set_shape(set, tensor_bytes);
  for (std::uint64_t r = 0; r < set.rows; ++r) {
    const std::span<const std::byte> in = stored_row(set, tensor_bytes, r);
    std::byte* dst = out.data() + r * l;
    if (set.is_raw(r)) {
      if (in.size() < l) {
        throw format_error{"ibp: raw row " + std::to_string(r) + " has " +
                           std::to_string(in.size()) + " bytes, needs " + std::to_string(l)};
      }
      std::copy_n(in.begin(), l, dst);
      continue;
    }
    const status st = decode_row(in.data(), in.size(), book_of(r), dst);
    if (st != status::ok) {
      throw format_error{"ibp: row " + std::to_string(r) + " is " + to_string(st) + " (" +
                         std::to_string(in.size()) + " stored bytes)"};
    }
  }
}

}  // namespace detail

/// Compresses `rows` rows of cb.tensor_bytes each (reference encoder).
inline compressed_set compress(std::span<const std::byte> data, std::size_t rows,
                               const codebook& cb, layout kind) {
  validate(cb);
  const codebook_ref ref = cb.ref();
  return detail::compress_rows(data, rows, cb.tensor_bytes, kind,
                               [ref](std::uint64_t) { return ref; });
}

/// Bytes available to row r: its slot (in place) or its offset range (condensed).
/// Throws format_error on offsets that are not monotone or leave the data.
inline std::span<const std::byte> stored_row(const compressed_set& set, const codebook& cb,
                                             std::uint64_t r) {
  return detail::stored_row(set, cb.tensor_bytes, r);
}

/// Decompresses the whole set into out ([rows, tensor_bytes]). Throws format_error,
/// naming the row, on anything malformed; writes nothing past out's rows.
inline void decompress(const compressed_set& set, const codebook& cb, std::span<std::byte> out) {
  validate(cb);
  const codebook_ref ref = cb.ref();
  detail::decompress_rows(set, cb.tensor_bytes, out, [ref](std::uint64_t) { return ref; });
}

}  // namespace squeeze::ibp
