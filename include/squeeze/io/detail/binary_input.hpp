// SPDX-License-Identifier: Apache-2.0
// squeeze/io/detail/binary_input.hpp: the byte source of the binary readers (.npy, IDX, graph
// files): a C FILE or a std::istream, the bytes it has left when that can be known, and the
// reading of sizes a header declares without trusting them with memory (read_limits.hpp
// states the rule).
#pragma once

#include <algorithm>
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
#include <string_view>
#include <type_traits>
#include <utility>

#include "squeeze/core/checked.hpp"
#include "squeeze/core/error.hpp"
#include "squeeze/io/detail/stream_guard.hpp"

namespace squeeze::io::detail {

/// A C FILE that is closed when it goes out of scope.
using file_ptr = std::unique_ptr<std::FILE, int (*)(std::FILE*)>;

/// Opens `path` with fopen's `mode` ("rb" or "wb"). Throws io_error naming `what` (".npy
/// file") and the reason when it cannot be opened or created.
[[nodiscard]] inline file_ptr open_file(const std::string& path, const char* mode,
                                        std::string_view what) {
  errno = 0;
  file_ptr f{std::fopen(path.c_str(), mode), &std::fclose};
  if (!f) {
    throw io_error{std::string{mode[0] == 'w' ? "cannot create " : "cannot open "} +
                   std::string{what} + " '" + path + "': " + std::strerror(errno)};
  }
  return f;
}

/// The bytes from `f`'s current position to its end, when it can seek (a regular file,
/// fmemopen); nullopt when it cannot (a pipe). The position is put back.
[[nodiscard]] inline std::optional<std::uint64_t> bytes_left(std::FILE* f) noexcept {
  const long at = std::ftell(f);
  if (at < 0 || std::fseek(f, 0, SEEK_END) != 0) return std::nullopt;
  const long end = std::ftell(f);
  if (std::fseek(f, at, SEEK_SET) != 0 || end < at) return std::nullopt;
  return static_cast<std::uint64_t>(end - at);
}

/// The bytes from `in`'s current position to its end, when its buffer can seek (a string
/// stream, a file stream on a regular file); nullopt when it cannot (a pipe). The position is
/// put back.
[[nodiscard]] inline std::optional<std::uint64_t> bytes_left(std::istream& in) {
  std::streambuf* const buffer = in.rdbuf();
  if (buffer == nullptr || !in.good()) return std::nullopt;
  const std::streamoff at = buffer->pubseekoff(0, std::ios::cur, std::ios::in);
  if (at < 0) return std::nullopt;
  const std::streamoff end = buffer->pubseekoff(0, std::ios::end, std::ios::in);
  if (buffer->pubseekpos(at, std::ios::in) != at || end < at) return std::nullopt;
  return static_cast<std::uint64_t>(end - at);
}

/// Reads a FILE or a stream from its current position. Its size is known when the input can
/// seek (a regular file, a string stream, fmemopen) and unknown when it cannot (a pipe, a
/// socket); left() says which.
class binary_input {
 public:
  /// Reads `f`, which stays open and owned by the caller; `name` is what messages call it.
  binary_input(std::FILE* f, std::string name) : file_{f}, name_{std::move(name)} {
    size_ = bytes_left(f);
    errno = 0;  // (a pipe's failed seek leaves ESPIPE)
  }
  /// Reads `in`; `name` is what messages call it.
  binary_input(std::istream& in, std::string name)
      : stream_{&in}, quiet_{std::in_place, in}, name_{std::move(name)} {
    size_ = bytes_left(in);
    errno = 0;
  }

  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  /// Bytes read so far.
  [[nodiscard]] std::uint64_t bytes_read() const noexcept { return read_; }
  /// Bytes the input holds past those read, when its size is known.
  [[nodiscard]] std::optional<std::uint64_t> left() const noexcept {
    if (!size_) return std::nullopt;
    return *size_ > read_ ? *size_ - read_ : 0;
  }

  /// Reads up to n bytes into dst and returns how many: fewer only at the end of the input.
  /// Throws io_error when reading fails.
  std::size_t read(void* dst, std::size_t n) {
    if (n == 0) return 0;
    std::size_t got = 0;
    if (file_ != nullptr) {
      got = std::fread(dst, 1, n, file_);
      if (got < n && std::ferror(file_)) failed();
    } else {
      stream_->read(static_cast<char*>(dst), static_cast<std::streamsize>(n));
      got = static_cast<std::size_t>(stream_->gcount());
      if (stream_->bad()) failed();
    }
    read_ += got;
    return got;
  }

  /// Whether exactly n bytes were read into dst.
  [[nodiscard]] bool read_exact(void* dst, std::size_t n) { return read(dst, n) == n; }

  /// Reads `count` elements (bytes, as the input holds them) that the input declares into
  /// `out`, a contiguous container of a trivially copyable type (std::string, std::vector):
  /// true when all arrived, false when the input ended first. Nothing is allocated past
  /// what the input holds: when its size is known, count is compared with it first; when it
  /// is not, `out` grows in steps that double from 64 KiB as the bytes arrive.
  template <class Container>
  [[nodiscard]] bool read_declared(Container& out, std::uint64_t count) {
    using T = typename Container::value_type;
    static_assert(std::is_trivially_copyable_v<T>, "read_declared: elements are copied as bytes");
    out.clear();
    const std::optional<std::uint64_t> bytes = core::checked_mul<std::uint64_t>(count, sizeof(T));
    if (!bytes || *bytes > std::numeric_limits<std::size_t>::max() / 2) return false;
    if (const std::optional<std::uint64_t> rest = left()) {
      if (*bytes > *rest) return false;
      out.resize(static_cast<std::size_t>(count));
      return read_exact(out.data(), static_cast<std::size_t>(*bytes));
    }
    const auto total = static_cast<std::size_t>(count);
    const std::size_t first = std::max<std::size_t>(1, step_bytes / sizeof(T));
    std::size_t have = 0;
    while (have < total) {
      const std::size_t next = std::min(total, std::max(first, 2 * have));
      out.resize(next);
      const std::size_t want = (next - have) * sizeof(T);
      const std::size_t got = read(reinterpret_cast<char*>(out.data()) + have * sizeof(T), want);
      if (got != want) return false;
      have = next;
    }
    return true;
  }

  /// Whether the input has no byte left (reads one to find out). Throws io_error when
  /// reading fails.
  [[nodiscard]] bool at_end() {
    char c = 0;
    return read(&c, 1) == 0;
  }

 private:
  static constexpr std::size_t step_bytes = std::size_t{1} << 16;

  [[noreturn]] void failed() const {
    throw io_error{"cannot read '" + name_ +
                   "': " + (errno != 0 ? std::strerror(errno) : "the stream failed")};
  }

  std::FILE* file_ = nullptr;
  std::istream* stream_ = nullptr;
  std::optional<stream_exceptions_off> quiet_;  // while a stream is read
  std::string name_;
  std::optional<std::uint64_t> size_;  ///< bytes left at the start, when known
  std::uint64_t read_ = 0;
};

}  // namespace squeeze::io::detail
