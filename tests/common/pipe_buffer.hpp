// SPDX-License-Identifier: Apache-2.0
// tests/common/pipe_buffer.hpp: a std::streambuf over bytes that cannot seek and refills 7
// bytes at a time, as a pipe does: a reader cannot learn the input's size in advance. Used
// by the io host tests and fuzz targets to drive the readers' stream paths.
#pragma once

#include <algorithm>
#include <cstddef>
#include <streambuf>
#include <string>
#include <type_traits>
#include <utility>

namespace squeeze::test {

class pipe_buffer : public std::streambuf {
 public:
  explicit pipe_buffer(std::string bytes) : bytes_{std::move(bytes)} {}
  /// From any contiguous container of bytes (std::vector<unsigned char>, ...).
  template <class Bytes>
  requires(sizeof(typename Bytes::value_type) == 1 && !std::is_same_v<Bytes, std::string>)
  explicit pipe_buffer(const Bytes& bytes)
      : bytes_(reinterpret_cast<const char*>(bytes.data()), bytes.size()) {}

 protected:
  int_type underflow() override {
    if (at_ == bytes_.size()) return traits_type::eof();
    const std::size_t n = std::min<std::size_t>(7, bytes_.size() - at_);
    char* const p = bytes_.data() + at_;
    setg(p, p, p + n);
    at_ += n;
    return traits_type::to_int_type(*p);
  }

 private:
  std::string bytes_;
  std::size_t at_ = 0;
};

}  // namespace squeeze::test
