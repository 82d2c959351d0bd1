// SPDX-License-Identifier: Apache-2.0
// squeeze/io/npy.hpp: reads and writes NumPy .npy files (what np.save writes, np.load reads).
//
//   "\x93NUMPY" <major u8> <minor u8> <header length: u16 LE in 1.0, u32 LE in 2.0 and 3.0>
//   <header: a Python dict literal, e.g.
//      {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
//    padded with spaces and ended by '\n' so that the data starts at a multiple of 64
//    (of 16 in files from NumPy before 1.14)>
//   <data: the elements, row-major, in the byte order descr names>
//
// descr is a byte-order char ('<' little, '>' big, '|' not applicable, '=' native), a kind and
// a size in bytes. Supported: f2 f4 f8, i1 i2 i4 i8, u1 u2 u4 u8 and b1 (bool, numpy's '?').
// Version 3.0 differs from 2.0 only in allowing UTF-8 in the header; 1.0 is written unless the
// header needs more than 65535 bytes (then 2.0), as NumPy does.
//
// Host-only. read_npy returns the elements in host byte order (big-endian files are swapped)
// and a descr that says so. Structured, object, string, complex, datetime and Fortran-order
// arrays are refused, as is every malformed file: io_error / format_error name the file and
// what is wrong. Nothing is read past the sizes checked, and no size computation can overflow.
// Memory (read_limits.hpp): a file's header and data are compared with its size before they
// are allocated; a pipe's are read in steps, so one that ends early costs at most twice what
// it sent.
#pragma once

#include <algorithm>
#include <bit>
#include <cerrno>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <istream>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "squeeze/core/checked.hpp"
#include "squeeze/core/error.hpp"
#include "squeeze/io/detail/binary_input.hpp"

namespace squeeze::io {

/// An array as held in a .npy file. Invariant: rows() * row_bytes() == data.size().
struct npy_array {
  std::string descr;               ///< host byte order: "<f4", "<i8", "|u1", "|b1", ...
  char kind = 0;                   ///< 'f' float, 'i' signed, 'u' unsigned, 'b' bool
  std::size_t item_bytes = 0;      ///< bytes per element: 1, 2, 4 or 8
  std::vector<std::size_t> shape;  ///< row-major, e.g. {3, 4}; empty for a 0-d (scalar) array
  std::vector<std::byte> data;     ///< elements() * item_bytes bytes, host byte order

  /// Number of elements: the product of shape (1 for a 0-d array, 0 for an empty one).
  [[nodiscard]] std::size_t elements() const noexcept {
    std::size_t n = 1;
    for (const std::size_t d : shape) n *= d;
    return n;
  }
  /// Extent of the first dimension (1 for a 0-d array).
  [[nodiscard]] std::size_t rows() const noexcept { return shape.empty() ? 1 : shape[0]; }
  /// Bytes of one row: the dimensions after the first (item_bytes for a 1-d array, the
  /// whole array for a 0-d one).
  [[nodiscard]] std::size_t row_bytes() const noexcept {
    std::size_t n = item_bytes;
    for (std::size_t d = 1; d < shape.size(); ++d) n *= shape[d];
    return n;
  }
};

/// The C++ types that map onto a supported dtype (no C++20 type holds f2).
template <class T>
concept npy_element = std::same_as<T, bool> ||
                      (std::is_integral_v<T> &&
                       (sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8)) ||
                      (std::is_floating_point_v<T> && (sizeof(T) == 4 || sizeof(T) == 8));

/// The descr of T in host byte order, as read_npy reports it: float -> "<f4", bool -> "|b1".
template <npy_element T>
[[nodiscard]] constexpr std::string_view npy_descr_of() noexcept {
  constexpr bool little = std::endian::native == std::endian::little;
  if constexpr (std::same_as<T, bool>) {
    return "|b1";
  } else if constexpr (sizeof(T) == 1) {
    return std::is_signed_v<T> ? "|i1" : "|u1";
  } else if constexpr (std::is_floating_point_v<T>) {
    if constexpr (sizeof(T) == 4) return little ? "<f4" : ">f4";
    return little ? "<f8" : ">f8";
  } else if constexpr (std::is_signed_v<T>) {
    if constexpr (sizeof(T) == 2) return little ? "<i2" : ">i2";
    if constexpr (sizeof(T) == 4) return little ? "<i4" : ">i4";
    return little ? "<i8" : ">i8";
  } else {
    if constexpr (sizeof(T) == 2) return little ? "<u2" : ">u2";
    if constexpr (sizeof(T) == 4) return little ? "<u4" : ">u4";
    return little ? "<u8" : ">u8";
  }
}

namespace detail {

inline constexpr char npy_magic[] = "\x93NUMPY";  // 6 bytes and the terminator
inline constexpr std::size_t npy_magic_bytes = 6;
inline constexpr std::size_t npy_align = 64;
inline constexpr char npy_native_order = std::endian::native == std::endian::little ? '<' : '>';

struct npy_dtype {
  char order = 0;  ///< '<', '>', '|' or '=' as spelled
  char kind = 0;
  std::size_t item_bytes = 0;

