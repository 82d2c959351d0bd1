// SPDX-License-Identifier: Apache-2.0
// accessor_gmres: restarted GMRES(m) written the ordinary way (cuSPARSE for A v, cuBLAS over
// raw device pointers for the rest), then the same solver with its Krylov basis stored through
// squeeze::frsz2::accessor in a cuda::std::mdspan. The change is a few lines: the basis type
// (cublas_basis -> mdspan_basis<Storage>) and the three calls that touch the basis. README.md
// shows the diff.
//
//   ordinary          V: n x (m + 1) doubles, column-major (leading dimension ld)
//                     h = V^T w     cublasDgemv (CUBLAS_OP_T)
//                     w -= V h      cublasDgemv (CUBLAS_OP_N), and x += V y at each restart
//   compressed basis  V: frsz2::array<Storage>, the same layout, read as
//                     mdspan<const double, dextents<int64_t, 2>, layout_stride,
//                            frsz2::accessor<Storage>>
//                     h = V^T w, w -= V h, x += V y: two kernels written against mdspan alone,
//                     the same for every Storage (float64, frsz2::format<32>, <21>, <16>)
//
// Arithmetic is fp64 everywhere: only the stored basis vectors are rounded (the CB-GMRES of
// Aliaga et al. and Grützmacher et al.). The Arnoldi step is classical Gram-Schmidt; the
// small least-squares problem is solved on the host with Givens rotations.
//
//   accessor_gmres [matrix.mtx] [--sizes LIST] [--restart M] [--tol T] [--max-iters K]
//                  [--repeats R] [--json FILE]
//
// Exit status: 0 when float64 (both ways) and frsz2_32 reached the tolerance on every matrix;
// 1 when one did not; 2 on an error (a failed CUDA, cuBLAS or cuSPARSE call, a bad argument);
// 77 without a usable GPU (nothing ran; common/gpu.hpp).
#include <squeeze/core/buffer.hpp>
#include <squeeze/core/cuda_error.hpp>
#include <squeeze/core/device.hpp>
#include <squeeze/core/error.hpp>
#include <squeeze/core/launch.hpp>
#include <squeeze/core/timer.hpp>
#include <squeeze/frsz2/accessor.hpp>
#include <squeeze/frsz2/array.cuh>
#include <squeeze/frsz2/format.hpp>
#include <squeeze/io/csr.hpp>
#include <squeeze/io/matrix_market.hpp>
#include <squeeze/io/stencil.hpp>

#include <cublas_v2.h>
#include <cusparse.h>

#include <cuda/std/array>
#include <cuda/std/mdspan>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/cli.hpp"
#include "common/gpu.hpp"
#include "common/json.hpp"
#include "common/manufactured.hpp"

namespace core = squeeze::core;
namespace frsz2 = squeeze::frsz2;
namespace io = squeeze::io;
namespace cstd = cuda::std;

namespace {

constexpr const char* usage =
    "usage: accessor_gmres [matrix.mtx] [--sizes LIST] [--restart M] [--tol T] [--max-iters K]\n"
    "                      [--repeats R] [--json FILE]\n"
    "  matrix.mtx     also solve this square Matrix Market matrix (then --sizes defaults to none)\n"
    "  --sizes LIST   grid sides N of 3D convection-diffusion matrices (N^3 rows),\n"
    "                 comma-separated, or none (default 32,64,128)\n"
    "  --restart M    Krylov vectors per cycle (default 100)\n"
    "  --tol T        target relative residual ||b - A x|| / ||b|| (default 1e-10)\n"
    "  --max-iters K  iteration cap per solve (default 20000)\n"
    "  --repeats R    timed solves per variant after one warm-up; the median is reported\n"
    "                 (default 3)\n"
    "  --json FILE    also write the results as JSON\n"
    "exit status: 0 ok; 1 float64 or frsz2_32 missed the tolerance; 2 error; 77 no GPU\n";

constexpr int exit_not_converged = 1;
constexpr int exit_error = 2;

// ---- error checks for cuBLAS and cuSPARSE (SQUEEZE_CUDA_TRY covers the runtime) -------------

void check(cublasStatus_t status, const char* call, const squeeze::source_location& where) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  throw squeeze::error{std::string{call} + " failed: " + cublasGetStatusName(status) + " (" +
                           cublasGetStatusString(status) + ")",
                       where};
}
void check(cusparseStatus_t status, const char* call, const squeeze::source_location& where) {
  if (status == CUSPARSE_STATUS_SUCCESS) return;
  throw squeeze::error{std::string{call} + " failed: " + cusparseGetErrorName(status) + " (" +
                           cusparseGetErrorString(status) + ")",
                       where};
}
#define CUBLAS_TRY(call) check((call), #call, ::squeeze::source_location::current())
#define CUSPARSE_TRY(call) check((call), #call, ::squeeze::source_location::current())

