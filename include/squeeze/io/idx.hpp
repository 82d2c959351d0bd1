// SPDX-License-Identifier: Apache-2.0
// squeeze/io/idx.hpp: reads IDX files (the MNIST / Fashion-MNIST format).
//
//   magic: 0x00 0x00 <type> <ndims>, then ndims big-endian uint32 sizes, then the data
//   (big-endian elements, row-major). Types: 0x08 uint8, 0x09 int8, 0x0B int16,
//   0x0C int32, 0x0D float32, 0x0E float64.
//
// Host-only. The reader takes the uncompressed file (the Debian package ships .gz: run
// `gunzip -k` first); a gzip file is recognized and refused with that advice. Every
// malformed file is an io_error / format_error that names the file and what is wrong.
// Memory (read_limits.hpp): the dimensions' product is computed without overflow and compared
// with the bytes the input holds before the data is allocated; a pipe is read in steps, so
// one that ends early costs at most twice what it sent.
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <istream>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "squeeze/core/checked.hpp"
#include "squeeze/core/error.hpp"
#include "squeeze/io/detail/binary_input.hpp"

namespace squeeze::io {

/// An IDX file's array (the MNIST format): its type, dimensions and elements.
struct idx_array {
  std::uint8_t type = 0;            ///< the IDX type code
  std::vector<std::uint32_t> dims;  ///< e.g. {60000, 28, 28}
  std::vector<std::byte> data;      ///< elements in host (little-endian) byte order

  /// Bytes of one element of `type` (0 for an unknown type).
  [[nodiscard]] std::size_t element_bytes() const noexcept {
    switch (type) {
      case 0x08:
      case 0x09: return 1;
      case 0x0B: return 2;
      case 0x0C:
      case 0x0D: return 4;
      case 0x0E: return 8;
      default: return 0;
    }
  }
  /// Elements after the first dimension: a row's element count (1 for a 1-d array). The
  /// reader refuses dimensions whose nonzero product overflows, so this never wraps.
  [[nodiscard]] std::size_t row_elements() const noexcept {
    std::size_t n = 1;
    for (std::size_t d = 1; d < dims.size(); ++d) n *= dims[d];
    return n;
  }
};

namespace detail {

/// "60000 x 28 x 28" for a message.
inline std::string idx_dims_text(const std::vector<std::uint32_t>& dims) {
  std::string s;
  for (std::size_t d = 0; d < dims.size(); ++d) {
    if (d > 0) s += " x ";
    s += std::to_string(dims[d]);
  }
  return s;
}

/// Reads an IDX array from `in`, which names it in messages; `whole`: the input must end
/// with the array (a file), else it may go on (a stream holding more).
inline idx_array idx_read(binary_input& in, bool whole) {
  const std::string& path = in.name();
  unsigned char magic[4];
  if (!in.read_exact(magic, 4)) {
    throw format_error{"'" + path + "' is too short for an IDX header"};
  }
  if (magic[0] == 0x1f && magic[1] == 0x8b) {
    throw format_error{"'" + path + "' is gzip-compressed: decompress it first (gunzip -k)"};
  }
  idx_array a;
  a.type = magic[2];
  if (magic[0] != 0 || magic[1] != 0 || a.element_bytes() == 0 || magic[3] == 0) {
    throw format_error{"'" + path + "' is not an IDX file (bad magic bytes)"};
  }
  a.dims.reserve(magic[3]);  // at most 255
  // The element count and the data bytes, from the nonzero dimensions (so that
  // row_elements() never wraps, even for an empty array).
  std::optional<std::uint64_t> bytes{a.element_bytes()};
  bool empty = false;
  for (unsigned d = 0; d < magic[3]; ++d) {
    unsigned char b[4];
    if (!in.read_exact(b, 4)) {
      throw format_error{"'" + path + "' ends inside its dimensions"};
    }
    const std::uint32_t size = (std::uint32_t{b[0]} << 24) | (std::uint32_t{b[1]} << 16) |
                               (std::uint32_t{b[2]} << 8) | b[3];
    a.dims.push_back(size);
    if (size == 0) {
      empty = true;
    } else if (bytes) {
      bytes = core::checked_mul<std::uint64_t>(*bytes, size);
    }
  }
  const std::string dims = idx_dims_text(a.dims) + " elements of " +
                           std::to_string(a.element_bytes()) +
                           (a.element_bytes() == 1 ? " byte" : " bytes");
  if (!bytes || *bytes > std::numeric_limits<std::size_t>::max()) {
    throw format_error{"'" + path + "' declares " + dims + ", a size that overflows 64 bits"};
  }
  if (empty) bytes = 0;
  const std::string fewer =
      "'" + path + "' holds fewer than the " + std::to_string(*bytes / a.element_bytes()) +
      " elements its header declares (" + dims + ": " + std::to_string(*bytes) + " bytes)";
  if (const std::optional<std::uint64_t> left = in.left(); left && *left < *bytes) {
    throw format_error{fewer + "; only " + std::to_string(*left) + " bytes follow the header"};
  }
  if (!in.read_declared(a.data, *bytes)) throw format_error{fewer};
  if (whole && !in.at_end()) {
    throw format_error{"'" + path + "' is longer than its header describes: bytes follow the " +
                       dims};
  }
  const std::size_t e = a.element_bytes();
  if (e > 1) {  // big-endian to host order
    for (std::size_t i = 0; i < a.data.size(); i += e) {
      for (std::size_t k = 0; k < e / 2; ++k) std::swap(a.data[i + k], a.data[i + e - 1 - k]);
    }
  }
  return a;
}

}  // namespace detail

/// Reads an IDX file. Throws io_error when it cannot be opened or read, format_error when it
/// is not a well-formed IDX file or holds less or more than its header declares.
inline idx_array read_idx(const std::string& path) {
  const detail::file_ptr f = detail::open_file(path, "rb", "IDX file");
  detail::binary_input in{f.get(), path};
  return detail::idx_read(in, true);
}

/// Reads an IDX array from `in`'s current position, leaving it just past the data; `name` is
/// what messages call the input. A stream that can seek has its size checked first; one that
/// cannot is read in steps. Errors as the path overload's.
inline idx_array read_idx(std::istream& in, const std::string& name) {
  detail::binary_input input{in, name};
  return detail::idx_read(input, false);
}

}  // namespace squeeze::io
