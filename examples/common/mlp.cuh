// SPDX-License-Identifier: Apache-2.0
// examples/common/mlp.cuh: what the Fashion-MNIST training examples share (roast_train,
// allreduce_sgd): the 784-512-256-10 MLP, its kernels (batches, bias and ReLU, softmax
// cross-entropy, accuracy, Adam), a cuBLAS wrapper and the dense layers, forward and backward
// over any linear layers, the flat parameter arrays, and the data (IDX files, standardized with
// the training set's mean and deviation).
//
//   dataset data = load_dataset(dir, "my_example --data ~/fashion-mnist");
//   device_split train{data.train, data, stream}, test{data.test, data, stream};
//   mlp_params m;  init_dense(m, seed, stream);
//   workspace ws{batch, train.count};
//   const dense_layers dense{cublas, CUBLAS_COMPUTE_32F, m};
//   gather_batch(train, ws.order.data(), first, batch, ws, stream);
//   mlp_forward(dense, m, ws, batch, stream);
//   softmax_cross_entropy(ws, batch, 1.0f / batch, stream);
//   mlp_backward(dense, m, ws, batch, stream);          // every gradient, into m.grads
//   adam_step(m, cosine_lr(lr, step, total_steps), step, stream);
//
// The linear layers are a policy (linear_layers): dense_layers here (cuBLAS), roast_train's
// ROAST layers there; biases, ReLUs and the loss are the same code for both. Everything runs on
// the caller's stream (cuBLAS through a handle bound to it).
#pragma once

#include <squeeze/core.hpp>
#include <squeeze/io/idx.hpp>

#include "common/cli.hpp"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <numbers>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