/// The stream every call is ordered on, and the cuBLAS and cuSPARSE handles bound to it.
class context {
 public:
  context() {
    CUBLAS_TRY(cublasCreate(&blas_));
    CUBLAS_TRY(cublasSetStream(blas_, stream_));
    CUSPARSE_TRY(cusparseCreate(&sparse_));
    CUSPARSE_TRY(cusparseSetStream(sparse_, stream_));
  }
  context(const context&) = delete;
  context& operator=(const context&) = delete;
  ~context() {
    if (sparse_ != nullptr) static_cast<void>(cusparseDestroy(sparse_));
    if (blas_ != nullptr) static_cast<void>(cublasDestroy(blas_));
  }
  [[nodiscard]] cudaStream_t stream() const noexcept { return stream_; }
  [[nodiscard]] cublasHandle_t blas() const noexcept { return blas_; }
  [[nodiscard]] cusparseHandle_t sparse() const noexcept { return sparse_; }

  /// ||x|| (blocks until it is known: cuBLAS's host pointer mode).
  double norm(int n, const double* x) const {
    double result = 0;
    CUBLAS_TRY(cublasDnrm2(blas_, n, x, 1, &result));
    return result;
  }
  /// x *= alpha.
  void scale(int n, double alpha, double* x) const {
    CUBLAS_TRY(cublasDscal(blas_, n, &alpha, x, 1));
  }

 private:
  core::stream stream_;
  cublasHandle_t blas_ = nullptr;
  cusparseHandle_t sparse_ = nullptr;
};

/// A CSR matrix in GPU memory, multiplied by cuSPARSE: y = alpha A x + beta y.
class sparse_matrix {
 public:
  sparse_matrix(const io::csr_matrix<double, std::int32_t>& a, const context& ctx)
      : rows_{static_cast<int>(a.rows)},
        row_ptr_{a.row_ptr.size(), ctx.stream()},
        col_{std::max<std::size_t>(a.col_idx.size(), 1), ctx.stream()},
        values_{std::max<std::size_t>(a.values.size(), 1), ctx.stream()},
        x_buffer_{static_cast<std::size_t>(rows_), ctx.stream()},
        ctx_{ctx} {
    row_ptr_.copy_from(std::span<const std::int32_t>{a.row_ptr}, ctx.stream());
    col_.copy_from(std::span<const std::int32_t>{a.col_idx}, ctx.stream());
    values_.copy_from(std::span<const double>{a.values}, ctx.stream());
    CUSPARSE_TRY(cusparseCreateCsr(&a_, a.rows, a.cols, a.nnz(), row_ptr_.data(), col_.data(),
                                   values_.data(), CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I,
                                   CUSPARSE_INDEX_BASE_ZERO, CUDA_R_64F));
    CUSPARSE_TRY(cusparseCreateDnVec(&x_, a.cols, x_buffer_.data(), CUDA_R_64F));
    CUSPARSE_TRY(cusparseCreateDnVec(&y_, a.rows, x_buffer_.data(), CUDA_R_64F));
    const double one = 1;
    std::size_t bytes = 0;
    CUSPARSE_TRY(cusparseSpMV_bufferSize(ctx.sparse(), CUSPARSE_OPERATION_NON_TRANSPOSE, &one, a_,
                                         x_, &one, y_, CUDA_R_64F, CUSPARSE_SPMV_ALG_DEFAULT,
                                         &bytes));
    workspace_ = core::device_buffer<std::byte>{std::max<std::size_t>(bytes, 1), ctx.stream()};
  }
  sparse_matrix(const sparse_matrix&) = delete;
  sparse_matrix& operator=(const sparse_matrix&) = delete;
  ~sparse_matrix() {
    if (y_ != nullptr) static_cast<void>(cusparseDestroyDnVec(y_));
    if (x_ != nullptr) static_cast<void>(cusparseDestroyDnVec(x_));
    if (a_ != nullptr) static_cast<void>(cusparseDestroySpMat(a_));
  }

