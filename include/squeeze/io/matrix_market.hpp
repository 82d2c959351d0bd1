// squeeze/io/matrix_market.hpp: reads and writes Matrix Market sparse matrices (.mtx, the
// SuiteSparse Matrix Collection's format) as csr_matrix.
//
//   %%MatrixMarket matrix coordinate <field> <symmetry>     the banner, line 1
//   % comments                                               '%' lines, blank lines
//   <rows> <cols> <entries>                                  the size line
//   <i> <j> [<value>]                                        <entries> lines, 1-based
//
// Supported: field real (or double), integer, pattern (every value is 1); symmetry general,
// symmetric (only the lower triangle is stored, i >= j; off-diagonal entries are mirrored)
// and skew-symmetric (only the strictly lower triangle, i > j; mirrored with negation). The
// banner's words are matched without regard to case, as the format allows. Not supported,
// and refused with a message that says so: array (dense) format, complex and hermitian
// matrices, vector objects. Duplicate entries are summed. nan and inf are accepted as
// values; a value too large for Value is refused, one too small rounds as strtod does.
//
// Host-only. Every malformed input is a format_error whose message names the file (or the
// stream's name), the line number and what is wrong; a file that cannot be opened or read is
// an io_error. Lines are parsed with std::from_chars from a large buffer: a 10 M entry file
// reads in about a second.
#pragma once

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <istream>
#include <limits>
#include <ostream>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "squeeze/core/error.hpp"
#include "squeeze/io/csr.hpp"
#include "squeeze/io/detail/text_writer.hpp"

namespace squeeze::io {

namespace detail {

/// Splits a stream into lines without copying each one: reads 1 MiB blocks and hands out
/// views into the block. A view lives until the next call. '\r' before '\n' is dropped.
class mm_line_reader {
 public:
  mm_line_reader(std::istream& in, const std::string& name) : in_{in}, name_{name} {
    buffer_.resize(block_bytes);
  }

