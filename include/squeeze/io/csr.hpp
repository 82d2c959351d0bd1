// SPDX-License-Identifier: Apache-2.0
// squeeze/io/csr.hpp: a host CSR (compressed sparse row) matrix, its construction from
// coordinate entries, a validity check, and a reference sparse matrix-vector product.
//
//   row_ptr  [rows + 1]  row r holds entries row_ptr[r] .. row_ptr[r + 1] - 1
//   col_idx  [nnz]       0-based columns, strictly increasing within each row
//   values   [nnz]       the entries, in the order of col_idx
//
// Host-only. Value is the entry type, Index the type of row_ptr and col_idx (so nnz and the
// dimensions must fit Index). Builders throw invalid_argument for bad parameters; validate()
// throws format_error naming the first broken invariant.
#pragma once

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "squeeze/core/error.hpp"

namespace squeeze::io {

/// A sparse matrix in CSR form, as the loaders return it and the examples upload it.
/// Invariants (validate() checks them): row_ptr.size() == rows + 1, row_ptr[0] == 0,
/// row_ptr never decreases, row_ptr[rows] == col_idx.size() == values.size(), and each row's
/// columns lie in [0, cols) and strictly increase.
template <class Value = double, class Index = std::int32_t>
struct csr_matrix {
  static_assert(std::is_integral_v<Index> && !std::is_same_v<Index, bool>,
                "csr_matrix: Index must be an integer type");
  using value_type = Value;  ///< the entries' type
  using index_type = Index;  ///< row_ptr's and col_idx's type

  std::int64_t rows = 0;       ///< rows of the matrix
  std::int64_t cols = 0;       ///< columns of the matrix
  std::vector<Index> row_ptr;  ///< [rows + 1]
  std::vector<Index> col_idx;  ///< [nnz]
  std::vector<Value> values;   ///< [nnz]

