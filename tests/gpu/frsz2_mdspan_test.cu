// SPDX-License-Identifier: Apache-2.0
// frsz2::accessor as the AccessorPolicy of cuda::std::mdspan, in kernels written against
// mdspan alone: a dot product (and one of submdspans, which moves the handle by offset()),
// dense matrix-vector products over FRSZ2 matrices in layout_right and layout_left, and a
// CSR matrix-vector product, for four FRSZ2 formats, each checked against the same product
// of the values the host reference decoder gives for the same compressed words; writes
// through the plain accessors' proxy (in-place scaling in 1-D and 2-D, copies from proxy to
// proxy) checked bit for bit against the same accessor run on the host; and, at compile
// time, the AccessorPolicy requirements and the proxy's rule that only a temporary is
// assigned to.
#include <squeeze/core/bits.hpp>
#include <squeeze/core/buffer.hpp>
#include <squeeze/core/cuda_error.hpp>
#include <squeeze/frsz2/accessor.hpp>
#include <squeeze/frsz2/format.hpp>

#include <gtest/gtest.h>
#include <cuda/std/mdspan>

#include <cmath>
#include <concepts>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/gpu_test.hpp"

namespace frsz2 = squeeze::frsz2;
namespace core = squeeze::core;
namespace cstd = cuda::std;

// Named, not anonymous: SQUEEZE_KERNEL gives kernels hidden visibility, which needs
// external linkage.
namespace frsz2_mdspan_test {

using squeeze::test::download;
using squeeze::test::upload;

// ---- compile time: what cuda::std::mdspan asks of an accessor policy ------------------

/// The AccessorPolicy requirements of [mdspan.accessor.reqmts].
// (clang-format 14 mangles concept definitions)
// clang-format off
template <class A>
concept accessor_policy =
    std::copyable<A> && std::is_nothrow_move_constructible_v<A> &&
    std::is_nothrow_move_assignable_v<A> && std::is_nothrow_swappable_v<A> &&
    requires {
      typename A::element_type;
      typename A::reference;
      typename A::data_handle_type;
      typename A::offset_policy;
    } &&
    std::copyable<typename A::data_handle_type> &&
    std::is_nothrow_move_constructible_v<typename A::data_handle_type> &&
    std::is_nothrow_swappable_v<typename A::data_handle_type> &&
    std::common_reference_with<typename A::reference&&, typename A::element_type&> &&
    std::constructible_from<typename A::offset_policy, const A&> &&
    std::is_same_v<typename A::offset_policy::element_type, typename A::element_type> &&
    requires(const A a, const typename A::data_handle_type p, std::size_t i) {
      { a.access(p, i) } -> std::same_as<typename A::reference>;
      { a.offset(p, i) } -> std::same_as<typename A::offset_policy::data_handle_type>;
    };

/// `r = v` with r a named proxy (an lvalue): must not compile.
template <class R, class V>
concept assignable_when_named = requires(R& r, V v) { r = v; };
/// `f() = v` with f() returning the proxy (a prvalue, as access() and operator[] do).
template <class R, class V>
concept assignable_as_temporary = requires(R (&f)(), V v) { f() = v; };
/// The same for `*=`.
template <class R, class V>
concept scalable_when_named = requires(R& r, V v) { r *= v; };
template <class R, class V>
concept scalable_as_temporary = requires(R (&f)(), V v) { f() *= v; };
// clang-format on

static_assert(accessor_policy<frsz2::accessor<double, double>>);
static_assert(accessor_policy<frsz2::accessor<float, double>>);
static_assert(accessor_policy<frsz2::accessor<__half, float>>);
static_assert(accessor_policy<frsz2::accessor<__nv_bfloat16, float>>);
static_assert(accessor_policy<frsz2::accessor<const float, double>>);
static_assert(accessor_policy<frsz2::accessor<frsz2::format<16>, double>>);
static_assert(accessor_policy<frsz2::accessor<frsz2::format<21, double, 64>, float>>);
static_assert(accessor_policy<frsz2::accessor<frsz2::format<12, float>, double>>);

using float_proxy = frsz2::accessor<float, double>::reference;
// A temporary takes values, other proxies' values and compound assignments ...
static_assert(assignable_as_temporary<float_proxy, double>);
static_assert(assignable_as_temporary<float_proxy, const float_proxy&>);
static_assert(assignable_as_temporary<float_proxy, frsz2::accessor<__half, double>::reference&&>);
static_assert(scalable_as_temporary<float_proxy, double>);
// ... a named proxy takes none of them, and cannot be copied or moved.
static_assert(!assignable_when_named<float_proxy, double>);
static_assert(!assignable_when_named<float_proxy, const float_proxy&>);
static_assert(!assignable_when_named<float_proxy, float_proxy&&>);
static_assert(!scalable_when_named<float_proxy, double>);
static_assert(!std::is_copy_constructible_v<float_proxy> &&
              !std::is_move_constructible_v<float_proxy>);
// Reads of a named proxy still work.
static_assert(std::is_convertible_v<const float_proxy&, double>);
// Read-only accessors (const plain storage, FRSZ2) hand out values: nothing to assign to.
static_assert(!assignable_as_temporary<frsz2::accessor<const float, double>::reference, double>);
static_assert(!assignable_as_temporary<frsz2::accessor<frsz2::format<16>>::reference, double>);
// An mdspan over a writable accessor converts to the read-only one.
static_assert(
    std::is_convertible_v<cstd::mdspan<double, cstd::dextents<int, 1>, cstd::layout_right,
                                       frsz2::accessor<float, double>>,
                          cstd::mdspan<const double, cstd::dextents<int, 1>, cstd::layout_right,
                                       frsz2::accessor<const float, double>>>);

// ---- the kernels: written against mdspan, nothing else ---------------------------------

/// A rank-1 FRSZ2 vector read as double.
template <class F>
using frsz2_vector =
    cstd::mdspan<const double, cstd::dextents<int, 1>, cstd::layout_right, frsz2::accessor<F>>;
/// A rank-2 FRSZ2 matrix read as double, in any layout.
template <class F, class Layout>
using frsz2_matrix = cstd::mdspan<const double, cstd::dextents<int, 2>, Layout, frsz2::accessor<F>>;
/// A result vector written through the plain accessor's proxy.
using result_vector = cstd::mdspan<double, cstd::dextents<int, 1>, cstd::layout_right,
                                   frsz2::accessor<double, double>>;

constexpr int dot_threads = 256;

/// *out = x . y: one block, a block-stride loop, a reduction in shared memory.
template <class X, class Y>
SQUEEZE_KERNEL(dot_threads)
void dot_kernel(X x, Y y, double* out) {
  __shared__ double partial[dot_threads];
  double sum = 0;
  for (int i = static_cast<int>(threadIdx.x); i < x.extent(0); i += dot_threads) sum += x[i] * y[i];
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int half = dot_threads / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) *out = partial[0];
}

