// SPDX-License-Identifier: Apache-2.0
// squeeze/ibp/wire_format.hpp: the IBP wire message (n float or double values as one
// self-describing, variable-size buffer: what ibp::wire_codec sends through a collective),
// with its host reference encoder and decoder. Host+device: the layout arithmetic, the
// codebook rule and the header checks are the ones the GPU codec (ibp/wire.cuh) runs, and
// the GPU's messages are checked bit for bit against wire_encode here.
//
// The n · V bytes of the values (V = sizeof(T), 4 or 8) are cut into R rows of
// L = min(512, n · V) bytes; the last row holds the remaining bytes (a multiple of V) and
// may be shorter. The rows are one IBP data set (ibp/format.hpp) with chunks of C = V bytes
// (one participation bit per value) and one codebook for all of them: per-bit-position
// counts over every row, then Mask and Bitval for each of eight thresholds (percent of the
// rows holding the bit: 100 = all of them, 97, 93, 90, 85, 80, 75, 70), and the codebook
// that stores the rows in the fewest bytes wins (ties: the higher threshold). A short last
// row uses the first bytes of the codebook. Sizes are exact: no row grows (a row that would
// not save a byte is stored raw). A message of either kind below:
//
// Raw message (kind 1), when the compressed one would not be shorter (n = 0, a few hundred
// values, incompressible data): the header, then the n · V bytes of the values. No
// message is longer than 64 + n · V bytes.
//
//   | header (64 B) | values (n · V B) |
//
// Compressed message (kind 0; little-endian; every section starts on a 16-byte boundary
// and is padded with zero bytes to the next one; L' = L rounded up to 16):
//
//   0        64       64+L'    64+2L'
//   | header | mask   | bitval | bases       | raw      | sizes    | payload              |
//     64 B     L B      L B      (G+1) x u64   G x u32    R x u16    P B (no padding)
//
//   header   wire_header below: magic "IBPW", version 1, V, C, L, the threshold kept (%),
//            kind, n, R, P (payload bytes), total bytes, a reserved zero word, a check word
//   mask     Mask over a row of L bytes
//   bitval   Bitval, 0 wherever Mask is 0
//   bases    G = ceil(R / 32) tiles of 32 rows: bases[g] = payload offset of row 32g;
//            bases[G] = P
//   raw      bit r % 32 of word r / 32 set: row r is stored raw (its size is its length)
//   sizes    stored bytes of row r: 1 .. L_r (L_r = L, or the last row's length)
//   payload  the stored rows back to back (ibp's condensed layout); row r starts at
//            bases[r / 32] + the sizes of the rows before it in its tile
//   total  = payload offset + P
//
//   e.g. n = 1000 floats: V = C = 4, L = 512, R = 8 (7 x 512 B + 416 B), G = 1;
//        mask at 64, bitval at 576, bases at 1088 (2 x u64), raw at 1104, sizes at 1120,
//        payload at 1136; the compressed message has 1136 + P bytes, so it is sent only
//        when P < 2928 (N(0, 1e-3) floats of this length take ~3470: sent raw, 4064 B)
//
// max_wire_bytes (wire_max_bytes) is the compressed layout with every row raw: the encoder
// writes the sections before it knows the kind, so its buffer must hold them. The check
// word is a hash of the header's other 56 bytes in which a change to any one field always
// changes the result, so a flipped header field is always detected; the sections are
// checked against each other (tile sums against bases, raw bits against sizes, every
// stream against its size) but carry no checksum: a flipped payload bit may decode to a
// different value.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "squeeze/core/bits.hpp"
#include "squeeze/core/checked.hpp"
#include "squeeze/core/config.hpp"
#include "squeeze/core/error.hpp"
#include "squeeze/core/status.hpp"
#include "squeeze/ibp/format.hpp"

