// SPDX-License-Identifier: Apache-2.0
// squeeze/ibp/format.hpp: the bit format of invariant bit packing, with the per-tensor
// reference encoder and decoder. Host+device: the GPU kernels are checked bit for bit
// against these functions.
//
// A data set is N tensors ("rows") of L bytes each. Preprocessing finds bits that are the
// same in most rows and records them once for the whole data set in a codebook:
//
//   Mask   [L bytes]  1 where the bit position is invariant
//   Bitval [L bytes]  the invariant value there (0 wherever Mask is 0)
//
// A row is cut into K = ceil(L / C) chunks of C in {1, 2, 4, 8} bytes; the last chunk
// holds the remaining L - (K-1)·C bytes when C does not divide L. Chunk i, its mask and
// its bitval are read as little-endian integers of up to 64 bits. Chunk i *participates*
// when (chunk & mask) == bitval; then only its free bits (~mask) are stored.
//
// Compressed row, an LSB-first bit stream, padded with zero bits to whole bytes:
//
//   bit 0                K                                                      8·S
//   | p0 p1 ... p(K-1) | payload 0 | payload 1 | ... | payload K-1 | 0 pad |
//     participation      payload i = the chunk's free bits in position order
//     bit per chunk      (popcount(~mask_i) bits) when p_i = 1,
//                        all 8·len_i bits of the chunk when p_i = 0
//
//   e.g. L = 3, C = 2: chunks [b0 b1] and [b2]; mask 0xFF00 (chunk 0), 0xF0 (chunk 1)
//        row 0x12 0xAB 0xC7 with bitval 0xAB00, 0xC0: both participate ->
//        stream = 1 1 | 0x12 (8 free bits of chunk 0) | 0x7 (4 free bits of chunk 1)
//        = 2 + 8 + 4 = 14 bits -> S = 2 bytes
//
// S = ceil(bits / 8) is the row's stored size. A row whose S would not be at least one
// byte smaller than L is stored raw (L bytes, no participation bits); a one-bit-per-row
// bitmask of the data set says which rows are raw. Two data-set layouts
// (ibp/dataset.hpp): in place (row r keeps its L-byte slot, only its first S bytes are
// meaningful) and condensed (rows back to back, with N+1 byte offsets).
#pragma once

#include <cstddef>
#include <cstdint>

#include "squeeze/core/bits.hpp"
#include "squeeze/core/config.hpp"
#include "squeeze/core/status.hpp"

namespace squeeze::ibp {

/// Chunk sizes the format allows.
SQUEEZE_HOST_DEVICE constexpr bool valid_chunk_bytes(std::uint32_t c) noexcept {
  return c == 1 || c == 2 || c == 4 || c == 8;
}

/// Little-endian integer made of the `len` (1..8) bytes at p.
SQUEEZE_HOST_DEVICE constexpr std::uint64_t load_chunk(const std::byte* p, unsigned len) noexcept {
  std::uint64_t v = 0;
  for (unsigned b = 0; b < len; ++b) v |= static_cast<std::uint64_t>(p[b]) << (8 * b);
  return v;
}

/// Stores the low `len` (1..8) bytes of v at p, little-endian.
SQUEEZE_HOST_DEVICE constexpr void store_chunk(std::byte* p, unsigned len,
                                               std::uint64_t v) noexcept {
  for (unsigned b = 0; b < len; ++b) p[b] = static_cast<std::byte>((v >> (8 * b)) & 0xFFu);
}

/// A view of a data set's codebook (trivially copyable; device code gets it by value).
/// A view carries no array sizes: it is as good as the codebook it was made from
/// (ibp::validate(codebook) on the host: mask and bitval of tensor_bytes bytes, chunk_bytes
/// 1, 2, 4 or 8). Its chunk members take any index: chunks from chunks() on are empty
/// (length 0, mask and bitval 0), so no index reads outside [0, tensor_bytes).
struct codebook_ref {
  const std::byte* mask = nullptr;    ///< [tensor_bytes]
  const std::byte* bitval = nullptr;  ///< [tensor_bytes]
  std::uint32_t tensor_bytes = 0;     ///< L
  std::uint32_t chunk_bytes = 4;      ///< C

