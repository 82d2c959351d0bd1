// SPDX-License-Identifier: Apache-2.0
// allreduce_sgd: data-parallel training of the 784-512-256-10 MLP on Fashion-MNIST across MPI
// ranks, the gradients averaged by an allreduce every step: the transport's own (the
// uncompressed baseline) or squeeze's (coll::allreducer), raw or with FRSZ2 on the wire. Each
// variant trains from the same initialization with the same batch order; the program prints
// every epoch's test accuracy, train loss, time and time inside the allreduce, and a summary
// that compares the compressed variants' accuracy with the baseline's (Zhou et al., ISC 2024,
// report that compression costs less than 0.5 points) and shows the bytes each sends per step.
//
//   mpiexec -n 2 build/bench/examples/allreduce_sgd --data DIR
//   mpiexec -n N allreduce_sgd [--data DIR] [--epochs N] [--batch B] [--seed S] [--lr LR]
//                              [--variants LIST] [--algorithm ring|rd]
//                              [--transport auto|nccl|mpi]
//
// (Open MPI run as root also needs --allow-run-as-root; more ranks than cores, --oversubscribe.)
//
// Ranks and GPUs: rank r uses GPU (its rank on the node) % (GPUs visible). When every rank has
// a GPU of its own the transport is NCCL (coll::nccl_transport, over a communicator made from
// MPI_COMM_WORLD: ncclGetUniqueId, MPI_Bcast, ncclCommInitRank); when ranks share a GPU it is
// MPI (coll::mpi_transport, staged through pinned host memory when MPI is not CUDA-aware),
// since NCCL allows one rank per GPU. --transport mpi forces MPI.
//
// Variants (--variants, default all four, each trained in turn):
//   native    the transport's own allreduce: ncclAllReduce or MPI_Allreduce
//   ring      squeeze's allreduce, raw (recursive doubling with --algorithm rd)
//   frsz2_16  squeeze's allreduce with frsz2::wire_codec<16> on the wire (about 0.52 of raw)
//   frsz2_8   squeeze's allreduce with frsz2::wire_codec<8> (about 0.27 of raw)
//
// The model, initialization, optimizer and schedule are roast_train's dense model (shared in
// common/mlp.cuh): ReLU MLP, softmax cross-entropy, W ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)),
// Adam (lr 1e-3 cosine-decayed to 0), fp32 cuBLAS. Every rank holds the same parameters. Each
// global minibatch (--batch, from one permutation per epoch that every rank draws alike) is
// cut into N shards of equal size (sizes differ by one row at most where N does not divide
// the batch); each rank computes the gradient of its shard, with the loss gradient scaled by
// 1 / (global batch) rather than 1 / (shard), so that the SUM the allreduce forms is the mean
// gradient over the global batch (the 1/N average folded into the loss: no extra pass). All
// gradients (weights and biases of the three layers) lie in one flat float array, so one
// allreduce per step averages them all. Every rank then takes the same Adam step on the same
// averaged gradient: the parameters stay identical on every rank, which is checked after
// every epoch (a checksum of the parameters compared across ranks; a difference aborts).
//
// Times: an epoch's time is the wall time of its training steps (evaluation excluded), the
// slowest rank's; the allreduce time is the sum over the steps of the time from the
// allreduce's start on the stream to its end (CUDA events; waiting for slower ranks
// included), the slowest rank's. Test accuracy is computed with the test set split across the
// ranks.
//
// Data: as roast_train, a directory holding the four uncompressed IDX files. Without --data
// the first of shared/data/fashion-mnist, ../shared/data/fashion-mnist, ../shared/data and
// /usr/share/datasets/fashion-mnist that holds them is used. The Debian package ships them
// gzip-compressed in /usr/share/datasets/fashion-mnist/: decompress a copy with `gunzip -k`
// and pass that directory.
#include <squeeze/coll/allreduce.cuh>
#include <squeeze/coll/mpi.hpp>
#include <squeeze/coll/mpi_nccl.hpp>
#include <squeeze/coll/nccl.hpp>
#include <squeeze/core.hpp>
#include <squeeze/frsz2/wire.cuh>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "common/cli.hpp"
#include "common/gpu.hpp"
#include "common/mlp.cuh"