namespace squeeze::ibp {

inline constexpr std::uint32_t wire_magic = 0x57504249u;  ///< "IBPW", read little-endian
inline constexpr std::uint16_t wire_version = 1;          ///< the format's version
/// Longest row (L) of a message; the encoder uses min(this, n · V). 512 B is one warp group
/// of ibp's encoder and decoder (16 bytes a lane), keeps the codebook at 1 KiB and the
/// per-row metadata at 2.4 bytes a row (0.46 %), and the decoder's workspace small.
inline constexpr std::uint32_t wire_max_row_bytes = 512;
/// Rows per tile: one base offset and one raw-bit word per tile.
inline constexpr std::uint32_t wire_tile_rows = 32;
inline constexpr std::uint64_t wire_header_bytes = 64;  ///< the header's size
/// Thresholds the encoder measures (wire_threshold_percent(0 .. wire_candidates - 1)).
inline constexpr int wire_candidates = 8;
/// Message kinds (wire_header::kind).
inline constexpr std::uint16_t wire_compressed = 0;
inline constexpr std::uint16_t wire_raw = 1;  ///< the values follow the header as they are

/// Threshold candidate k as a percentage of the rows that must agree on a bit for it to
/// be invariant (100: every row; Kamath et al., EuroSys 2026, found 75-90 % best on their
/// data).
SQUEEZE_HOST_DEVICE constexpr std::uint32_t wire_threshold_percent(int k) noexcept {
  switch (k) {
    case 0: return 100;
    case 1: return 97;
    case 2: return 93;
    case 3: return 90;
    case 4: return 85;
    case 5: return 80;
    case 6: return 75;
    default: return 70;
  }
}

/// T for a bit position that `rows` (> 0) rows hold: floor(rows · percent / 100) (formed
/// without the product, so it never wraps), at most rows - 1 (the make_codebook rule in
/// ibp/dataset.hpp then marks a bit all rows agree on). percent is at most 100.
SQUEEZE_HOST_DEVICE constexpr std::uint64_t wire_threshold(std::uint64_t rows,
                                                           std::uint32_t percent) noexcept {
  if (rows == 0) return 0;
  const std::uint64_t t = rows / 100 * percent + rows % 100 * percent / 100;
  return t < rows ? t : rows - 1;
}

/// One byte of Mask and Bitval.
struct wire_codebook_byte {
  std::uint8_t mask = 0;    ///< 1 where the bit is invariant
  std::uint8_t bitval = 0;  ///< the invariant bits' values
};

/// Mask and Bitval of a byte whose 8 bits are set in ones[0..8) of `rows` rows, for
/// threshold T (make_codebook's rule): invariant 1 when more than T rows have the bit,
/// invariant 0 when fewer than rows - T do.
template <class Count>
SQUEEZE_HOST_DEVICE constexpr wire_codebook_byte wire_codebook_bits(const Count* ones,
                                                                    std::uint64_t rows,
                                                                    std::uint64_t t) noexcept {
  unsigned m = 0;
  unsigned v = 0;
  for (unsigned bit = 0; bit < 8; ++bit) {
    const auto c = static_cast<std::uint64_t>(ones[bit]);
    if (c > t) {
      m |= 1u << bit;
      v |= 1u << bit;
    } else if (c < rows - t) {
      m |= 1u << bit;
    }
  }
  return {static_cast<std::uint8_t>(m), static_cast<std::uint8_t>(v)};
}

/// The message header (the first 64 bytes).
struct wire_header {
  std::uint32_t magic = 0;              ///< wire_magic
  std::uint16_t version = 0;            ///< wire_version
  std::uint8_t value_bytes = 0;         ///< V
  std::uint8_t chunk_bytes = 0;         ///< C (= V; 0 in a raw message)
  std::uint32_t row_bytes = 0;          ///< L (0 in a raw message)
  std::uint16_t threshold_percent = 0;  ///< the codebook's threshold (0 in a raw message)
  std::uint16_t kind = 0;               ///< wire_compressed or wire_raw
  std::uint64_t values = 0;             ///< n
  std::uint64_t rows = 0;               ///< R (0 in a raw message)
  std::uint64_t payload_bytes = 0;      ///< P (n · V in a raw message)
  std::uint64_t total_bytes = 0;        ///< the message's length
  std::uint64_t reserved = 0;           ///< 0
  std::uint64_t check = 0;              ///< wire_check_word of the fields above
};
static_assert(sizeof(wire_header) == wire_header_bytes);
static_assert(std::is_trivially_copyable_v<wire_header>);
static_assert(std::endian::native == std::endian::little,
              "ibp wire messages are little-endian, as are CUDA hosts and devices");

namespace detail {
/// One step of the check word: a bijection of the state for a fixed word and of the word
/// for a fixed state (xor, multiply by an odd constant, xorshift).
SQUEEZE_HOST_DEVICE constexpr std::uint64_t wire_mix(std::uint64_t h, std::uint64_t w) noexcept {
  h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
  return h ^ (h >> 31);
}
SQUEEZE_HOST_DEVICE constexpr std::uint64_t pad16(std::uint64_t bytes) noexcept {
  return core::align_up<std::uint64_t>(bytes, 16);
}
}  // namespace detail

/// The header's check word: every step is a bijection, so two headers that differ in one
/// field (of the first 56 bytes) never share it.
SQUEEZE_HOST_DEVICE constexpr std::uint64_t wire_check_word(const wire_header& h) noexcept {
  std::uint64_t x = 0x9e3779b97f4a7c15ull;
  x = detail::wire_mix(x, std::uint64_t{h.magic} | (std::uint64_t{h.version} << 32) |
                              (std::uint64_t{h.value_bytes} << 48) |
                              (std::uint64_t{h.chunk_bytes} << 56));
  x = detail::wire_mix(x, std::uint64_t{h.row_bytes} | (std::uint64_t{h.threshold_percent} << 32) |
                              (std::uint64_t{h.kind} << 48));
  x = detail::wire_mix(x, h.values);
  x = detail::wire_mix(x, h.rows);
  x = detail::wire_mix(x, h.payload_bytes);
  x = detail::wire_mix(x, h.total_bytes);
  x = detail::wire_mix(x, h.reserved);
  return x;
}

/// Where everything of a message of `values` values lies (byte offsets from its start).
/// Every offset fits in 64 bits whenever values · value_bytes does and row_bytes >= 4
/// (the sections before the payload take at most 0.6 · n · V + 2.2 KiB); callers with a
/// value count from outside check that first (wire_data_bytes_fit; check_wire_header does).
struct wire_layout {
  std::uint64_t values = 0;          ///< n
  std::uint64_t data_bytes = 0;      ///< values · value_bytes
  std::uint32_t value_bytes = 0;     ///< V
  std::uint32_t row_bytes = 0;       ///< L (0 when there are no values)
  std::uint32_t last_row_bytes = 0;  ///< the last row's length (L when it is whole)
  std::uint64_t rows = 0;            ///< R
  std::uint64_t tiles = 0;           ///< G
  std::uint64_t mask = 0;            ///< offset of Mask in the message
  std::uint64_t bitval = 0;          ///< offset of Bitval
  std::uint64_t bases = 0;           ///< offset of the tiles' base offsets
  std::uint64_t raw = 0;             ///< offset of the raw-row bits
  std::uint64_t sizes = 0;           ///< offset of the rows' stored sizes
  std::uint64_t payload = 0;         ///< offset of the stored rows