  /// Whether the bytes of an element are stored in the host's order.
  [[nodiscard]] bool host_order() const noexcept {
    return item_bytes == 1 || order == '=' || order == '|' || order == npy_native_order;
  }
  /// The descr NumPy writes for this dtype in host order ('|' for one-byte types).
  [[nodiscard]] std::string host_descr() const {
    return std::string(1, item_bytes == 1 ? '|' : npy_native_order) + kind +
           static_cast<char>('0' + item_bytes);
  }
  /// The descr NumPy writes for this dtype in the order it was spelled with.
  [[nodiscard]] std::string canonical_descr() const {
    if (item_bytes == 1 || order == '=' || order == '|') return host_descr();
    return std::string(1, order) + kind + static_cast<char>('0' + item_bytes);
  }
};

/// Parses a supported descr ("<f4", "|b1", ">i8", ...); nullopt for anything else.
inline std::optional<npy_dtype> parse_npy_descr(std::string_view descr) noexcept {
  if (descr.size() != 3) return std::nullopt;
  npy_dtype t{descr[0], descr[1], 0};
  if (t.order != '<' && t.order != '>' && t.order != '|' && t.order != '=') return std::nullopt;
  switch (descr[2]) {
    case '1': t.item_bytes = 1; break;
    case '2': t.item_bytes = 2; break;
    case '4': t.item_bytes = 4; break;
    case '8': t.item_bytes = 8; break;
    default: return std::nullopt;
  }
  switch (t.kind) {
    case 'f': return t.item_bytes >= 2 ? std::optional{t} : std::nullopt;
    case 'i':
    case 'u': return t;
    case 'b': return t.item_bytes == 1 ? std::optional{t} : std::nullopt;
    default: return std::nullopt;
  }
}

/// A shape as Python spells a tuple: "()", "(5,)", "(3, 4)".
inline std::string npy_shape_text(std::span<const std::size_t> shape) {
  std::string s{"("};
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (d > 0) s += ", ";
    s += std::to_string(shape[d]);
  }
  return s + (shape.size() == 1 ? ",)" : ")");
}

/// Elements * item_bytes, or nullopt when that does not fit in std::size_t. As in NumPy, the
/// product of the nonzero dimensions must fit even when a zero makes the array empty, so
/// that npy_array::elements() and row_bytes() never wrap.
inline std::optional<std::size_t> npy_data_bytes(std::span<const std::size_t> shape,
                                                 std::size_t item_bytes) noexcept {
  std::optional<std::size_t> n{item_bytes};
  bool empty = false;
  for (const std::size_t d : shape) {
    if (d == 0) {
      empty = true;
    } else if (n) {
      n = core::checked_mul<std::size_t>(*n, d);
    }
  }
  if (!n) return std::nullopt;
  return empty ? 0 : *n;
}

/// The parsed header dict.
struct npy_header {
  std::string descr;  ///< as written; for a non-string value (a structured dtype) its text
  bool descr_is_string = true;
  bool fortran_order = false;
  std::vector<std::size_t> shape;
};

/// A recursive-descent parser for the subset of Python literals a .npy header holds.
class npy_header_parser {
 public:
  npy_header_parser(std::string_view text, const std::string& path) : text_{text}, path_{path} {}