/// y = A x, one thread per row: A of any layout (element (i, j) is A[{i, j}]).
template <class A, class X, class Y>
SQUEEZE_KERNEL(128)
void gemv_kernel(A a, X x, Y y) {
  const int i = static_cast<int>(blockIdx.x * 128 + threadIdx.x);
  if (i >= a.extent(0)) return;
  double sum = 0;
  for (int j = 0; j < a.extent(1); ++j) sum += a[cstd::array{i, j}] * x[j];
  y[i] = sum;  // the proxy converts and stores
}

/// y = A x for A in CSR: row_ptr [rows + 1], col [nnz], values an mdspan of nnz values.
template <class Values, class X, class Y>
SQUEEZE_KERNEL(128)
void csr_kernel(const int* row_ptr, const int* col, Values values, X x, Y y) {
  const int i = static_cast<int>(blockIdx.x * 128 + threadIdx.x);
  if (i >= y.extent(0)) return;
  double sum = 0;
  for (int k = row_ptr[i]; k < row_ptr[i + 1]; ++k) sum += values[k] * x[col[k]];
  y[i] = sum;
}

/// v[i] *= alpha, in place through the proxy.
template <class V, class T>
SQUEEZE_KERNEL(256)
void scale_kernel(V v, T alpha) {
  const int i = static_cast<int>(blockIdx.x * 256 + threadIdx.x);
  if (i < v.extent(0)) v[i] *= alpha;
}

