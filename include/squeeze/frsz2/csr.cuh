// SPDX-License-Identifier: Apache-2.0
// squeeze/frsz2/csr.cuh: the sparse matrix CB-GMRES multiplies by. csr_ref is the view
// kernels take (by value); device_csr owns the arrays in device memory, uploaded from host
// arrays after checking them.
//
//   frsz2::device_csr a{rows, cols, row_ptr, col_idx, values, stream};   // host spans in
//   frsz2::csr_ref view = a.ref();
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>

#include "squeeze/core/buffer.hpp"
#include "squeeze/core/error.hpp"

namespace squeeze::frsz2 {

/// A CSR matrix in device memory, as kernels see it (passed by value).
///   row_ptr [rows + 1], col_idx [nnz] (0-based), values [nnz]
struct csr_ref {
  std::int32_t rows = 0;                  ///< rows of the matrix
  std::int32_t cols = 0;                  ///< columns of the matrix
  std::int64_t nnz = 0;                   ///< stored entries
  const std::int32_t* row_ptr = nullptr;  ///< [rows + 1]
  const std::int32_t* col_idx = nullptr;  ///< [nnz], 0-based
  const double* values = nullptr;         ///< [nnz]
};

/// An owned CSR matrix in device memory, uploaded from host arrays after checking them
/// (sizes, row_ptr monotone from 0 to nnz, columns in range). Allocated stream-ordered on
/// `stream`, which must outlive the matrix.
class device_csr {
 public:
  device_csr() = default;
  /// Checks the host arrays (invalid_argument naming the problem) and uploads them on `stream`.
  device_csr(std::int64_t rows, std::int64_t cols, std::span<const std::int32_t> row_ptr,
             std::span<const std::int32_t> col_idx, std::span<const double> values,
             cudaStream_t stream) {
    constexpr std::int64_t index_max = std::numeric_limits<std::int32_t>::max();
    SQUEEZE_EXPECTS(rows >= 0 && cols >= 0 && rows <= index_max && cols <= index_max,
                    "frsz2::device_csr: dimensions " + std::to_string(rows) + " x " +
                        std::to_string(cols) + " must lie in [0, 2^31 - 1]");
    SQUEEZE_EXPECTS(row_ptr.size() == static_cast<std::size_t>(rows) + 1,
                    "frsz2::device_csr: row_ptr has " + std::to_string(row_ptr.size()) +
                        " entries; rows + 1 = " + std::to_string(rows + 1) + " expected");
    SQUEEZE_EXPECTS(col_idx.size() == values.size(),
                    "frsz2::device_csr: col_idx has " + std::to_string(col_idx.size()) +
                        " entries but values has " + std::to_string(values.size()));
    SQUEEZE_EXPECTS(row_ptr[0] == 0,
                    "frsz2::device_csr: row_ptr[0] must be 0, is " + std::to_string(row_ptr[0]));
    SQUEEZE_EXPECTS(static_cast<std::size_t>(row_ptr.back()) == values.size(),
                    "frsz2::device_csr: row_ptr[rows] = " + std::to_string(row_ptr.back()) +
                        " but there are " + std::to_string(values.size()) + " entries");
    for (std::size_t r = 0; r + 1 < row_ptr.size(); ++r) {
      SQUEEZE_EXPECTS(row_ptr[r + 1] >= row_ptr[r],
                      "frsz2::device_csr: row_ptr decreases at row " + std::to_string(r));
    }
    for (std::size_t k = 0; k < col_idx.size(); ++k) {
      SQUEEZE_EXPECTS(col_idx[k] >= 0 && col_idx[k] < cols,
                      "frsz2::device_csr: col_idx[" + std::to_string(k) +
                          "] = " + std::to_string(col_idx[k]) + " is outside [0, " +
                          std::to_string(cols) + ")");
    }
    rows_ = static_cast<std::int32_t>(rows);
    cols_ = static_cast<std::int32_t>(cols);
    row_ptr_ = core::device_buffer<std::int32_t>{row_ptr.size(), stream};
    col_idx_ = core::device_buffer<std::int32_t>{col_idx.size(), stream};
    values_ = core::device_buffer<double>{values.size(), stream};
    row_ptr_.copy_from(row_ptr, stream);
    if (!values.empty()) {
      col_idx_.copy_from(col_idx, stream);
      values_.copy_from(values, stream);
    }
  }

  /// The device view (by value in kernels).
  [[nodiscard]] csr_ref ref() const noexcept {
    return {rows_,           cols_,           static_cast<std::int64_t>(values_.size()),
            row_ptr_.data(), col_idx_.data(), values_.data()};
  }
  /// Rows.
  [[nodiscard]] std::int32_t rows() const noexcept { return rows_; }
  /// Columns.
  [[nodiscard]] std::int32_t cols() const noexcept { return cols_; }
  /// Stored entries.
  [[nodiscard]] std::int64_t nnz() const noexcept {
    return static_cast<std::int64_t>(values_.size());
  }

 private:
  std::int32_t rows_ = 0;
  std::int32_t cols_ = 0;
  core::device_buffer<std::int32_t> row_ptr_;
  core::device_buffer<std::int32_t> col_idx_;
  core::device_buffer<double> values_;
};

}  // namespace squeeze::frsz2