  [[nodiscard]] int rows() const noexcept { return rows_; }

  /// y = alpha A x + beta y, in fp64.
  void multiply(double alpha, const double* x, double beta, double* y) const {
    CUSPARSE_TRY(cusparseDnVecSetValues(x_, const_cast<double*>(x)));
    CUSPARSE_TRY(cusparseDnVecSetValues(y_, y));
    CUSPARSE_TRY(cusparseSpMV(ctx_.sparse(), CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha, a_, x_,
                              &beta, y_, CUDA_R_64F, CUSPARSE_SPMV_ALG_DEFAULT, workspace_.data()));
  }

 private:
  int rows_;
  core::device_buffer<std::int32_t> row_ptr_, col_;
  core::device_buffer<double> values_;
  core::device_buffer<double> x_buffer_;  // where the vector descriptors point until first use
  core::device_buffer<std::byte> workspace_;
  const context& ctx_;
  cusparseSpMatDescr_t a_ = nullptr;
  cusparseDnVecDescr_t x_ = nullptr, y_ = nullptr;
};

/// Rows of the basis in memory: n rounded up to FRSZ2's 32-value blocks, so that every column
/// starts a block (frsz2::array::store writes whole blocks) and is 256-byte aligned as float64.
int leading_dimension(int n) {
  return (n + 31) / 32 * 32;
}

// ---- the kernels of the compressed basis: written against mdspan alone ------------------------

using index = std::int64_t;
constexpr int threads = 256;

/// The sum of `v` over the block's threads (in thread 0).
__device__ double block_sum(double v) {
  __shared__ double warp_sums[threads / 32];
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = v;
  __syncthreads();
  v = 0;
  if (threadIdx.x < 32) {
    v = threadIdx.x < threads / 32 ? warp_sums[threadIdx.x] : 0.0;
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
  }
  return v;
}

/// partial[c][s] = the sum of V(i, c) w[i] over the rows i of stripe s: block (c, s) of a grid
/// of V.extent(1) x stripes blocks. Blocks run columns first, so the k blocks that read one
/// stripe of w run close together and find it in L2.
template <class Basis>
__global__ void __launch_bounds__(threads)
    column_dots_kernel(Basis v, const double* w, double* partial) {
  const index c = blockIdx.x;
  double sum = 0;
  for (index i = index{blockIdx.y} * threads + threadIdx.x; i < v.extent(0);
       i += index{gridDim.y} * threads) {
    sum += v[cstd::array{i, c}] * w[i];
  }
  sum = block_sum(sum);
  if (threadIdx.x == 0) partial[c * gridDim.y + blockIdx.y] = sum;
}

/// h[c] = the sum of partial[c][0 .. stripes), a warp per column, always in the same order
/// (so a solve gives the same bits every time).
__global__ void __launch_bounds__(32)
    sum_stripes_kernel(const double* partial, int stripes, double* h) {
  double sum = 0;
  for (int s = static_cast<int>(threadIdx.x); s < stripes; s += 32) {
    sum += partial[blockIdx.x * stripes + s];
  }
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_down_sync(0xffffffffu, sum, offset);
  if (threadIdx.x == 0) h[blockIdx.x] = sum;
}

/// w[i] += alpha * sum over c of V(i, c) y[c], a thread per row.
template <class Basis>
__global__ void __launch_bounds__(threads)
    add_columns_kernel(Basis v, double alpha, const double* y, double* w) {
  for (index i = index{blockIdx.x} * threads + threadIdx.x; i < v.extent(0);
       i += index{gridDim.x} * threads) {
    double sum = 0;
    for (index c = 0; c < v.extent(1); ++c) sum += v[cstd::array{i, c}] * y[c];
    w[i] += alpha * sum;
  }
}

