// SPDX-License-Identifier: Apache-2.0
// squeeze/io/detail/line_reader.hpp: what the text readers (Matrix Market, edge lists) share:
// a line splitter over a std::istream and the word and integer parsers.
#pragma once

#include <cerrno>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <istream>
#include <string>
#include <string_view>
#include <system_error>

#include "squeeze/core/error.hpp"
#include "squeeze/io/detail/stream_guard.hpp"

namespace squeeze::io::detail {

/// Splits a stream into lines without copying each one: reads blocks into a buffer and hands
/// out views into it. A view lives until the next call. '\r' before '\n' is dropped.
///
/// Memory: the buffer starts at 64 KiB and doubles with each read up to 1 MiB blocks (the
/// speed of large reads without making a 20-byte input cost a megabyte), and past that only
/// while one line fills half of it; so it never exceeds 64 KiB or twice the bytes read.
class line_reader {
 public:
  /// `what` names the kind of input in an io_error ("Matrix Market input", "edge list").
  line_reader(std::istream& in, const std::string& name, const char* what)
      : in_{in}, quiet_{in}, name_{name}, what_{what} {
    errno = 0;
  }

  /// The next line, or false at the end of the stream. Throws io_error on a read error.
  bool next(std::string_view& line) {
    for (;;) {
      const char* const first = buffer_.data() + begin_;
      const std::size_t available = end_ - begin_;
      const auto* const newline =
          available == 0 ? nullptr : static_cast<const char*>(std::memchr(first, '\n', available));
      if (newline != nullptr) {
        const auto length = static_cast<std::size_t>(newline - first);
        line = trim_cr(std::string_view{first, length});
        begin_ += length + 1;
        ++number_;
        return true;
      }
      if (eof_) {
        if (available == 0) return false;
        line = trim_cr(std::string_view{first, available});
        begin_ = end_;
        ++number_;
        return true;
      }
      fill();
    }
  }

  /// The 1-based number of the line next() returned last.
  [[nodiscard]] std::int64_t number() const noexcept { return number_; }
  /// Bytes taken from the stream so far.
  [[nodiscard]] std::uint64_t bytes_read() const noexcept { return bytes_read_; }

 private:
  static constexpr std::size_t first_bytes = std::size_t{1} << 16;
  static constexpr std::size_t block_bytes = std::size_t{1} << 20;

  static std::string_view trim_cr(std::string_view s) noexcept {
    if (!s.empty() && s.back() == '\r') s.remove_suffix(1);
    return s;
  }

  // Moves the unread tail to the front and reads more after it.
  void fill() {
    const std::size_t tail = end_ - begin_;
    if (begin_ > 0) {
      std::memmove(buffer_.data(), buffer_.data() + begin_, tail);
      begin_ = 0;
      end_ = tail;
    }
    if (buffer_.empty()) {
      buffer_.resize(first_bytes);
    } else if (buffer_.size() < block_bytes || buffer_.size() - end_ < buffer_.size() / 2) {
      buffer_.resize(buffer_.size() * 2);
    }
    in_.read(buffer_.data() + end_, static_cast<std::streamsize>(buffer_.size() - end_));
    const auto got = static_cast<std::size_t>(in_.gcount());
    end_ += got;
    bytes_read_ += got;
    if (in_.eof()) {
      eof_ = true;
    } else if (in_.bad() || in_.fail()) {
      throw io_error{"cannot read " + std::string{what_} + " '" + name_ +
                     "': " + (errno != 0 ? std::strerror(errno) : "the stream failed")};
    }
  }

  std::istream& in_;
  stream_exceptions_off quiet_;
  const std::string& name_;
  const char* what_;
  std::string buffer_;
  std::size_t begin_ = 0, end_ = 0;
  bool eof_ = false;
  std::int64_t number_ = 0;
  std::uint64_t bytes_read_ = 0;
};

[[nodiscard]] constexpr bool text_is_space(char c) noexcept {
  return c == ' ' || c == '\t' || c == '\v' || c == '\f';
}

/// The next whitespace-separated word of `s` from `pos` (empty at the end); advances pos.
[[nodiscard]] inline std::string_view text_word(std::string_view s, std::size_t& pos) noexcept {
  while (pos < s.size() && text_is_space(s[pos])) ++pos;
  const std::size_t begin = pos;
  while (pos < s.size() && !text_is_space(s[pos])) ++pos;
  return s.substr(begin, pos - begin);
}

/// At most 60 characters of `s`, quoted, for an error message.
[[nodiscard]] inline std::string text_quote(std::string_view s) {
  std::string out{"'"};
  out += s.substr(0, 60);
  if (s.size() > 60) out += "...";
  return out + "'";
}

/// A base-10 integer (an optional sign, then digits, nothing else); false if it is not one
/// or overflows int64.
[[nodiscard]] inline bool text_parse_int(std::string_view word, std::int64_t& value) noexcept {
  if (word.size() > 1 && word[0] == '+' && word[1] != '-') word.remove_prefix(1);
  const char* const end = word.data() + word.size();
  const auto [ptr, ec] = std::from_chars(word.data(), end, value);
  return ec == std::errc{} && ptr == end;
}

/// Opens `path` for reading as a binary stream. Throws io_error naming `what` ("edge list")
/// and the system's reason when it cannot be opened.
[[nodiscard]] inline std::ifstream open_input(const std::filesystem::path& path,
                                              std::string_view what) {
  errno = 0;
  std::ifstream in{path, std::ios::binary};
  if (!in) {
    throw io_error{"cannot open " + std::string{what} + " '" + path.string() +
                   "': " + std::strerror(errno)};
  }
  return in;
}

}  // namespace squeeze::io::detail