  npy_header parse() {
    npy_header h;
    bool have_descr = false, have_fortran = false, have_shape = false;
    skip_space();
    if (peek() != '{') fail("is not a Python dict literal (it must start with '{')");
    ++pos_;
    skip_space();
    while (peek() != '}') {
      if (at_end()) fail("ends before the dict's closing '}'");
      const std::size_t key_at = pos_;
      const std::string key = parse_string("a key");
      skip_space();
      if (peek() != ':') fail("has no ':' after the key '" + key + "'");
      ++pos_;
      skip_space();
      if (key == "descr") {
        claim(have_descr, key);
        h.descr_is_string = peek() == '\'' || peek() == '"';
        h.descr = h.descr_is_string ? parse_string("the descr") : parse_raw_value();
      } else if (key == "fortran_order") {
        claim(have_fortran, key);
        h.fortran_order = parse_bool(key);
      } else if (key == "shape") {
        claim(have_shape, key);
        h.shape = parse_shape();
      } else {
        pos_ = key_at;
        fail("has an unexpected key '" + key + "' (a .npy header holds 'descr', " +
             "'fortran_order' and 'shape')");
      }
      skip_space();
      if (peek() == ',') {
        ++pos_;
        skip_space();
      } else if (at_end()) {
        fail("ends before the dict's closing '}'");
      } else if (peek() != '}') {
        fail("has no ',' or '}' after the value of '" + key + "'");
      }
    }
    ++pos_;
    skip_space();
    if (!at_end()) fail("has text after the dict's closing '}'");
    if (!have_descr) fail("has no 'descr' key");
    if (!have_fortran) fail("has no 'fortran_order' key");
    if (!have_shape) fail("has no 'shape' key");
    return h;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    // Quote at most 80 characters around the failure, non-printable bytes as '?'.
    const std::size_t from = pos_ > 40 ? pos_ - 40 : 0;
    std::string excerpt{text_.substr(from, 80)};
    for (char& c : excerpt) {
      if (c < 0x20 || c > 0x7e) c = '?';
    }
    throw format_error{"'" + path_ + "': the .npy header " + what + " (at byte " +
                       std::to_string(pos_) + " of the header: \"" + excerpt + "\")"};
  }

  void claim(bool& seen, const std::string& key) const {
    if (seen) fail("has the key '" + key + "' twice");
    seen = true;
  }

  [[nodiscard]] bool at_end() const noexcept { return pos_ >= text_.size(); }
  [[nodiscard]] char peek() const noexcept { return at_end() ? '\0' : text_[pos_]; }
  [[nodiscard]] static bool is_digit(char c) noexcept { return c >= '0' && c <= '9'; }

  void skip_space() noexcept {
    while (!at_end() && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' ||
                         text_[pos_] == '\r' || text_[pos_] == '\f' || text_[pos_] == '\v')) {
      ++pos_;
    }
  }

  // A quoted string without escapes ('...' or "..."): all a .npy header needs.
  std::string parse_string(const std::string& what) {
    const char quote = peek();
    if (quote != '\'' && quote != '"') fail("has no quoted string where " + what + " belongs");
    const std::size_t begin = ++pos_;
    while (!at_end() && text_[pos_] != quote) {
      if (text_[pos_] == '\\' || text_[pos_] == '\n')
        fail("has a string with an escape or newline");
      ++pos_;
    }
    if (at_end()) fail("ends inside a string");
    return std::string{text_.substr(begin, pos_++ - begin)};
  }

  // The text of a bracketed value (a structured dtype's list), kept for the error message.
  std::string parse_raw_value() {
    const std::size_t begin = pos_;
    int depth = 0;
    while (!at_end()) {
      const char c = text_[pos_];
      if (c == '\'' || c == '"') {
        parse_string("a value");
        continue;
      }
      if (depth == 0 && (c == ',' || c == '}')) break;
      if (c == '[' || c == '(' || c == '{') ++depth;
      if (c == ']' || c == ')' || c == '}') --depth;
      if (depth < 0) fail("has unbalanced brackets");
      ++pos_;
    }
    if (at_end()) fail("ends inside a value");
    std::string_view value = text_.substr(begin, pos_ - begin);
    while (!value.empty() && (value.back() == ' ' || value.back() == '\n')) value.remove_suffix(1);
    if (value.empty()) fail("has an empty value");
    return std::string{value};
  }

