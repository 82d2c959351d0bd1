// roast_train: trains a 784-512-256-10 MLP on Fashion-MNIST on the GPU, once with dense
// weights (cuBLAS) and once per compression with ROAST weights: every linear layer is a view
// into ONE shared parameter array M (global memory sharing), read through the tile hash by
// ROAST-MM. Prints the test accuracy after every epoch and a summary table.
//
//   roast_train [--data DIR] [--epochs N] [--batch B] [--seed S] [--compressions LIST]
//               [--tile KxN] [--lr LR] [--gms-c C] [--dense-tf32]
//
// The model: ReLU after the two hidden layers, dense biases, softmax cross-entropy. Pixels
// are scaled to [0, 1], then standardized with the training set's mean and standard
// deviation. Every model trains with the same optimizer, schedule and batch order: Adam
// (beta1 0.9, beta2 0.999, eps 1e-8), learning rate 1e-3 decayed to 0 by a cosine over
// all steps, minibatches of 256 drawn from a fresh permutation each epoch.
//
// Weights at initialization, all with the spread of 1/sqrt(fan_in) (PyTorch's nn.Linear):
//   dense:  W ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)), biases 0
//   ROAST:  M ~ U(-1/C, 1/C), W = lambda * M[hash] with lambda = C / sqrt(fan_in)
//           (roast::gms_scale), biases 0; |M| = dense weights / compression, at least one
//           tile; each layer hashes with its own seed.
// C only decides how the one M is shared out: with Adam, an element of M moves by about the
// learning rate per step, so a weight moves by lambda times that. The default C = sqrt(512)
// gives the middle layer lambda = 1 (its steps match the dense layer's); the first and last
// layers get lambda 0.81 and 1.41.
//
// Data: a directory holding the four uncompressed IDX files (train-images-idx3-ubyte,
// train-labels-idx1-ubyte, t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte). The Debian
// package ships them gzip-compressed in /usr/share/datasets/fashion-mnist/: decompress a
// copy with `gunzip -k` and pass that directory.
#include <squeeze/core.hpp>
#include <squeeze/io/idx.hpp>
#include <squeeze/roast/gemm.cuh>
#include <squeeze/roast/mapping.hpp>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <numbers>
#include <optional>
#include <source_location>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "common/cli.hpp"

namespace core = squeeze::core;
namespace io = squeeze::io;
namespace roast = squeeze::roast;