/// h = V^T w for V any rank-2 mdspan of doubles of at most `rows` x `columns`; owns the
/// partial sums its first kernel leaves for the second ([columns][stripes] doubles).
class column_dots {
 public:
  column_dots(int rows, int columns, cudaStream_t stream)
      : stripes_{core::grid_for(static_cast<std::size_t>(rows), threads * 8, core::per_sm(2))},
        partial_{std::size_t{stripes_} * static_cast<std::size_t>(columns), stream} {}

  template <class Basis>
  void operator()(Basis v, const double* w, double* h, cudaStream_t stream) const {
    const auto k = static_cast<unsigned>(v.extent(1));
    column_dots_kernel<<<dim3{k, stripes_}, threads, 0, stream>>>(v, w, partial_.data());
    SQUEEZE_CHECK_LAUNCH();
    sum_stripes_kernel<<<k, 32, 0, stream>>>(partial_.data(), static_cast<int>(stripes_), h);
    SQUEEZE_CHECK_LAUNCH();
  }

 private:
  unsigned stripes_;  // blocks along the rows
  core::device_buffer<double> partial_;
};

/// w += alpha V y (V: any rank-2 mdspan of doubles).
template <class Basis>
void add_columns(Basis v, double alpha, const double* y, double* w, cudaStream_t stream) {
  const unsigned blocks =
      core::grid_for(static_cast<std::size_t>(v.extent(0)), threads, core::per_sm(8));
  add_columns_kernel<<<blocks, threads, 0, stream>>>(v, alpha, y, w);
  SQUEEZE_CHECK_LAUNCH();
}

// ---- the two bases: the diff in README.md is between these two classes ----------------------
//
// A basis holds the m + 1 Krylov vectors and does what GMRES asks of them:
//   store(j, v)             V(:, j) = v                          (v: n doubles on the GPU)
//   project(k, w, h)        h = V(:, 0:k)^T w                    (h: k doubles on the GPU)
//   add(k, alpha, y, w)     w += alpha V(:, 0:k) y

/// The ordinary basis: n x (m + 1) doubles, column-major, products by cuBLAS.
class cublas_basis {
 public:
  static constexpr double bits_per_value = 64;

  cublas_basis(int n, int m, const context& ctx)
      : n_{n},
        ld_{leading_dimension(n)},
        ctx_{ctx},
        v_{static_cast<std::size_t>(ld_) * (m + 1), ctx.stream()} {}

  void store(int j, const double* v) {
    SQUEEZE_CUDA_TRY(cudaMemcpyAsync(v_.data() + std::size_t(j) * ld_, v, n_ * sizeof(double),
                                     cudaMemcpyDeviceToDevice, ctx_.stream()));
  }
  void project(int k, const double* w, double* h) {
    const double one = 1, zero = 0;
    CUBLAS_TRY(
        cublasDgemv(ctx_.blas(), CUBLAS_OP_T, n_, k, &one, v_.data(), ld_, w, 1, &zero, h, 1));
  }
  void add(int k, double alpha, const double* y, double* w) {
    const double one = 1;
    CUBLAS_TRY(
        cublasDgemv(ctx_.blas(), CUBLAS_OP_N, n_, k, &alpha, v_.data(), ld_, y, 1, &one, w, 1));
  }
  [[nodiscard]] std::size_t bytes() const noexcept { return v_.bytes(); }

 private:
  int n_, ld_;
  const context& ctx_;
  core::device_buffer<double> v_;  // [m + 1][ld]: column j at j * ld
};

/// What a basis of Storage is read through: frsz2::accessor of the storage (const for a plain
/// type: the kernels only read; the columns are written by frsz2::array::store).
template <class Storage>
using basis_accessor =
    frsz2::accessor<std::conditional_t<frsz2::format_like<Storage>, Storage, const Storage>>;
template <class Storage>
using basis_view = cstd::mdspan<const double, cstd::dextents<index, 2>, cstd::layout_stride,
                                basis_accessor<Storage>>;

/// The same basis in any storage frsz2::array holds, read through mdspan.
template <class Storage>  // double, frsz2::format<32>, frsz2::format<21>, frsz2::format<16>
class mdspan_basis {
 public:
  static constexpr double bits_per_value = frsz2::storage_traits<Storage>::bits_per_value;

