// SPDX-License-Identifier: Apache-2.0
// squeeze/core/error.hpp: the exceptions host code throws, and SQUEEZE_EXPECTS.
//
// Every host-side failure is a squeeze::error. Its what() is for the person running the
// program and reads
//   "squeeze: <message>"
// message() is <message> alone and where() the call site that raised it. what_and_where()
// adds the call site, for logs and debugging:
//   "squeeze: <message> [<file>:<line> in <function>]"
// Device code never throws; it reports a squeeze::status (core/status.hpp), which
// throw_if_error turns into the matching exception on the host (core::device_status::check,
// core/device_status.cuh, uses it).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <version>

#if defined(__cpp_lib_source_location)
#include <source_location>
#endif

#include "squeeze/core/status.hpp"

namespace squeeze {

#if defined(__cpp_lib_source_location)
/// Where an error was raised: std::source_location.
using source_location = std::source_location;
#else
/// Where an error was raised, where the standard library has no std::source_location (clang
/// 14 with libstdc++ 12, which needs a builtin clang 14 lacks): the same interface, filled in
/// by the builtins clang and g++ share. column() is 0.
class source_location {
 public:
  static constexpr source_location current(const char* file = __builtin_FILE(),
                                           const char* function = __builtin_FUNCTION(),
                                           std::uint_least32_t line = __builtin_LINE()) noexcept {
    source_location s;
    s.file_ = file;
    s.function_ = function;
    s.line_ = line;
    return s;
  }
  constexpr source_location() noexcept = default;
  [[nodiscard]] constexpr const char* file_name() const noexcept { return file_; }
  [[nodiscard]] constexpr const char* function_name() const noexcept { return function_; }
  [[nodiscard]] constexpr std::uint_least32_t line() const noexcept { return line_; }
  [[nodiscard]] constexpr std::uint_least32_t column() const noexcept { return 0; }

 private:
  const char* file_ = "";
  const char* function_ = "";
  std::uint_least32_t line_ = 0;
};
#endif

/// Base of every exception squeeze throws.
class error : public std::runtime_error {
 public:
  explicit error(std::string message, const source_location& where = source_location::current())
      : std::runtime_error{"squeeze: " + message}, message_{std::move(message)}, where_{where} {}

  /// The message alone, without the "squeeze: " prefix.
  [[nodiscard]] const std::string& message() const noexcept { return message_; }
  /// Where the error was raised.
  [[nodiscard]] const source_location& where() const noexcept { return where_; }
  /// what() followed by the call site, for logs and debugging:
  /// "squeeze: <message> [<file>:<line> in <function>]".
  [[nodiscard]] std::string what_and_where() const {
    std::string text{what()};
    text += " [";
    text += where_.file_name();
    text += ':';
    text += std::to_string(where_.line());
    text += " in ";
    text += where_.function_name();
    text += ']';
    return text;
  }

 private:
  std::string message_;
  source_location where_;
};

// (Constructors are spelled out: nvcc 13 cannot inherit one whose default argument is
// source_location::current().)

/// A caller passed a value outside the documented range (wrong size, null pointer, ...).
class invalid_argument : public error {
 public:
  explicit invalid_argument(std::string message,
                            const source_location& where = source_location::current())
      : error{std::move(message), where} {}
};

/// Compressed or serialized data is malformed: truncated, corrupt, wrong version.
class format_error : public error {
 public:
  explicit format_error(std::string message,
                        const source_location& where = source_location::current())
      : error{std::move(message), where} {}
};

/// A file or device could not be read or written.
class io_error : public error {
 public:
  explicit io_error(std::string message, const source_location& where = source_location::current())
      : error{std::move(message), where} {}
};

/// A CUDA runtime call failed. code() is the cudaError_t value, kept as an int so this
/// header needs no CUDA header (core/cuda_error.hpp builds these from cudaError_t).
class cuda_error : public error {
 public:
  cuda_error(int code, std::string message,
             const source_location& where = source_location::current())
      : error{std::move(message), where}, code_{code} {}
  [[nodiscard]] int code() const noexcept { return code_; }

 private:
  int code_;
};

/// Throws the squeeze::error subclass that stands for a status a kernel reported, with
/// `message`; returns when `s` is status::ok. The library's one mapping from statuses to
/// exceptions:
///   invalid_argument, out_of_bounds   invalid_argument  (a parameter or an index out of range)
///   truncated, corrupt                format_error      (malformed input)
///   io_error                          io_error          (a storage request failed)
///   cache_full, any other value       error
inline void throw_if_error(status s, std::string message,
                           const source_location& where = source_location::current()) {
  switch (s) {
    case status::ok: return;
    case status::invalid_argument:
    case status::out_of_bounds: throw invalid_argument{std::move(message), where};
    case status::truncated:
    case status::corrupt: throw format_error{std::move(message), where};
    case status::io_error: throw io_error{std::move(message), where};
    case status::cache_full: break;
  }
  throw error{std::move(message), where};
}

}  // namespace squeeze

/// Throws squeeze::invalid_argument with `message` (anything convertible to std::string)
/// and the failed condition when `condition` is false. For checking a caller's input.
#define SQUEEZE_EXPECTS(condition, message)                                                    \
  do {                                                                                         \
    if (!(condition)) {                                                                        \
      throw ::squeeze::invalid_argument(std::string(message) + " (violated: " #condition ")"); \
    }                                                                                          \
  } while (false)