/// m(i, j) = alpha * m(i, j), through the proxy (a 2-D grid of 16 x 16 blocks). (One
/// multiplication and no addition, so no contraction to an FMA can make the GPU's result
/// differ from the host's.)
template <class M, class T>
SQUEEZE_KERNEL(256)
void scale_matrix_kernel(M m, T alpha) {
  const int i = static_cast<int>(blockIdx.y * 16 + threadIdx.y);
  const int j = static_cast<int>(blockIdx.x * 16 + threadIdx.x);
  if (i < m.extent(0) && j < m.extent(1)) m[cstd::array{i, j}] = alpha * m[cstd::array{i, j}];
}

/// dst[i] = src[i]: proxy to proxy.
template <class D, class S>
SQUEEZE_KERNEL(256)
void copy_kernel(D dst, S src) {
  const int i = static_cast<int>(blockIdx.x * 256 + threadIdx.x);
  if (i < dst.extent(0)) dst[i] = src[i];
}

// ---- host side ---------------------------------------------------------------------------

/// n values of T: normal, a scale that changes every 32 values over 2^-6 .. 2^6, never zero.
template <class T>
std::vector<T> random_values(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng{seed};
  std::normal_distribution<double> normal{0.0, 1.0};
  std::vector<T> x(n);
  int scale = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (i % 32 == 0) scale = static_cast<int>(rng() % 13) - 6;
    double v = std::ldexp(normal(rng), scale);
    if (v == 0.0) v = 1.0;
    x[i] = static_cast<T>(v);
  }
  return x;
}

/// An FRSZ2 vector encoded on the host (reference encoder), its words in device memory, and
/// the values the host reference decoder reads from the same words.
template <class F>
struct compressed {
  frsz2::host_vector<F> host;
  core::device_buffer<std::uint32_t> payload;
  core::device_buffer<std::uint16_t> exponents;
  std::vector<double> decoded;

  explicit compressed(const std::vector<typename F::float_type>& x)
      : host{frsz2::encode<F>(std::span<const typename F::float_type>{x})},
        payload{upload(host.payload)},
        exponents{upload(host.exponents)} {
    for (const auto v : frsz2::decode(host)) decoded.push_back(static_cast<double>(v));
  }
  [[nodiscard]] frsz2::compressed_handle<F> handle() const {
    return {payload.data(), exponents.data(), 0};
  }
};

/// Device memory for n doubles, poisoned.
inline core::device_buffer<double> poisoned(std::size_t n) {
  core::device_buffer<double> d{n};
  d.fill_bytes(static_cast<int>(squeeze::test::poison), nullptr);
  SQUEEZE_CUDA_TRY(cudaDeviceSynchronize());
  return d;
}

/// |got - want| within what two orders of summing `terms` products, each within
/// (terms + 1) ulps of sum |product| (abs_sum), may differ by.
inline void expect_close(double got, double want, double abs_sum, int terms,
                         const std::string& what) {
  const double bound = 2.0 * (terms + 1) * std::numeric_limits<double>::epsilon() * abs_sum;
  EXPECT_LE(std::abs(got - want), bound) << what << ": got " << got << ", want " << want;
}

struct format_names {
  template <class F>
  static std::string GetName(int) {
    return std::string{frsz2::storage_traits<F>::name()} +
           (std::is_same_v<typename F::float_type, float> ? "_fp32" : "_fp64") + "_bs" +
           std::to_string(F::block_size);
  }
};

template <class F>
class Frsz2MdspanTest : public ::testing::Test {
 protected:
  void SetUp() override { SQUEEZE_REQUIRE_GPU(); }
};

using formats = ::testing::Types<frsz2::format<16>, frsz2::format<32>,
                                 frsz2::format<21, double, 64>, frsz2::format<12, float>>;

}  // namespace frsz2_mdspan_test

using namespace frsz2_mdspan_test;

TYPED_TEST_SUITE(Frsz2MdspanTest, formats, format_names);