namespace coll = squeeze::coll;
namespace core = squeeze::core;
namespace frsz2 = squeeze::frsz2;

namespace allreduce_sgd {

// The MLP's shape, kernels, dense layers, data and Adam: common/mlp.cuh.
using namespace squeeze_examples;

// ---- command line -------------------------------------------------------------------------

constexpr const char* usage =
    "usage: mpiexec -n N allreduce_sgd [--data DIR] [--epochs N] [--batch B] [--seed S]\n"
    "                                  [--lr LR] [--variants LIST] [--algorithm ring|rd]\n"
    "                                  [--transport auto|nccl|mpi]\n"
    "  --data DIR        directory with the four uncompressed Fashion-MNIST IDX files\n"
    "                    (default: the first of shared/data/fashion-mnist,\n"
    "                    ../shared/data/fashion-mnist, ../shared/data and\n"
    "                    /usr/share/datasets/fashion-mnist that holds them)\n"
    "  --epochs N        training epochs per variant (default 10)\n"
    "  --batch B         global minibatch, split into equal shards across the ranks\n"
    "                    (default 256)\n"
    "  --seed S          seed for initialization and batch order (default 0)\n"
    "  --lr LR           Adam's initial learning rate, cosine-decayed to 0 (default 1e-3)\n"
    "  --variants LIST   gradient allreduces to train with, comma-separated (default all):\n"
    "                    native    the transport's own (ncclAllReduce or MPI_Allreduce)\n"
    "                    ring      squeeze's, raw\n"
    "                    frsz2_16  squeeze's, FRSZ2 with 16-bit codes on the wire\n"
    "                    frsz2_8   squeeze's, FRSZ2 with 8-bit codes on the wire\n"
    "  --algorithm A     squeeze's schedule: ring, or rd (recursive doubling) (default ring)\n"
    "  --transport T     auto: NCCL when every rank has a GPU of its own, else MPI;\n"
    "                    nccl; mpi (default auto)\n";

using squeeze_examples::parse_number;
using squeeze_examples::usage_error;

constexpr std::array<std::string_view, 4> variant_keys{"native", "ring", "frsz2_16", "frsz2_8"};

enum class transport_choice : std::uint8_t { automatic, nccl, mpi };

struct arguments {
  std::string data;  // empty: the first default directory that holds the files
  int epochs = 10;
  std::uint64_t batch = 256;
  std::uint64_t seed = 0;
  double lr = 1e-3;
  std::vector<std::string> variants{variant_keys.begin(), variant_keys.end()};
  coll::algorithm algorithm = coll::algorithm::ring;
  transport_choice transport = transport_choice::automatic;
  bool help = false;
};

arguments parse(int argc, char** argv) {
  arguments args;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    const auto value = [&] { return squeeze_examples::option_value(argc, argv, i); };
    if (arg == "--help" || arg == "-h") {
      args.help = true;
    } else if (parse_training_option(arg, value, args)) {  // --data --epochs --batch --seed --lr
    } else if (arg == "--variants") {
      args.variants.clear();
      for (const std::string_view item : squeeze_examples::list_items(arg, value())) {
        if (std::find(variant_keys.begin(), variant_keys.end(), item) == variant_keys.end()) {
          throw usage_error{"--variants: '" + std::string{item} +
                            "' is not one of native, ring, frsz2_16, frsz2_8"};
        }
        if (std::find(args.variants.begin(), args.variants.end(), item) != args.variants.end()) {
          throw usage_error{"--variants: '" + std::string{item} + "' is named twice"};
        }
        args.variants.emplace_back(item);
      }
    } else if (arg == "--algorithm") {
      const std::string_view a = value();
      if (a == "ring") {
        args.algorithm = coll::algorithm::ring;
      } else if (a == "rd" || a == "recursive_doubling") {
        args.algorithm = coll::algorithm::recursive_doubling;
      } else {
        throw usage_error{"--algorithm: '" + std::string{a} + "' is not ring or rd"};
      }
    } else if (arg == "--transport") {
      const std::string_view t = value();
      if (t == "auto") {
        args.transport = transport_choice::automatic;
      } else if (t == "nccl") {
        args.transport = transport_choice::nccl;
      } else if (t == "mpi") {
        args.transport = transport_choice::mpi;
      } else {
        throw usage_error{"--transport: '" + std::string{t} + "' is not auto, nccl or mpi"};
      }
    } else {
      throw usage_error{"unknown argument '" + std::string{arg} + "'"};
    }
  }
  return args;
}

