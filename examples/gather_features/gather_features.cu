// SPDX-License-Identifier: Apache-2.0
// gather_features: the feature fetch of a GNN trainer, with squeeze's row gather.
//
// A node-feature table too large to keep on the GPU stays in host memory (here: mapped,
// page-locked memory). Each step samples a minibatch of node ids on the GPU side and
// gathers their feature rows straight from host memory into a device tensor: no CPU
// gather, no staging copy. The program checks the gathered rows against the table and
// prints the fetch rate beside one cudaMemcpy of the same number of bytes.
//
//   gather_features [nodes] [features] [batch]      (defaults 1000000 100 100000)
#include <squeeze/core.hpp>
#include <squeeze/xfer.cuh>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "common/gpu.hpp"

namespace core = squeeze::core;
namespace xfer = squeeze::xfer;

int main(int argc, char** argv) try {
  const std::size_t nodes = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1'000'000;
  const std::size_t features = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 100;
  const std::size_t batch = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 100'000;
  SQUEEZE_EXPECTS(nodes > 0 && features > 0 && batch > 0,
                  "nodes, features and batch must be positive");

  const auto presence = core::detect_devices();
  if (!presence.present()) return squeeze_examples::exit_without_gpu("gather_features", presence);
  std::printf("GPU: %s\n", core::describe(core::query_device()).c_str());

  // [nodes, features] float32 in mapped host memory: 400 B rows, not a multiple of 128.
  const std::size_t row_bytes = features * sizeof(float);
  auto table = xfer::allocate_mapped<float>(nodes * features);
  std::mt19937_64 rng{42};
  std::normal_distribution<float> normal{0.0f, 1.0f};
  for (std::size_t i = 0; i < table.size(); ++i) table[i] = normal(rng);

  // A minibatch of node ids (sampled on the host here; a trainer samples on the GPU).
  std::vector<std::int64_t> ids(batch);
  for (auto& id : ids) id = static_cast<std::int64_t>(rng() % nodes);

  core::stream stream;
  core::device_buffer<std::int64_t> d_ids{batch};
  core::device_buffer<float> out{batch * features};  // [batch, features]
  core::device_buffer<squeeze::status> d_status{1};
  d_ids.copy_from(std::span<const std::int64_t>{ids}, stream);
  SQUEEZE_CUDA_TRY(cudaMemsetAsync(d_status.data(), 0, sizeof(squeeze::status), stream));

  xfer::gather_args<std::int64_t> args;
  args.dst = out.data();
  args.dst_stride = row_bytes;
  args.src = table.device_data();
  args.src_stride = row_bytes;
  args.src_rows = nodes;
  args.row_bytes = row_bytes;
  args.indices = d_ids.data();
  args.count = batch;
  args.status_out = d_status.data();

  const auto gather = core::time_region(stream, {.warmup = 2, .repeats = 10},
                                        [&] { xfer::gather_rows(args, stream); });

  // Check: every gathered row equals its table row.
  std::vector<float> got(batch * features);
  out.copy_to(std::span<float>{got}, stream);
  squeeze::status st{};
  SQUEEZE_CUDA_TRY(
      cudaMemcpyAsync(&st, d_status.data(), sizeof st, cudaMemcpyDeviceToHost, stream));
  stream.synchronize();
  if (st != squeeze::status::ok)
    throw squeeze::error{std::string{"gather reported: "} + squeeze::to_string(st)};
  for (std::size_t i = 0; i < batch; ++i) {
    const float* want = table.data() + static_cast<std::size_t>(ids[i]) * features;
    for (std::size_t f = 0; f < features; ++f) {
      if (got[i * features + f] != want[f]) {
        std::printf("MISMATCH at row %zu feature %zu\n", i, f);
        return 1;
      }
    }
  }

  // Baseline from the same run: one bulk copy of the same number of bytes.
  const std::size_t bytes = batch * row_bytes;
  auto staging = core::pinned_buffer<std::byte>{bytes};
  core::device_buffer<std::byte> bulk_dst{bytes};
  const auto bulk = core::time_region(stream, {.warmup = 2, .repeats = 10}, [&] {
    SQUEEZE_CUDA_TRY(
        cudaMemcpyAsync(bulk_dst.data(), staging.data(), bytes, cudaMemcpyHostToDevice, stream));
  });

  const double gb = static_cast<double>(bytes) / 1e9;
  std::printf(
      "gathered %zu rows of %zu B (%.1f MB): %.3f ms, %.1f GB/s; one cudaMemcpy of the same "
      "bytes: %.3f ms, %.1f GB/s; ratio %.2f\n",
      batch, row_bytes, gb * 1e3, gather.median_ms, gb / (gather.median_ms * 1e-3), bulk.median_ms,
      gb / (bulk.median_ms * 1e-3), bulk.median_ms / gather.median_ms);
  std::printf("check: all %zu rows match the table\n", batch);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "gather_features: %s\n", e.what());
  return 1;
}