  /// K, the number of chunks (and of participation bits) of a row.
  SQUEEZE_HOST_DEVICE constexpr std::uint32_t chunks() const noexcept {
    // one 32-bit division (the decoders call this per row), and no sum that could wrap
    return tensor_bytes / chunk_bytes + (tensor_bytes % chunk_bytes != 0 ? 1u : 0u);
  }
  /// Bytes in chunk i (chunk_bytes, fewer for the last one, 0 past it).
  SQUEEZE_HOST_DEVICE constexpr unsigned chunk_len(std::uint32_t i) const noexcept {
    const std::uint64_t at = std::uint64_t{i} * chunk_bytes;
    if (at >= tensor_bytes) return 0;
    const std::uint64_t left = tensor_bytes - at;
    return static_cast<unsigned>(left < chunk_bytes ? left : chunk_bytes);
  }
  /// Chunk i of Mask, a little-endian integer (0 past the last chunk).
  SQUEEZE_HOST_DEVICE constexpr std::uint64_t chunk_mask(std::uint32_t i) const noexcept {
    const unsigned len = chunk_len(i);
    return len == 0 ? 0 : load_chunk(mask + std::size_t{i} * chunk_bytes, len);
  }
  /// Chunk i of Bitval, a little-endian integer (0 past the last chunk).
  SQUEEZE_HOST_DEVICE constexpr std::uint64_t chunk_bitval(std::uint32_t i) const noexcept {
    const unsigned len = chunk_len(i);
    return len == 0 ? 0 : load_chunk(bitval + std::size_t{i} * chunk_bytes, len);
  }
  /// Bits a participating chunk i keeps.
  SQUEEZE_HOST_DEVICE constexpr unsigned free_bits(std::uint32_t i) const noexcept {
    return 8 * chunk_len(i) - static_cast<unsigned>(core::popcount(chunk_mask(i)));
  }
};

/// A view of a clustered codebook (ibp/cluster.hpp): `clusters` codebooks for rows of the
/// same tensor_bytes and chunk_bytes, stored back to back, and each row's cluster id
/// packed LSB-first in 32-bit words, id_bits per row (0 when there is one cluster):
///
///   masks, bitvals   [clusters, tensor_bytes]     codebook c at + c·tensor_bytes
///   ids              [ceil(rows · id_bits / 32)]  row r's id = bits [r·id_bits, (r+1)·id_bits)
///
/// The view carries neither the row count nor the array sizes, so its readers are
/// unchecked: row r must be below the rows of the ibp::cluster_set it was made from (after
/// ibp::validate(cluster_set)) and c below `clusters`. Host code reads a cluster_set's
/// checked cluster_of / book instead.
struct cluster_ref {
  const std::byte* masks = nullptr;    ///< [clusters, tensor_bytes]
  const std::byte* bitvals = nullptr;  ///< [clusters, tensor_bytes]
  const std::uint32_t* ids = nullptr;  ///< [ceil(rows · id_bits / 32)], packed LSB-first
  std::uint32_t clusters = 0;          ///< codebooks; 0: the set is not clustered
  std::uint32_t id_bits = 0;           ///< bits of a row's cluster id (0 with one cluster)
  std::uint32_t tensor_bytes = 0;      ///< L
  std::uint32_t chunk_bytes = 4;       ///< C