  bool parse_bool(const std::string& key) {
    if (text_.substr(pos_, 4) == "True") {
      pos_ += 4;
      return true;
    }
    if (text_.substr(pos_, 5) == "False") {
      pos_ += 5;
      return false;
    }
    fail("has '" + key + "' neither True nor False");
  }

  // "()", "(5,)", "(3, 4)", "(3,4,)"; Python 2's long suffix "(3L, 4L)" too.
  std::vector<std::size_t> parse_shape() {
    if (peek() != '(') fail("has a shape that is not a tuple of integers");
    ++pos_;
    skip_space();
    std::vector<std::size_t> shape;
    bool comma = false;  // whether a ',' followed the last dimension
    while (peek() != ')') {
      if (!shape.empty() && !comma) fail("has a shape with no ',' between two dimensions");
      shape.push_back(parse_dimension());
      skip_space();
      comma = peek() == ',';
      if (comma) {
        ++pos_;
        skip_space();
      }
    }
    ++pos_;
    if (shape.size() == 1 && !comma) {
      fail("has a shape that is an integer in parentheses, not a tuple (a 1-d shape is (n,))");
    }
    return shape;
  }

  std::size_t parse_dimension() {
    if (!is_digit(peek())) fail("has a shape dimension that is not a non-negative integer");
    constexpr std::size_t max = std::numeric_limits<std::size_t>::max();
    std::size_t value = 0;
    while (is_digit(peek())) {
      const auto digit = static_cast<std::size_t>(text_[pos_] - '0');
      if (value > (max - digit) / 10) fail("has a shape dimension that overflows std::size_t");
      value = value * 10 + digit;
      ++pos_;
    }
    if (peek() == 'L' || peek() == 'l') ++pos_;
    return value;
  }

  std::string_view text_;
  const std::string& path_;
  std::size_t pos_ = 0;
};

inline void npy_swap_bytes(std::span<std::byte> data, std::size_t item_bytes) noexcept {
  for (std::size_t i = 0; i + item_bytes <= data.size(); i += item_bytes) {
    std::reverse(data.begin() + static_cast<std::ptrdiff_t>(i),
                 data.begin() + static_cast<std::ptrdiff_t>(i + item_bytes));
  }
}

}  // namespace detail