TYPED_TEST(Frsz2MdspanTest, DotProductOfTwoVectorsAndOfSubspans) {
  using F = TypeParam;
  using T = typename F::float_type;
  const int n = 5000 + 7;
  const compressed<F> x{random_values<T>(n, 1)};
  const compressed<F> y{random_values<T>(n, 2)};
  const frsz2_vector<F> dx{x.handle(), n};
  const frsz2_vector<F> dy{y.handle(), n};
  // x[17 .. n) . y[0 .. n - 17): submdspan moves x's handle by accessor::offset.
  const int skip = 17;
  const auto sx = cstd::submdspan(dx, cstd::pair{skip, n});
  const auto sy = cstd::submdspan(dy, cstd::pair{0, n - skip});
  ASSERT_EQ(sx.data_handle().first, std::size_t{skip});

  auto out = poisoned(2);
  dot_kernel<<<1, dot_threads>>>(dx, dy, out.data());
  SQUEEZE_CHECK_LAUNCH();
  dot_kernel<<<1, dot_threads>>>(sx, sy, out.data() + 1);
  SQUEEZE_CHECK_LAUNCH();
  const auto got = download(out, 2);

  for (const int s : {0, skip}) {
    double want = 0, abs_sum = 0;
    for (int i = 0; i + s < n; ++i) {
      const double p = x.decoded[i + s] * y.decoded[i];
      want += p;
      abs_sum += std::abs(p);
    }
    expect_close(got[s == 0 ? 0 : 1], want, abs_sum, n, "dot from " + std::to_string(s));
  }
}

TYPED_TEST(Frsz2MdspanTest, DenseMatrixVectorInBothLayouts) {
  using F = TypeParam;
  using T = typename F::float_type;
  const int rows = 97, cols = 75;  // blocks of values span rows (and columns)
  const auto values = random_values<T>(std::size_t{rows} * cols, 3);
  const compressed<F> x{random_values<T>(cols, 4)};
  const frsz2_vector<F> dx{x.handle(), cols};
  // The same values stored row by row (layout_right) and column by column (layout_left):
  // element (i, j) is values[i * cols + j] in both.
  std::vector<T> by_columns(values.size());
  for (int i = 0; i < rows; ++i) {
    for (int j = 0; j < cols; ++j) by_columns[j * rows + i] = values[i * cols + j];
  }
  const compressed<F> right{values};
  const compressed<F> left{by_columns};
  const frsz2_matrix<F, cstd::layout_right> a_right{right.handle(), rows, cols};
  const frsz2_matrix<F, cstd::layout_left> a_left{left.handle(), rows, cols};

  for (const bool row_major : {true, false}) {
    SCOPED_TRACE(row_major ? "layout_right" : "layout_left");
    auto y = poisoned(rows);
    const result_vector dy{y.data(), rows};
    if (row_major)
      gemv_kernel<<<core::div_ceil(rows, 128), 128>>>(a_right, dx, dy);
    else
      gemv_kernel<<<core::div_ceil(rows, 128), 128>>>(a_left, dx, dy);
    SQUEEZE_CHECK_LAUNCH();
    const auto got = download(y, rows);
    for (int i = 0; i < rows; ++i) {
      double want = 0, abs_sum = 0;
      for (int j = 0; j < cols; ++j) {
        const double a = row_major ? right.decoded[i * cols + j] : left.decoded[j * rows + i];
        want += a * x.decoded[j];
        abs_sum += std::abs(a * x.decoded[j]);
      }
      expect_close(got[i], want, abs_sum, cols, "row " + std::to_string(i));
    }
  }
}

TYPED_TEST(Frsz2MdspanTest, CsrMatrixVector) {
  using F = TypeParam;
  using T = typename F::float_type;
  const int rows = 600, cols = 450;
  std::mt19937_64 rng{5};
  std::vector<int> row_ptr{0}, col;
  for (int i = 0; i < rows; ++i) {
    const int count = 1 + static_cast<int>(rng() % 12);
    for (int k = 0; k < count; ++k) col.push_back(static_cast<int>(rng() % cols));
    row_ptr.push_back(static_cast<int>(col.size()));
  }
  const int nnz = row_ptr.back();
  const compressed<F> values{random_values<T>(nnz, 6)};
  const compressed<F> x{random_values<T>(cols, 7)};
  const auto d_row_ptr = upload(row_ptr);
  const auto d_col = upload(col);
  auto y = poisoned(rows);

  csr_kernel<<<core::div_ceil(rows, 128), 128>>>(
      d_row_ptr.data(), d_col.data(), frsz2_vector<F>{values.handle(), nnz},
      frsz2_vector<F>{x.handle(), cols}, result_vector{y.data(), rows});
  SQUEEZE_CHECK_LAUNCH();
  const auto got = download(y, rows);
  for (int i = 0; i < rows; ++i) {
    double want = 0, abs_sum = 0;
    for (int k = row_ptr[i]; k < row_ptr[i + 1]; ++k) {
      want += values.decoded[k] * x.decoded[col[k]];
      abs_sum += std::abs(values.decoded[k] * x.decoded[col[k]]);
    }
    expect_close(got[i], want, abs_sum, row_ptr[i + 1] - row_ptr[i], "row " + std::to_string(i));
  }
}

