// SPDX-License-Identifier: Apache-2.0
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
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/cli.hpp"
#include "common/gpu.hpp"
#include "common/mlp.cuh"

namespace core = squeeze::core;
namespace roast = squeeze::roast;

namespace roast_train {

// The MLP's shape, kernels, dense layers, data and Adam: common/mlp.cuh.
using namespace squeeze_examples;

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
    } else if (parse_training_option(arg, value, args)) {  // --data --epochs --batch --seed --lr
    } else if (arg == "--compressions") {
      args.compressions.clear();
      for (const std::string_view item : squeeze_examples::list_items(arg, value())) {
        const double c = parse_number<double>(arg, item);
        if (!std::isfinite(c) || c < 1) {
          throw usage_error{"--compressions: '" + std::string{item} +
                            "' is not a compression >= 1 (dense weights / |M|)"};
        }
        args.compressions.push_back(c);
      }
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

// ---- models -------------------------------------------------------------------------------

constexpr std::uint64_t hash_stream = 100;  // + layer

/// One MLP: its flat arrays (mlp_params). Dense: [W1 | W2 | W3 | b1 | b2 | b3]; ROAST:
/// [M | b1 | b2 | b3] (M first: 16-byte aligned, as ROAST-MM needs). Segments start on
/// 64-value boundaries; the padding stays 0.
struct model : mlp_params {
  std::string name;
  bool roast = false;
  std::uint64_t stored_weights = 0;           // dense weights, or |M|
  std::array<roast::mapping, layers> maps{};  // ROAST only; M at offset 0

  [[nodiscard]] std::uint64_t parameters() const { return stored_weights + bias_count(); }
  [[nodiscard]] double compression() const {
    return static_cast<double>(dense_weight_count()) / static_cast<double>(stored_weights);
  }
};

model make_dense(std::uint64_t seed, bool tf32, cudaStream_t stream) {
  model m;
  m.name = tf32 ? "dense (TF32)" : "dense";
  m.stored_weights = dense_weight_count();
  init_dense(m, seed, stream);
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

/// The ROAST layers: W_l = lambda_l * M[hash_l], read through the tile hash by ROAST-MM;
/// the weight gradient accumulates into dM (cleared before the backward pass).
struct roast_layers {
  const model& m;
  cudaStream_t stream;

  void forward(std::size_t l, const float* x, std::uint64_t batch, float* y) const {
    roast::forward(x, widths[l], m.params.data(), m.maps[l], batch, y, widths[l + 1], stream);
  }
  void weight_gradient(std::size_t l, const float* x, const float* dy, std::uint64_t batch) const {
    roast::backward_memory(x, widths[l], dy, widths[l + 1], m.maps[l], batch, m.grads.data(),
                           stream);
  }
  void input_gradient(std::size_t l, const float* dy, std::uint64_t batch, float* dx) const {
    roast::backward_input(dy, widths[l + 1], m.params.data(), m.maps[l], batch, dx, widths[l],
                          stream);
  }
};
static_assert(linear_layers<roast_layers>);

struct trainer {
  const arguments& args;
  const device_split& train;
  const device_split& test;
  workspace& ws;
  cublasHandle_t cublas;
  cudaStream_t stream;

  [[nodiscard]] dense_layers dense(const model& m) const {
    return {cublas, args.dense_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, m};
  }

  void forward(const model& m, std::uint64_t batch) {
    if (m.roast) {
      mlp_forward(roast_layers{m, stream}, m, ws, batch, stream);
    } else {
      mlp_forward(dense(m), m, ws, batch, stream);
    }
  }

  /// Gradients of every parameter from grad[layers] (dLoss / dlogits).
  void backward(model& m, std::uint64_t batch) {
    if (m.roast) {  // dM accumulates over the layers
      SQUEEZE_CUDA_TRY(
          cudaMemsetAsync(m.grads.data(), 0, m.stored_weights * sizeof(float), stream));
      mlp_backward(roast_layers{m, stream}, m, ws, batch, stream);
    } else {
      mlp_backward(dense(m), m, ws, batch, stream);
    }
  }

  /// Test accuracy (fraction correct).
  double evaluate(const model& m) {
    const std::uint64_t correct =
        m.roast
            ? count_correct(roast_layers{m, stream}, m, ws, test, 0, test.count, args.batch, stream)
            : count_correct(dense(m), m, ws, test, 0, test.count, args.batch, stream);
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
    fresh_permutation(order, order_rng);
    start.record(t.stream);
    t.ws.order.copy_from(std::span<const int>{order}, t.stream);
    SQUEEZE_CUDA_TRY(cudaMemsetAsync(t.ws.loss_sum.data(), 0, sizeof(double), t.stream));
    for (std::uint64_t first = 0; first < n_train; first += args.batch, ++step) {
      const std::uint64_t batch = std::min(args.batch, n_train - first);
      gather_batch(t.train, t.ws.order.data(), first, batch, t.ws, t.stream);
      t.forward(m, batch);
      softmax_cross_entropy(t.ws, batch, 1.0f / static_cast<float>(batch), t.stream);
      t.backward(m, batch);
      adam_step(m, cosine_lr(args.lr, step, total_steps), step, t.stream);
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
    data = load_dataset(args.data, "roast_train --data ~/fashion-mnist");
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
  if (!presence.present()) return squeeze_examples::exit_without_gpu("roast_train", presence);
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
  const device_split train{data.train, data, stream};
  const device_split test{data.test, data, stream};
  workspace ws{args.batch, data.train.count};
  trainer t{args, train, test, ws, cublas.get(), stream};

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