  mdspan_basis(int n, int m, const context& ctx)
      : n_{n},
        ld_{leading_dimension(n)},
        ctx_{ctx},
        v_{static_cast<std::size_t>(ld_) * (m + 1), ctx.stream()},
        dots_{n, m + 1, ctx.stream()} {}

  void store(int j, const double* v) { v_.store(std::size_t(j) * ld_, v, n_, ctx_.stream()); }
  void project(int k, const double* w, double* h) { dots_(columns(k), w, h, ctx_.stream()); }
  void add(int k, double alpha, const double* y, double* w) {
    add_columns(columns(k), alpha, y, w, ctx_.stream());
  }
  [[nodiscard]] std::size_t bytes() const noexcept { return v_.bytes(); }

 private:
  /// V(:, 0:k) as an mdspan: n x k, column j at j * ld.
  [[nodiscard]] basis_view<Storage> columns(int k) const {
    const cstd::dextents<index, 2> shape{n_, k};
    return {v_.data_handle(), {shape, cstd::array<index, 2>{1, ld_}}};
  }

  int n_, ld_;
  const context& ctx_;
  frsz2::array<Storage> v_;  // [m + 1][ld]: column j at j * ld, in Storage
  column_dots dots_;         // h = V^T w, with its partial sums
};

// ---- GMRES(m): the same code for every basis ---------------------------------------------------

using squeeze_examples::solver_options;

struct solve_result {
  int iterations = 0;
  int restarts = 0;
  bool converged = false;
  double relative_residual = 0;  ///< ||b - A x|| / ||b||, computed in fp64 (cuSPARSE, cuBLAS)
};

/// What one matrix's solves share: A, b, x and the vectors GMRES works in, on the GPU.
struct problem {
  std::string name;
  std::int64_t nnz;
  const context& ctx;
  sparse_matrix a;
  int n;
  core::device_buffer<double> b, x, v, w, h, y;
  core::pinned_buffer<double> h_host, y_host;  // the Hessenberg column, the update's weights

  problem(std::string name_, const io::csr_matrix<double, std::int32_t>& matrix,
          const std::vector<double>& rhs, int restart, const context& c)
      : name{std::move(name_)},
        nnz{matrix.nnz()},
        ctx{c},
        a{matrix, c},
        n{a.rows()},
        b{rhs.size(), c.stream()},
        x{rhs.size(), c.stream()},
        v{rhs.size(), c.stream()},
        w{rhs.size(), c.stream()},
        h{static_cast<std::size_t>(restart) + 1, c.stream()},
        y{static_cast<std::size_t>(restart), c.stream()},
        h_host{static_cast<std::size_t>(restart) + 2},
        y_host{static_cast<std::size_t>(restart)} {
    b.copy_from(std::span<const double>{rhs}, c.stream());
  }
};