// A dense product with a plain float vector read through the read-only accessor.
TEST(Frsz2Mdspan, ReadOnlyPlainVectorInAProduct) {
  SQUEEZE_REQUIRE_GPU();
  using F = frsz2::format<16>;
  const int rows = 64, cols = 300;
  const compressed<F> a{random_values<double>(std::size_t{rows} * cols, 8)};
  const auto x = random_values<float>(cols, 9);
  const auto dx = upload(x);
  auto y = poisoned(rows);
  using read_only = cstd::mdspan<const double, cstd::dextents<int, 1>, cstd::layout_right,
                                 frsz2::accessor<const float, double>>;
  gemv_kernel<<<1, 128>>>(frsz2_matrix<F, cstd::layout_right>{a.handle(), rows, cols},
                          read_only{dx.data(), cols}, result_vector{y.data(), rows});
  SQUEEZE_CHECK_LAUNCH();
  const auto got = download(y, rows);
  for (int i = 0; i < rows; ++i) {
    double want = 0, abs_sum = 0;
    for (int j = 0; j < cols; ++j) {
      want += a.decoded[i * cols + j] * double{x[j]};
      abs_sum += std::abs(a.decoded[i * cols + j] * double{x[j]});
    }
    expect_close(got[i], want, abs_sum, cols, "row " + std::to_string(i));
  }
}

// ---- writes through the plain proxy --------------------------------------------------------

namespace frsz2_mdspan_test {

template <class S, class A>
struct storage_pair {
  using storage = S;
  using arithmetic = A;
};

struct pair_names {
  template <class P>
  static std::string GetName(int) {
    return std::string{frsz2::storage_traits<typename P::storage>::name()} + "_as_" +
           (std::is_same_v<typename P::arithmetic, double> ? "double" : "float");
  }
};

template <class P>
class PlainProxyWriteTest : public ::testing::Test {
 protected:
  void SetUp() override { SQUEEZE_REQUIRE_GPU(); }
};

using storage_pairs =
    ::testing::Types<storage_pair<double, double>, storage_pair<float, double>,
                     storage_pair<__half, float>, storage_pair<__nv_bfloat16, float>>;

/// n random values of storage S (converted from A), never zero.
template <class S, class A>
std::vector<S> random_storage(std::size_t n, std::uint64_t seed) {
  std::vector<S> v(n);
  const frsz2::accessor<S, A> acc;
  const auto x = random_values<double>(n, seed);
  for (std::size_t i = 0; i < n; ++i) {
    acc.access(v.data(), i) = static_cast<A>(x[i]);
    if (acc.load(v.data(), i) == A{0}) acc.access(v.data(), i) = A{1};  // underflowed
  }
  return v;
}

/// The first index where two arrays of S hold different bytes, or -1.
template <class S>
long long first_difference(const std::vector<S>& a, const std::vector<S>& b) {
  const long long byte = squeeze::test::first_mismatch(reinterpret_cast<const std::byte*>(a.data()),
                                                       reinterpret_cast<const std::byte*>(b.data()),
                                                       a.size() * sizeof(S));
  return byte < 0 ? -1 : byte / static_cast<long long>(sizeof(S));
}

}  // namespace frsz2_mdspan_test

TYPED_TEST_SUITE(PlainProxyWriteTest, storage_pairs, pair_names);