  /// Number of stored entries.
  [[nodiscard]] std::int64_t nnz() const noexcept {
    return static_cast<std::int64_t>(values.size());
  }
};

/// One entry of a matrix in coordinate form; row and col are 0-based.
template <class Value = double>
struct coordinate_entry {
  std::int64_t row = 0;  ///< 0-based
  std::int64_t col = 0;  ///< 0-based
  Value value{};         ///< the entry
};

namespace detail {

template <class Index>
[[nodiscard]] std::string csr_index_name() {
  std::string name = std::is_signed_v<Index> ? "int" : "uint";
  return name + std::to_string(8 * sizeof(Index)) + " (max " +
         std::to_string(std::numeric_limits<Index>::max()) + ")";
}

template <class Index>
[[nodiscard]] constexpr bool csr_fits(std::int64_t n) noexcept {
  return n >= 0 && static_cast<std::uint64_t>(n) <=
                       static_cast<std::uint64_t>(std::numeric_limits<Index>::max());
}

}  // namespace detail

/// Builds a rows x cols CSR matrix from coordinate entries (0-based, any order). Entries are
/// ordered by (row, col); duplicates are summed, in the order they were given. Throws
/// invalid_argument when a dimension is negative or does not fit Index, an entry lies outside
/// the matrix, or the number of distinct entries does not fit Index (the message says which).
/// Runs in O(nnz + rows): a counting sort by row, then a sort of each row not already sorted.
template <class Value = double, class Index = std::int32_t>
[[nodiscard]] csr_matrix<Value, Index> csr_from_coordinates(
    std::int64_t rows, std::int64_t cols, std::vector<coordinate_entry<Value>> entries) {
  if (rows < 0 || cols < 0) {
    throw invalid_argument{"csr_from_coordinates: dimensions " + std::to_string(rows) + " x " +
                           std::to_string(cols) + " must not be negative"};
  }
  if (!detail::csr_fits<Index>(rows)) {
    throw invalid_argument{"csr_from_coordinates: " + std::to_string(rows) +
                           " rows do not fit the index type " + detail::csr_index_name<Index>() +
                           "; use a wider Index"};
  }
  if (!detail::csr_fits<Index>(cols)) {
    throw invalid_argument{"csr_from_coordinates: " + std::to_string(cols) +
                           " columns do not fit the index type " + detail::csr_index_name<Index>() +
                           "; use a wider Index"};
  }
  const auto n_rows = static_cast<std::size_t>(rows);
  std::vector<std::int64_t> start(n_rows + 1, 0);  // [rows + 1], entries before each row
  for (std::size_t k = 0; k < entries.size(); ++k) {
    const coordinate_entry<Value>& e = entries[k];
    if (e.row < 0 || e.row >= rows || e.col < 0 || e.col >= cols) {
      throw invalid_argument{"csr_from_coordinates: entry " + std::to_string(k) + " at (" +
                             std::to_string(e.row) + ", " + std::to_string(e.col) +
                             ") lies outside the " + std::to_string(rows) + " x " +
                             std::to_string(cols) + " matrix (indices are 0-based)"};
    }
    ++start[static_cast<std::size_t>(e.row) + 1];
  }
  for (std::size_t r = 0; r < n_rows; ++r) start[r + 1] += start[r];

  // Counting sort by row, stable: within a row the entries keep the order they were given.
  std::vector<Index> col(entries.size());
  std::vector<Value> val(entries.size());
  {
    std::vector<std::int64_t> next(start.begin(), start.end() - 1);
    for (const coordinate_entry<Value>& e : entries) {
      const auto at = static_cast<std::size_t>(next[static_cast<std::size_t>(e.row)]++);
      col[at] = static_cast<Index>(e.col);
      val[at] = e.value;
    }
  }
  entries.clear();
  entries.shrink_to_fit();

  csr_matrix<Value, Index> a;
  a.rows = rows;
  a.cols = cols;
  a.row_ptr.assign(n_rows + 1, Index{0});
  std::vector<std::pair<Index, Value>> row_buffer;
  std::size_t out = 0;  // entries kept so far; duplicates are merged in place
  for (std::size_t r = 0; r < n_rows; ++r) {
    const auto begin = static_cast<std::size_t>(start[r]);
    const auto end = static_cast<std::size_t>(start[r + 1]);
    if (!std::is_sorted(col.begin() + static_cast<std::ptrdiff_t>(begin),
                        col.begin() + static_cast<std::ptrdiff_t>(end))) {
      row_buffer.clear();
      for (std::size_t k = begin; k < end; ++k) row_buffer.emplace_back(col[k], val[k]);
      std::stable_sort(row_buffer.begin(), row_buffer.end(),
                       [](const auto& x, const auto& y) { return x.first < y.first; });
      for (std::size_t k = begin; k < end; ++k) {
        col[k] = row_buffer[k - begin].first;
        val[k] = row_buffer[k - begin].second;
      }
    }
    const std::size_t row_begin = out;
    for (std::size_t k = begin; k < end; ++k) {
      if (out > row_begin && col[out - 1] == col[k]) {
        val[out - 1] += val[k];
      } else {
        col[out] = col[k];
        val[out] = val[k];
        ++out;
      }
    }
    if (!detail::csr_fits<Index>(static_cast<std::int64_t>(out))) {
      throw invalid_argument{"csr_from_coordinates: the matrix has more than " +
                             std::to_string(std::numeric_limits<Index>::max()) +
                             " distinct entries (nnz), which do not fit the index type " +
                             detail::csr_index_name<Index>() + "; use a wider Index"};
    }
    a.row_ptr[r + 1] = static_cast<Index>(out);
  }
  col.resize(out);
  val.resize(out);
  a.col_idx = std::move(col);
  a.values = std::move(val);
  return a;
}

/// Checks the invariants of csr_matrix; throws format_error naming the first one broken (and
/// where), in this order: non-negative dimensions, row_ptr size, row_ptr[0] == 0, row_ptr
/// monotone, col_idx and values sizes, row_ptr[rows] == nnz, columns in range, columns
/// strictly increasing within each row (sorted, no duplicates).
template <class Value, class Index>
void validate(const csr_matrix<Value, Index>& a) {
  const auto fail = [](const std::string& what) {
    throw format_error{"invalid CSR matrix: " + what};
  };
  if (a.rows < 0 || a.cols < 0) {
    fail("dimensions " + std::to_string(a.rows) + " x " + std::to_string(a.cols) + " are negative");
  }
  // (rows + 1 in 64-bit unsigned arithmetic: rows may be INT64_MAX.)
  const std::uint64_t rows_plus_one = static_cast<std::uint64_t>(a.rows) + 1;
  if (a.row_ptr.size() != rows_plus_one) {
    fail("row_ptr has " + std::to_string(a.row_ptr.size()) +
         " elements; rows + 1 = " + std::to_string(rows_plus_one) + " expected");
  }
  if (a.row_ptr[0] != 0) fail("row_ptr[0] is " + std::to_string(a.row_ptr[0]) + ", not 0");
  for (std::size_t r = 0; r + 1 < a.row_ptr.size(); ++r) {
    if (a.row_ptr[r + 1] < a.row_ptr[r]) {
      fail("row_ptr is not monotone: row_ptr[" + std::to_string(r + 1) +
           "] = " + std::to_string(a.row_ptr[r + 1]) + " < row_ptr[" + std::to_string(r) +
           "] = " + std::to_string(a.row_ptr[r]));
    }
  }
  if (a.col_idx.size() != a.values.size()) {
    fail("col_idx has " + std::to_string(a.col_idx.size()) + " elements but values has " +
         std::to_string(a.values.size()) + " (sizes differ)");
  }
  const auto last = static_cast<std::uint64_t>(a.row_ptr.back());
  if (last != a.col_idx.size()) {
    fail("row_ptr[rows] = " + std::to_string(last) + " but col_idx and values hold " +
         std::to_string(a.col_idx.size()) + " entries (sizes differ)");
  }
  for (std::size_t r = 0; r + 1 < a.row_ptr.size(); ++r) {
    const auto begin = static_cast<std::size_t>(a.row_ptr[r]);
    const auto end = static_cast<std::size_t>(a.row_ptr[r + 1]);
    for (std::size_t k = begin; k < end; ++k) {
      const auto c = static_cast<std::int64_t>(a.col_idx[k]);
      if (c < 0 || c >= a.cols) {
        fail("row " + std::to_string(r) + ": col_idx[" + std::to_string(k) +
             "] = " + std::to_string(c) + " is out of range [0, " + std::to_string(a.cols) + ")");
      }
      if (k > begin && a.col_idx[k] <= a.col_idx[k - 1]) {
        fail("row " + std::to_string(r) + " is not sorted: col_idx[" + std::to_string(k) +
             "] = " + std::to_string(c) + " does not exceed col_idx[" + std::to_string(k - 1) +
             "] = " + std::to_string(a.col_idx[k - 1]) +
             " (columns must strictly increase within a row)");
      }
    }
  }
}

/// y = A x on the host, each row accumulated in long double and rounded to Value once. The
/// reference the GPU kernels are checked against. Validates `a` first (format_error) and
/// throws invalid_argument when x.size() != cols or y.size() != rows.
template <class Value, class Index>
void spmv_reference(const csr_matrix<Value, Index>& a,
                    std::type_identity_t<std::span<const Value>> x,
                    std::type_identity_t<std::span<Value>> y) {
  validate(a);
  if (x.size() != static_cast<std::uint64_t>(a.cols) ||
      y.size() != static_cast<std::uint64_t>(a.rows)) {
    throw invalid_argument{"spmv_reference: a " + std::to_string(a.rows) + " x " +
                           std::to_string(a.cols) + " matrix needs x of size " +
                           std::to_string(a.cols) + " and y of size " + std::to_string(a.rows) +
                           "; got " + std::to_string(x.size()) + " and " +
                           std::to_string(y.size())};
  }
  for (std::size_t r = 0; r < y.size(); ++r) {
    long double sum = 0;
    const auto end = static_cast<std::size_t>(a.row_ptr[r + 1]);
    for (auto k = static_cast<std::size_t>(a.row_ptr[r]); k < end; ++k) {
      sum += static_cast<long double>(a.values[k]) *
             static_cast<long double>(x[static_cast<std::size_t>(a.col_idx[k])]);
    }
    y[r] = static_cast<Value>(sum);
  }
}

}  // namespace squeeze::io
