// SPDX-License-Identifier: Apache-2.0
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
//
// Memory (read_limits.hpp): about 24 bytes per entry line (48 for a mirrored one) while
// reading, then the CSR build; the rows the size line declares cost 16 + sizeof(Index) bytes
// each, refused with a format_error past 16 bytes per byte of input plus
// read_limits::max_bytes (default 256 MiB), so a 62-byte file cannot ask for 32 GB.
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
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "squeeze/core/checked.hpp"
#include "squeeze/core/error.hpp"
#include "squeeze/io/csr.hpp"
#include "squeeze/io/detail/binary_input.hpp"
#include "squeeze/io/detail/line_reader.hpp"
#include "squeeze/io/detail/text_writer.hpp"
#include "squeeze/io/read_limits.hpp"

namespace squeeze::io {

namespace detail {

/// Whether a line holds only whitespace or is a '%' comment.
[[nodiscard]] inline bool mm_skippable(std::string_view line) noexcept {
  std::size_t pos = 0;
  while (pos < line.size() && text_is_space(line[pos])) ++pos;
  return pos == line.size() || line[pos] == '%';
}

[[nodiscard]] inline std::string mm_lower(std::string_view s) {
  std::string out{s};
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
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

/// The banner and the size line of a Matrix Market input.
struct mm_header {
  mm_field field{};
  mm_symmetry symmetry{};
  std::string field_name;     ///< as the banner spells it, lower case
  std::string symmetry_name;  ///< as the banner spells it, lower case
  std::int64_t rows = 0, cols = 0, declared = 0;  ///< the size line: declared = entry lines
  std::int64_t size_line = 0;                     ///< its line number

  /// Whether each off-diagonal entry stands for two.
  [[nodiscard]] bool mirrored() const noexcept { return symmetry != mm_symmetry::general; }
};

/// Throws format_error "'<name>' line <n>: <what>".
[[noreturn]] inline void mm_fail(const std::string& name, std::int64_t line,
                                 const std::string& what) {
  throw format_error{"'" + name + "' line " + std::to_string(line) + ": " + what};
}

/// Reads the banner and the size line; format_error for anything malformed or unsupported.
inline mm_header mm_read_header(line_reader& reader, const std::string& name) {
  std::string_view line;
  const auto fail = [&](const std::string& what) { mm_fail(name, reader.number(), what); };

  // ---- banner ----
  if (!reader.next(line)) {
    mm_fail(name, 1,
            "the input is empty; a Matrix Market file starts with the banner '%%MatrixMarket "
            "matrix coordinate <field> <symmetry>'");
  }
  std::size_t pos = 0;
  const std::string_view magic = text_word(line, pos);
  if (mm_lower(magic) != "%%matrixmarket") {
    fail(
        "missing Matrix Market banner: the first line must start with '%%MatrixMarket' but "
        "reads " +
        text_quote(line));
  }
  std::string words[4];
  for (std::string& w : words) w = mm_lower(text_word(line, pos));
  const std::string_view extra = text_word(line, pos);
  if (words[3].empty() || !extra.empty()) {
    fail("invalid banner " + text_quote(line) +
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
  mm_header h;
  h.field_name = words[2];
  h.symmetry_name = words[3];
  if (words[2] == "real" || words[2] == "double") {
    h.field = mm_field::real;
  } else if (words[2] == "integer") {
    h.field = mm_field::integer;
  } else if (words[2] == "pattern") {
    h.field = mm_field::pattern;
  } else {
    fail("field '" + words[2] + "' is not supported (real, integer and pattern are)");
  }
  if (words[3] == "general") {
    h.symmetry = mm_symmetry::general;
  } else if (words[3] == "symmetric") {
    h.symmetry = mm_symmetry::symmetric;
  } else if (words[3] == "skew-symmetric") {
    h.symmetry = mm_symmetry::skew_symmetric;
  } else {
    fail("symmetry '" + words[3] +
         "' is not supported (general, symmetric and skew-symmetric are)");
  }

  // ---- size line ----
  do {
    if (!reader.next(line)) {
      mm_fail(name, reader.number(),
              "the input ends before the size line '<rows> <cols> <entries>'");
    }
  } while (mm_skippable(line));
  h.size_line = reader.number();
  pos = 0;
  const std::string_view w0 = text_word(line, pos);
  const std::string_view w1 = text_word(line, pos);
  const std::string_view w2 = text_word(line, pos);
  const std::string_view w3 = text_word(line, pos);
  if (!w3.empty() || !text_parse_int(w0, h.rows) || !text_parse_int(w1, h.cols) ||
      !text_parse_int(w2, h.declared) || h.rows < 0 || h.cols < 0 || h.declared < 0) {
    fail("bad size line " + text_quote(line) +
         ": expected three non-negative integers '<rows> <cols> <entries>'");
  }
  if (h.mirrored() && h.rows != h.cols) {
    fail("a " + h.symmetry_name + " matrix must be square, but the size line declares " +
         std::to_string(h.rows) + " x " + std::to_string(h.cols));
  }
  return h;
}

/// Entries that `bytes_left` bytes of input can hold (each line takes at least 4: "1 1\n"),
/// times two when mirrored, at most as many as declared: what a reader may reserve.
[[nodiscard]] inline std::size_t mm_reservable(const mm_header& h,
                                               std::optional<std::uint64_t> bytes_left) noexcept {
  if (!bytes_left) return 0;  // a stream of unknown size: grow as entries arrive
  const std::uint64_t lines =
      std::min(static_cast<std::uint64_t>(h.declared), *bytes_left / 4 + 1);
  return static_cast<std::size_t>(lines * (h.mirrored() ? 2 : 1));
}

/// Reads the entry lines after the size line, checking each against `h`, and calls
/// add(row, col, value) (0-based) for every entry they stand for: mirrored ones too.
/// format_error naming the line for anything malformed, too many or too few entries.
template <std::floating_point Value, class Add>
void mm_read_entries(line_reader& reader, const std::string& name, const mm_header& h,
                     Add&& add) {
  std::string_view line;
  const auto fail = [&](const std::string& what) { mm_fail(name, reader.number(), what); };
  std::int64_t seen = 0;
  while (reader.next(line)) {
    if (mm_skippable(line)) continue;
    if (seen == h.declared) {
      fail("too many entries: the size line (line " + std::to_string(h.size_line) +
           ") declares " + std::to_string(h.declared) + ", but more follow");
    }
    std::size_t pos = 0;
    const std::string_view wi = text_word(line, pos);
    const std::string_view wj = text_word(line, pos);
    const std::string_view wv =
        h.field == mm_field::pattern ? std::string_view{} : text_word(line, pos);
    const std::string_view rest = text_word(line, pos);
    const char* const expected =
        h.field == mm_field::pattern ? "'<row> <col>'" : "'<row> <col> <value>'";
    if (wj.empty() || (h.field != mm_field::pattern && wv.empty()) || !rest.empty()) {
      fail("bad entry " + text_quote(line) + ": expected " + expected + " (" + h.field_name +
           " field)");
    }
    std::int64_t i = 0, j = 0;
    if (!text_parse_int(wi, i)) {
      fail("cannot parse the row index " + text_quote(wi) + " as an integer");
    }
    if (!text_parse_int(wj, j)) {
      fail("cannot parse the column index " + text_quote(wj) + " as an integer");
    }
    if (i < 1 || i > h.rows) {
      fail("row index " + std::to_string(i) + " is out of range 1.." + std::to_string(h.rows) +
           " (indices are 1-based)");
    }
    if (j < 1 || j > h.cols) {
      fail("column index " + std::to_string(j) + " is out of range 1.." +
           std::to_string(h.cols) + " (indices are 1-based)");
    }
    Value v{1};
    if (h.field == mm_field::real) {
      switch (mm_parse_real(wv, v)) {
        case mm_real_status::ok: break;
        case mm_real_status::not_a_number:
          fail("cannot parse the value " + text_quote(wv) + " as a real number");
          break;
        case mm_real_status::too_large:
          fail("the value " + text_quote(wv) + " is out of range for the value type");
          break;
      }
    } else if (h.field == mm_field::integer) {
      std::int64_t n = 0;
      if (!text_parse_int(wv, n)) {
        fail("cannot parse the value " + text_quote(wv) + " as an integer (integer field)");
      }
      v = static_cast<Value>(n);
    }
    if (h.symmetry == mm_symmetry::symmetric && i < j) {
      fail("entry (" + std::to_string(i) + ", " + std::to_string(j) +
           ") lies above the diagonal; a symmetric Matrix Market file stores only the lower "
           "triangle (row >= column)");
    }
    if (h.symmetry == mm_symmetry::skew_symmetric && i <= j) {
      fail("entry (" + std::to_string(i) + ", " + std::to_string(j) + ") lies " +
           (i == j ? "on" : "above") +
           " the diagonal; a skew-symmetric Matrix Market file stores only the strictly lower "
           "triangle (row > column)");
    }
    add(i - 1, j - 1, v);
    if (h.mirrored() && i != j) {
      add(j - 1, i - 1, h.symmetry == mm_symmetry::skew_symmetric ? Value(-v) : v);
    }
    ++seen;
  }
  if (seen < h.declared) {
    fail("too few entries: the input ends after " + std::to_string(seen) +
         " entries, but the size line (line " + std::to_string(h.size_line) + ") declares " +
         std::to_string(h.declared));
  }
}

/// Refuses (format_error) `count` rows or vertices (`what`) that the size line declares, at
/// `bytes_each` bytes each (count + 1 of them: the offsets array has one more), when they pass
/// `limits` after `input_bytes` bytes of input.
inline void mm_check_declared(const std::string& name, const mm_header& h, std::uint64_t count,
                              std::uint64_t bytes_each, const char* what,
                              std::uint64_t input_bytes, const read_limits& limits) {
  const std::optional<std::uint64_t> bytes =
      core::checked_mul<std::uint64_t>(count + 1, bytes_each);  // count < 2^63
  if (declared_bytes_allowed(bytes, input_bytes, limits)) return;
  mm_fail(name, h.size_line,
          "the size line declares " + std::to_string(h.rows) + " x " + std::to_string(h.cols) +
              ": " + std::to_string(count) + " " + what + " of " + std::to_string(bytes_each) +
              " bytes, " + declared_bytes_refusal(bytes, input_bytes, limits));
}

}  // namespace detail

/// Reads a Matrix Market coordinate matrix from `in`; `name` (a file name, say) is what
/// error messages call the input. Throws format_error (naming the input, the line and the
/// cause) for malformed or unsupported input, or rows that pass `limits` (see the memory note
/// above), io_error when the stream fails, and invalid_argument when the dimensions or the
/// number of entries do not fit Index.
template <std::floating_point Value = double, class Index = std::int32_t>
[[nodiscard]] csr_matrix<Value, Index> read_matrix_market(std::istream& in,
                                                          const std::string& name,
                                                          const read_limits& limits = {}) {
  const std::optional<std::uint64_t> bytes_left = detail::bytes_left(in);
  detail::line_reader reader{in, name, "Matrix Market input"};
  const detail::mm_header h = detail::mm_read_header(reader, name);
  if (!detail::csr_fits<Index>(h.rows) || !detail::csr_fits<Index>(h.cols)) {
    throw invalid_argument{"'" + name + "' line " + std::to_string(h.size_line) + ": a " +
                           std::to_string(h.rows) + " x " + std::to_string(h.cols) +
                           " matrix does not fit the index type " +
                           detail::csr_index_name<Index>() + "; read it with a wider Index"};
  }
  std::vector<coordinate_entry<Value>> entries;
  entries.reserve(detail::mm_reservable(h, bytes_left));
  detail::mm_read_entries<Value>(reader, name, h, [&](std::int64_t i, std::int64_t j, Value v) {
    entries.push_back({i, j, v});
  });
  // csr_from_coordinates keeps row_ptr and two int64 counters per row.
  detail::mm_check_declared(name, h, static_cast<std::uint64_t>(h.rows), 16 + sizeof(Index),
                            "rows", reader.bytes_read(), limits);
  try {
    return csr_from_coordinates<Value, Index>(h.rows, h.cols, std::move(entries));
  } catch (const invalid_argument& e) {
    throw invalid_argument{"'" + name + "': " + e.message()};
  }
}

/// Reads a Matrix Market file; see the stream overload. io_error when it cannot be opened.
template <std::floating_point Value = double, class Index = std::int32_t>
[[nodiscard]] csr_matrix<Value, Index> read_matrix_market(const std::filesystem::path& path,
                                                          const read_limits& limits = {}) {
  std::ifstream in = detail::open_input(path, "Matrix Market file");
  return read_matrix_market<Value, Index>(in, path.string(), limits);
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
