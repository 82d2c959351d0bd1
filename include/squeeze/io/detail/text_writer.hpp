// SPDX-License-Identifier: Apache-2.0
// squeeze/io/detail/text_writer.hpp: text output built in a buffer and written out in chunks
// of about 1 MiB (the Matrix Market and edge-list writers).
#pragma once

#include <charconv>
#include <cstddef>
#include <ostream>
#include <string>
#include <utility>

#include "squeeze/core/error.hpp"

namespace squeeze::io::detail {

class text_writer {
 public:
  text_writer(std::ostream& out, std::string header) : out_{out}, text_{std::move(header)} {
    text_.reserve(chunk + 256);
  }

  /// Appends std::to_chars(value, args...) (a number; args: format and precision).
  template <class Value, class... Args>
  void number(Value value, Args... args) {
    char buffer[64];
    const auto result = std::to_chars(buffer, buffer + sizeof buffer, value, args...);
    text_.append(buffer, static_cast<std::size_t>(result.ptr - buffer));
  }
  void put(char c) { text_ += c; }
  /// Ends a line; writes the buffer out when it is full.
  void end_line() {
    text_ += '\n';
    if (text_.size() >= chunk) {
      out_.write(text_.data(), static_cast<std::streamsize>(text_.size()));
      text_.clear();
    }
  }
  /// Writes the rest and flushes; io_error naming `what` when the stream failed.
  void finish(const char* what) {
    out_.write(text_.data(), static_cast<std::streamsize>(text_.size()));
    out_.flush();
    if (!out_) throw io_error{std::string{"cannot write "} + what + " output"};
  }

 private:
  static constexpr std::size_t chunk = std::size_t{1} << 20;
  std::ostream& out_;
  std::string text_;
};

}  // namespace squeeze::io::detail