// The same writes on the GPU and on the host (the same accessor, SQUEEZE_HOST_DEVICE) give
// the same bits.
TYPED_TEST(PlainProxyWriteTest, ScaleInPlaceAndCopyMatchTheHost) {
  using S = typename TypeParam::storage;
  using A = typename TypeParam::arithmetic;
  using acc = frsz2::accessor<S, A>;
  using vector = cstd::mdspan<A, cstd::dextents<int, 1>, cstd::layout_right, acc>;
  using matrix = cstd::mdspan<A, cstd::dextents<int, 2>, cstd::layout_left, acc>;
  const A alpha = static_cast<A>(-0.3125 * 3.1);  // not a power of two: the result rounds

  // 1-D: v[i] *= alpha.
  const int n = 3000 + 5;
  auto v = random_storage<S, A>(n, 10);
  auto dv = upload(v);
  scale_kernel<<<core::div_ceil(n, 256), 256>>>(vector{dv.data(), n}, alpha);
  SQUEEZE_CHECK_LAUNCH();
  const vector hv{v.data(), n};
  for (int i = 0; i < n; ++i) hv[i] *= alpha;
  const long long bad = first_difference(download(dv, n), v);
  EXPECT_EQ(bad, -1) << "scaled value " << bad;

  // 2-D, column by column (layout_left): m(i, j) = alpha * m(i, j).
  const int rows = 45, cols = 70;
  auto m = random_storage<S, A>(std::size_t{rows} * cols, 11);
  auto dm = upload(m);
  const dim3 grid{static_cast<unsigned>(core::div_ceil(cols, 16)),
                  static_cast<unsigned>(core::div_ceil(rows, 16))};
  scale_matrix_kernel<<<grid, dim3{16, 16}>>>(matrix{dm.data(), rows, cols}, alpha);
  SQUEEZE_CHECK_LAUNCH();
  const matrix hm{m.data(), rows, cols};
  for (int i = 0; i < rows; ++i) {
    for (int j = 0; j < cols; ++j) hm[cstd::array{i, j}] = alpha * hm[cstd::array{i, j}];
  }
  const long long bad_m = first_difference(download(dm, m.size()), m);
  EXPECT_EQ(bad_m, -1) << "matrix value " << bad_m << " (row " << bad_m % rows << ", column "
                       << bad_m / rows << ")";

  // Proxy to proxy: dst[i] = src[i] into a poisoned destination copies the values exactly
  // (Storage -> Arithmetic -> Storage is exact).
  const auto src = random_storage<S, A>(n, 12);
  auto dsrc = upload(src);
  core::device_buffer<S> ddst{static_cast<std::size_t>(n)};
  ddst.fill_bytes(static_cast<int>(squeeze::test::poison), nullptr);
  SQUEEZE_CUDA_TRY(cudaDeviceSynchronize());
  copy_kernel<<<core::div_ceil(n, 256), 256>>>(vector{ddst.data(), n}, vector{dsrc.data(), n});
  SQUEEZE_CHECK_LAUNCH();
  const long long bad_copy = first_difference(download(ddst, n), src);
  EXPECT_EQ(bad_copy, -1) << "copied value " << bad_copy;
}

// The proxy's operations on the host (no GPU needed): compound assignments return the value
// stored, a read-only view converts from the writable one.
TEST(Frsz2Mdspan, ProxyOperationsOnTheHost) {
  std::vector<float> f{1.5f, -2.0f, 3.0f, 0.1f};
  using acc = frsz2::accessor<float, double>;
  const cstd::mdspan<double, cstd::dextents<int, 1>, cstd::layout_right, acc> m{f.data(), 4};
  EXPECT_EQ(m[0] += 1.0, 2.5);
  EXPECT_EQ(m[1] *= 0.5, -1.0);
  EXPECT_EQ(m[2] -= 4.0, -1.0);
  EXPECT_EQ(m[3] = 0.1, static_cast<double>(0.1f));  // the value stored, rounded to float
  EXPECT_EQ(m[0] = m[1], -1.0);
  EXPECT_EQ(m[2] /= 4.0, -0.25);
  EXPECT_EQ(f, (std::vector<float>{-1.0f, -1.0f, -0.25f, 0.1f}));
  const cstd::mdspan<const double, cstd::dextents<int, 1>, cstd::layout_right,
                     frsz2::accessor<const float, double>>
      read_only = m;
  EXPECT_EQ(read_only[2], -0.25);
  EXPECT_EQ(read_only.data_handle(), f.data());
}