namespace squeeze_examples {

// ---- the model's shape ------------------------------------------------------------------

constexpr int image_side = 28;
constexpr int classes = 10;
/// Layer widths: input, two hidden layers, logits. Layer l maps widths[l] -> widths[l + 1].
constexpr std::array<std::uint64_t, 4> widths{image_side * image_side, 512, 256, classes};
constexpr std::size_t layers = widths.size() - 1;
constexpr int block = 256;  // threads per block of the examples' own kernels

constexpr std::uint64_t dense_weight_count() {
  std::uint64_t n = 0;
  for (std::size_t l = 0; l < layers; ++l) n += widths[l] * widths[l + 1];
  return n;
}
constexpr std::uint64_t bias_count() {
  std::uint64_t n = 0;
  for (std::size_t l = 0; l < layers; ++l) n += widths[l + 1];
  return n;
}

// ---- kernels ------------------------------------------------------------------------------
// (templates only so that this header may define them; launched through the functions below)

namespace detail {

/// x[i][j] = (images[row(i)][j] / 255 - mean) * inv_std and y[i] = labels[row(i)], where
/// row(i) = order[start + i] (or start + i without an order). x: [batch, pixels] row-major.
template <int = 0>
SQUEEZE_KERNEL(block)
void gather_batch_kernel(const std::uint8_t* images, const std::uint8_t* labels, const int* order,
                         std::uint64_t start, std::uint64_t batch, std::uint64_t pixels, float mean,
                         float inv_std, float* x, int* y) {
  const std::uint64_t total = batch * pixels;
  for (std::uint64_t e = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; e < total;
       e += std::uint64_t{gridDim.x} * blockDim.x) {
    const std::uint64_t i = e / pixels;
    const std::uint64_t j = e % pixels;
    const std::uint64_t row =
        order != nullptr ? static_cast<std::uint64_t>(order[start + i]) : start + i;
    x[e] = (static_cast<float>(images[row * pixels + j]) * (1.0f / 255.0f) - mean) * inv_std;
    if (j == 0) y[i] = labels[row];
  }
}

/// y[i][j] += bias[j], then ReLU when asked. y: [batch, n] row-major.
template <int = 0>
SQUEEZE_KERNEL(block)
void add_bias_kernel(float* y, const float* bias, std::uint64_t batch, std::uint64_t n, bool relu) {
  const std::uint64_t total = batch * n;
  for (std::uint64_t e = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; e < total;
       e += std::uint64_t{gridDim.x} * blockDim.x) {
    const float v = y[e] + bias[e % n];
    y[e] = relu ? fmaxf(v, 0.0f) : v;
  }
}

/// dx[e] = 0 where the layer's ReLU output x[e] was 0 (the ReLU was closed there).
template <int = 0>
SQUEEZE_KERNEL(block)
void relu_backward_kernel(float* dx, const float* x, std::uint64_t count) {
  for (std::uint64_t e = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; e < count;
       e += std::uint64_t{gridDim.x} * blockDim.x) {
    if (!(x[e] > 0.0f)) dx[e] = 0.0f;
  }
}

/// db[j] = sum over rows of dy[i][j]: one thread per column. dy: [batch, n] row-major.
template <int = 0>
SQUEEZE_KERNEL(block)
void bias_gradient_kernel(const float* dy, std::uint64_t batch, std::uint64_t n, float* db) {
  const std::uint64_t j = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x;
  if (j >= n) return;
  float sum = 0.0f;
  for (std::uint64_t i = 0; i < batch; ++i) sum += dy[i * n + j];
  db[j] = sum;
}

/// Softmax cross-entropy, one warp per row (classes <= 32): adds the row's loss to
/// `loss_sum` and writes dlogits = (softmax - onehot) * inv_batch. logits: [batch, classes].
template <int = 0>
SQUEEZE_KERNEL(block)
void softmax_cross_entropy_kernel(const float* logits, const int* labels, std::uint64_t batch,
                                  float inv_batch, float* dlogits, double* loss_sum) {
  static_assert(classes <= 32, "one warp per row: a lane per class");
  const std::uint64_t row = (blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (row >= batch) return;  // whole warps leave together
  const float* z = logits + row * classes;
  const float v = lane < classes ? z[lane] : -INFINITY;
  float max = v;
  for (int d = 16; d > 0; d /= 2) max = fmaxf(max, __shfl_xor_sync(0xffffffffu, max, d));
  const float e = lane < classes ? __expf(v - max) : 0.0f;
  float sum = e;
  for (int d = 16; d > 0; d /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, d);
  const int label = labels[row];
  if (lane < classes) {
    dlogits[row * classes + lane] = (e / sum - (lane == label ? 1.0f : 0.0f)) * inv_batch;
  }
  if (lane == label) atomicAdd(loss_sum, static_cast<double>(logf(sum) - (v - max)));
}

/// Adds to `correct` the rows whose largest logit is the label's. One thread per row.
template <int = 0>
SQUEEZE_KERNEL(block)
void count_correct_kernel(const float* logits, const int* labels, std::uint64_t batch,
                          unsigned* correct) {
  const std::uint64_t row = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x;
  if (row >= batch) return;
  const float* z = logits + row * classes;
  int best = 0;
  for (int c = 1; c < classes; ++c) {
    if (z[c] > z[best]) best = c;
  }
  if (best == labels[row]) atomicAdd(correct, 1u);
}

/// One Adam step over every parameter (PyTorch's form): m and v are the moment estimates,
/// c1 = 1 / (1 - beta1^t), c2 = 1 / (1 - beta2^t).
template <int = 0>
SQUEEZE_KERNEL(block)
void adam_step_kernel(float* p, const float* g, float* m, float* v, std::uint64_t count, float lr,
                      float beta1, float beta2, float eps, float c1, float c2) {
  for (std::uint64_t e = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; e < count;
       e += std::uint64_t{gridDim.x} * blockDim.x) {
    const float grad = g[e];
    const float m1 = beta1 * m[e] + (1.0f - beta1) * grad;
    const float v1 = beta2 * v[e] + (1.0f - beta2) * grad * grad;
    m[e] = m1;
    v[e] = v1;
    p[e] -= lr * (m1 * c1) / (sqrtf(v1 * c2) + eps);
  }
}

}  // namespace detail

/// Blocks for a grid-stride loop over `count` elements.
inline unsigned blocks_for(std::uint64_t count) {
  const std::uint64_t b = (count + block - 1) / block;
  return static_cast<unsigned>(std::clamp<std::uint64_t>(b, 1, 4096));
}

/// Blocks for one thread per item (kernels without a grid-stride loop).
inline unsigned blocks_covering(std::uint64_t threads) {
  return static_cast<unsigned>(std::max<std::uint64_t>((threads + block - 1) / block, 1));
}

// ---- cuBLAS -------------------------------------------------------------------------------

inline void cublas_check(cublasStatus_t status, const char* call,
                         const ::squeeze::source_location& where = ::squeeze::source_location::current()) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  throw squeeze::error{std::string{call} + " failed: " + cublasGetStatusName(status) + " (" +
                           cublasGetStatusString(status) + ")",
                       where};
}

/// An owned cuBLAS handle bound to one stream.
class cublas_handle {
 public:
  explicit cublas_handle(cudaStream_t stream) {
    cublas_check(cublasCreate(&handle_), "cublasCreate");
    try {
      cublas_check(cublasSetStream(handle_, stream), "cublasSetStream");
    } catch (...) {
      static_cast<void>(cublasDestroy(handle_));
      throw;
    }
  }
  cublas_handle(const cublas_handle&) = delete;
  cublas_handle& operator=(const cublas_handle&) = delete;
  ~cublas_handle() { static_cast<void>(cublasDestroy(handle_)); }
  [[nodiscard]] cublasHandle_t get() const noexcept { return handle_; }

