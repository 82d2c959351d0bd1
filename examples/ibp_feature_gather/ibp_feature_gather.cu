// SPDX-License-Identifier: Apache-2.0
// ibp_feature_gather: a GNN trainer's feature fetch, compressed.
//
// N node-feature rows (float32) stay in host memory. Preprocessing (once): the GPU counts
// bits and sweeps the threshold, then compresses the rows; the compressed set goes back to
// pinned, mapped host memory. Each training step fetches a random minibatch of rows: once
// with the plain zero-copy gather of the uncompressed rows, once with IBP's compressed
// gather, and the program prints the fetch time per epoch of both and checks that the two
// deliver the same bytes.
//
//   ibp_feature_gather [nodes] [features] [batch]
//   ibp_feature_gather features.npy [batch]      (2-d, any dtype: a row is shape[1] items)
//   defaults: 500000 nodes, 128 float32 features, minibatches of 10000 rows
//
// The features are synthetic here: sparse, non-negative activations (ReLU of N(0,1), as in
// hidden-layer features), where IBP saves most of the exponent and sign bits.
#include <squeeze/core.hpp>
#include <squeeze/ibp/compress.cuh>
#include <squeeze/ibp/gather.cuh>
#include <squeeze/io/npy.hpp>
#include <squeeze/xfer.cuh>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/gpu.hpp"

namespace core = squeeze::core;
namespace ibp = squeeze::ibp;
namespace xfer = squeeze::xfer;