namespace roast_train {

// ---- the model's shape ------------------------------------------------------------------

constexpr int image_side = 28;
constexpr int classes = 10;
/// Layer widths: input, two hidden layers, logits. Layer l maps widths[l] -> widths[l + 1].
constexpr std::array<std::uint64_t, 4> widths{image_side * image_side, 512, 256, classes};
constexpr std::size_t layers = widths.size() - 1;
constexpr int block = 256;  // threads per block of the example's own kernels

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

/// x[i][j] = (images[row(i)][j] / 255 - mean) * inv_std and y[i] = labels[row(i)], where
/// row(i) = order[start + i] (or start + i without an order). x: [batch, pixels] row-major.
SQUEEZE_KERNEL(block)
void gather_batch(const std::uint8_t* images, const std::uint8_t* labels, const int* order,
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
SQUEEZE_KERNEL(block)
void add_bias(float* y, const float* bias, std::uint64_t batch, std::uint64_t n, bool relu) {
  const std::uint64_t total = batch * n;
  for (std::uint64_t e = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; e < total;
       e += std::uint64_t{gridDim.x} * blockDim.x) {
    const float v = y[e] + bias[e % n];
    y[e] = relu ? fmaxf(v, 0.0f) : v;
  }
}

/// dx[e] = 0 where the layer's ReLU output x[e] was 0 (the ReLU was closed there).
SQUEEZE_KERNEL(block)
void relu_backward(float* dx, const float* x, std::uint64_t count) {
  for (std::uint64_t e = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; e < count;
       e += std::uint64_t{gridDim.x} * blockDim.x) {
    if (!(x[e] > 0.0f)) dx[e] = 0.0f;
  }
}

/// db[j] = sum over rows of dy[i][j]: one thread per column. dy: [batch, n] row-major.
SQUEEZE_KERNEL(block)
void bias_gradient(const float* dy, std::uint64_t batch, std::uint64_t n, float* db) {
  const std::uint64_t j = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x;
  if (j >= n) return;
  float sum = 0.0f;
  for (std::uint64_t i = 0; i < batch; ++i) sum += dy[i * n + j];
  db[j] = sum;
}

/// Softmax cross-entropy, one warp per row (classes <= 32): adds the row's loss to
/// `loss_sum` and writes dlogits = (softmax - onehot) / batch. logits: [batch, classes].
SQUEEZE_KERNEL(block)
void softmax_cross_entropy(const float* logits, const int* labels, std::uint64_t batch,
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
SQUEEZE_KERNEL(block)
void count_correct(const float* logits, const int* labels, std::uint64_t batch, unsigned* correct) {
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
SQUEEZE_KERNEL(block)
void adam_step(float* p, const float* g, float* m, float* v, std::uint64_t count, float lr,
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

/// Blocks for a grid-stride loop over `count` elements.
unsigned blocks_for(std::uint64_t count) {
  const std::uint64_t b = (count + block - 1) / block;
  return static_cast<unsigned>(std::clamp<std::uint64_t>(b, 1, 4096));
}

/// Blocks for one thread per item (kernels without a grid-stride loop).
unsigned blocks_covering(std::uint64_t threads) {
  return static_cast<unsigned>(std::max<std::uint64_t>((threads + block - 1) / block, 1));
}

// ---- cuBLAS -------------------------------------------------------------------------------

void cublas_check(cublasStatus_t status, const char* call,
                  const std::source_location& where = std::source_location::current()) {
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
void gemm(cublasHandle_t handle, cublasComputeType_t compute, cublasOperation_t ta,
          cublasOperation_t tb, std::uint64_t m, std::uint64_t n, std::uint64_t k, const float* a,
          std::uint64_t lda, const float* b, std::uint64_t ldb, float* c, std::uint64_t ldc) {
  const float one = 1.0f;
  const float zero = 0.0f;
  const auto i = [](std::uint64_t v) { return static_cast<int>(v); };
  cublas_check(
      cublasGemmEx(handle, ta, tb, i(m), i(n), i(k), &one, a, CUDA_R_32F, i(lda), b, CUDA_R_32F,
                   i(ldb), &zero, c, CUDA_R_32F, i(ldc), compute, CUBLAS_GEMM_DEFAULT),
      "cublasGemmEx");
}

// ---- command line -------------------------------------------------------------------------

constexpr const char* usage =
    "usage: roast_train [--data DIR] [--epochs N] [--batch B] [--seed S] [--compressions LIST]\n"
    "                   [--tile KxN] [--lr LR] [--gms-c C] [--dense-tf32]\n"
    "  --data DIR          directory with the four uncompressed Fashion-MNIST IDX files\n"
    "                      (default /usr/share/datasets/fashion-mnist)\n"
    "  --epochs N          training epochs per model (default 10)\n"
    "  --batch B           minibatch size (default 256)\n"
    "  --seed S            seed for initialization, hashes and batch order (default 0)\n"
    "  --compressions LIST ROAST compressions, dense weights / |M|, comma-separated\n"
    "                      (default 1,10,100)\n"
    "  --tile KxN          ROAST hash tile (default 32x64; K a multiple of 32, N of 8)\n"
    "  --lr LR             Adam's initial learning rate, cosine-decayed to 0 (default 1e-3)\n"
    "  --gms-c C           M ~ U(-1/C, 1/C), lambda = C / sqrt(fan_in) (default sqrt(512))\n"
    "  --dense-tf32        cuBLAS layers on TF32 tensor cores (default: exact fp32)\n";

using squeeze_examples::parse_number;
using squeeze_examples::usage_error;

/// The data set is not where --data says: reported with advice, exit status 1.
struct missing_data {
  std::string message;
};

struct arguments {
  std::string data = "/usr/share/datasets/fashion-mnist";
  int epochs = 10;
  std::uint64_t batch = 256;
  std::uint64_t seed = 0;
  std::vector<double> compressions{1, 10, 100};
  roast::tile_shape tile{32, 64};
  double lr = 1e-3;
  double gms_c = std::sqrt(512.0);
  bool dense_tf32 = false;
};

arguments parse(int argc, char** argv) {
  arguments args;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    const auto value = [&] { return squeeze_examples::option_value(argc, argv, i); };
    if (arg == "--help" || arg == "-h") {
      std::fputs(usage, stdout);
      std::exit(0);
    } else if (arg == "--data") {
      args.data = std::string{value()};
      if (args.data.empty()) throw usage_error{"--data: the directory name is empty"};
    } else if (arg == "--epochs") {
      args.epochs = parse_number<int>(arg, value());
      if (args.epochs < 1 || args.epochs > 10000) {
        throw usage_error{"--epochs: must lie in [1, 10000]"};
      }
    } else if (arg == "--batch") {
      args.batch = parse_number<std::uint64_t>(arg, value());
      if (args.batch < 1 || args.batch > 60000)
        throw usage_error{"--batch: must lie in [1, 60000]"};
    } else if (arg == "--seed") {
      args.seed = parse_number<std::uint64_t>(arg, value());
    } else if (arg == "--compressions") {
      args.compressions.clear();
      std::string_view list = value();
      while (!list.empty()) {
        const std::size_t comma = list.find(',');
        const std::string_view item = list.substr(0, comma);
        const double c = parse_number<double>(arg, item);
        if (!std::isfinite(c) || c < 1) {
          throw usage_error{"--compressions: '" + std::string{item} +
                            "' is not a compression >= 1 (dense weights / |M|)"};
        }
        args.compressions.push_back(c);
        list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
      }
      if (args.compressions.empty()) throw usage_error{"--compressions: the list is empty"};
    } else if (arg == "--tile") {
      const std::string_view text = value();
      const std::size_t x = text.find('x');
      if (x == std::string_view::npos) {
        throw usage_error{"--tile: '" + std::string{text} + "' is not KxN (e.g. 32x64)"};
      }
      args.tile.k = parse_number<std::uint32_t>(arg, text.substr(0, x));
      args.tile.n = parse_number<std::uint32_t>(arg, text.substr(x + 1));
      if (args.tile.k == 0 || args.tile.k % 32 != 0 || args.tile.k > 4096) {
        throw usage_error{
            "--tile: K must be a multiple of 32 in [32, 4096] (one 128-byte row of fp32 values)"};
      }
      if (args.tile.n == 0 || args.tile.n % 8 != 0 || args.tile.n > 4096) {
        throw usage_error{"--tile: N must be a multiple of 8 in [8, 4096]"};
      }
    } else if (arg == "--lr") {
      args.lr = parse_number<double>(arg, value());
      if (!std::isfinite(args.lr) || args.lr <= 0) throw usage_error{"--lr: must be > 0"};
    } else if (arg == "--gms-c") {
      args.gms_c = parse_number<double>(arg, value());
      if (!std::isfinite(args.gms_c) || args.gms_c <= 0) throw usage_error{"--gms-c: must be > 0"};
    } else if (arg == "--dense-tf32") {
      args.dense_tf32 = true;
    } else {
      throw usage_error{"unknown argument '" + std::string{arg} + "'"};
    }
  }
  return args;
}

// ---- data ---------------------------------------------------------------------------------

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

/// The path of IDX file `stem` ("train-images-idx3-ubyte") in `dir`, also accepting
/// MNIST's spelling with a dot ("train-images.idx3-ubyte"); nullopt when neither exists.
std::optional<std::filesystem::path> find_idx(const std::filesystem::path& dir,
                                              const std::string& stem) {
  std::string dotted = stem;
  dotted[dotted.rfind('-', dotted.rfind('-') - 1)] = '.';
  for (const std::string& name : {stem, dotted}) {
    std::error_code ec;
    if (std::filesystem::is_regular_file(dir / name, ec)) return dir / name;
  }
  return std::nullopt;
}

split read_split(const std::filesystem::path& images_path,
                 const std::filesystem::path& labels_path) {
  const io::idx_array images = io::read_idx(images_path.string());
  const io::idx_array labels = io::read_idx(labels_path.string());
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

dataset load_dataset(const std::string& dir_name) {
  const std::filesystem::path dir{dir_name};
  const std::array<std::string, 4> stems{"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                         "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};
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
        "  roast_train --data ~/fashion-mnist\n"
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
std::uint64_t derive_seed(std::uint64_t seed, std::uint64_t stream) {
  return splitmix64{seed ^ (0x6a09e667f3bcc909ull * (stream + 1))}.next();
}

constexpr std::uint64_t init_stream = 1;
constexpr std::uint64_t order_stream = 2;
constexpr std::uint64_t hash_stream = 100;  // + layer

// ---- models -------------------------------------------------------------------------------

/// One MLP: its parameters, their gradients and Adam's moments, each one flat device array.
/// Dense: [W1 | W2 | W3 | b1 | b2 | b3]; ROAST: [M | b1 | b2 | b3] (M first: 16-byte
/// aligned, as ROAST-MM needs). Segments start on 64-value boundaries; the padding stays 0.
struct model {
  std::string name;
  bool roast = false;
  std::uint64_t stored_weights = 0;                 // dense weights, or |M|
  std::array<std::size_t, layers> weight_offset{};  // dense only
  std::array<std::size_t, layers> bias_offset{};
  std::array<roast::mapping, layers> maps{};  // ROAST only; M at offset 0
  std::size_t size = 0;                       // values in each flat array, padding included
  core::device_buffer<float> params, grads, adam_m, adam_v;

  [[nodiscard]] std::uint64_t parameters() const { return stored_weights + bias_count(); }
  [[nodiscard]] double compression() const {
    return static_cast<double>(dense_weight_count()) / static_cast<double>(stored_weights);
  }
};

constexpr std::size_t round_up(std::size_t n, std::size_t to) {
  return (n + to - 1) / to * to;
}

/// Allocates the flat arrays and uploads `init` (the parameters; the rest start at 0).
void allocate(model& m, const std::vector<float>& init, cudaStream_t stream) {
  m.params = core::device_buffer<float>{m.size};
  m.grads = core::device_buffer<float>{m.size};
  m.adam_m = core::device_buffer<float>{m.size};
  m.adam_v = core::device_buffer<float>{m.size};
  m.params.copy_from(std::span<const float>{init}, stream);
  m.grads.fill_bytes(0, stream);
  m.adam_m.fill_bytes(0, stream);
  m.adam_v.fill_bytes(0, stream);
}

model make_dense(std::uint64_t seed, bool tf32, cudaStream_t stream) {
  model m;
  m.name = tf32 ? "dense (TF32)" : "dense";
  m.stored_weights = dense_weight_count();
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
  std::vector<float> init(m.size, 0.0f);
  splitmix64 rng{derive_seed(seed, init_stream)};
  for (std::size_t l = 0; l < layers; ++l) {
    const double r = 1.0 / std::sqrt(static_cast<double>(widths[l]));
    for (std::uint64_t e = 0; e < widths[l] * widths[l + 1]; ++e) {
      init[m.weight_offset[l] + e] = rng.uniform(r);
    }
  }
  allocate(m, init, stream);
  return m;
}

model make_roast(double compression, const arguments& args, cudaStream_t stream) {
  model m;
  const std::uint64_t tile_values = std::uint64_t{args.tile.k} * args.tile.n;
  m.stored_weights = std::max<std::uint64_t>(
      tile_values, static_cast<std::uint64_t>(
                       std::llround(static_cast<double>(dense_weight_count()) / compression)));
  char name[64];
  std::snprintf(name, sizeof name, "roast %gx", compression);
  m.name = name;
  m.roast = true;
  std::size_t offset = round_up(m.stored_weights, 64);
  for (std::size_t l = 0; l < layers; ++l) {
    const roast::module_desc desc{widths[l],
                                  widths[l + 1],
                                  args.tile,
                                  roast::gms_scale(args.gms_c, widths[l]),
                                  derive_seed(args.seed, hash_stream + l),
                                  /*signs=*/false};
    m.maps[l] = roast::mapping{desc, m.stored_weights, sizeof(float)};
    m.bias_offset[l] = offset;
    offset += round_up(widths[l + 1], 64);
  }
  m.size = offset;
  std::vector<float> init(m.size, 0.0f);
  splitmix64 rng{derive_seed(args.seed, init_stream)};
  for (std::uint64_t e = 0; e < m.stored_weights; ++e) init[e] = rng.uniform(1.0 / args.gms_c);
  allocate(m, init, stream);
  return m;
}

/// Activations and their gradients for up to `capacity` rows: act[0] the input, act[l + 1]
/// layer l's output (after its ReLU; act[layers] the logits); grad[l] = dLoss / d act[l].
struct workspace {
  std::array<core::device_buffer<float>, layers + 1> act;
  std::array<core::device_buffer<float>, layers + 1> grad;  // grad[0] unused
  core::device_buffer<int> labels;
  core::device_buffer<int> order;
  core::device_buffer<double> loss_sum{1};
  core::device_buffer<unsigned> correct{1};

  workspace(std::uint64_t capacity, std::uint64_t train_count)
      : labels{capacity}, order{train_count} {
    for (std::size_t l = 0; l <= layers; ++l) {
      act[l] = core::device_buffer<float>{capacity * widths[l]};
      if (l > 0) grad[l] = core::device_buffer<float>{capacity * widths[l]};
    }
  }
};

/// The images (uint8, [count, 784]) and labels of one split on the device.
struct device_split {
  core::device_buffer<std::uint8_t> images;
  core::device_buffer<std::uint8_t> labels;
  std::uint64_t count = 0;

  device_split(const split& s, cudaStream_t stream)
      : images{s.images.size()}, labels{s.labels.size()}, count{s.count} {
    images.copy_from(std::span<const std::uint8_t>{s.images}, stream);
    labels.copy_from(std::span<const std::uint8_t>{s.labels}, stream);
  }
};

struct trainer {
  const arguments& args;
  const dataset& data;
  const device_split& train;
  const device_split& test;
  workspace& ws;
  cublasHandle_t cublas;
  cudaStream_t stream;

  void gather(const device_split& s, const int* order, std::uint64_t start, std::uint64_t batch) {
    const std::uint64_t pixels = widths[0];
    gather_batch<<<blocks_for(batch * pixels), block, 0, stream>>>(
        s.images.data(), s.labels.data(), order, start, batch, pixels, data.mean,
        1.0f / data.stddev, ws.act[0].data(), ws.labels.data());
    SQUEEZE_CHECK_LAUNCH();
  }

  void forward(const model& m, std::uint64_t batch) {
    const cublasComputeType_t compute =
        args.dense_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    for (std::size_t l = 0; l < layers; ++l) {
      const std::uint64_t k = widths[l];
      const std::uint64_t n = widths[l + 1];
      const float* x = ws.act[l].data();  // [batch, K]
      float* y = ws.act[l + 1].data();    // [batch, N]
      if (m.roast) {
        roast::forward(x, k, m.params.data(), m.maps[l], batch, y, n, stream);
      } else {
        // Row-major Y = X . W is column-major Y^T (N x batch) = W^T . X^T: no transposes.
        gemm(cublas, compute, CUBLAS_OP_N, CUBLAS_OP_N, n, batch, k,
             m.params.data() + m.weight_offset[l], n, x, k, y, n);
      }
      add_bias<<<blocks_for(batch * n), block, 0, stream>>>(y, m.params.data() + m.bias_offset[l],
                                                            batch, n, l + 1 < layers);
      SQUEEZE_CHECK_LAUNCH();
    }
  }

  /// Gradients of every parameter from grad[layers] (dLoss / dlogits).
  void backward(model& m, std::uint64_t batch) {
    const cublasComputeType_t compute =
        args.dense_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    if (m.roast) {  // dM accumulates over the layers
      SQUEEZE_CUDA_TRY(
          cudaMemsetAsync(m.grads.data(), 0, m.stored_weights * sizeof(float), stream));
    }
    for (std::size_t l = layers; l-- > 0;) {
      const std::uint64_t k = widths[l];
      const std::uint64_t n = widths[l + 1];
      const float* x = ws.act[l].data();        // [batch, K]
      const float* dy = ws.grad[l + 1].data();  // [batch, N]
      if (m.roast) {
        roast::backward_memory(x, k, dy, n, m.maps[l], batch, m.grads.data(), stream);
      } else {
        // dW (K x N) = X^T . dY, column-major dW^T (N x K) = dY^T . X.
        gemm(cublas, compute, CUBLAS_OP_N, CUBLAS_OP_T, n, k, batch, dy, n, x, k,
             m.grads.data() + m.weight_offset[l], n);
      }
      bias_gradient<<<blocks_covering(n), block, 0, stream>>>(dy, batch, n,
                                                              m.grads.data() + m.bias_offset[l]);
      SQUEEZE_CHECK_LAUNCH();
      if (l == 0) break;              // no gradient for the images
      float* dx = ws.grad[l].data();  // [batch, K]
      if (m.roast) {
        roast::backward_input(dy, n, m.params.data(), m.maps[l], batch, dx, k, stream);
      } else {
        // dX = dY . W^T, column-major dX^T (K x batch) = W . dY^T (W^T is N x K there).
        gemm(cublas, compute, CUBLAS_OP_T, CUBLAS_OP_N, k, batch, n,
             m.params.data() + m.weight_offset[l], n, dy, n, dx, k);
      }
      relu_backward<<<blocks_for(batch * k), block, 0, stream>>>(dx, x, batch * k);
      SQUEEZE_CHECK_LAUNCH();
    }
  }

  /// Test accuracy (fraction correct).
  double evaluate(const model& m) {
    SQUEEZE_CUDA_TRY(cudaMemsetAsync(ws.correct.data(), 0, sizeof(unsigned), stream));
    for (std::uint64_t start = 0; start < test.count; start += args.batch) {
      const std::uint64_t batch = std::min(args.batch, test.count - start);
      gather(test, nullptr, start, batch);
      forward(m, batch);
      count_correct<<<blocks_covering(batch), block, 0, stream>>>(
          ws.act[layers].data(), ws.labels.data(), batch, ws.correct.data());
      SQUEEZE_CHECK_LAUNCH();
    }
    unsigned correct = 0;
    ws.correct.copy_to(std::span<unsigned>{&correct, 1}, stream);
    SQUEEZE_CUDA_TRY(cudaStreamSynchronize(stream));
    return static_cast<double>(correct) / static_cast<double>(test.count);
  }
};

struct epoch_result {
  double train_loss = 0;
  double test_accuracy = 0;
  double ms = 0;  // training only (device time from the first batch to the last update)
};

struct summary {
  std::string name;
  std::uint64_t stored_weights = 0;
  std::uint64_t parameters = 0;
  double compression = 1;
  std::vector<epoch_result> epochs;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

summary train_model(trainer& t, model& m) {
  const arguments& args = t.args;
  const std::uint64_t n_train = t.train.count;
  const std::uint64_t steps_per_epoch = (n_train + args.batch - 1) / args.batch;
  const double total_steps = static_cast<double>(steps_per_epoch) * args.epochs;
  constexpr float beta1 = 0.9f;
  constexpr float beta2 = 0.999f;
  constexpr float eps = 1e-8f;

  summary s{m.name, m.stored_weights, m.parameters(), m.compression(), {}};
  std::printf("    before training: test accuracy %.2f%%\n", 100.0 * t.evaluate(m));
  std::printf("    %5s  %10s  %9s  %9s  %9s\n", "epoch", "train loss", "test acc", "best", "ms");
  std::vector<int> order(n_train);
  splitmix64 order_rng{derive_seed(args.seed, order_stream)};  // the same order for every model
  core::event start;
  core::event stop;
  std::uint64_t step = 0;
  double best = 0;
  for (int epoch = 1; epoch <= args.epochs; ++epoch) {
    for (std::uint64_t i = 0; i < n_train; ++i) order[i] = static_cast<int>(i);
    for (std::uint64_t i = n_train - 1; i > 0; --i) {
      std::swap(order[i], order[order_rng.next() % (i + 1)]);
    }
    start.record(t.stream);
    t.ws.order.copy_from(std::span<const int>{order}, t.stream);
    SQUEEZE_CUDA_TRY(cudaMemsetAsync(t.ws.loss_sum.data(), 0, sizeof(double), t.stream));
    for (std::uint64_t first = 0; first < n_train; first += args.batch, ++step) {
      const std::uint64_t batch = std::min(args.batch, n_train - first);
      t.gather(t.train, t.ws.order.data(), first, batch);
      t.forward(m, batch);
      softmax_cross_entropy<<<blocks_covering(batch * 32), block, 0, t.stream>>>(
          t.ws.act[layers].data(), t.ws.labels.data(), batch, 1.0f / static_cast<float>(batch),
          t.ws.grad[layers].data(), t.ws.loss_sum.data());
      SQUEEZE_CHECK_LAUNCH();
      t.backward(m, batch);
      const double lr =
          args.lr * 0.5 *
          (1.0 + std::cos(std::numbers::pi * static_cast<double>(step) / total_steps));
      const double tt = static_cast<double>(step + 1);
      adam_step<<<blocks_for(m.size), block, 0, t.stream>>>(
          m.params.data(), m.grads.data(), m.adam_m.data(), m.adam_v.data(), m.size,
          static_cast<float>(lr), beta1, beta2, eps,
          static_cast<float>(1.0 / (1.0 - std::pow(double{beta1}, tt))),
          static_cast<float>(1.0 / (1.0 - std::pow(double{beta2}, tt))));
      SQUEEZE_CHECK_LAUNCH();
    }
    stop.record(t.stream);
    double loss_sum = 0;
    t.ws.loss_sum.copy_to(std::span<double>{&loss_sum, 1}, t.stream);
    stop.synchronize();
    SQUEEZE_CUDA_TRY(cudaStreamSynchronize(t.stream));
    float ms = 0;
    SQUEEZE_CUDA_TRY(cudaEventElapsedTime(&ms, start.get(), stop.get()));
    epoch_result r{loss_sum / static_cast<double>(n_train), t.evaluate(m), ms};
    best = std::max(best, r.test_accuracy);
    std::printf("    %5d  %10.4f  %8.2f%%  %8.2f%%  %9.1f\n", epoch, r.train_loss,
                100.0 * r.test_accuracy, 100.0 * best, r.ms);
    std::fflush(stdout);
    s.epochs.push_back(r);
  }
  return s;
}

}  // namespace roast_train

int main(int argc, char** argv) try {
  using namespace roast_train;
  arguments args;
  try {
    args = parse(argc, argv);
  } catch (const usage_error& e) {
    std::fprintf(stderr, "roast_train: %s\n%s", e.message.c_str(), usage);
    return 2;
  }

  // The data first: a missing data set is reported the same with or without a GPU.
  dataset data;
  try {
    data = load_dataset(args.data);
  } catch (const missing_data& e) {
    std::fprintf(stderr, "roast_train: %s\n", e.message.c_str());
    return 1;
  }
  std::printf("Fashion-MNIST from %s: %llu training and %llu test images of 28x28\n",
              args.data.c_str(), static_cast<unsigned long long>(data.train.count),
              static_cast<unsigned long long>(data.test.count));
  std::printf("  pixels / 255, standardized with the training mean %.4f and deviation %.4f\n",
              static_cast<double>(data.mean), static_cast<double>(data.stddev));

  const auto presence = core::detect_devices();
  if (!presence.present()) {
    std::printf("roast_train: no CUDA device (%s); nothing to run\n", presence.reason.c_str());
    return 0;
  }
  std::printf("GPU: %s\n", core::describe(core::query_device()).c_str());
  std::printf(
      "MLP 784-512-256-10, ReLU, softmax cross-entropy; %llu dense weights + %llu "
      "biases\n",
      static_cast<unsigned long long>(dense_weight_count()),
      static_cast<unsigned long long>(bias_count()));
  std::printf(
      "training: %d epochs, batch %llu, Adam (lr %g cosine-decayed to 0, betas 0.9 / "
      "0.999, eps 1e-8), seed %llu\n",
      args.epochs, static_cast<unsigned long long>(args.batch), args.lr,
      static_cast<unsigned long long>(args.seed));
  std::printf(
      "dense: cuBLAS %s; ROAST: one shared M, tile %ux%u, M ~ U(-1/C, 1/C) with C = "
      "%.3g, lambda = C / sqrt(fan_in), fp32 operands (TF32 forward on Hopper)\n",
      args.dense_tf32 ? "TF32 tensor cores" : "exact fp32", args.tile.k, args.tile.n, args.gms_c);

  core::stream stream;
  const cublas_handle cublas{stream};
  const device_split train{data.train, stream};
  const device_split test{data.test, stream};
  workspace ws{args.batch, data.train.count};
  trainer t{args, data, train, test, ws, cublas.get(), stream};

  std::vector<summary> results;
  const auto run = [&](model m) {
    std::printf(
        "\n== %s: %llu weights stored (compression %.1fx) + %llu biases = %llu "
        "parameters\n",
        m.name.c_str(), static_cast<unsigned long long>(m.stored_weights), m.compression(),
        static_cast<unsigned long long>(bias_count()),
        static_cast<unsigned long long>(m.parameters()));
    if (m.roast) {
      std::printf("    lambdas");
      for (const roast::mapping& map : m.maps) {
        std::printf(" %.3f", static_cast<double>(map.scale()));
      }
      std::printf("; %llu tile starts in M\n", static_cast<unsigned long long>(m.maps[0].slots()));
    }
    results.push_back(train_model(t, m));
  };
  run(make_dense(args.seed, args.dense_tf32, stream));
  for (const double c : args.compressions) run(make_roast(c, args, stream));

  std::printf("\n%-16s %15s %11s %12s %10s %10s %10s\n", "model", "weights stored", "parameters",
              "compression", "final acc", "best acc", "ms/epoch");
  for (const summary& s : results) {
    double best = 0;
    std::vector<double> ms;
    for (const epoch_result& r : s.epochs) {
      best = std::max(best, r.test_accuracy);
      ms.push_back(r.ms);
    }
    std::printf("%-16s %15llu %11llu %11.1fx %9.2f%% %9.2f%% %10.1f\n", s.name.c_str(),
                static_cast<unsigned long long>(s.stored_weights),
                static_cast<unsigned long long>(s.parameters), s.compression,
                100.0 * s.epochs.back().test_accuracy, 100.0 * best, median(ms));
  }
  std::printf(
      "(ms/epoch: the median over epochs of the training device time, evaluation "
      "excluded)\n");
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "roast_train: %s\n", e.what());
  return 1;
}
