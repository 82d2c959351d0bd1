// SPDX-License-Identifier: Apache-2.0
// squeeze/io/read_limits.hpp: how much memory the readers of outside bytes in io/ may
// allocate, and the one rule they all follow.
//
// A reader allocates no more than a small multiple of the bytes it has read, plus what the
// caller allows here. Two kinds of size come from an input:
//
//   - Sizes the input must hold: a .npy or IDX array, a .npy header, the lists of a graph
//     file. Where the input's size is known (a regular file, a seekable stream) they are
//     compared with it before anything is allocated. Where it is not (a pipe) they are read
//     in steps that double from 64 KiB, so an input that ends early costs at most twice what
//     it sent, never what it declared. These readers need no allowance.
//   - Sizes the input declares without holding them: the rows of a sparse Matrix Market
//     matrix, the vertices of a graph up to its largest id. These may cost up to 16 bytes per
//     byte of input read (generous for real files: a row with an entry costs at most 24 bytes
//     and its entry line takes at least 4) plus read_limits::max_bytes. Past that the reader
//     throws format_error naming the input, the size and the limit, before allocating.
//
// Which readers take a read_limits: read_matrix_market, read_matrix_market_graph and
// read_edge_list (in edge_list_options). read_npy, read_idx and read_graph_binary allocate
// only what their input holds.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "squeeze/core/checked.hpp"

namespace squeeze::io {

/// What a reader may allocate for sizes its input declares without holding them.
struct read_limits {
  /// Bytes allowed beyond 16 per byte of input read. Default 256 MiB: room for a sparse
  /// matrix of 11 M rows with no entries, or 22 M vertices that no edge names, while a
  /// 62-byte file can no longer ask for 32 GB. Raise it to read such inputs.
  std::uint64_t max_bytes = std::uint64_t{256} << 20;
};

namespace detail {

/// Bytes a declared size may cost per byte of input read (see above).
inline constexpr std::uint64_t declared_bytes_per_input_byte = 16;

/// Whether `bytes` (nullopt: past 2^64) for sizes the input declares stays within `limits`
/// after `input_bytes` bytes of input.
[[nodiscard]] constexpr bool declared_bytes_allowed(std::optional<std::uint64_t> bytes,
                                                    std::uint64_t input_bytes,
                                                    const read_limits& limits) noexcept {
  if (!bytes) return false;
  const std::optional<std::uint64_t> earned =
      core::checked_mul<std::uint64_t>(input_bytes, declared_bytes_per_input_byte);
  const std::optional<std::uint64_t> allowed =
      earned ? core::checked_add<std::uint64_t>(*earned, limits.max_bytes) : std::nullopt;
  return !allowed || *bytes <= *allowed;  // an allowance past 2^64 bytes allows anything
}

/// The end of a message refusing a declared size: "which need ... bytes: more than ...".
[[nodiscard]] inline std::string declared_bytes_refusal(std::optional<std::uint64_t> bytes,
                                                        std::uint64_t input_bytes,
                                                        const read_limits& limits) {
  return "which need " + (bytes ? std::to_string(*bytes) : std::string{"more than 2^64"}) +
         " bytes: more than " + std::to_string(input_bytes) +
         " bytes of input may ask for (" + std::to_string(declared_bytes_per_input_byte) +
         " bytes per byte read, plus read_limits::max_bytes = " +
         std::to_string(limits.max_bytes) + "); raise max_bytes to read it";
}

}  // namespace detail

}  // namespace squeeze::io
