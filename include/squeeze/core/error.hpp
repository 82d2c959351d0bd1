// squeeze/core/error.hpp: the exceptions host code throws, and SQUEEZE_EXPECTS.
//
// Every host-side failure is a squeeze::error. Its what() reads
//   "squeeze: <message> [<file>:<line> in <function>]"
// and message() / where() give the two parts apart. Device code never throws; it
// reports a squeeze::status (core/status.hpp).
#pragma once

#include <source_location>
#include <stdexcept>
#include <string>
#include <string_view>

namespace squeeze {

namespace detail {
inline std::string describe(std::string_view message, const std::source_location& where) {
  std::string text{"squeeze: "};
  text += message;
  text += " [";
  text += where.file_name();
  text += ':';
  text += std::to_string(where.line());
  text += " in ";
  text += where.function_name();
  text += ']';
  return text;
}
}  // namespace detail

/// Base of every exception squeeze throws.
class error : public std::runtime_error {
 public:
  explicit error(std::string message,
                 const std::source_location& where = std::source_location::current())
      : std::runtime_error{detail::describe(message, where)},
        message_{std::move(message)},
        where_{where} {}

  /// The message alone, without the call site.
  [[nodiscard]] const std::string& message() const noexcept { return message_; }
  /// Where the error was raised.
  [[nodiscard]] const std::source_location& where() const noexcept { return where_; }

 private:
  std::string message_;
  std::source_location where_;
};

// (Constructors are spelled out: nvcc 13 cannot inherit one whose default argument is
// std::source_location::current().)

/// A caller passed a value outside the documented range (wrong size, null pointer, ...).
class invalid_argument : public error {
 public:
  explicit invalid_argument(std::string message,
                            const std::source_location& where = std::source_location::current())
      : error{std::move(message), where} {}
};

/// Compressed or serialized data is malformed: truncated, corrupt, wrong version.
class format_error : public error {
 public:
  explicit format_error(std::string message,
                        const std::source_location& where = std::source_location::current())
      : error{std::move(message), where} {}
};

/// A file or device could not be read or written.
class io_error : public error {
 public:
  explicit io_error(std::string message,
                    const std::source_location& where = std::source_location::current())
      : error{std::move(message), where} {}
};

/// A CUDA runtime call failed. code() is the cudaError_t value, kept as an int so this
/// header needs no CUDA header (core/cuda_error.hpp builds these from cudaError_t).
class cuda_error : public error {
 public:
  cuda_error(int code, std::string message,
             const std::source_location& where = std::source_location::current())
      : error{std::move(message), where}, code_{code} {}
  [[nodiscard]] int code() const noexcept { return code_; }

 private:
  int code_;
};

}  // namespace squeeze

/// Throws squeeze::invalid_argument with `message` (anything convertible to std::string)
/// and the failed condition when `condition` is false. For checking a caller's input.
#define SQUEEZE_EXPECTS(condition, message)                                                    \
  do {                                                                                         \
    if (!(condition)) {                                                                        \
      throw ::squeeze::invalid_argument(std::string(message) + " (violated: " #condition ")"); \
    }                                                                                          \
  } while (false)