// ---- data ---------------------------------------------------------------------------------

constexpr std::array<const char*, 4> default_data_dirs{
    "shared/data/fashion-mnist", "../shared/data/fashion-mnist", "../shared/data",
    "/usr/share/datasets/fashion-mnist"};
constexpr const char* example_line = "mpiexec -n 2 allreduce_sgd --data ~/fashion-mnist";

/// The data set from --data, or from the first default directory that holds it (the last
/// default is read for real, so that its error says what is wrong there). Throws missing_data.
std::pair<std::string, dataset> load_data(const arguments& args) {
  if (!args.data.empty()) return {args.data, load_dataset(args.data, example_line)};
  for (std::size_t i = 0; i + 1 < default_data_dirs.size(); ++i) {
    if (holds_dataset(default_data_dirs[i])) {
      return {default_data_dirs[i], load_dataset(default_data_dirs[i], example_line)};
    }
  }
  const std::string last = default_data_dirs.back();
  try {
    return {last, load_dataset(last, example_line)};
  } catch (const missing_data& e) {
    std::string tried;
    for (const char* dir : default_data_dirs) tried += std::string{tried.empty() ? "" : ", "} + dir;
    throw missing_data{"no --data given, and none of " + tried +
                       " holds the four uncompressed IDX files.\n" + e.message};
  }
}

// ---- MPI ----------------------------------------------------------------------------------

using world = coll::placement;

world query_world() {
  return coll::placement_of(MPI_COMM_WORLD);
}

/// op of v over the ranks.
template <class T>
T over_ranks(T v, MPI_Op op) {
  SQUEEZE_MPI_TRY(MPI_Allreduce(MPI_IN_PLACE, &v, 1, coll::mpi_type<T>(), op, MPI_COMM_WORLD));
  return v;
}
template <class T>
T max_over_ranks(T v) {
  return over_ranks(v, MPI_MAX);
}
template <class T>
T min_over_ranks(T v) {
  return over_ranks(v, MPI_MIN);
}
template <class T>
T sum_over_ranks(T v) {
  return over_ranks(v, MPI_SUM);
}

// ---- variants -----------------------------------------------------------------------------

/// One way of summing the gradients over the ranks.
struct variant {
  std::string key;   // as --variants names it
  std::string name;  // for the tables
  /// grads[0 .. count) = their sum over the ranks, in place (device memory), ordered on
  /// `stream` (NCCL) or complete on return (MPI). squeeze's variants check across the ranks
  /// that every rank makes the same call the first time a signature is seen (a host
  /// synchronization), not again (coll::verification::first_call).
  std::function<void(float* grads, std::size_t count, cudaStream_t stream)> sum;
  /// What this rank sent in the last call (squeeze's variants only).
  std::function<std::size_t()> bytes_sent;
};

template <class Codec, class Transport>
variant squeeze_variant(std::string key, std::string name, Transport& net,
                        coll::algorithm algorithm) {
  auto ar = std::make_shared<coll::allreducer<Transport, Codec>>(net);
  return {std::move(key), std::move(name),
          [ar, algorithm](float* grads, std::size_t count, cudaStream_t stream) {
            (*ar)(grads, grads, count, coll::reduce_op::sum, stream, {.algorithm = algorithm});
          },
          [ar] { return ar->bytes_sent(); }};
}