 private:
  cublasHandle_t handle_{nullptr};
};

/// C = op(A) . op(B) in cuBLAS's column-major terms (C is m x n), fp32 operands and output.
inline void gemm(cublasHandle_t handle, cublasComputeType_t compute, cublasOperation_t ta,
                 cublasOperation_t tb, std::uint64_t m, std::uint64_t n, std::uint64_t k,
                 const float* a, std::uint64_t lda, const float* b, std::uint64_t ldb, float* c,
                 std::uint64_t ldc) {
  const float one = 1.0f;
  const float zero = 0.0f;
  const auto i = [](std::uint64_t v) { return static_cast<int>(v); };
  cublas_check(
      cublasGemmEx(handle, ta, tb, i(m), i(n), i(k), &one, a, CUDA_R_32F, i(lda), b, CUDA_R_32F,
                   i(ldb), &zero, c, CUDA_R_32F, i(ldc), compute, CUBLAS_GEMM_DEFAULT),
      "cublasGemmEx");
}

// ---- data ---------------------------------------------------------------------------------

/// The data set is not where --data says: reported with advice, exit status 1.
struct missing_data {
  std::string message;
};

struct split {
  std::vector<std::uint8_t> images;  // [count, 784]
  std::vector<std::uint8_t> labels;  // [count]
  std::uint64_t count = 0;
};

struct dataset {
  split train;
  split test;
  float mean = 0;  // of the training pixels, scaled to [0, 1]
  float stddev = 1;
};

/// The four IDX files of Fashion-MNIST (and MNIST), by their stems.
inline const std::array<std::string, 4>& idx_stems() {
  static const std::array<std::string, 4> stems{"train-images-idx3-ubyte",
                                                "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                                                "t10k-labels-idx1-ubyte"};
  return stems;
}

/// The path of IDX file `stem` ("train-images-idx3-ubyte") in `dir`, also accepting
/// MNIST's spelling with a dot ("train-images.idx3-ubyte"); nullopt when neither exists.
inline std::optional<std::filesystem::path> find_idx(const std::filesystem::path& dir,
                                                     const std::string& stem) {
  std::string dotted = stem;
  dotted[dotted.rfind('-', dotted.rfind('-') - 1)] = '.';
  for (const std::string& name : {stem, dotted}) {
    std::error_code ec;
    if (std::filesystem::is_regular_file(dir / name, ec)) return dir / name;
  }
  return std::nullopt;
}

/// Whether `dir` holds the four uncompressed IDX files.
inline bool holds_dataset(const std::filesystem::path& dir) {
  return std::ranges::all_of(
      idx_stems(), [&](const std::string& stem) { return find_idx(dir, stem).has_value(); });
}

inline split read_split(const std::filesystem::path& images_path,
                        const std::filesystem::path& labels_path) {
  const squeeze::io::idx_array images = squeeze::io::read_idx(images_path.string());
  const squeeze::io::idx_array labels = squeeze::io::read_idx(labels_path.string());
  if (images.type != 0x08 || images.dims.size() != 3 || images.dims[1] != image_side ||
      images.dims[2] != image_side) {
    throw squeeze::format_error{"'" + images_path.string() +
                                "' does not hold 28 x 28 uint8 images"};
  }
  if (labels.type != 0x08 || labels.dims.size() != 1) {
    throw squeeze::format_error{"'" + labels_path.string() + "' does not hold uint8 labels"};
  }
  if (labels.dims[0] != images.dims[0] || images.dims[0] == 0) {
    throw squeeze::format_error{
        "'" + images_path.string() + "' holds " + std::to_string(images.dims[0]) + " images but '" +
        labels_path.string() + "' " + std::to_string(labels.dims[0]) + " labels"};
  }
  split s;
  s.count = images.dims[0];
  s.images.resize(images.data.size());
  std::transform(images.data.begin(), images.data.end(), s.images.begin(),
                 [](std::byte b) { return std::to_integer<std::uint8_t>(b); });
  s.labels.resize(labels.data.size());
  std::transform(labels.data.begin(), labels.data.end(), s.labels.begin(),
                 [](std::byte b) { return std::to_integer<std::uint8_t>(b); });
  for (const std::uint8_t label : s.labels) {
    if (label >= classes) {
      throw squeeze::format_error{"'" + labels_path.string() + "' holds the label " +
                                  std::to_string(label) + "; Fashion-MNIST has 10 classes"};
    }
  }
  return s;
}

/// Reads the four IDX files from `dir_name` and the training pixels' mean and deviation.
/// Throws missing_data when a file is missing; its advice ends with `example_line` (how to
/// run the program on a decompressed copy, e.g. "roast_train --data ~/fashion-mnist").
inline dataset load_dataset(const std::string& dir_name, const std::string& example_line) {
  const std::filesystem::path dir{dir_name};
  const std::array<std::string, 4>& stems = idx_stems();
  std::array<std::filesystem::path, 4> paths;
  std::string missing;
  bool gzipped = false;
  for (std::size_t i = 0; i < stems.size(); ++i) {
    if (const auto p = find_idx(dir, stems[i])) {
      paths[i] = *p;
      continue;
    }
    missing += (missing.empty() ? "" : ", ") + stems[i];
    std::error_code ec;
    gzipped = gzipped || std::filesystem::exists(dir / (stems[i] + ".gz"), ec);
  }
  if (!missing.empty()) {
    std::error_code ec;
    std::string why;
    if (!std::filesystem::is_directory(dir, ec)) {
      why = "'" + dir_name + "' is not a directory.\n";
    } else if (gzipped) {
      why = "'" + dir_name +
            "' holds them gzip-compressed (*.gz); the IDX reader takes them uncompressed.\n";
    }
    throw missing_data{
        "Fashion-MNIST not found: '" + dir_name + "' lacks " + missing + ".\n" + why +
        "--data DIR must name a directory holding the four uncompressed IDX files. The Debian\n"
        "package ships them gzip-compressed in /usr/share/datasets/fashion-mnist/; decompress a\n"
        "copy with gunzip -k:\n"
        "  mkdir -p ~/fashion-mnist\n"
        "  cp /usr/share/datasets/fashion-mnist/*-ubyte.gz ~/fashion-mnist/\n"
        "  gunzip -k ~/fashion-mnist/*-ubyte.gz\n"
        "  " +
        example_line +
        "\n"
        "(or, with write access there: gunzip -k /usr/share/datasets/fashion-mnist/*-ubyte.gz)"};
  }
  dataset d;
  d.train = read_split(paths[0], paths[1]);
  d.test = read_split(paths[2], paths[3]);
  double sum = 0;
  double squares = 0;
  for (const std::uint8_t p : d.train.images) {
    const double v = p / 255.0;
    sum += v;
    squares += v * v;
  }
  const auto n = static_cast<double>(d.train.images.size());
  const double mean = sum / n;
  d.mean = static_cast<float>(mean);
  d.stddev = static_cast<float>(std::sqrt(std::max(squares / n - mean * mean, 1e-12)));
  return d;
}

/// The images (uint8, [count, 784]) and labels of one split on the device, with the
/// standardization gather_batch applies (the training set's mean and deviation).
struct device_split {
  squeeze::core::device_buffer<std::uint8_t> images;
  squeeze::core::device_buffer<std::uint8_t> labels;
  std::uint64_t count = 0;
  float mean = 0;
  float stddev = 1;

  device_split(const split& s, const dataset& d, cudaStream_t stream)
      : images{s.images.size()},
        labels{s.labels.size()},
        count{s.count},
        mean{d.mean},
        stddev{d.stddev} {
    images.copy_from(std::span<const std::uint8_t>{s.images}, stream);
    labels.copy_from(std::span<const std::uint8_t>{s.labels}, stream);
  }
};

// ---- random numbers (splitmix64: the same sequence on every platform) -----------------------

struct splitmix64 {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  /// Uniform in [-r, r).
  float uniform(double r) {
    return static_cast<float>((static_cast<double>(next() >> 11) * 0x1p-53 * 2.0 - 1.0) * r);
  }
};

/// A seed for one purpose (`stream`) from the user's seed.
inline std::uint64_t derive_seed(std::uint64_t seed, std::uint64_t stream) {
  return splitmix64{seed ^ (0x6a09e667f3bcc909ull * (stream + 1))}.next();
}

constexpr std::uint64_t init_stream = 1;
constexpr std::uint64_t order_stream = 2;

/// order = a fresh permutation of 0 .. order.size() - 1 (Fisher-Yates, from `rng`).
inline void fresh_permutation(std::vector<int>& order, splitmix64& rng) {
  const std::uint64_t n = order.size();
  if (n == 0) return;
  for (std::uint64_t i = 0; i < n; ++i) order[i] = static_cast<int>(i);
  for (std::uint64_t i = n - 1; i > 0; --i) std::swap(order[i], order[rng.next() % (i + 1)]);
}

// ---- parameters ---------------------------------------------------------------------------

/// One MLP's parameters, their gradients and Adam's moments, each one flat device array of
/// `size` values. Dense: [W1 | W2 | W3 | b1 | b2 | b3], W_l [K, N] row-major at
/// weight_offset[l]; other layouts place their weights themselves and set bias_offset.
/// Segments start on 64-value boundaries; the padding stays 0.
struct mlp_params {
  std::array<std::size_t, layers> weight_offset{};  // dense layers only
  std::array<std::size_t, layers> bias_offset{};
  std::size_t size = 0;  // values in each flat array, padding included
  squeeze::core::device_buffer<float> params, grads, adam_m, adam_v;
};

constexpr std::size_t round_up(std::size_t n, std::size_t to) {
  return (n + to - 1) / to * to;
}

/// Allocates the flat arrays and uploads `init` (the parameters; the rest start at 0).
inline void allocate(mlp_params& m, const std::vector<float>& init, cudaStream_t stream) {
  m.params = squeeze::core::device_buffer<float>{m.size};
  m.grads = squeeze::core::device_buffer<float>{m.size};
  m.adam_m = squeeze::core::device_buffer<float>{m.size};
  m.adam_v = squeeze::core::device_buffer<float>{m.size};
  m.params.copy_from(std::span<const float>{init}, stream);
  m.grads.fill_bytes(0, stream);
  m.adam_m.fill_bytes(0, stream);
  m.adam_v.fill_bytes(0, stream);
}

/// The dense layout's offsets and size (nothing allocated).
inline void set_dense_layout(mlp_params& m) {
  std::size_t offset = 0;
  for (std::size_t l = 0; l < layers; ++l) {
    m.weight_offset[l] = offset;
    offset += round_up(widths[l] * widths[l + 1], 64);
  }
  for (std::size_t l = 0; l < layers; ++l) {
    m.bias_offset[l] = offset;
    offset += round_up(widths[l + 1], 64);
  }
  m.size = offset;
}

/// The dense layout, W ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)) from `seed` (PyTorch's
/// nn.Linear), biases 0: the same values for the same seed, everywhere.
inline void init_dense(mlp_params& m, std::uint64_t seed, cudaStream_t stream) {
  set_dense_layout(m);
  std::vector<float> init(m.size, 0.0f);
  splitmix64 rng{derive_seed(seed, init_stream)};
  for (std::size_t l = 0; l < layers; ++l) {
    const double r = 1.0 / std::sqrt(static_cast<double>(widths[l]));
    for (std::uint64_t e = 0; e < widths[l] * widths[l + 1]; ++e) {
      init[m.weight_offset[l] + e] = rng.uniform(r);
    }
  }
  allocate(m, init, stream);
}

// ---- activations --------------------------------------------------------------------------

/// Activations and their gradients for up to `capacity` rows: act[0] the input, act[l + 1]
/// layer l's output (after its ReLU; act[layers] the logits); grad[l] = dLoss / d act[l].
struct workspace {
  std::array<squeeze::core::device_buffer<float>, layers + 1> act;
  std::array<squeeze::core::device_buffer<float>, layers + 1> grad;  // grad[0] unused
  squeeze::core::device_buffer<int> labels;
  squeeze::core::device_buffer<int> order;
  squeeze::core::device_buffer<double> loss_sum{1};
  squeeze::core::device_buffer<unsigned> correct{1};

  workspace(std::uint64_t capacity, std::uint64_t train_count)
      : labels{capacity}, order{train_count} {
    for (std::size_t l = 0; l <= layers; ++l) {
      act[l] = squeeze::core::device_buffer<float>{capacity * widths[l]};
      if (l > 0) grad[l] = squeeze::core::device_buffer<float>{capacity * widths[l]};
    }
  }
};

// ---- the linear layers ----------------------------------------------------------------------

/// What the MLP asks of its linear layers, for layer l (K = widths[l], N = widths[l + 1]),
/// all row-major, on the caller's stream:
///   forward(l, x, batch, y)              y [batch, N] = x [batch, K] . W_l
///   weight_gradient(l, x, dy, batch)     the gradient of W_l from x and dy [batch, N]
///                                        (written, or accumulated where weights are shared)
///   input_gradient(l, dy, batch, dx)     dx [batch, K] = dy . W_l^T
template <class L>
concept linear_layers = requires(const L& lin, std::size_t l, const float* in, float* out,
                                 std::uint64_t batch) {
  lin.forward(l, in, batch, out);
  lin.weight_gradient(l, in, in, batch);
  lin.input_gradient(l, in, batch, out);
};

/// Dense layers through cuBLAS: W_l at m.params + m.weight_offset[l], its gradient at the same
/// offset of m.grads. The handle is bound to the stream the MLP runs on.
struct dense_layers {
  cublasHandle_t cublas;
  cublasComputeType_t compute;
  const mlp_params& m;

  void forward(std::size_t l, const float* x, std::uint64_t batch, float* y) const {
    // Row-major Y = X . W is column-major Y^T (N x batch) = W^T . X^T: no transposes.
    const std::uint64_t k = widths[l];
    const std::uint64_t n = widths[l + 1];
    gemm(cublas, compute, CUBLAS_OP_N, CUBLAS_OP_N, n, batch, k,
         m.params.data() + m.weight_offset[l], n, x, k, y, n);
  }
  void weight_gradient(std::size_t l, const float* x, const float* dy, std::uint64_t batch) const {
    // dW (K x N) = X^T . dY, column-major dW^T (N x K) = dY^T . X.
    const std::uint64_t k = widths[l];
    const std::uint64_t n = widths[l + 1];
    gemm(cublas, compute, CUBLAS_OP_N, CUBLAS_OP_T, n, k, batch, dy, n, x, k,
         m.grads.data() + m.weight_offset[l], n);
  }
  void input_gradient(std::size_t l, const float* dy, std::uint64_t batch, float* dx) const {
    // dX = dY . W^T, column-major dX^T (K x batch) = W . dY^T (W^T is N x K there).
    const std::uint64_t k = widths[l];
    const std::uint64_t n = widths[l + 1];
    gemm(cublas, compute, CUBLAS_OP_T, CUBLAS_OP_N, k, batch, n,
         m.params.data() + m.weight_offset[l], n, dy, n, dx, k);
  }
};
static_assert(linear_layers<dense_layers>);

// ---- one training step's parts --------------------------------------------------------------

/// ws.act[0] and ws.labels = rows order[start .. start + batch) of `s` (rows start .. without
/// an order), standardized.
inline void gather_batch(const device_split& s, const int* order, std::uint64_t start,
                         std::uint64_t batch, workspace& ws, cudaStream_t stream) {
  const std::uint64_t pixels = widths[0];
  detail::gather_batch_kernel<<<blocks_for(batch * pixels), block, 0, stream>>>(
      s.images.data(), s.labels.data(), order, start, batch, pixels, s.mean, 1.0f / s.stddev,
      ws.act[0].data(), ws.labels.data());
  SQUEEZE_CHECK_LAUNCH();
}

/// ws.act[1 .. layers] from ws.act[0] for `batch` rows: each layer's product, its bias, and a
/// ReLU after every layer but the last (ws.act[layers]: the logits).
template <linear_layers Linear>
void mlp_forward(const Linear& linear, const mlp_params& m, workspace& ws, std::uint64_t batch,
                 cudaStream_t stream) {
  for (std::size_t l = 0; l < layers; ++l) {
    const std::uint64_t n = widths[l + 1];
    const float* x = ws.act[l].data();  // [batch, K]
    float* y = ws.act[l + 1].data();    // [batch, N]
    linear.forward(l, x, batch, y);
    detail::add_bias_kernel<<<blocks_for(batch * n), block, 0, stream>>>(
        y, m.params.data() + m.bias_offset[l], batch, n, l + 1 < layers);
    SQUEEZE_CHECK_LAUNCH();
  }
}

/// Adds the softmax cross-entropy of the logits (ws.act[layers]) against ws.labels to
/// ws.loss_sum and writes ws.grad[layers] = (softmax - onehot) * inv_batch.
inline void softmax_cross_entropy(workspace& ws, std::uint64_t batch, float inv_batch,
                                  cudaStream_t stream) {
  detail::softmax_cross_entropy_kernel<<<blocks_covering(batch * 32), block, 0, stream>>>(
      ws.act[layers].data(), ws.labels.data(), batch, inv_batch, ws.grad[layers].data(),
      ws.loss_sum.data());
  SQUEEZE_CHECK_LAUNCH();
}

/// Gradients of every parameter (into m.grads, through the linear layers for the weights)
/// from ws.grad[layers] (dLoss / dlogits); ws.grad[1 .. layers - 1] are overwritten.
template <linear_layers Linear>
void mlp_backward(const Linear& linear, mlp_params& m, workspace& ws, std::uint64_t batch,
                  cudaStream_t stream) {
  for (std::size_t l = layers; l-- > 0;) {
    const std::uint64_t k = widths[l];
    const std::uint64_t n = widths[l + 1];
    const float* x = ws.act[l].data();        // [batch, K]
    const float* dy = ws.grad[l + 1].data();  // [batch, N]
    linear.weight_gradient(l, x, dy, batch);
    detail::bias_gradient_kernel<<<blocks_covering(n), block, 0, stream>>>(
        dy, batch, n, m.grads.data() + m.bias_offset[l]);
    SQUEEZE_CHECK_LAUNCH();
    if (l == 0) break;              // no gradient for the images
    float* dx = ws.grad[l].data();  // [batch, K]
    linear.input_gradient(l, dy, batch, dx);
    detail::relu_backward_kernel<<<blocks_for(batch * k), block, 0, stream>>>(dx, x, batch * k);
    SQUEEZE_CHECK_LAUNCH();
  }
}

/// Adam's initial learning rate `lr` decayed to 0 by a cosine over `total_steps`.
inline double cosine_lr(double lr, std::uint64_t step, double total_steps) {
  return lr * 0.5 * (1.0 + std::cos(std::numbers::pi * static_cast<double>(step) / total_steps));
}

/// One Adam step over all of m (beta1 0.9, beta2 0.999, eps 1e-8) at learning rate `lr`;
/// `step` counts from 0.
inline void adam_step(mlp_params& m, double lr, std::uint64_t step, cudaStream_t stream) {
  constexpr float beta1 = 0.9f;
  constexpr float beta2 = 0.999f;
  constexpr float eps = 1e-8f;
  const double t = static_cast<double>(step + 1);
  detail::adam_step_kernel<<<blocks_for(m.size), block, 0, stream>>>(
      m.params.data(), m.grads.data(), m.adam_m.data(), m.adam_v.data(), m.size,
      static_cast<float>(lr), beta1, beta2, eps,
      static_cast<float>(1.0 / (1.0 - std::pow(double{beta1}, t))),
      static_cast<float>(1.0 / (1.0 - std::pow(double{beta2}, t))));
  SQUEEZE_CHECK_LAUNCH();
}

/// How many of rows first .. first + count of `s` the model classifies right, in batches of
/// at most `batch` rows (the workspace's capacity). Synchronizes the stream.
template <linear_layers Linear>
std::uint64_t count_correct(const Linear& linear, const mlp_params& m, workspace& ws,
                            const device_split& s, std::uint64_t first, std::uint64_t count,
                            std::uint64_t batch, cudaStream_t stream) {
  SQUEEZE_CUDA_TRY(cudaMemsetAsync(ws.correct.data(), 0, sizeof(unsigned), stream));
  for (std::uint64_t start = first; start < first + count; start += batch) {
    const std::uint64_t rows = std::min(batch, first + count - start);
    gather_batch(s, nullptr, start, rows, ws, stream);
    mlp_forward(linear, m, ws, rows, stream);
    detail::count_correct_kernel<<<blocks_covering(rows), block, 0, stream>>>(
        ws.act[layers].data(), ws.labels.data(), rows, ws.correct.data());
    SQUEEZE_CHECK_LAUNCH();
  }
  unsigned correct = 0;
  ws.correct.copy_to(std::span<unsigned>{&correct, 1}, stream);
  SQUEEZE_CUDA_TRY(cudaStreamSynchronize(stream));
  return correct;
}

// ---- command line ---------------------------------------------------------------------------

/// The options every training example takes: --data DIR, --epochs N, --batch B, --seed S and
/// --lr LR, into the same-named fields of `args`. Returns whether `arg` was one of them;
/// `value()` yields the option's value (common/cli.hpp's option_value).
template <class Arguments, class Value>
bool parse_training_option(std::string_view arg, Value&& value, Arguments& args) {
  if (arg == "--data") {
    args.data = std::string{value()};
    if (args.data.empty()) throw usage_error{"--data: the directory name is empty"};
  } else if (arg == "--epochs") {
    args.epochs = parse_number<int>(arg, value());
    if (args.epochs < 1 || args.epochs > 10000) throw usage_error{"--epochs: must lie in [1, 10000]"};
  } else if (arg == "--batch") {
    args.batch = parse_number<std::uint64_t>(arg, value());
    if (args.batch < 1 || args.batch > 60000) throw usage_error{"--batch: must lie in [1, 60000]"};
  } else if (arg == "--seed") {
    args.seed = parse_number<std::uint64_t>(arg, value());
  } else if (arg == "--lr") {
    args.lr = parse_number<double>(arg, value());
    if (!std::isfinite(args.lr) || args.lr <= 0) throw usage_error{"--lr: must be > 0"};
  } else {
    return false;
  }
  return true;
}

}  // namespace squeeze_examples