int main(int argc, char** argv) try {
  const std::string first = argc > 1 ? argv[1] : "";
  const bool from_npy = first.size() > 4 && first.substr(first.size() - 4) == ".npy";
  // Node features: [nodes, row_bytes] in mapped host memory, from a .npy file or synthetic.
  squeeze::io::npy_array npy;
  if (from_npy) npy = squeeze::io::read_npy(first);
  SQUEEZE_EXPECTS(!from_npy || npy.shape.size() == 2, "ibp_feature_gather: the .npy must be 2-d");
  const std::size_t nodes =
      from_npy ? npy.rows() : (argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 500'000);
  const std::size_t features =
      from_npy ? 0 : (argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 128);
  const int batch_arg = from_npy ? 2 : 3;
  const std::size_t batch = argc > batch_arg ? std::strtoull(argv[batch_arg], nullptr, 10)
                                             : std::min<std::size_t>(10'000, nodes);
  const auto row_bytes =
      static_cast<std::uint32_t>(from_npy ? npy.row_bytes() : features * sizeof(float));
  SQUEEZE_EXPECTS(nodes > 0 && batch > 0 && batch <= nodes, "need 0 < batch <= nodes");
  SQUEEZE_EXPECTS(row_bytes > 0, "rows must not be empty");
  const auto presence = core::detect_devices();
  if (!presence.present()) {
    return squeeze_examples::exit_without_gpu("ibp_feature_gather", presence);
  }
  std::printf("GPU: %s\n", core::describe(core::query_device()).c_str());

  auto table = xfer::allocate_mapped<std::byte>(nodes * row_bytes);
  std::mt19937_64 rng{7};
  if (from_npy) {
    std::copy(npy.data.begin(), npy.data.end(), table.data());
    std::printf("features: %s, %zu rows of %u B (%s)\n", first.c_str(), nodes, row_bytes,
                npy.descr.c_str());
  } else {
    std::normal_distribution<float> normal{0.0f, 1.0f};
    for (std::size_t i = 0; i < nodes * features; ++i) {
      const float v = std::max(0.0f, normal(rng));
      std::memcpy(table.data() + 4 * i, &v, 4);
    }
  }

  // Preprocess and compress once, on the GPU, straight from host memory.
  core::stream stream;
  core::event_timer prep{stream};
  prep.start();
  const auto counts = ibp::count_set_bits(table.device_data(), nodes, row_bytes, stream);
  const auto sweep = ibp::sweep_threshold_on_gpu(table.device_data(), nodes, counts, 4, 16, stream);
  const ibp::device_codebook on_gpu{sweep.best, stream};
  const ibp::codebook_ref cb = on_gpu.ref();
  const ibp::device_set compressed =
      ibp::compress_condensed(table.device_data(), nodes, cb, stream);
  prep.stop();
  // The compressed rows live in host memory, like the uncompressed ones.
  auto host_set = xfer::allocate_mapped<std::byte>(compressed.data_bytes);
  compressed.data.copy_to(std::span<std::byte>{host_set.data(), host_set.size()}, stream);
  stream.synchronize();
  const double saved =
      1.0 - static_cast<double>(compressed.data_bytes) / static_cast<double>(nodes * row_bytes);
  std::printf(
      "preprocessed and compressed %zu rows of %u B in %.1f ms: %.1f %% saved (T = %llu of %zu)\n",
      nodes, row_bytes, prep.elapsed_ms(), 100.0 * saved,
      static_cast<unsigned long long>(sweep.threshold), nodes);

  // One epoch of minibatches over a random permutation of the nodes.
  std::vector<std::int64_t> perm(nodes);
  for (std::size_t i = 0; i < nodes; ++i) perm[i] = static_cast<std::int64_t>(i);
  std::shuffle(perm.begin(), perm.end(), rng);
  core::device_buffer<std::int64_t> d_perm{nodes};
  d_perm.copy_from(std::span<const std::int64_t>{perm}, stream);
  core::device_buffer<std::byte> plain_out{batch * row_bytes}, ibp_out{batch * row_bytes};
  core::device_buffer<squeeze::status> st{1};
  SQUEEZE_CUDA_TRY(cudaMemsetAsync(st.data(), 0, sizeof(squeeze::status), stream));
  float plain_ms = 0, ibp_ms = 0;
  bool same = true;
  std::vector<std::byte> a(batch * row_bytes), b(batch * row_bytes);
  for (std::size_t first = 0; first + batch <= nodes; first += batch) {
    xfer::gather_args<std::int64_t> p;
    p.dst = plain_out.data();
    p.dst_stride = row_bytes;
    p.src = table.device_data();
    p.src_stride = row_bytes;
    p.src_rows = nodes;
    p.row_bytes = row_bytes;
    p.indices = d_perm.data() + first;
    p.count = batch;
    p.status_out = st.data();
    ibp::gather_args<std::int64_t> c;
    c.dst = ibp_out.data();
    c.dst_stride = row_bytes;
    c.data = host_set.device_data();
    c.data_bytes = host_set.size();
    c.offsets = compressed.offsets.data();
    c.rows = nodes;
    c.indices = d_perm.data() + first;
    c.count = batch;
    c.codebook = cb;
    c.status_out = st.data();
    core::event_timer t1{stream}, t2{stream};
    t1.start();
    xfer::gather_rows(p, stream);
    t1.stop();
    t2.start();
    ibp::gather_rows(c, stream);
    t2.stop();
    plain_ms += t1.elapsed_ms();
    ibp_ms += t2.elapsed_ms();
    if (first == 0) {  // check the first minibatch byte for byte
      plain_out.copy_to(std::span<std::byte>{a}, stream);
      ibp_out.copy_to(std::span<std::byte>{b}, stream);
      stream.synchronize();
      same = a == b;
    }
  }
  squeeze::status status{};
  SQUEEZE_CUDA_TRY(
      cudaMemcpyAsync(&status, st.data(), sizeof status, cudaMemcpyDeviceToHost, stream));
  stream.synchronize();
  if (status != squeeze::status::ok || !same) {
    std::printf("MISMATCH (status: %s)\n", squeeze::to_string(status));
    return 1;
  }
  std::printf(
      "epoch of %zu minibatches of %zu rows: plain gather %.2f ms, compressed gather %.2f ms "
      "(%.2fx; bound %.2fx)\n",
      nodes / batch, batch, plain_ms, ibp_ms, plain_ms / ibp_ms, 1.0 / (1.0 - saved));
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "ibp_feature_gather: %s\n", e.what());
  return 1;
}