/// The variant --variants names `key`, over `net` (which must outlive it).
template <class Transport>
variant make_variant(const std::string& key, Transport& net, coll::algorithm algorithm,
                     const char* native_name) {
  const std::string schedule = algorithm == coll::algorithm::ring ? "ring" : "rd";
  if (key == "native") {
    return {key,
            std::string{"native ("} + native_name + ")",
            [&net](float* grads, std::size_t count, cudaStream_t stream) {
              net.native_allreduce(grads, grads, count, coll::reduce_op::sum, stream);
            },
            {}};
  }
  if (key == "ring") {
    return squeeze_variant<coll::no_compression>(key, schedule + " raw", net, algorithm);
  }
  if (key == "frsz2_16") {
    return squeeze_variant<frsz2::wire_codec<16>>(key, schedule + "+frsz2_16", net, algorithm);
  }
  return squeeze_variant<frsz2::wire_codec<8>>(key, schedule + "+frsz2_8", net, algorithm);
}

// ---- training -----------------------------------------------------------------------------

/// What every variant's training shares.
struct context {
  const arguments& args;
  const world& w;
  const device_split& train;
  const device_split& test;
  workspace& ws;
  std::uint64_t capacity;  // rows of ws: the largest shard of a global batch
  cublasHandle_t cublas;
  cudaStream_t stream;
};

/// This rank's rows of `count` rows from `first`: [first + count r / N, first + count (r+1) / N),
/// as (first row, rows).
std::pair<std::uint64_t, std::uint64_t> shard(std::uint64_t first, std::uint64_t count,
                                              const world& w) {
  const auto r = static_cast<std::uint64_t>(w.rank);
  const auto n = static_cast<std::uint64_t>(w.size);
  const std::uint64_t lo = first + count * r / n;
  const std::uint64_t hi = first + count * (r + 1) / n;
  return {lo, hi - lo};
}

/// Test accuracy (fraction correct), each rank classifying its shard of the test set.
double evaluate(const context& c, const dense_layers& dense, const mlp_params& m) {
  const auto [first, rows] = shard(0, c.test.count, c.w);
  const std::uint64_t correct =
      sum_over_ranks(count_correct(dense, m, c.ws, c.test, first, rows, c.capacity, c.stream));
  return static_cast<double>(correct) / static_cast<double>(c.test.count);
}

/// FNV-1a over the parameters' bits.
std::uint64_t checksum(const mlp_params& m, cudaStream_t stream) {
  std::vector<std::uint32_t> bits(m.size);
  SQUEEZE_CUDA_TRY(cudaMemcpyAsync(bits.data(), m.params.data(), m.size * sizeof(float),
                                   cudaMemcpyDeviceToHost, stream));
  SQUEEZE_CUDA_TRY(cudaStreamSynchronize(stream));
  std::uint64_t h = 1469598103934665603ull;
  for (const std::uint32_t b : bits) h = (h ^ b) * 1099511628211ull;
  return h;
}

/// Aborts every rank unless all ranks hold the same parameters (the maximum over the ranks of
/// the checksum and of its complement: both match this rank's iff all checksums are equal).
void check_same_parameters(const context& c, const mlp_params& m, const variant& v,
                           const char* when) {
  const std::uint64_t mine = checksum(m, c.stream);
  std::array<std::uint64_t, 2> all{mine, ~mine};
  SQUEEZE_MPI_TRY(
      MPI_Allreduce(MPI_IN_PLACE, all.data(), 2, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD));
  if (all[0] == mine && all[1] == ~mine) return;
  std::fprintf(stderr,
               "allreduce_sgd: rank %d: the ranks' parameters DIFFER %s (%s): this rank's "
               "checksum %016llx, the largest %016llx, the smallest %016llx. Every rank must "
               "hold the same model; the allreduce did not give every rank the same sum.\n",
               c.w.rank, when, v.name.c_str(), static_cast<unsigned long long>(mine),
               static_cast<unsigned long long>(all[0]), static_cast<unsigned long long>(~all[1]));
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 3);
}

