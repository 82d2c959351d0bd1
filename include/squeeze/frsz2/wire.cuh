// SPDX-License-Identifier: Apache-2.0
// squeeze/frsz2/wire.cuh: FRSZ2 as a fixed-rate wire codec for collectives.
//
//   coll::allreducer<coll::nccl_transport, frsz2::wire_codec<16>> ar{transport};
//
// A message of n values of T (float or double) is the FRSZ2 vector of format<Bits, T, 32>
// laid out in one buffer, payload first, then the block exponents:
//
//   [ payload: blocks(n) x words_per_block uint32 ][ exponents: blocks(n) uint16 ][ pad to 16 B ]
//
// Its size depends on n alone (Bits/32 of the raw size, plus 2 bytes per 32 values), so
// peers need no size exchange: the analogue of ZFP's fixed-rate mode in Zhou et al.
// (ISC 2024).
// decode_reduce decodes and reduces in one pass (dst[i] = op(dst[i], value i): frsz2::
// decompress_reduce), or with the other operand from a second array (dst[i] = op(src[i],
// value i)).
//
// This header meets coll::wire_codec_for by shape and includes nothing from coll::.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "squeeze/core/config.hpp"
#include "squeeze/core/cuda_error.hpp"
#include "squeeze/core/error.hpp"
#include "squeeze/core/reduce_op.hpp"
#include "squeeze/frsz2/compress.cuh"
#include "squeeze/frsz2/format.hpp"

namespace squeeze::frsz2 {

/// FRSZ2 with codes of `Bits` bits as a collective's codec (see the file comment).
template <int Bits, rounding Mode = rounding::nearest>
struct wire_codec {
  static constexpr bool lossless = false;   ///< values arrive within FRSZ2's error bound
  static constexpr bool fixed_size = true;  ///< the message size depends on n alone
  /// Chunks start on block boundaries, so each chunk is a whole FRSZ2 vector.
  static constexpr std::size_t granule = 32;
  /// "frsz2_<Bits>".
  static const char* name() noexcept {
    static const std::string text = "frsz2_" + std::to_string(Bits);
    return text.c_str();
  }

  /// The FRSZ2 format of a message of T values.
  template <class T>
  using format_for = format<Bits, T, 32>;

  /// Bytes of the message of n values (its exact size: the codec is fixed-rate).
  template <class T>
  static constexpr std::size_t max_wire_bytes(std::size_t n) noexcept {
    using F = format_for<T>;
    const std::size_t raw = F::payload_words(n) * 4 + F::blocks(n) * 2;
    return (raw + 15) / 16 * 16;
  }

  /// The view of a message of n values at `wire`.
  template <class T>
  static compressed_ref<format_for<T>> view(const std::byte* wire, std::size_t n) noexcept {
    using F = format_for<T>;
    auto* base = const_cast<std::byte*>(wire);
    return {reinterpret_cast<std::uint32_t*>(base),
            reinterpret_cast<std::uint16_t*>(base + F::payload_words(n) * 4), n};
  }

  /// Writes the message of src[0, n) (device memory) to wire (max_wire_bytes<T>(n) bytes,
  /// 16-byte aligned), ordered on s. The size is implied by n: *size is not written.
  template <class T>
  void encode(const T* src, std::size_t n, std::byte* wire, std::uint64_t* /*size*/,
              cudaStream_t s) const {
    check_types<T>();
    if (n == 0) return;
    check_wire(wire, "encode");
    compress<format_for<T>>(src, n, view<T>(wire, n), s, Mode);
  }

  /// dst[i] = value i of the message at wire, which must be max_wire_bytes<T>(n) bytes
  /// (format_error otherwise), ordered on s.
  template <class T>
  void decode(const std::byte* wire, std::size_t bytes, std::size_t n, T* dst,
              cudaStream_t s) const {
    check_types<T>();
    check_size<T>(bytes, n, "decode");
    if (n == 0) return;
    check_wire(wire, "decode");
    decompress<format_for<T>>(view<T>(wire, n), 0, dst, n, s);
  }

  /// dst[i] = op(dst[i], value i), decoding and reducing in one pass, ordered on s.
  template <class T>
  void decode_reduce(const std::byte* wire, std::size_t bytes, std::size_t n, T* dst,
                     core::reduce_op op, cudaStream_t s) const {
    check_types<T>();
    check_size<T>(bytes, n, "decode_reduce");
    if (n == 0) return;
    check_wire(wire, "decode_reduce");
    decompress_reduce<format_for<T>>(view<T>(wire, n), 0, dst, n, op, s);
  }

  /// dst[i] = op(src[i], value i): decode_reduce with the other operand read from src (which
  /// may be dst; no other overlap).
  template <class T>
  void decode_reduce(const std::byte* wire, std::size_t bytes, std::size_t n, const T* src,
                     T* dst, core::reduce_op op, cudaStream_t s) const {
    check_types<T>();
    check_size<T>(bytes, n, "decode_reduce");
    if (n == 0) return;
    check_wire(wire, "decode_reduce");
    decompress_reduce<format_for<T>>(view<T>(wire, n), 0, src, dst, n, op, s);
  }

 private:
  template <class T>
  static constexpr void check_types() {
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                  "frsz2::wire_codec: values are float or double");
    static_assert(Bits >= 2 && Bits <= static_cast<int>(8 * sizeof(T)),
                  "frsz2::wire_codec: Bits must lie in [2, 32] for float, [2, 64] for double");
  }
  template <class T>
  static void check_size(std::size_t bytes, std::size_t n, const char* who) {
    if (bytes != max_wire_bytes<T>(n)) {
      throw format_error{std::string{"frsz2::wire_codec::"} + who + ": a message of " +
                         std::to_string(n) + " values has " +
                         std::to_string(max_wire_bytes<T>(n)) + " bytes, got " +
                         std::to_string(bytes)};
    }
  }
  static void check_wire(const std::byte* wire, const char* who) {
    SQUEEZE_EXPECTS(wire != nullptr, std::string{"frsz2::wire_codec::"} + who + ": null message");
    SQUEEZE_EXPECTS(reinterpret_cast<std::uintptr_t>(wire) % 16 == 0,
                    std::string{"frsz2::wire_codec::"} + who +
                        ": the message must start on a 16-byte boundary");
  }
};

}  // namespace squeeze::frsz2