/// Solves A x = b from the x given, restarting every opt.restart iterations, until the true
/// relative residual ||b - A x|| / ||b|| reaches opt.tolerance or opt.max_iterations pass.
template <class Basis>
solve_result gmres(problem& p, Basis& basis, const solver_options& opt) {
  const context& ctx = p.ctx;
  const cudaStream_t stream = ctx.stream();
  const int n = p.n, m = opt.restart;
  const double b_norm = ctx.norm(n, p.b.data());
  double* v = p.v.data();  // the newest basis vector, unrounded (A v is computed from it)
  double* w = p.w.data();
  std::vector<double> r(static_cast<std::size_t>(m + 1) * m);  // the rotated Hessenberg matrix
  std::vector<double> g(m + 1), cs(m), sn(m);                  // rotated ||r|| e1, the rotations
  solve_result out;
  for (int cycle = 0;; ++cycle) {
    // r = b - A x, its norm, and the first basis vector r / ||r||.
    SQUEEZE_CUDA_TRY(
        cudaMemcpyAsync(w, p.b.data(), n * sizeof(double), cudaMemcpyDeviceToDevice, stream));
    p.a.multiply(-1.0, p.x.data(), 1.0, w);
    const double beta = ctx.norm(n, w);
    out.relative_residual = b_norm > 0 ? beta / b_norm : beta;
    out.converged = out.relative_residual <= opt.tolerance;
    if (out.converged || out.iterations >= opt.max_iterations) break;
    out.restarts = cycle;
    ctx.scale(n, 1.0 / beta, w);
    std::swap(v, w);
    basis.store(0, v);
    std::fill(g.begin(), g.end(), 0.0);
    g[0] = beta;

    int k = 0;  // columns of V in this cycle's update
    while (k < m && out.iterations < opt.max_iterations) {
      const int j = k++;
      ++out.iterations;
      // Arnoldi with classical Gram-Schmidt: w = A v_j, h = V^T w, w -= V h.
      p.a.multiply(1.0, v, 0.0, w);
      basis.project(j + 1, w, p.h.data());
      basis.add(j + 1, -1.0, p.h.data(), w);
      SQUEEZE_CUDA_TRY(cudaMemcpyAsync(p.h_host.data(), p.h.data(), (j + 1) * sizeof(double),
                                       cudaMemcpyDeviceToHost, stream));
      const double h_next = ctx.norm(n, w);
      SQUEEZE_CUDA_TRY(cudaStreamSynchronize(stream));  // h_host has arrived
      if (h_next > 0 && j + 1 < m) {                    // v_{j+1} = w / ||w||
        ctx.scale(n, 1.0 / h_next, w);
        std::swap(v, w);
        basis.store(j + 1, v);
      }
      // The new Hessenberg column, rotated by the previous rotations and a new one.
      double* col = &r[static_cast<std::size_t>(j) * (m + 1)];
      std::copy_n(p.h_host.data(), j + 1, col);
      col[j + 1] = h_next;
      for (int i = 0; i < j; ++i) {
        const double t = cs[i] * col[i] + sn[i] * col[i + 1];
        col[i + 1] = -sn[i] * col[i] + cs[i] * col[i + 1];
        col[i] = t;
      }
      const double d = std::hypot(col[j], col[j + 1]);
      cs[j] = d > 0 ? col[j] / d : 1.0;
      sn[j] = d > 0 ? col[j + 1] / d : 0.0;
      col[j] = d;
      col[j + 1] = 0;
      g[j + 1] = -sn[j] * g[j];
      g[j] = cs[j] * g[j];
      if (std::abs(g[j + 1]) <= opt.tolerance * b_norm || h_next == 0) break;
    }
    // x += V y, where R y = g (R: k x k, upper triangular).
    for (int i = k - 1; i >= 0; --i) {
      double s = g[i];
      for (int l = i + 1; l < k; ++l)
        s -= r[static_cast<std::size_t>(l) * (m + 1) + i] * p.y_host[l];
      const double diagonal = r[static_cast<std::size_t>(i) * (m + 1) + i];
      p.y_host[i] = diagonal != 0 ? s / diagonal : 0.0;
    }
    SQUEEZE_CUDA_TRY(cudaMemcpyAsync(p.y.data(), p.y_host.data(), k * sizeof(double),
                                     cudaMemcpyHostToDevice, stream));
    basis.add(k, 1.0, p.y.data(), p.x.data());
  }
  SQUEEZE_CUDA_TRY(cudaStreamSynchronize(stream));
  return out;
}

// ---- the variants, timed ------------------------------------------------------------------------

struct variant_result {
  std::string matrix;
  int rows = 0;
  std::int64_t nnz = 0;
  const char* variant = "";
  double bits_per_value = 0;
  solve_result solve;
  double ms_per_iteration = 0;  ///< median over the timed solves
  std::vector<double> ms_per_iteration_runs;
  std::size_t basis_bytes = 0;
  bool must_converge = false;
};

/// One warm-up solve (one cycle at most), then `repeats` timed solves from x = 0.
template <class Basis>
variant_result run_variant(problem& p, const solver_options& opt, int repeats) {
  const cudaStream_t stream = p.ctx.stream();
  Basis basis{p.n, opt.restart, p.ctx};
  variant_result out;
  out.bits_per_value = Basis::bits_per_value;
  out.basis_bytes = basis.bytes();
  solver_options warm = opt;
  warm.max_iterations = std::min(opt.max_iterations, opt.restart);
  SQUEEZE_CUDA_TRY(cudaMemsetAsync(p.x.data(), 0, p.x.bytes(), stream));
  static_cast<void>(gmres(p, basis, warm));
  for (int repeat = 0; repeat < repeats; ++repeat) {
    SQUEEZE_CUDA_TRY(cudaMemsetAsync(p.x.data(), 0, p.x.bytes(), stream));
    core::event_timer timer{stream};
    timer.start();
    out.solve = gmres(p, basis, opt);
    timer.stop();
    out.ms_per_iteration_runs.push_back(timer.elapsed_ms() / std::max(out.solve.iterations, 1));
  }
  std::vector<double> sorted = out.ms_per_iteration_runs;
  std::sort(sorted.begin(), sorted.end());
  out.ms_per_iteration = sorted[sorted.size() / 2];
  return out;
}

