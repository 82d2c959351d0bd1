// SPDX-License-Identifier: Apache-2.0
// frsz2_spmv: a user's CSR sparse matrix-vector product whose matrix values are stored
// FRSZ2-compressed and read through cuda::std::mdspan, with frsz2::accessor as its accessor
// policy. The kernel is written against mdspan alone: changing the storage is changing one
// type (the policy the user picks), here float64, frsz2_32 and frsz2_16.
//
//   y = A x     A: n x n, CSR, 1 .. 9 random entries a row
//               x: float32, read as double through accessor<const float, double> (read-only)
//               y: double, a plain mdspan
//
//   values_view<S> = cuda::std::mdspan<const double, cuda::std::dextents<int, 1>,
//                                      cuda::std::layout_right, frsz2::accessor<S>>
//   values[k]        decodes value k (FRSZ2: its block's exponent and the bits of its code)
//
// The values are compressed on the host (frsz2::encode, the reference encoder; frsz2::array
// compresses on the GPU), and each product is checked against the same product of the values
// frsz2::decode reads from the same words. It also prints how far each storage moves y from
// the float64 product.
//
//   custom_frsz2_spmv        exit 0: matches the host; 1: mismatch; 77: no GPU (nothing ran)
#include <squeeze/core/bits.hpp>
#include <squeeze/core/buffer.hpp>
#include <squeeze/core/cuda_error.hpp>
#include <squeeze/frsz2/accessor.hpp>
#include <squeeze/frsz2/format.hpp>

#include <cuda/std/mdspan>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <span>
#include <type_traits>
#include <vector>

#include "support.hpp"

namespace core = squeeze::core;
namespace frsz2 = squeeze::frsz2;
namespace cstd = cuda::std;

namespace {

using extents = cstd::dextents<int, 1>;
template <class Storage>
using values_view =
    cstd::mdspan<const double, extents, cstd::layout_right, frsz2::accessor<Storage>>;
using x_view =
    cstd::mdspan<const double, extents, cstd::layout_right, frsz2::accessor<const float, double>>;
using y_view = cstd::mdspan<double, extents>;  // the default accessor

/// y = A x, one thread per row.
template <class Values>
__global__ void __launch_bounds__(256)
    csr_spmv(const int* row_ptr, const int* col, Values values, x_view x, y_view y) {
  const int i = static_cast<int>(blockIdx.x * 256 + threadIdx.x);
  if (i >= y.extent(0)) return;
  double sum = 0;
  for (int k = row_ptr[i]; k < row_ptr[i + 1]; ++k) sum += values[k] * x[col[k]];
  y[i] = sum;
}

struct csr {
  std::vector<int> row_ptr{0}, col;
  std::vector<double> values;
};

/// n x n, 1 .. 9 entries a row at random columns, values U(-1, 1) scaled by 2^(-8 .. 8).
csr random_matrix(int n, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u{-1.0, 1.0};
  csr a;
  for (int i = 0; i < n; ++i) {
    for (int k = 1 + static_cast<int>(rng() % 9); k > 0; --k) {
      a.col.push_back(static_cast<int>(rng() % n));
      a.values.push_back(std::ldexp(u(rng), static_cast<int>(rng() % 17) - 8));
    }
    a.row_ptr.push_back(static_cast<int>(a.col.size()));
  }
  return a;
}

/// Runs the SpMV with values stored as S (const double: plain, read-only); returns y and
/// counts its values that differ from the host reference in `bad`.
template <class S>
std::vector<double> spmv(const char* name, const csr& a, const core::device_buffer<int>& row_ptr,
                         const core::device_buffer<int>& col, const core::device_buffer<float>& x,
                         const std::vector<float>& hx, int& bad) {
  const int n = static_cast<int>(a.row_ptr.size()) - 1, nnz = static_cast<int>(a.values.size());
  std::vector<double> decoded = a.values;  // what the accessor reads, decoded on the host
  typename frsz2::accessor<S>::data_handle_type handle;
  core::device_buffer<double> plain;
  core::device_buffer<std::uint32_t> payload;
  core::device_buffer<std::uint16_t> exponents;
  if constexpr (frsz2::format_like<S>) {
    const auto v = frsz2::encode<S>(std::span<const double>{a.values});
    decoded = frsz2::decode(v);
    payload = custom_kernels::upload(v.payload, nullptr);
    exponents = custom_kernels::upload(v.exponents, nullptr);
    handle = {payload.data(), exponents.data(), 0};
  } else {
    plain = custom_kernels::upload(a.values, nullptr);
    handle = plain.data();
  }
  core::device_buffer<double> y{static_cast<std::size_t>(n)};
  y.fill_bytes(0xA5, nullptr);  // poison: an unwritten value shows
  csr_spmv<<<core::div_ceil(n, 256), 256>>>(row_ptr.data(), col.data(), values_view<S>{handle, nnz},
                                            x_view{x.data(), n}, y_view{y.data(), n});
  SQUEEZE_CHECK_LAUNCH();
  std::vector<double> got(static_cast<std::size_t>(n));
  SQUEEZE_CUDA_TRY(cudaMemcpy(got.data(), y.data(), y.bytes(), cudaMemcpyDeviceToHost));

  // Within what two orders of rounding the row's sum may differ by.
  for (int i = 0; i < n; ++i) {
    double want = 0, abs_sum = 0;
    for (int k = a.row_ptr[i]; k < a.row_ptr[i + 1]; ++k) {
      want += decoded[k] * double{hx[a.col[k]]};
      abs_sum += std::abs(decoded[k] * double{hx[a.col[k]]});
    }
    const int terms = a.row_ptr[i + 1] - a.row_ptr[i];
    const double tolerance = 2.0 * (terms + 1) * std::numeric_limits<double>::epsilon() * abs_sum;
    custom_kernels::close_enough(got[i], want, tolerance, i, bad);
  }
  std::printf("%-8s %5.1f bits a value\n", name,
              frsz2::storage_traits<std::remove_const_t<S>>::bits_per_value);
  return got;
}

}  // namespace

int main() {
  return custom_kernels::run("custom_frsz2_spmv", [] {
    std::mt19937_64 rng{11};
    const int n = 100'000;
    const csr a = random_matrix(n, rng);
    std::vector<float> x(static_cast<std::size_t>(n));
    std::normal_distribution<float> normal{0.0f, 1.0f};
    for (auto& v : x) v = normal(rng);
    const auto row_ptr = custom_kernels::upload(a.row_ptr, nullptr);
    const auto col = custom_kernels::upload(a.col, nullptr);
    const auto dx = custom_kernels::upload(x, nullptr);

    int bad = 0;
    const auto y64 = spmv<const double>("float64", a, row_ptr, col, dx, x, bad);
    const auto y32 = spmv<frsz2::format<32>>("frsz2_32", a, row_ptr, col, dx, x, bad);
    const auto y16 = spmv<frsz2::format<16>>("frsz2_16", a, row_ptr, col, dx, x, bad);
    double e32 = 0, e16 = 0, scale = 0;
    for (int i = 0; i < n; ++i) {
      e32 = std::max(e32, std::abs(y32[i] - y64[i]));
      e16 = std::max(e16, std::abs(y16[i] - y64[i]));
      scale = std::max(scale, std::abs(y64[i]));
    }
    std::printf("max |y - y_float64| / max |y_float64|: frsz2_32 %.2e, frsz2_16 %.2e\n",
                e32 / scale, e16 / scale);
    return custom_kernels::verdict("custom_frsz2_spmv", bad, 3LL * n);
  });
}
