// squeeze/io/idx.hpp: reads IDX files (the MNIST / Fashion-MNIST format).
//
//   magic: 0x00 0x00 <type> <ndims>, then ndims big-endian uint32 sizes, then the data
//   (big-endian elements, row-major). Types: 0x08 uint8, 0x09 int8, 0x0B int16,
//   0x0C int32, 0x0D float32, 0x0E float64.
//
// Host-only. The reader takes the uncompressed file (the Debian package ships .gz: run
// `gunzip -k` first); a gzip file is recognized and refused with that advice. Every
// malformed file is an io_error / format_error that names the file and what is wrong.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "squeeze/core/error.hpp"

namespace squeeze::io {

struct idx_array {
  std::uint8_t type = 0;            ///< the IDX type code
  std::vector<std::uint32_t> dims;  ///< e.g. {60000, 28, 28}
  std::vector<std::byte> data;      ///< elements in host (little-endian) byte order

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
  /// Elements after the first dimension: a row's element count (1 for a 1-d array).
  [[nodiscard]] std::size_t row_elements() const noexcept {
    std::size_t n = 1;
    for (std::size_t d = 1; d < dims.size(); ++d) n *= dims[d];
    return n;
  }
};

inline idx_array read_idx(const std::string& path) {
  const std::unique_ptr<std::FILE, int (*)(std::FILE*)> f{std::fopen(path.c_str(), "rb"),
                                                          &std::fclose};
  if (!f) throw io_error{"cannot open IDX file '" + path + "'"};
  unsigned char magic[4];
  if (std::fread(magic, 1, 4, f.get()) != 4)
    throw format_error{"'" + path + "' is too short for an IDX header"};
  if (magic[0] == 0x1f && magic[1] == 0x8b) {
    throw format_error{"'" + path + "' is gzip-compressed: decompress it first (gunzip -k)"};
  }
  idx_array a;
  a.type = magic[2];
  if (magic[0] != 0 || magic[1] != 0 || a.element_bytes() == 0 || magic[3] == 0) {
    throw format_error{"'" + path + "' is not an IDX file (bad magic bytes)"};
  }
  std::size_t count = 1;
  for (unsigned d = 0; d < magic[3]; ++d) {
    unsigned char b[4];
    if (std::fread(b, 1, 4, f.get()) != 4)
      throw format_error{"'" + path + "' ends inside its dimensions"};
    const std::uint32_t size = (std::uint32_t{b[0]} << 24) | (std::uint32_t{b[1]} << 16) |
                               (std::uint32_t{b[2]} << 8) | b[3];
    a.dims.push_back(size);
    count *= size;
  }
  const std::size_t e = a.element_bytes();
  a.data.resize(count * e);
  if (std::fread(a.data.data(), 1, a.data.size(), f.get()) != a.data.size()) {
    throw format_error{"'" + path + "' holds fewer than the " + std::to_string(count) +
                       " elements its header declares"};
  }
  if (e > 1) {  // big-endian to host order
    for (std::size_t i = 0; i < a.data.size(); i += e) {
      for (std::size_t k = 0; k < e / 2; ++k) std::swap(a.data[i + k], a.data[i + e - 1 - k]);
    }
  }
  return a;
}

}  // namespace squeeze::io