struct variant_entry {
  const char* name;
  bool must_converge;  ///< the program fails when this one misses the tolerance
  variant_result (*run)(problem&, const solver_options&, int);
};

constexpr variant_entry variants[] = {
    {"float64_cublas", true, &run_variant<cublas_basis>},
    {"float64_mdspan", true, &run_variant<mdspan_basis<double>>},
    {"frsz2_32", true, &run_variant<mdspan_basis<frsz2::format<32>>>},
    {"frsz2_21", false, &run_variant<mdspan_basis<frsz2::format<21>>>},
    {"frsz2_16", false, &run_variant<mdspan_basis<frsz2::format<16>>>},
};

// ---- command line, report ---------------------------------------------------------------------

struct arguments {
  std::optional<std::string> matrix_file;
  std::vector<int> sizes{32, 64, 128};
  bool sizes_given = false;
  solver_options solver;
  int repeats = 3;
  std::optional<std::string> json;
};

arguments parse(int argc, char** argv) {
  using squeeze_examples::parse_number;
  using squeeze_examples::usage_error;
  arguments args;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    const auto value = [&] { return squeeze_examples::option_value(argc, argv, i); };
    if (arg == "--help" || arg == "-h") {
      std::fputs(usage, stdout);
      std::exit(0);
    } else if (arg == "--sizes") {
      args.sizes.clear();
      args.sizes_given = true;
      const std::string_view list = value();
      if (list == "none") continue;
      for (const std::string_view item : squeeze_examples::list_items(arg, list)) {
        const int side = parse_number<int>(arg, item);
        if (side < 1 || side > 600) throw usage_error{"--sizes: a grid side must lie in [1, 600]"};
        args.sizes.push_back(side);
      }
    } else if (squeeze_examples::parse_solver_option(arg, value, args.solver, 1000)) {
    } else if (arg == "--repeats") {
      args.repeats = parse_number<int>(arg, value());
      if (args.repeats < 1) throw usage_error{"--repeats: must be >= 1"};
    } else if (arg == "--json") {
      args.json = std::string{value()};
    } else if (arg.starts_with("-")) {
      throw usage_error{"unknown option '" + std::string{arg} + "'"};
    } else {
      if (args.matrix_file) throw usage_error{"more than one matrix file given"};
      args.matrix_file = std::string{arg};
    }
  }
  if (args.matrix_file && !args.sizes_given) args.sizes.clear();
  if (!args.matrix_file && args.sizes.empty()) {
    throw usage_error{"nothing to solve: give a matrix file or some --sizes"};
  }
  return args;
}

using squeeze_examples::json_number;
using squeeze_examples::json_string;

void write_json(const std::string& path, const std::string& gpu, const arguments& args,
                const std::vector<variant_result>& results) {
  std::ofstream out{path};
  if (!out) throw squeeze::io_error{"cannot open '" + path + "' for writing"};
  out << "{\n  \"program\": \"accessor_gmres\",\n  \"gpu\": " << json_string(gpu)
      << ",\n  \"restart\": " << args.solver.restart
      << ",\n  \"tolerance\": " << json_number(args.solver.tolerance)
      << ",\n  \"max_iterations\": " << args.solver.max_iterations
      << ",\n  \"repeats\": " << args.repeats << ",\n  \"results\": [\n";
  for (std::size_t i = 0; i < results.size(); ++i) {
    const variant_result& r = results[i];
    out << "    {\"matrix\": " << json_string(r.matrix) << ", \"rows\": " << r.rows
        << ", \"nnz\": " << r.nnz << ", \"variant\": " << json_string(r.variant)
        << ", \"bits_per_value\": " << json_number(r.bits_per_value)
        << ", \"iterations\": " << r.solve.iterations << ", \"restarts\": " << r.solve.restarts
        << ", \"converged\": " << (r.solve.converged ? "true" : "false")
        << ", \"relative_residual\": " << json_number(r.solve.relative_residual)
        << ", \"ms_per_iteration\": " << json_number(r.ms_per_iteration)
        << ", \"ms_per_iteration_runs\": [";
    for (std::size_t k = 0; k < r.ms_per_iteration_runs.size(); ++k) {
      out << (k > 0 ? ", " : "") << json_number(r.ms_per_iteration_runs[k]);
    }
    out << "], \"basis_bytes\": " << r.basis_bytes << "}"
        << (i + 1 < results.size() ? ",\n" : "\n");
  }
  out << "  ]\n}\n";
  if (!out) throw squeeze::io_error{"writing '" + path + "' failed"};
}