namespace detail {

/// Reads one .npy array from `in`; with `whole`, the array must end the input.
inline npy_array npy_read(binary_input& in, bool whole) {
  const std::string& path = in.name();
  unsigned char prefix[12];
  if (!in.read_exact(prefix, 8)) {
    throw format_error{"'" + path + "' is too short for a .npy header"};
  }
  if (std::memcmp(prefix, npy_magic, npy_magic_bytes) != 0) {
    throw format_error{"'" + path + "' is not a .npy file (bad magic bytes; expected \\x93NUMPY)"};
  }
  const unsigned major = prefix[6], minor = prefix[7];
  if ((major != 1 && major != 2 && major != 3) || minor != 0) {
    throw format_error{"'" + path + "' has .npy format version " + std::to_string(major) + "." +
                       std::to_string(minor) + ", which is not supported (1.0, 2.0, 3.0 are)"};
  }
  const std::size_t length_bytes = major == 1 ? 2 : 4;
  if (!in.read_exact(prefix + 8, length_bytes)) {
    throw format_error{"'" + path + "' is truncated inside its .npy header length"};
  }
  std::uint64_t header_bytes = 0;  // < 2^32
  for (std::size_t i = 0; i < length_bytes; ++i) {
    header_bytes |= std::uint64_t{prefix[8 + i]} << 8 * i;
  }
  if (const std::optional<std::uint64_t> left = in.left(); left && *left < header_bytes) {
    throw format_error{"'" + path + "' is truncated: its .npy header is " +
                       std::to_string(header_bytes) + " bytes long but only " +
                       std::to_string(*left) + " bytes follow its length"};
  }
  std::string header;
  if (!in.read_declared(header, header_bytes)) {
    throw format_error{"'" + path + "' is truncated inside its .npy header (" +
                       std::to_string(header_bytes) + " bytes declared)"};
  }

  const npy_header h = npy_header_parser{header, path}.parse();
  const std::optional<npy_dtype> dtype = parse_npy_descr(h.descr);
  const std::string descr = h.descr_is_string ? "'" + h.descr + "'" : h.descr;
  if (!dtype) {
    throw format_error{"'" + path + "' holds dtype " + descr +
                       ", which is not supported (f2 f4 f8 i1 i2 i4 i8 u1 u2 u4 u8 b1 are)"};
  }
  if (h.fortran_order) {
    throw format_error{"'" + path +
                       "': fortran_order arrays are not supported; save with "
                       "np.ascontiguousarray"};
  }
  const std::optional<std::size_t> data_bytes = npy_data_bytes(h.shape, dtype->item_bytes);
  if (!data_bytes) {
    throw format_error{"'" + path + "' has shape " + npy_shape_text(h.shape) + " of dtype " +
                       descr + ", whose byte count overflows std::size_t"};
  }
  const std::string described = std::to_string(*data_bytes) + " bytes of data (shape " +
                                npy_shape_text(h.shape) + ", dtype " + descr + ")";
  if (const std::optional<std::uint64_t> left = in.left()) {
    if (*left < *data_bytes) {
      throw format_error{"'" + path + "' is truncated: its header describes " + described +
                         " but only " + std::to_string(*left) + " follow it"};
    }
    if (whole && *left > *data_bytes) {
      throw format_error{"'" + path + "' is longer than its header describes: " +
                         std::to_string(*left - *data_bytes) + " bytes follow the " + described};
    }
  }

  npy_array a;
  a.kind = dtype->kind;
  a.item_bytes = dtype->item_bytes;
  a.descr = dtype->host_descr();
  a.shape = h.shape;
  // (Checked again while reading: the input need not have a known size, and may change.)
  if (!in.read_declared(a.data, *data_bytes)) {
    throw format_error{"'" + path + "' is truncated: its header describes " + described};
  }
  if (whole && !in.at_end()) {
    throw format_error{"'" + path + "' is longer than its header describes: bytes follow the " +
                       described};
  }
  if (!dtype->host_order()) npy_swap_bytes(a.data, a.item_bytes);
  return a;
}

}  // namespace detail

/// Reads a .npy file (format 1.0, 2.0 or 3.0). Throws io_error when the file cannot be read
/// and format_error when it is not a well-formed .npy file of a supported dtype, or holds
/// bytes past the array.
inline npy_array read_npy(const std::string& path) {
  const detail::file_ptr f = detail::open_file(path, "rb", ".npy file");
  detail::binary_input in{f.get(), path};
  return detail::npy_read(in, true);
}

/// Reads one .npy array from `f`'s current position and leaves `f` just past it (as
/// np.load does with an open file), so arrays saved one after another read one by one.
/// `name` is what messages call the input. A FILE that can seek has its size checked first;
/// one that cannot (a pipe) is read in steps. Errors as the path overload's.
inline npy_array read_npy(std::FILE* f, const std::string& name) {
  SQUEEZE_EXPECTS(f != nullptr, "read_npy('" + name + "'): the FILE is null");
  detail::binary_input in{f, name};
  return detail::npy_read(in, false);
}

/// Reads one .npy array from `in`; see the FILE overload.
inline npy_array read_npy(std::istream& in, const std::string& name) {
  detail::binary_input input{in, name};
  return detail::npy_read(input, false);
}

/// Reads a .npy file whose dtype must be T's (npy_descr_of<T>(), in either byte order); the
/// shape, if wanted, goes to *shape. Throws format_error naming both dtypes on a mismatch.
template <npy_element T>
std::vector<T> read_npy_as(const std::string& path, std::vector<std::size_t>* shape = nullptr) {
  npy_array a = read_npy(path);
  if (a.descr != npy_descr_of<T>()) {
    throw format_error{"'" + path + "' holds dtype " + a.descr + ", not the " +
                       std::string{npy_descr_of<T>()} + " asked for"};
  }
  std::vector<T> values(a.elements());
  if constexpr (std::same_as<T, bool>) {
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = a.data[i] != std::byte{0};
  } else if (!values.empty()) {
    std::memcpy(values.data(), a.data.data(), a.data.size());
  }
  if (shape != nullptr) *shape = std::move(a.shape);
  return values;
}