  /// The layout for rows of row_bytes (> 0 unless values = 0).
  SQUEEZE_HOST_DEVICE static constexpr wire_layout of(std::uint64_t values,
                                                      std::uint32_t value_bytes,
                                                      std::uint32_t row_bytes) noexcept {
    wire_layout w;
    w.values = values;
    w.value_bytes = value_bytes;
    w.data_bytes = values * value_bytes;
    w.row_bytes = w.data_bytes == 0 ? 0 : row_bytes;
    if (w.row_bytes != 0) {
      w.rows = w.data_bytes / w.row_bytes + (w.data_bytes % w.row_bytes != 0 ? 1 : 0);
      w.last_row_bytes = static_cast<std::uint32_t>(w.data_bytes - (w.rows - 1) * w.row_bytes);
    }
    w.tiles = (w.rows + wire_tile_rows - 1) / wire_tile_rows;
    w.mask = wire_header_bytes;
    w.bitval = w.mask + detail::pad16(w.row_bytes);
    w.bases = w.bitval + detail::pad16(w.row_bytes);
    w.raw = w.bases + detail::pad16(8 * (w.tiles + 1));
    w.sizes = w.raw + detail::pad16(4 * w.tiles);
    w.payload = w.sizes + detail::pad16(2 * w.rows);
    return w;
  }
  /// L_r, the length of row r.
  SQUEEZE_HOST_DEVICE constexpr std::uint32_t row_length(std::uint64_t r) const noexcept {
    return r + 1 == rows ? last_row_bytes : row_bytes;
  }
  /// How many rows hold byte b of a row (all, or all but a short last row).
  SQUEEZE_HOST_DEVICE constexpr std::uint64_t rows_with_byte(std::uint32_t b) const noexcept {
    return b < last_row_bytes ? rows : rows - 1;
  }
};

/// Whether `values` values of value_bytes (4 or 8) take fewer than 2^64 bytes: the sizes
/// of their messages are then representable (wire_layout above).
SQUEEZE_HOST_DEVICE constexpr bool wire_data_bytes_fit(std::uint64_t values,
                                                       std::uint32_t value_bytes) noexcept {
  return value_bytes == 0 || values <= ~std::uint64_t{0} / value_bytes;
}

/// L the encoder picks for data_bytes of values.
SQUEEZE_HOST_DEVICE constexpr std::uint32_t wire_row_bytes_for(std::uint64_t data_bytes) noexcept {
  return data_bytes < wire_max_row_bytes ? static_cast<std::uint32_t>(data_bytes)
                                         : wire_max_row_bytes;
}

/// The layout the encoder writes for `values` values of value_bytes.
SQUEEZE_HOST_DEVICE constexpr wire_layout wire_layout_for(std::uint64_t values,
                                                          std::uint32_t value_bytes) noexcept {
  return wire_layout::of(values, value_bytes, wire_row_bytes_for(values * value_bytes));
}

/// The buffer the encoder needs for `values` values: the compressed layout with every row
/// raw (the message it leaves there is never longer than 64 + values · value_bytes bytes).
/// 2^64 - 1 (no buffer holds it) when that size does not fit in 64 bits.
SQUEEZE_HOST_DEVICE constexpr std::uint64_t wire_max_bytes(std::uint64_t values,
                                                           std::uint32_t value_bytes) noexcept {
  constexpr std::uint64_t none = ~std::uint64_t{0};
  if (!wire_data_bytes_fit(values, value_bytes)) return none;
  const wire_layout w = wire_layout_for(values, value_bytes);
  return w.payload <= none - w.data_bytes ? w.payload + w.data_bytes : none;
}

/// Whether the encoder sends the values raw: when the compressed message, with P =
/// payload_bytes, would not be shorter.
SQUEEZE_HOST_DEVICE constexpr bool wire_sends_raw(const wire_layout& w,
                                                  std::uint64_t payload_bytes) noexcept {
  return w.rows == 0 || w.payload + payload_bytes >= wire_header_bytes + w.data_bytes;
}

/// The header of a compressed message with layout w, threshold `percent` and P =
/// payload_bytes.
SQUEEZE_HOST_DEVICE constexpr wire_header make_wire_header(const wire_layout& w,
                                                           std::uint32_t percent,
                                                           std::uint64_t payload_bytes) noexcept {
  wire_header h;
  h.magic = wire_magic;
  h.version = wire_version;
  h.value_bytes = static_cast<std::uint8_t>(w.value_bytes);
  h.chunk_bytes = static_cast<std::uint8_t>(w.value_bytes);
  h.row_bytes = w.row_bytes;
  h.threshold_percent = static_cast<std::uint16_t>(percent);
  h.kind = wire_compressed;
  h.values = w.values;
  h.rows = w.rows;
  h.payload_bytes = payload_bytes;
  h.total_bytes = w.payload + payload_bytes;
  h.reserved = 0;
  h.check = wire_check_word(h);
  return h;
}

/// The header of a raw message of `values` values of value_bytes.
SQUEEZE_HOST_DEVICE constexpr wire_header make_raw_wire_header(std::uint64_t values,
                                                               std::uint32_t value_bytes) noexcept {
  wire_header h;
  h.magic = wire_magic;
  h.version = wire_version;
  h.value_bytes = static_cast<std::uint8_t>(value_bytes);
  h.kind = wire_raw;
  h.values = values;
  h.payload_bytes = values * value_bytes;
  h.total_bytes = wire_header_bytes + h.payload_bytes;
  h.check = wire_check_word(h);
  return h;
}

/// What a decoder found wrong with a message (none: nothing).
enum class wire_fault : std::uint8_t {
  none = 0,
  short_message,  ///< fewer bytes than a header
  magic,          ///< not an IBP wire message
  version,        ///< a version this decoder does not read
  check_word,     ///< the header's check word does not match its fields
  kind,           ///< neither a compressed nor a raw message
  value_bytes,    ///< values of another size than the decoder's type (or not 4 or 8 bytes)
  values,         ///< another value count than the caller expects, or n · V >= 2^64 bytes
  chunk_bytes,    ///< chunks other than one value
  row_bytes,      ///< a row length outside [V, 512] or not a multiple of V
  rows,           ///< a row count that n and L contradict
  reserved,       ///< the reserved word is not zero, or the threshold is out of range
  total_bytes,    ///< the message is longer than the bytes received
  payload_bytes,  ///< payload and total lengths that the layout contradicts
  bases,          ///< tile offsets not monotone, or not the sums of their rows' sizes
  row_size,       ///< a row stored in 0 bytes, or in more than its length
  raw_flag,       ///< a raw bit that the row's size contradicts
  row_stream,     ///< a compressed row that does not decode (truncated or corrupt)
};

/// The fault in words ("no fault", ...).
SQUEEZE_HOST_DEVICE constexpr const char* to_string(wire_fault f) noexcept {
  switch (f) {
    case wire_fault::none: return "no fault";
    case wire_fault::short_message: return "the message is shorter than its 64-byte header";
    case wire_fault::magic: return "the message does not start with the IBP wire magic";
    case wire_fault::version: return "the message has an unknown format version";
    case wire_fault::check_word: return "the header's check word does not match its fields";
    case wire_fault::kind: return "the header names an unknown message kind";
    case wire_fault::value_bytes: return "the message holds values of another size";
    case wire_fault::values:
      return "the message holds another number of values than expected, or 2^64 bytes or more";
    case wire_fault::chunk_bytes: return "the header's chunk size is not the value size";
    case wire_fault::row_bytes: return "the header's row length is out of range";
    case wire_fault::rows: return "the header's row count does not match n and the row length";
    case wire_fault::reserved: return "the header's reserved word or threshold is out of range";
    case wire_fault::total_bytes: return "the header claims more bytes than were received";
    case wire_fault::payload_bytes:
      return "the header's payload and total lengths contradict the layout";
    case wire_fault::bases: return "the tile offsets disagree with the row sizes";
    case wire_fault::row_size: return "a row size is 0 or longer than the row";
    case wire_fault::raw_flag: return "a raw-row bit disagrees with the row's size";
    case wire_fault::row_stream: return "a compressed row does not decode";
  }
  return "unknown fault";
}

/// The status a fault maps to (truncated for the short ones).
SQUEEZE_HOST_DEVICE constexpr status status_of(wire_fault f) noexcept {
  if (f == wire_fault::none) return status::ok;
  if (f == wire_fault::short_message || f == wire_fault::total_bytes) return status::truncated;
  return status::corrupt;
}

/// Checks a header (read from a message of `bytes` >= 64 bytes) against what the caller
/// expects, `values` values of value_bytes (4 or 8); on success sets `layout` from it (for
/// a compressed message; a raw one holds the values right after the header). An accepted
/// header puts every section inside the message: [64, 64 + n · V) of a raw one, [64,
/// total) of a compressed one (layout.payload <= total_bytes <= bytes). No sum or product
/// of header fields is formed where it could wrap.
SQUEEZE_HOST_DEVICE constexpr wire_fault check_wire_header(const wire_header& h,
                                                           std::uint64_t bytes,
                                                           std::uint64_t values,
                                                           std::uint32_t value_bytes,
                                                           wire_layout& layout) noexcept {
  if (h.magic != wire_magic) return wire_fault::magic;
  if (h.version != wire_version) return wire_fault::version;
  if (h.check != wire_check_word(h)) return wire_fault::check_word;
  if (h.kind != wire_compressed && h.kind != wire_raw) return wire_fault::kind;
  if ((value_bytes != 4 && value_bytes != 8) || h.value_bytes != value_bytes) {
    return wire_fault::value_bytes;
  }
  if (h.values != values || !wire_data_bytes_fit(values, value_bytes)) return wire_fault::values;
  const std::uint64_t data = values * value_bytes;
  if (h.kind == wire_raw) {
    if (h.chunk_bytes != 0) return wire_fault::chunk_bytes;
    if (h.row_bytes != 0) return wire_fault::row_bytes;
    if (h.rows != 0) return wire_fault::rows;
    if (h.reserved != 0 || h.threshold_percent != 0) return wire_fault::reserved;
    if (h.total_bytes > bytes) return wire_fault::total_bytes;
    if (h.payload_bytes != data || h.total_bytes < wire_header_bytes ||
        h.total_bytes - wire_header_bytes != data) {
      return wire_fault::payload_bytes;
    }
    return wire_fault::none;
  }
  if (h.chunk_bytes != value_bytes) return wire_fault::chunk_bytes;
  if (data == 0 || h.row_bytes < value_bytes || h.row_bytes > wire_max_row_bytes ||
      h.row_bytes % value_bytes != 0) {
    return wire_fault::row_bytes;
  }
  const wire_layout w = wire_layout::of(values, value_bytes, h.row_bytes);
  if (h.rows != w.rows) return wire_fault::rows;
  if (h.reserved != 0 || h.threshold_percent > 100) return wire_fault::reserved;
  if (h.total_bytes > bytes) return wire_fault::total_bytes;
  if (h.payload_bytes > w.data_bytes || h.payload_bytes < w.rows || h.total_bytes < w.payload ||
      h.total_bytes - w.payload != h.payload_bytes) {
    return wire_fault::payload_bytes;
  }
  layout = w;
  return wire_fault::none;
}

// ---- host reference -----------------------------------------------------------------

namespace detail {
template <class U>
void put_le(std::vector<std::byte>& m, std::uint64_t at, U v) {
  std::memcpy(m.data() + at, &v, sizeof v);
}
template <class U>
U get_le(const std::byte* p) {
  U v{};
  std::memcpy(&v, p, sizeof v);
  return v;
}
}  // namespace detail

/// Reference encoder: the message of the data.size() / value_bytes values in `data`
/// (value_bytes 4 or 8). ibp::wire_codec writes the same bytes on the GPU.
inline std::vector<std::byte> wire_encode(std::span<const std::byte> data,
                                          std::uint32_t value_bytes) {
  SQUEEZE_EXPECTS(value_bytes == 4 || value_bytes == 8,
                  "ibp::wire_encode: value_bytes must be 4 or 8");
  SQUEEZE_EXPECTS(data.size() % value_bytes == 0, "ibp::wire_encode: data must hold whole values");
  const wire_layout w = wire_layout_for(data.size() / value_bytes, value_bytes);
  const auto raw_message = [&] {
    std::vector<std::byte> m(wire_header_bytes + data.size());
    const wire_header h = make_raw_wire_header(w.values, value_bytes);
    std::memcpy(m.data(), &h, sizeof h);
    std::copy(data.begin(), data.end(), m.begin() + wire_header_bytes);
    return m;
  };
  if (w.rows == 0) return raw_message();

  const std::uint32_t l = w.row_bytes;
  const auto row_at = [&](std::uint64_t r) { return data.data() + r * l; };
  // Per-bit counts over every row (a short last row counts its bytes).
  std::vector<std::uint64_t> ones(8 * std::size_t{l}, 0);
  for (std::uint64_t r = 0; r < w.rows; ++r) {
    for (std::uint32_t b = 0; b < w.row_length(r); ++b) {
      const auto byte = static_cast<unsigned>(row_at(r)[b]);
      for (unsigned bit = 0; bit < 8; ++bit) ones[8 * std::size_t{b} + bit] += (byte >> bit) & 1u;
    }
  }
  // Every candidate's codebook and total; the smallest total wins (ties: the first).
  std::vector<std::byte> masks(wire_candidates * std::size_t{l});
  std::vector<std::byte> bitvals(masks.size());
  const auto book = [&](int k, std::uint32_t len) {
    const std::size_t at = static_cast<std::size_t>(k) * l;
    return codebook_ref{masks.data() + at, bitvals.data() + at, len, value_bytes};
  };
  int best = 0;
  std::uint64_t best_total = 0;
  for (int k = 0; k < wire_candidates; ++k) {
    for (std::uint32_t b = 0; b < l; ++b) {
      const std::uint64_t rows = w.rows_with_byte(b);
      const wire_codebook_byte cb = wire_codebook_bits(
          ones.data() + 8 * std::size_t{b}, rows, wire_threshold(rows, wire_threshold_percent(k)));
      masks[static_cast<std::size_t>(k) * l + b] = std::byte{cb.mask};
      bitvals[static_cast<std::size_t>(k) * l + b] = std::byte{cb.bitval};
    }
    std::uint64_t total = 0;
    for (std::uint64_t r = 0; r < w.rows; ++r) {
      total += stored_bytes(row_at(r), book(k, w.row_length(r)));
    }
    if (k == 0 || total < best_total) {
      best = k;
      best_total = total;
    }
  }
  if (wire_sends_raw(w, best_total)) return raw_message();

  std::vector<std::byte> m(w.payload, std::byte{0});
  std::memcpy(m.data() + w.mask, masks.data() + static_cast<std::size_t>(best) * l, l);
  std::memcpy(m.data() + w.bitval, bitvals.data() + static_cast<std::size_t>(best) * l, l);
  // Sizes, raw bits, tile bases and the payload.
  std::vector<std::byte> stream(l);
  std::uint64_t payload = 0;
  std::uint32_t raw_word = 0;
  for (std::uint64_t r = 0; r < w.rows; ++r) {
    const std::uint64_t tile = r / wire_tile_rows;
    if (r % wire_tile_rows == 0) detail::put_le(m, w.bases + 8 * tile, payload);
    const std::uint32_t len = w.row_length(r);
    const codebook_ref cb = book(best, len);
    const std::uint32_t s = stored_bytes(row_at(r), cb);
    detail::put_le(m, w.sizes + 2 * r, static_cast<std::uint16_t>(s));
    if (s == len) {
      raw_word |= 1u << (r % wire_tile_rows);
      std::memcpy(stream.data(), row_at(r), len);
    } else {
      encode_row(row_at(r), cb, stream.data());
    }
    m.insert(m.end(), stream.begin(), stream.begin() + s);
    payload += s;
    if (r % wire_tile_rows == wire_tile_rows - 1 || r + 1 == w.rows) {
      detail::put_le(m, w.raw + 4 * tile, raw_word);
      raw_word = 0;
    }
  }
  detail::put_le(m, w.bases + 8 * w.tiles, payload);
  const wire_header h = make_wire_header(w, wire_threshold_percent(best), payload);
  std::memcpy(m.data(), &h, sizeof h);
  return m;
}

/// Reference decoder: the `values` values of value_bytes in `message` (all of whose bytes
/// may be read; the message may be shorter) into out[0, values · value_bytes). Returns the
/// first fault met, header first, then tile by tile and row by row (row_status, if given,
/// gets a row stream's status); reads nothing outside `message`, writes nothing outside
/// out. The GPU decoder makes the same checks, so it finds a fault exactly when this does.
inline wire_fault wire_decode(std::span<const std::byte> message, std::uint64_t values,
                              std::uint32_t value_bytes, std::span<std::byte> out,
                              status* row_status = nullptr) {
  SQUEEZE_EXPECTS(value_bytes == 4 || value_bytes == 8,
                  "ibp::wire_decode: value_bytes must be 4 or 8");
  const auto need = core::checked_mul<std::uint64_t>(values, value_bytes);
  SQUEEZE_EXPECTS(need && out.size() >= *need,
                  "ibp::wire_decode: out holds fewer than values x value_bytes bytes");
  if (message.size() < wire_header_bytes) return wire_fault::short_message;
  const auto h = detail::get_le<wire_header>(message.data());
  wire_layout w;
  if (const wire_fault f = check_wire_header(h, message.size(), values, value_bytes, w);
      f != wire_fault::none) {
    return f;
  }
  const std::byte* m = message.data();
  if (h.kind == wire_raw) {
    std::copy_n(m + wire_header_bytes, h.payload_bytes, out.begin());
    return wire_fault::none;
  }
  const auto base = [&](std::uint64_t g) {
    return detail::get_le<std::uint64_t>(m + w.bases + 8 * g);
  };
  const auto size = [&](std::uint64_t r) {
    return std::uint32_t{detail::get_le<std::uint16_t>(m + w.sizes + 2 * r)};
  };
  if (base(0) != 0 || base(w.tiles) != h.payload_bytes) return wire_fault::bases;
  for (std::uint64_t g = 0; g < w.tiles; ++g) {
    std::uint64_t sum = 0;
    for (std::uint64_t r = g * wire_tile_rows; r < w.rows && r < (g + 1) * wire_tile_rows; ++r) {
      sum += size(r);
    }
    const std::uint64_t lo = base(g);
    const std::uint64_t hi = base(g + 1);
    if (lo > hi || hi > h.payload_bytes || hi - lo != sum) return wire_fault::bases;
  }
  std::uint64_t at = 0;  // payload offset of row r
  for (std::uint64_t r = 0; r < w.rows; ++r) {
    const std::uint32_t len = w.row_length(r);
    const std::uint32_t s = size(r);
    const auto raw_word = detail::get_le<std::uint32_t>(m + w.raw + 4 * (r / wire_tile_rows));
    const auto me = static_cast<unsigned>(r % wire_tile_rows);
    if (s == 0 || s > len) return wire_fault::row_size;
    if ((((raw_word >> me) & 1u) != 0) != (s == len)) return wire_fault::raw_flag;
    if (r + 1 == w.rows && me + 1 < wire_tile_rows && (raw_word >> (me + 1)) != 0) {
      return wire_fault::raw_flag;
    }
    const std::byte* in = m + w.payload + at;
    std::byte* dst = out.data() + r * w.row_bytes;
    if (s == len) {
      std::memcpy(dst, in, len);
    } else {
      const codebook_ref cb{m + w.mask, m + w.bitval, len, value_bytes};
      status st = decode_row(in, s, cb, dst);
      if (st == status::ok && (stream_bits(in, cb) + 7) / 8 != s) st = status::corrupt;
      if (st != status::ok) {
        if (row_status != nullptr) *row_status = st;
        return wire_fault::row_stream;
      }
    }
    at += s;
  }
  return wire_fault::none;
}

/// Throws squeeze::format_error naming the fault (and a row stream's status), unless f is
/// wire_fault::none.
inline void throw_if_fault(wire_fault f, status row = status::ok) {
  if (f == wire_fault::none) return;
  std::string what = std::string{"ibp wire message: "} + to_string(f);
  if (f == wire_fault::row_stream && row != status::ok) {
    what += std::string{" ("} + to_string(row) + ")";
  }
  throw format_error{what};
}

/// The `values` values of T (float or double) in `message`, by the reference decoder;
/// throws squeeze::format_error naming the fault of a message it refuses. Checks the header
/// before it allocates, so a header claiming more values than `message` can hold costs
/// nothing (an accepted header bounds n · V by 512 times the message's length).
template <class T>
std::vector<T> wire_decode_values(std::span<const std::byte> message, std::uint64_t values) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                "ibp::wire_decode_values: T must be float or double");
  if (message.size() < wire_header_bytes) throw_if_fault(wire_fault::short_message);
  wire_layout w;
  throw_if_fault(check_wire_header(detail::get_le<wire_header>(message.data()), message.size(),
                                   values, sizeof(T), w));
  std::vector<T> out(static_cast<std::size_t>(values));
  status row = status::ok;
  const wire_fault f =
      wire_decode(message, values, sizeof(T), std::as_writable_bytes(std::span<T>{out}), &row);
  throw_if_fault(f, row);
  return out;
}

}  // namespace squeeze::ibp