/// Solves A x = b with every variant, b = A x* for x* = sin(i) / ||sin|| (as cb_gmres does).
void solve_all(const std::string& name, const io::csr_matrix<double, std::int32_t>& a,
               const arguments& args, const context& ctx, std::vector<variant_result>& results) {
  const squeeze_examples::manufactured_system system = squeeze_examples::manufacture(name, a);
  problem p{name, a, system.b, args.solver.restart, ctx};

  std::printf("\n%s: %lld rows, %lld entries; restart %d, tolerance %.1e\n", name.c_str(),
              static_cast<long long>(a.rows), static_cast<long long>(a.nnz()), args.solver.restart,
              args.solver.tolerance);
  std::printf("%-15s %6s %10s %8s %15s %9s %10s\n", "variant", "bits", "iterations", "restarts",
              "||b-Ax||/||b||", "ms/iter", "basis MiB");
  for (const variant_entry& v : variants) {
    variant_result r = v.run(p, args.solver, args.repeats);
    r.matrix = name;
    r.rows = p.n;
    r.nnz = p.nnz;
    r.variant = v.name;
    r.must_converge = v.must_converge;
    std::printf("%-15s %6.2f %10d %8d %15.3e %9.4f %10.1f%s\n", v.name, r.bits_per_value,
                r.solve.iterations, r.solve.restarts, r.solve.relative_residual, r.ms_per_iteration,
                static_cast<double>(r.basis_bytes) / (1 << 20),
                r.solve.converged ? "" : "  (tolerance not reached)");
    results.push_back(std::move(r));
  }
}

}  // namespace

int main(int argc, char** argv) {
  arguments args;
  try {
    args = parse(argc, argv);
  } catch (const squeeze_examples::usage_error& e) {
    std::fprintf(stderr, "accessor_gmres: %s\n%s", e.message.c_str(), usage);
    return exit_error;
  }
  if (const auto presence = core::detect_devices(); !presence.present()) {
    return squeeze_examples::exit_without_gpu("accessor_gmres", presence);
  }
  try {
    const core::device_info device = core::query_device();
    std::printf("GPU: %s\n", core::describe(device).c_str());
    const context ctx;
    std::vector<variant_result> results;
    for (const int side : args.sizes) {
      solve_all("convection_diffusion_" + std::to_string(side) + "^3",
                io::convection_diffusion_3d(side, side, side), args, ctx, results);
    }
    if (args.matrix_file) {
      solve_all(std::filesystem::path{*args.matrix_file}.stem().string(),
                io::read_matrix_market<double>(*args.matrix_file), args, ctx, results);
    }
    if (args.json) {
      write_json(*args.json, device.name, args, results);
      std::printf("\nwrote %s\n", args.json->c_str());
    }
    int missed = 0;
    for (const variant_result& r : results) {
      if (r.must_converge && !r.solve.converged) {
        std::printf(
            "FAILED: %s on %s stopped at ||b - Ax|| / ||b|| = %.3e > %.1e after %d "
            "iterations\n",
            r.variant, r.matrix.c_str(), r.solve.relative_residual, args.solver.tolerance,
            r.solve.iterations);
        ++missed;
      }
    }
    if (missed > 0) return exit_not_converged;
    std::printf(
        "\nfloat64 (cuBLAS and mdspan) and frsz2_32 reached the tolerance on every "
        "matrix\n");
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "accessor_gmres: %s\n", e.what());
    return exit_error;
  }
}