  /// The next line, or false at the end of the stream. Throws io_error on a read error.
  bool next(std::string_view& line) {
    for (;;) {
      const char* const first = buffer_.data() + begin_;
      const std::size_t available = end_ - begin_;
      const auto* const newline = static_cast<const char*>(std::memchr(first, '\n', available));
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

 private:
  static constexpr std::size_t block_bytes = std::size_t{1} << 20;

  static std::string_view trim_cr(std::string_view s) noexcept {
    if (!s.empty() && s.back() == '\r') s.remove_suffix(1);
    return s;
  }

  // Moves the unread tail to the front and reads more after it (growing the buffer when a
  // single line fills it).
  void fill() {
    const std::size_t tail = end_ - begin_;
    if (begin_ > 0) {
      std::memmove(buffer_.data(), buffer_.data() + begin_, tail);
      begin_ = 0;
      end_ = tail;
    }
    if (buffer_.size() - end_ < block_bytes / 2) buffer_.resize(buffer_.size() * 2);
    in_.read(buffer_.data() + end_, static_cast<std::streamsize>(buffer_.size() - end_));
    end_ += static_cast<std::size_t>(in_.gcount());
    if (in_.eof()) {
      eof_ = true;
    } else if (in_.bad() || in_.fail()) {
      throw io_error{"cannot read Matrix Market input '" + name_ + "'"};
    }
  }

  std::istream& in_;
  const std::string& name_;
  std::string buffer_;
  std::size_t begin_ = 0, end_ = 0;
  bool eof_ = false;
  std::int64_t number_ = 0;
};

[[nodiscard]] constexpr bool mm_is_space(char c) noexcept {
  return c == ' ' || c == '\t' || c == '\v' || c == '\f';
}

/// The next whitespace-separated word of `s` from `pos` (empty at the end); advances pos.
[[nodiscard]] inline std::string_view mm_word(std::string_view s, std::size_t& pos) noexcept {
  while (pos < s.size() && mm_is_space(s[pos])) ++pos;
  const std::size_t begin = pos;
  while (pos < s.size() && !mm_is_space(s[pos])) ++pos;
  return s.substr(begin, pos - begin);
}

/// Whether a line holds only whitespace or is a '%' comment.
[[nodiscard]] inline bool mm_skippable(std::string_view line) noexcept {
  std::size_t pos = 0;
  while (pos < line.size() && mm_is_space(line[pos])) ++pos;
  return pos == line.size() || line[pos] == '%';
}

[[nodiscard]] inline std::string mm_lower(std::string_view s) {
  std::string out{s};
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

/// At most 60 characters of `s`, quoted, for an error message.
[[nodiscard]] inline std::string mm_quote(std::string_view s) {
  std::string out{"'"};
  out += s.substr(0, 60);
  if (s.size() > 60) out += "...";
  return out + "'";
}

/// A base-10 integer (an optional sign, then digits, nothing else); false if it is not one
/// or overflows int64.
[[nodiscard]] inline bool mm_parse_int(std::string_view word, std::int64_t& value) noexcept {
  if (word.size() > 1 && word[0] == '+' && word[1] != '-') word.remove_prefix(1);
  const char* const end = word.data() + word.size();
  const auto [ptr, ec] = std::from_chars(word.data(), end, value);
  return ec == std::errc{} && ptr == end;
}

enum class mm_real_status { ok, not_a_number, too_large };

/// A real number as strtod reads one (decimal or hex-free forms, nan, inf, infinity), all of
/// `word`. Values too small for T round as strtod rounds them (to a subnormal or zero).
template <std::floating_point T>
[[nodiscard]] mm_real_status mm_parse_real(std::string_view word, T& value) {
  if (word.size() > 1 && word[0] == '+' && word[1] != '-') word.remove_prefix(1);
  const char* const end = word.data() + word.size();
  const auto [ptr, ec] = std::from_chars(word.data(), end, value, std::chars_format::general);
  if (ptr != end || ec == std::errc::invalid_argument) return mm_real_status::not_a_number;
  if (ec == std::errc::result_out_of_range) {
    // from_chars leaves value unchanged here; strtod tells overflow from underflow.
    const std::string text{word};
    const long double v = std::strtold(text.c_str(), nullptr);
    if (std::isinf(v) || std::fabs(v) > static_cast<long double>(std::numeric_limits<T>::max())) {
      return mm_real_status::too_large;
    }
    value = static_cast<T>(v);
  }
  return mm_real_status::ok;
}

enum class mm_field { real, integer, pattern };
enum class mm_symmetry { general, symmetric, skew_symmetric };

}  // namespace detail

/// Reads a Matrix Market coordinate matrix from `in`; `name` (a file name, say) is what
/// error messages call the input. Throws format_error (naming the input, the line and the
/// cause) for malformed or unsupported input, io_error when the stream fails, and
/// invalid_argument when the dimensions or the number of entries do not fit Index.
template <std::floating_point Value = double, class Index = std::int32_t>
[[nodiscard]] csr_matrix<Value, Index> read_matrix_market(std::istream& in,
                                                          const std::string& name) {
  detail::mm_line_reader reader{in, name};
  std::string_view line;
  const auto fail = [&](const std::string& what) {
    throw format_error{"'" + name + "' line " + std::to_string(reader.number()) + ": " + what};
  };

  // ---- banner ----
  if (!reader.next(line)) {
    throw format_error{"'" + name +
                       "' line 1: the input is empty; a Matrix Market file starts with the "
                       "banner '%%MatrixMarket matrix coordinate <field> <symmetry>'"};
  }
  std::size_t pos = 0;
  const std::string_view magic = detail::mm_word(line, pos);
  if (detail::mm_lower(magic) != "%%matrixmarket") {
    fail(
        "missing Matrix Market banner: the first line must start with '%%MatrixMarket' but "
        "reads " +
        detail::mm_quote(line));
  }
  std::string words[4];
  for (std::string& w : words) w = detail::mm_lower(detail::mm_word(line, pos));
  const std::string_view extra = detail::mm_word(line, pos);
  if (words[3].empty() || !extra.empty()) {
    fail("invalid banner " + detail::mm_quote(line) +
         ": expected exactly '%%MatrixMarket <object> <format> <field> <symmetry>'");
  }
  if (words[0] != "matrix") {
    fail("object '" + words[0] + "' is not supported (only 'matrix' is)");
  }
  if (words[1] == "array") {
    fail("format 'array' (a dense matrix) is not supported (only 'coordinate' is)");
  }
  if (words[1] != "coordinate") {
    fail("format '" + words[1] + "' is not supported (only 'coordinate' is)");
  }
  detail::mm_field field{};
  if (words[2] == "real" || words[2] == "double") {
    field = detail::mm_field::real;
  } else if (words[2] == "integer") {
    field = detail::mm_field::integer;
  } else if (words[2] == "pattern") {
    field = detail::mm_field::pattern;
  } else {
    fail("field '" + words[2] + "' is not supported (real, integer and pattern are)");
  }
  detail::mm_symmetry symmetry{};
  if (words[3] == "general") {
    symmetry = detail::mm_symmetry::general;
  } else if (words[3] == "symmetric") {
    symmetry = detail::mm_symmetry::symmetric;
  } else if (words[3] == "skew-symmetric") {
    symmetry = detail::mm_symmetry::skew_symmetric;
  } else {
    fail("symmetry '" + words[3] +
         "' is not supported (general, symmetric and skew-symmetric are)");
  }

  // ---- size line ----
  do {
    if (!reader.next(line)) {
      throw format_error{"'" + name + "' line " + std::to_string(reader.number()) +
                         ": the input ends before the size line '<rows> <cols> <entries>'"};
    }
  } while (detail::mm_skippable(line));
  const std::int64_t size_line = reader.number();
  std::int64_t rows = 0, cols = 0, declared = 0;
  {
    pos = 0;
    const std::string_view w0 = detail::mm_word(line, pos);
    const std::string_view w1 = detail::mm_word(line, pos);
    const std::string_view w2 = detail::mm_word(line, pos);
    const std::string_view w3 = detail::mm_word(line, pos);
    if (!w3.empty() || !detail::mm_parse_int(w0, rows) || !detail::mm_parse_int(w1, cols) ||
        !detail::mm_parse_int(w2, declared) || rows < 0 || cols < 0 || declared < 0) {
      fail("bad size line " + detail::mm_quote(line) +
           ": expected three non-negative integers '<rows> <cols> <entries>'");
    }
  }
  if (symmetry != detail::mm_symmetry::general && rows != cols) {
    fail("a " + words[3] + " matrix must be square, but the size line declares " +
         std::to_string(rows) + " x " + std::to_string(cols));
  }
  if (!detail::csr_fits<Index>(rows) || !detail::csr_fits<Index>(cols)) {
    throw invalid_argument{"'" + name + "' line " + std::to_string(size_line) + ": a " +
                           std::to_string(rows) + " x " + std::to_string(cols) +
                           " matrix does not fit the index type " +
                           detail::csr_index_name<Index>() + "; read it with a wider Index"};
  }

  // ---- entries ----
  const bool mirrored = symmetry != detail::mm_symmetry::general;
  std::vector<coordinate_entry<Value>> entries;
  // (The declared count is not trusted with memory beyond 2^26 entries up front.)
  entries.reserve(static_cast<std::size_t>(std::min<std::int64_t>(declared, std::int64_t{1} << 26) *
                                           (mirrored ? 2 : 1)));
  std::int64_t seen = 0;
  while (reader.next(line)) {
    if (detail::mm_skippable(line)) continue;
    if (seen == declared) {
      fail("too many entries: the size line (line " + std::to_string(size_line) + ") declares " +
           std::to_string(declared) + ", but more follow");
    }
    pos = 0;
    const std::string_view wi = detail::mm_word(line, pos);
    const std::string_view wj = detail::mm_word(line, pos);
    const std::string_view wv =
        field == detail::mm_field::pattern ? std::string_view{} : detail::mm_word(line, pos);
    const std::string_view rest = detail::mm_word(line, pos);
    const char* const expected =
        field == detail::mm_field::pattern ? "'<row> <col>'" : "'<row> <col> <value>'";
    if (wj.empty() || (field != detail::mm_field::pattern && wv.empty()) || !rest.empty()) {
      fail("bad entry " + detail::mm_quote(line) + ": expected " + expected + " (" + words[2] +
           " field)");
    }
    std::int64_t i = 0, j = 0;
    if (!detail::mm_parse_int(wi, i)) {
      fail("cannot parse the row index " + detail::mm_quote(wi) + " as an integer");
    }
    if (!detail::mm_parse_int(wj, j)) {
      fail("cannot parse the column index " + detail::mm_quote(wj) + " as an integer");
    }
    if (i < 1 || i > rows) {
      fail("row index " + std::to_string(i) + " is out of range 1.." + std::to_string(rows) +
           " (indices are 1-based)");
    }
    if (j < 1 || j > cols) {
      fail("column index " + std::to_string(j) + " is out of range 1.." + std::to_string(cols) +
           " (indices are 1-based)");
    }
    Value v{1};
    if (field == detail::mm_field::real) {
      switch (detail::mm_parse_real(wv, v)) {
        case detail::mm_real_status::ok: break;
        case detail::mm_real_status::not_a_number:
          fail("cannot parse the value " + detail::mm_quote(wv) + " as a real number");
          break;
        case detail::mm_real_status::too_large:
          fail("the value " + detail::mm_quote(wv) + " is out of range for the value type");
          break;
      }
    } else if (field == detail::mm_field::integer) {
      std::int64_t n = 0;
      if (!detail::mm_parse_int(wv, n)) {
        fail("cannot parse the value " + detail::mm_quote(wv) + " as an integer (integer field)");
      }
      v = static_cast<Value>(n);
    }
    if (symmetry == detail::mm_symmetry::symmetric && i < j) {
      fail("entry (" + std::to_string(i) + ", " + std::to_string(j) +
           ") lies above the diagonal; a symmetric Matrix Market file stores only the lower "
           "triangle (row >= column)");
    }
    if (symmetry == detail::mm_symmetry::skew_symmetric && i <= j) {
      fail("entry (" + std::to_string(i) + ", " + std::to_string(j) + ") lies " +
           (i == j ? "on" : "above") +
           " the diagonal; a skew-symmetric Matrix Market file stores only the strictly lower "
           "triangle (row > column)");
    }
    entries.push_back({i - 1, j - 1, v});
    if (mirrored && i != j) {
      entries.push_back(
          {j - 1, i - 1, symmetry == detail::mm_symmetry::skew_symmetric ? Value(-v) : v});
    }
    ++seen;
  }
  if (seen < declared) {
    fail("too few entries: the input ends after " + std::to_string(seen) +
         " entries, but the size line (line " + std::to_string(size_line) + ") declares " +
         std::to_string(declared));
  }
  try {
    return csr_from_coordinates<Value, Index>(rows, cols, std::move(entries));
  } catch (const invalid_argument& e) {
    throw invalid_argument{"'" + name + "': " + e.message()};
  }
}

/// Reads a Matrix Market file; see the stream overload. io_error when it cannot be opened.
template <std::floating_point Value = double, class Index = std::int32_t>
[[nodiscard]] csr_matrix<Value, Index> read_matrix_market(const std::filesystem::path& path) {
  errno = 0;
  std::ifstream in{path, std::ios::binary};
  if (!in) {
    throw io_error{"cannot open Matrix Market file '" + path.string() +
                   "': " + std::strerror(errno)};
  }
  return read_matrix_market<Value, Index>(in, path.string());
}

/// Writes `a` as '%%MatrixMarket matrix coordinate real general', one 1-based entry a line,
/// values with max_digits10 significant digits (%.17g for double), so that reading the file
/// back gives the same matrix bit for bit. Validates `a` first (format_error); throws
/// io_error when the stream fails.
template <std::floating_point Value, class Index>
void write_matrix_market(std::ostream& out, const csr_matrix<Value, Index>& a) {
  validate(a);
  detail::text_writer w{out, "%%MatrixMarket matrix coordinate real general\n" +
                                 std::to_string(a.rows) + " " + std::to_string(a.cols) + " " +
                                 std::to_string(a.nnz()) + "\n"};
  for (std::size_t r = 0; r + 1 < a.row_ptr.size(); ++r) {
    const auto end = static_cast<std::size_t>(a.row_ptr[r + 1]);
    for (auto k = static_cast<std::size_t>(a.row_ptr[r]); k < end; ++k) {
      w.number(r + 1);
      w.put(' ');
      w.number(static_cast<std::int64_t>(a.col_idx[k]) + 1);
      w.put(' ');
      w.number(a.values[k], std::chars_format::general, std::numeric_limits<Value>::max_digits10);
      w.end_line();
    }
  }
  w.finish("Matrix Market");
}

/// Writes `a` to a file; see the stream overload. io_error when it cannot be written.
template <std::floating_point Value, class Index>
void write_matrix_market(const std::filesystem::path& path, const csr_matrix<Value, Index>& a) {
  validate(a);
  errno = 0;
  std::ofstream out{path, std::ios::binary | std::ios::trunc};
  if (!out) {
    throw io_error{"cannot create Matrix Market file '" + path.string() +
                   "': " + std::strerror(errno)};
  }
  try {
    write_matrix_market(out, a);
    out.close();
    if (!out) throw io_error{"close failed"};
  } catch (const io_error&) {
    throw io_error{"cannot write Matrix Market file '" + path.string() + "'"};
  }
}

}  // namespace squeeze::io