  /// Codebook c; unchecked: c < clusters.
  SQUEEZE_HOST_DEVICE constexpr codebook_ref unchecked_book(std::uint32_t c) const noexcept {
    const std::size_t at = std::size_t{c} * tensor_bytes;
    return {masks + at, bitvals + at, tensor_bytes, chunk_bytes};
  }
  /// Row r's cluster id as stored; unchecked: r below the rows the ids describe, and the
  /// caller checks the id against `clusters`.
  SQUEEZE_HOST_DEVICE constexpr std::uint32_t unchecked_cluster_of(std::uint64_t r) const noexcept {
    if (id_bits == 0) return 0;
    const std::uint64_t bit = r * id_bits;
    const std::uint64_t word = bit / 32;
    const auto shift = static_cast<unsigned>(bit % 32);
    std::uint64_t v = ids[word] >> shift;
    if (shift + id_bits > 32) v |= std::uint64_t{ids[word + 1]} << (32 - shift);
    return static_cast<std::uint32_t>(v & core::low_mask<std::uint64_t>(id_bits));
  }
};

/// Bits of row `row`'s compressed stream (participation bits + payload, before padding).
SQUEEZE_HOST_DEVICE constexpr std::uint64_t compressed_bits(const std::byte* row,
                                                            const codebook_ref& cb) noexcept {
  std::uint64_t bits = cb.chunks();
  for (std::uint32_t i = 0; i < cb.chunks(); ++i) {
    const unsigned len = cb.chunk_len(i);
    const std::uint64_t x = load_chunk(row + std::size_t{i} * cb.chunk_bytes, len);
    const std::uint64_t m = cb.chunk_mask(i);
    bits += (x & m) == cb.chunk_bitval(i) ? cb.free_bits(i) : 8 * len;
  }
  return bits;
}

/// Bytes a compressed stream of `bits` bits occupies, or tensor_bytes when that would
/// not save at least one byte (the row is then stored raw).
SQUEEZE_HOST_DEVICE constexpr std::uint32_t stored_bytes_for(std::uint64_t bits,
                                                             std::uint32_t tensor_bytes) noexcept {
  const std::uint64_t bytes = (bits + 7) / 8;
  return bytes < tensor_bytes ? static_cast<std::uint32_t>(bytes) : tensor_bytes;
}

/// Bytes row `row` is stored in; equal to cb.tensor_bytes means "stored raw".
SQUEEZE_HOST_DEVICE constexpr std::uint32_t stored_bytes(const std::byte* row,
                                                         const codebook_ref& cb) noexcept {
  return stored_bytes_for(compressed_bits(row, cb), cb.tensor_bytes);
}

/// Reference encoder: writes row's compressed stream, padded with zero bits, to
/// out[0, S) where S = stored_bytes(row, cb) < cb.tensor_bytes. (Rows that are stored raw
/// are copied by the caller.) One thread; the GPU compressor matches it bit for bit.
SQUEEZE_HOST_DEVICE constexpr void encode_row(const std::byte* row, const codebook_ref& cb,
                                              std::byte* out) noexcept {
  const std::uint32_t k = cb.chunks();
  const std::uint64_t total = compressed_bits(row, cb);
  for (std::uint64_t b = 0; b < (total + 7) / 8; ++b) out[b] = std::byte{0};
  std::uint64_t at = k;  // payload cursor
  for (std::uint32_t i = 0; i < k; ++i) {
    const unsigned len = cb.chunk_len(i);
    const std::uint64_t x = load_chunk(row + std::size_t{i} * cb.chunk_bytes, len);
    const std::uint64_t m = cb.chunk_mask(i);
    const bool participates = (x & m) == cb.chunk_bitval(i);
    core::write_bits(out, i, 1, participates ? 1u : 0u);
    if (participates) {
      const unsigned n = cb.free_bits(i);
      core::write_bits(out, at, n, core::pext(x, ~m & core::low_mask<std::uint64_t>(8 * len)));
      at += n;
    } else {
      core::write_bits(out, at, 8 * len, x);
      at += 8 * len;
    }
  }
}

/// Bits of a compressed stream (participation bits + payload, before padding) as its
/// participation bits say: what an in-place row's stored size, ceil(bits / 8), is read
/// from. Reads the first ceil(chunks / 8) bytes of `in` only.
SQUEEZE_HOST_DEVICE constexpr std::uint64_t stream_bits(const std::byte* in,
                                                        const codebook_ref& cb) noexcept {
  std::uint64_t total = cb.chunks();
  for (std::uint32_t i = 0; i < cb.chunks(); ++i) {
    total += core::read_bits(in, i, 1) != 0 ? cb.free_bits(i) : 8 * cb.chunk_len(i);
  }
  return total;
}

/// Reference decoder: rebuilds the row (cb.tensor_bytes bytes) from a compressed stream
/// of which `in_bytes` bytes are available. Reads only in[0, in_bytes); returns
/// status::truncated when the stream needs more, status::corrupt when its padding bits
/// are not zero or it is no shorter than a raw row; writes out only on success.
SQUEEZE_HOST_DEVICE constexpr status decode_row(const std::byte* in, std::size_t in_bytes,
                                                const codebook_ref& cb, std::byte* out) noexcept {
  const std::uint32_t k = cb.chunks();
  const std::uint64_t have = 8 * std::uint64_t{in_bytes};
  if (have < k) return status::truncated;
  const std::uint64_t total = stream_bits(in, cb);
  if (total > have) return status::truncated;
  if ((total + 7) / 8 >= cb.tensor_bytes) return status::corrupt;  // would have been raw
  if (total % 8 != 0 && core::read_bits(in, total, 8 - static_cast<unsigned>(total % 8)) != 0) {
    return status::corrupt;
  }
  std::uint64_t at = k;
  for (std::uint32_t i = 0; i < k; ++i) {
    const unsigned len = cb.chunk_len(i);
    std::uint64_t x = 0;
    if (core::read_bits(in, i, 1) != 0) {
      const std::uint64_t m = cb.chunk_mask(i);
      const unsigned n = cb.free_bits(i);
      x = cb.chunk_bitval(i) |
          core::pdep(core::read_bits(in, at, n), ~m & core::low_mask<std::uint64_t>(8 * len));
      at += n;
    } else {
      x = core::read_bits(in, at, 8 * len);
      at += 8 * len;
    }
    store_chunk(out + std::size_t{i} * cb.chunk_bytes, len, x);
  }
  return status::ok;
}

}  // namespace squeeze::ibp