struct epoch_result {
  double train_loss = 0;
  double test_accuracy = 0;
  double ms = 0;            // the training steps' wall time, the slowest rank's
  double allreduce_ms = 0;  // inside the allreduce calls, the slowest rank's
};

struct summary {
  std::string key;
  std::string name;
  std::vector<epoch_result> epochs;
  std::size_t bytes_per_step = 0;  // the most any rank sent in one allreduce (squeeze's only)
};

summary train_variant(const context& c, variant& v) {
  const arguments& args = c.args;
  const bool root = c.w.rank == 0;
  mlp_params m;
  init_dense(m, args.seed, c.stream);  // the same seed everywhere: the same model everywhere
  const dense_layers dense{c.cublas, CUBLAS_COMPUTE_32F, m};
  const std::uint64_t n_train = c.train.count;
  const std::uint64_t steps_per_epoch = (n_train + args.batch - 1) / args.batch;
  const double total_steps = static_cast<double>(steps_per_epoch) * args.epochs;

  // One untimed call on scratch values of the same size first: it allocates what the
  // allreducer keeps between calls and checks that every rank makes the same call; the
  // training calls repeat its signature, so they are not checked again (and make no host
  // synchronization).
  {
    core::device_buffer<float> scratch{m.size};
    scratch.fill_bytes(0x3C, c.stream);  // floats near 0.0115
    v.sum(scratch.data(), m.size, c.stream);
    SQUEEZE_CUDA_TRY(cudaStreamSynchronize(c.stream));
  }
  check_same_parameters(c, m, v, "after initialization");

  summary s{v.key, v.name, {}, 0};
  const double initial = evaluate(c, dense, m);
  if (root) {
    std::printf("    before training: test accuracy %.2f%%\n", 100.0 * initial);
    std::printf("    %5s  %10s  %9s  %9s  %9s  %12s\n", "epoch", "train loss", "test acc", "best",
                "ms", "allreduce ms");
    std::fflush(stdout);
  }
  std::vector<int> order(n_train);
  splitmix64 order_rng{derive_seed(args.seed, order_stream)};  // the same order everywhere
  std::vector<core::event> sum_start(steps_per_epoch);
  std::vector<core::event> sum_stop(steps_per_epoch);
  std::uint64_t step = 0;
  double best = 0;
  for (int epoch = 1; epoch <= args.epochs; ++epoch) {
    fresh_permutation(order, order_rng);
    c.ws.order.copy_from(std::span<const int>{order}, c.stream);
    SQUEEZE_CUDA_TRY(cudaMemsetAsync(c.ws.loss_sum.data(), 0, sizeof(double), c.stream));
    SQUEEZE_CUDA_TRY(cudaStreamSynchronize(c.stream));
    SQUEEZE_MPI_TRY(MPI_Barrier(MPI_COMM_WORLD));
    const auto t0 = std::chrono::steady_clock::now();
    std::size_t k = 0;
    for (std::uint64_t first = 0; first < n_train; first += args.batch, ++step, ++k) {
      const std::uint64_t batch = std::min(args.batch, n_train - first);
      const auto [lo, rows] = shard(first, batch, c.w);
      if (rows > 0) {
        gather_batch(c.train, c.ws.order.data(), lo, rows, c.ws, c.stream);
        mlp_forward(dense, m, c.ws, rows, c.stream);
        // 1 / (global batch): the sum over the ranks is the global batch's mean gradient
        softmax_cross_entropy(c.ws, rows, 1.0f / static_cast<float>(batch), c.stream);
        mlp_backward(dense, m, c.ws, rows, c.stream);
      } else {  // a last batch smaller than the ranks: this rank adds nothing
        m.grads.fill_bytes(0, c.stream);
      }
      sum_start[k].record(c.stream);
      v.sum(m.grads.data(), m.size, c.stream);  // every gradient, one call
      sum_stop[k].record(c.stream);
      adam_step(m, cosine_lr(args.lr, step, total_steps), step, c.stream);
    }
    SQUEEZE_CUDA_TRY(cudaStreamSynchronize(c.stream));
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    double sum_ms = 0;
    for (std::size_t i = 0; i < k; ++i) {
      float e = 0;
      SQUEEZE_CUDA_TRY(cudaEventElapsedTime(&e, sum_start[i].get(), sum_stop[i].get()));
      sum_ms += e;
    }
    double loss_sum = 0;
    c.ws.loss_sum.copy_to(std::span<double>{&loss_sum, 1}, c.stream);
    SQUEEZE_CUDA_TRY(cudaStreamSynchronize(c.stream));

    epoch_result r;
    r.train_loss = sum_over_ranks(loss_sum) / static_cast<double>(n_train);
    r.ms = max_over_ranks(ms);
    r.allreduce_ms = max_over_ranks(sum_ms);
    check_same_parameters(c, m, v, ("after epoch " + std::to_string(epoch)).c_str());
    r.test_accuracy = evaluate(c, dense, m);
    best = std::max(best, r.test_accuracy);
    if (root) {
      std::printf("    %5d  %10.4f  %8.2f%%  %8.2f%%  %9.1f  %12.1f\n", epoch, r.train_loss,
                  100.0 * r.test_accuracy, 100.0 * best, r.ms, r.allreduce_ms);
      std::fflush(stdout);
    }
    s.epochs.push_back(r);
  }
  if (v.bytes_sent) {
    s.bytes_per_step = static_cast<std::size_t>(max_over_ranks(std::uint64_t{v.bytes_sent()}));
  }
  return s;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/// Trains every variant --variants names, in turn, over `net`.
template <class Transport>
std::vector<summary> train_all(const context& c, Transport& net, const char* native_name) {
  std::vector<summary> results;
  for (const std::string& key : c.args.variants) {
    variant v = make_variant(key, net, c.args.algorithm, native_name);
    if (c.w.rank == 0) {
      std::printf("\n== %s\n", v.name.c_str());
      std::fflush(stdout);
    }
    results.push_back(train_variant(c, v));
  }
  return results;
}

void print_summary(const context& c, const std::vector<summary>& results, std::size_t values) {
  const summary* native = nullptr;
  const summary* raw = nullptr;
  for (const summary& s : results) {
    if (s.key == "native") native = &s;
    if (s.key == "ring") raw = &s;
  }
  std::printf("\n%-24s %10s %10s %10s %10s %13s %12s %9s\n", "variant", "final acc", "best acc",
              "vs native", "ms/epoch", "allreduce ms", "bytes/step", "vs raw");
  double worst = -1;  // the largest |difference| of a squeeze variant to native, in points
  for (const summary& s : results) {
    double best = 0;
    std::vector<double> ms;
    std::vector<double> sum_ms;
    for (const epoch_result& r : s.epochs) {
      best = std::max(best, r.test_accuracy);
      ms.push_back(r.ms);
      sum_ms.push_back(r.allreduce_ms);
    }
    const double final_acc = s.epochs.back().test_accuracy;
    char versus[32] = "-";
    if (native != nullptr && &s != native) {
      const double points = 100.0 * (final_acc - native->epochs.back().test_accuracy);
      std::snprintf(versus, sizeof versus, "%+.2f", points);
      worst = std::max(worst, std::abs(points));
    }
    char bytes[32] = "-";
    char ratio[32] = "-";
    if (s.key != "native") {
      std::snprintf(bytes, sizeof bytes, "%zu", s.bytes_per_step);
      if (raw != nullptr && raw->bytes_per_step > 0) {
        std::snprintf(
            ratio, sizeof ratio, "%.3f",
            static_cast<double>(s.bytes_per_step) / static_cast<double>(raw->bytes_per_step));
      }
    }
    std::printf("%-24s %9.2f%% %9.2f%% %10s %10.1f %13.1f %12s %9s\n", s.name.c_str(),
                100.0 * final_acc, 100.0 * best, versus, median(ms), median(sum_ms), bytes, ratio);
  }
  std::printf(
      "(vs native: final test accuracy minus native's, in points. ms/epoch and allreduce ms: "
      "medians over the epochs\n of the slowest rank's training wall time and time inside the "
      "allreduce calls. bytes/step: what a rank\n sent in one allreduce of the %zu gradient "
      "values (%zu bytes of fp32), allreducer::bytes_sent(), the most\n over the %d ranks; vs "
      "raw: that over the raw variant's.)\n",
      values, values * sizeof(float), c.w.size);
  if (native != nullptr && worst >= 0) {
    std::printf(
        "largest difference to native: %.2f points (Zhou et al., ISC 2024, report compression "
        "within 0.5): %s\n",
        worst, worst <= 0.5 ? "within" : "NOT within");
  }
}

/// The program between MPI_Init and MPI_Finalize; returns the exit status (the same on every
/// rank). Exceptions are for the caller to abort on.
int run(int argc, char** argv, const world& w) {
  const bool root = w.rank == 0;
  arguments args;
  try {
    args = parse(argc, argv);
  } catch (const usage_error& e) {
    if (root) std::fprintf(stderr, "allreduce_sgd: %s\n%s", e.message.c_str(), usage);
    return 2;
  }
  if (args.help) {
    if (root) std::fputs(usage, stdout);
    return 0;
  }
  if (args.batch < static_cast<std::uint64_t>(w.size)) {
    if (root) {
      std::fprintf(stderr, "allreduce_sgd: --batch %llu is smaller than the %d ranks\n%s",
                   static_cast<unsigned long long>(args.batch), w.size, usage);
    }
    return 2;
  }

  // The data first: a missing data set is reported the same with or without a GPU (by the
  // lowest rank that failed; every rank reads it).
  std::string data_dir;
  dataset data;
  std::string failure;
  try {
    std::tie(data_dir, data) = load_data(args);
  } catch (const missing_data& e) {
    failure = e.message;
  } catch (const std::exception& e) {
    failure = e.what();
  }
  const int first_failed = min_over_ranks(failure.empty() ? w.size : w.rank);
  if (first_failed < w.size) {
    if (w.rank == first_failed) std::fprintf(stderr, "allreduce_sgd: %s\n", failure.c_str());
    return 1;
  }
  if (root) {
    std::printf("Fashion-MNIST from %s: %llu training and %llu test images of 28x28\n",
                data_dir.c_str(), static_cast<unsigned long long>(data.train.count),
                static_cast<unsigned long long>(data.test.count));
    std::printf("  pixels / 255, standardized with the training mean %.4f and deviation %.4f\n",
                static_cast<double>(data.mean), static_cast<double>(data.stddev));
  }

  // Without a GPU on some rank, every rank exits with squeeze_examples::exit_no_gpu (77); the
  // lowest rank without one says why.
  const auto presence = core::detect_devices();
  const int first_without = min_over_ranks(presence.present() ? w.size : w.rank);
  if (first_without < w.size) {
    if (w.rank == first_without) {
      const std::string program = "allreduce_sgd: rank " + std::to_string(w.rank);
      return squeeze_examples::exit_without_gpu(program.c_str(), presence);
    }
    return squeeze_examples::exit_no_gpu;
  }
  const int device = w.local_rank % presence.count;
  SQUEEZE_CUDA_TRY(cudaSetDevice(device));
  const bool shared = max_over_ranks(w.local_size > presence.count ? 1 : 0) != 0;
  if (args.transport == transport_choice::nccl && shared) {
    if (root) {
      std::fprintf(stderr,
                   "allreduce_sgd: --transport nccl, but ranks share a GPU (a node runs more "
                   "ranks than it has GPUs) and NCCL allows one rank per GPU: use fewer ranks "
                   "or --transport mpi\n");
    }
    return 1;
  }
  const bool use_nccl = args.transport == transport_choice::nccl ||
                        (args.transport == transport_choice::automatic && !shared);

  std::vector<int> devices(static_cast<std::size_t>(w.size));
  SQUEEZE_MPI_TRY(MPI_Gather(&device, 1, MPI_INT, devices.data(), 1, MPI_INT, 0, MPI_COMM_WORLD));
  const std::uint64_t capacity =
      (args.batch + static_cast<std::uint64_t>(w.size) - 1) / static_cast<std::uint64_t>(w.size);
  if (root) {
    std::printf("GPU: %s\n", core::describe(core::query_device()).c_str());
    std::printf("%d ranks; GPU of each rank on its node:", w.size);
    for (const int d : devices) std::printf(" %d", d);
    std::printf("\n");
    std::printf(
        "MLP 784-512-256-10, ReLU, softmax cross-entropy; %llu dense weights + %llu biases\n",
        static_cast<unsigned long long>(dense_weight_count()),
        static_cast<unsigned long long>(bias_count()));
    std::printf(
        "training: %d epochs, global batch %llu (%llu rows per rank at most), Adam (lr %g "
        "cosine-decayed to 0, betas 0.9 / 0.999, eps 1e-8), seed %llu, cuBLAS exact fp32\n",
        args.epochs, static_cast<unsigned long long>(args.batch),
        static_cast<unsigned long long>(capacity), args.lr,
        static_cast<unsigned long long>(args.seed));
    std::fflush(stdout);
  }

  core::stream stream;
  const cublas_handle cublas{stream};
  const device_split train{data.train, data, stream};
  const device_split test{data.test, data, stream};
  workspace ws{capacity, data.train.count};
  const context c{args, w, train, test, ws, capacity, cublas.get(), stream};
  mlp_params layout;  // the flat arrays' size, nothing allocated
  set_dense_layout(layout);
  const std::size_t values = layout.size;
  if (root) {
    std::printf(
        "gradients: one flat array of %zu floats (%.2f MiB), one allreduce per step; "
        "squeeze's schedule: %s\n",
        values, static_cast<double>(values * sizeof(float)) / (1024.0 * 1024.0),
        coll::name(args.algorithm));
  }

  std::vector<summary> results;
  if (use_nccl) {
    const coll::nccl_communicator comm{MPI_COMM_WORLD};
    coll::nccl_transport net{comm.get()};
    if (root) {
      int version = 0;
      SQUEEZE_NCCL_TRY(comm.get(), ncclGetVersion(&version));
      std::printf("transport: NCCL %d (%s)\n", version,
                  args.transport == transport_choice::nccl ? "--transport nccl"
                                                           : "every rank has a GPU of its own");
      std::fflush(stdout);
    }
    results = train_all(c, net, "ncclAllReduce");
  } else {
    coll::mpi_transport net{MPI_COMM_WORLD};
    if (root) {
      std::printf(
          "transport: MPI (%s), %s\n",
          shared ? "ranks share a GPU, and NCCL allows one rank per GPU" : "--transport mpi",
          net.staged() ? "staged through pinned host memory (MPI is not CUDA-aware)"
                       : "device buffers to a CUDA-aware MPI");
      std::fflush(stdout);
    }
    results = train_all(c, net, "MPI_Allreduce");
  }
  if (root) print_summary(c, results, values);
  return 0;
}

}  // namespace allreduce_sgd

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  int status = 0;
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  try {
    status = allreduce_sgd::run(argc, argv, allreduce_sgd::query_world());
  } catch (const std::exception& e) {
    // The other ranks may wait in a collective for this one: end them all.
    std::fprintf(stderr, "allreduce_sgd: rank %d: %s\n", rank, e.what());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return status;
}
