// SPDX-License-Identifier: Apache-2.0
// squeeze/coll/codec.hpp: what a collective asks of a codec, and the codec that sends raw.
//
// Host-compilable (the CUDA runtime API types only). A codec turns n values of T (float or
// double) in device memory into a message ("wire bytes") and back, on a stream:
//
//   C::lossless, C::fixed_size       fixed_size: the wire size is a function of n alone, so
//                                    peers know it without being told
//   C::granule                       chunk boundaries fall on multiples of this many values
//   C::max_wire_bytes<T>(n)          the largest message of n values (workspace sizing)
//   c.encode(src, n, wire, size, s)  writes the message; a variable-size codec also writes
//                                    its byte count to *size (device-visible memory)
//   c.decode(wire, bytes, n, dst, s)              dst[i] = value i
//   c.decode_reduce(wire, bytes, n, dst, op, s)   dst[i] = op(dst[i], value i)
//   C::name()                        for tables
//
// Codecs live with their formats (frsz2::wire_codec, ibp::wire_codec) and do not include
// coll::: they meet this concept by shape. A codec with `identity = true` (no_compression)
// is special-cased by the collectives: they send the values themselves, with no copies,
// and need none of the member functions.
#pragma once

#include <cuda_runtime_api.h>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "squeeze/core/reduce_op.hpp"

namespace squeeze::coll {

using core::reduce_op;

/// The value types squeeze's collectives reduce.
template <class T>
concept collective_value = std::is_same_v<T, float> || std::is_same_v<T, double>;

/// A codec for values of T (see the file comment).
template <class C, class T>
concept wire_codec_for =
    collective_value<T> && requires(C& c, const T* src, T* dst, std::byte* wire,
                                    const std::byte* in, std::size_t n, std::size_t bytes,
                                    std::uint64_t* size, reduce_op op, cudaStream_t s) {
  { C::lossless } -> std::convertible_to<bool>;
  { C::fixed_size } -> std::convertible_to<bool>;
  { C::granule } -> std::convertible_to<std::size_t>;
  { C::template max_wire_bytes<T>(n) } -> std::same_as<std::size_t>;
  { C::name() } -> std::convertible_to<const char*>;
  c.encode(src, n, wire, size, s);
  c.decode(in, bytes, n, dst, s);
  c.decode_reduce(in, bytes, n, dst, op, s);
};

/// A codec that also reduces from a second array: c.decode_reduce(in, bytes, n, src, dst, op,
/// s) sets dst[i] = op(src[i], value i) (src may be dst). Optional: with it, an allreduce out
/// of place reduces its first messages straight from the send buffer instead of copying it
/// to the receive buffer first.
template <class C, class T>
concept decodes_reduce_from =
    requires(C& c, const std::byte* in, std::size_t bytes, std::size_t n, const T* src, T* dst,
             reduce_op op, cudaStream_t s) { c.decode_reduce(in, bytes, n, src, dst, op, s); };

/// Whether a codec is the raw one (the collectives then skip encode and decode).
template <class C>
inline constexpr bool is_identity_codec = requires { requires C::identity; };

/// Sends the values as they are: the collectives move them without a copy and reduce
/// received chunks with a plain element-wise kernel.
struct no_compression {
  static constexpr bool identity = true;     ///< the collectives skip encode and decode
  static constexpr bool lossless = true;     ///< the values arrive as sent
  static constexpr bool fixed_size = true;   ///< n values are n * sizeof(T) bytes
  static constexpr std::size_t granule = 4;  ///< 16-byte chunk boundaries for float
  /// "none".
  static constexpr const char* name() noexcept { return "none"; }
  /// n values' bytes.
  template <class T>
  static constexpr std::size_t max_wire_bytes(std::size_t n) noexcept {
    return n * sizeof(T);
  }
};

/// A codec the collectives accept for T: the raw one, or one that meets wire_codec_for.
template <class C, class T>
concept codec_for = collective_value<T> && (is_identity_codec<C> || wire_codec_for<C, T>);

}  // namespace squeeze::coll