/// Writes `data` as a C-order .npy array of dtype `descr` and `shape` (empty for 0-d). The
/// bytes of `data` are taken to be in the order descr names ('=' and '|' mean the host's);
/// the header is spelled as NumPy spells it, so the file is byte-identical to np.save's.
/// Format 1.0 is written unless the header needs more than 65535 bytes (then 2.0).
/// Throws invalid_argument for an unsupported descr or a data size that does not match
/// product(shape) * item size, and io_error when the file cannot be written.
inline void write_npy(const std::string& path, std::string_view descr,
                      std::span<const std::size_t> shape, std::span<const std::byte> data) {
  const std::optional<detail::npy_dtype> dtype = detail::parse_npy_descr(descr);
  if (!dtype) {
    throw invalid_argument{"write_npy('" + path + "'): dtype '" + std::string{descr} +
                           "' is not supported (f2 f4 f8 i1 i2 i4 i8 u1 u2 u4 u8 b1 are)"};
  }
  const std::optional<std::size_t> data_bytes = detail::npy_data_bytes(shape, dtype->item_bytes);
  if (!data_bytes || *data_bytes != data.size()) {
    throw invalid_argument{"write_npy('" + path + "'): shape " + detail::npy_shape_text(shape) +
                           " of dtype " + std::string{descr} + " needs " +
                           (data_bytes ? std::to_string(*data_bytes) : "more than SIZE_MAX") +
                           " bytes of data, but " + std::to_string(data.size()) + " were given"};
  }
  std::string dict = "{'descr': '" + dtype->canonical_descr() +
                     "', 'fortran_order': False, 'shape': " + detail::npy_shape_text(shape) + ", }";
  // NumPy leaves room for the first dimension to grow to 21 digits, for in-place appends.
  if (!shape.empty()) dict.append(21 - std::to_string(shape[0]).size(), ' ');
  // Spaces and a '\n' pad the prefix (magic, version, length, header) to a multiple of 64.
  const auto padded = [&](std::size_t length_bytes) {
    const std::size_t unpadded = detail::npy_magic_bytes + 2 + length_bytes + dict.size() + 1;
    return dict.size() + 1 + (detail::npy_align - unpadded % detail::npy_align);
  };
  const bool v1 = padded(2) <= 0xffff;
  const std::size_t length_bytes = v1 ? 2 : 4;
  const std::size_t header_bytes = padded(length_bytes);
  if (header_bytes > 0xffffffffu) {
    throw invalid_argument{"write_npy('" + path + "'): shape " + detail::npy_shape_text(shape) +
                           " needs a header longer than a .npy file can hold"};
  }
  std::string prefix{detail::npy_magic, detail::npy_magic_bytes};
  prefix += static_cast<char>(v1 ? 1 : 2);
  prefix += '\0';
  for (std::size_t i = 0; i < length_bytes; ++i) {
    prefix += static_cast<char>((header_bytes >> 8 * i) & 0xff);
  }
  prefix += dict;
  prefix.append(header_bytes - dict.size() - 1, ' ');
  prefix += '\n';

  detail::file_ptr f = detail::open_file(path, "wb", ".npy file");
  if (std::fwrite(prefix.data(), 1, prefix.size(), f.get()) != prefix.size() ||
      (!data.empty() && std::fwrite(data.data(), 1, data.size(), f.get()) != data.size())) {
    throw io_error{"cannot write '" + path + "': " + std::strerror(errno)};
  }
  if (std::fclose(f.release()) != 0) {
    throw io_error{"cannot write '" + path + "': " + std::strerror(errno)};
  }
}

/// Writes an array as read_npy returns it.
inline void write_npy(const std::string& path, const npy_array& array) {
  write_npy(path, array.descr, array.shape, array.data);
}

/// Writes `values` (host byte order) as a .npy array of shape `shape`; call it as
/// write_npy<float>(path, values, shape).
template <npy_element T>
void write_npy(const std::string& path, std::span<const T> values,
               std::span<const std::size_t> shape) {
  write_npy(path, npy_descr_of<T>(), shape, std::as_bytes(values));
}

}  // namespace squeeze::io
