// SPDX-License-Identifier: Apache-2.0
// embedding_bag: a user's kernel that sums bags of embedding rows stored IBP-compressed in
// host memory, decoding each row with ibp::warp_decoder (PyTorch's EmbeddingBag, mode "sum").
//
//   out[b][:] = sum over the ids i of bag b of table[i][:]     table: [rows, 64 float32]
//
// The host compresses the table once (the ibp host API: bit counts, a threshold sweep for the
// codebook, the condensed layout: the rows' stored bytes back to back, and offsets). The kernel
// runs one warp per bag: the warp decodes each of the bag's rows into a row buffer in shared
// memory, then every lane adds its own features. IBP is lossless, so the sums equal the host's
// sums of the original rows, bit for bit (the same additions in the same order).
//
// The decoder's policy is the user's: rows are stored in at most 256 B, so a 1 KiB workspace
// (ibp::decode_policy_like) with ordinary loads, no streaming path for longer rows
// (Streaming = false: such rows would be reported), and the 4-byte chunk decoder alone
// (ChunkBytes = 4: the codebook is built for 4-byte chunks), which saves registers.
//
//   custom_embedding_bag     exit 0: matches the host; 1: mismatch; 77: no GPU (nothing ran)
#include <squeeze/core/buffer.hpp>
#include <squeeze/core/cuda_error.hpp>
#include <squeeze/core/report.cuh>
#include <squeeze/ibp/compress.cuh>  // ibp::device_codebook
#include <squeeze/ibp/dataset.hpp>   // the host API: count_set_bits, sweep_threshold, compress
#include <squeeze/ibp/decode.cuh>
#include <squeeze/xfer/mapped_memory.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <span>
#include <vector>

#include "support.hpp"

namespace core = squeeze::core;
namespace ibp = squeeze::ibp;
namespace xfer = squeeze::xfer;
using squeeze::status;

namespace {

constexpr int dim = 64;  // floats a row
constexpr int warps_per_block = 4;

struct small_rows {  // the decoder policy: rows stored in at most 1 KiB
  static constexpr std::uint32_t workspace_bytes = 1024;
  static constexpr bool async_loads = false;
  static constexpr unsigned prefetch_waves = 1;
};
using decoder = ibp::warp_decoder<small_rows, /*Streaming=*/false, /*ChunkBytes=*/4>;

/// data/offsets: the condensed set (row r at data[offsets[r] .. offsets[r + 1])); bag b holds
/// ids[bag_ptr[b] .. bag_ptr[b + 1]); out: [bags, dim].
__global__ void __launch_bounds__(32 * warps_per_block)
    embedding_bag_sum(const std::byte* data, std::uint64_t data_bytes, const std::uint64_t* offsets,
                      ibp::codebook_ref codebook, const int* bag_ptr, const int* ids, int bags,
                      float* out, status* st) {
  __shared__ decoder::TempStorage storage[warps_per_block];
  __shared__ alignas(16) float row[warps_per_block][dim];
  const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  decoder dec{storage[warp], codebook};
  const auto readable = xfer::readable_range::of(data, data_bytes);  // where loads may go
  for (int b = static_cast<int>(blockIdx.x * warps_per_block + warp); b < bags;
       b += static_cast<int>(gridDim.x * warps_per_block)) {
    float sum[dim / 32] = {};
    for (int k = bag_ptr[b]; k < bag_ptr[b + 1]; ++k) {
      const std::uint64_t at = offsets[ids[k]];
      const auto stored = static_cast<std::uint32_t>(offsets[ids[k] + 1] - at);
      // The whole warp decodes the row into row[warp] (load, wait, decode).
      const status s =
          dec.decode(reinterpret_cast<std::byte*>(row[warp]), data + at, stored, readable);
      if (lane == 0) core::report_status(st, s);
      __syncwarp();  // the row is written
      for (int f = 0; f < dim / 32; ++f) sum[f] += row[warp][32 * f + lane];
      __syncwarp();  // every lane has read it before the next row lands
    }
    for (int f = 0; f < dim / 32; ++f) out[b * dim + 32 * f + lane] = sum[f];
  }
}

}  // namespace

int main() {
  return custom_kernels::run("custom_embedding_bag", [] {
    // The table: N(0, 0.05) floats, like trained embedding weights (their high bits repeat).
    const int rows = 4096, bags = 2048;
    const auto row_bytes = static_cast<std::uint32_t>(dim * sizeof(float));
    std::mt19937_64 rng{7};
    std::normal_distribution<float> normal{0.0f, 0.05f};
    std::vector<float> table(std::size_t{rows} * dim);
    for (auto& v : table) v = normal(rng);
    std::vector<std::byte> bytes(table.size() * sizeof(float));
    std::memcpy(bytes.data(), table.data(), bytes.size());

    // Compress on the host: codebook for 4-byte chunks, condensed layout.
    const auto counts = ibp::count_set_bits(bytes, rows, row_bytes);
    const ibp::codebook cb = ibp::sweep_threshold(bytes, rows, counts, 4, 8).best;
    const ibp::compressed_set set = ibp::compress(bytes, rows, cb, ibp::layout::condensed);
    std::printf("table: %d rows of %u B stored in %zu B (%.1f %% saved)\n", rows, row_bytes,
                set.data.size(), 100.0 * (1.0 - double(set.data.size()) / double(bytes.size())));

    // Bags of 1 .. 8 random ids.
    std::vector<int> bag_ptr{0}, ids;
    for (int b = 0; b < bags; ++b) {
      const int size = 1 + static_cast<int>(rng() % 8);
      for (int k = 0; k < size; ++k) ids.push_back(static_cast<int>(rng() % rows));
      bag_ptr.push_back(static_cast<int>(ids.size()));
    }

    // The stored rows stay in host memory (mapped); the rest goes to the GPU.
    core::stream stream;
    auto data = xfer::allocate_mapped<std::byte>(set.data.size());
    std::copy(set.data.begin(), set.data.end(), data.data());
    const ibp::device_codebook d_cb{cb, stream};
    const auto d_offsets = custom_kernels::upload(set.offsets, stream);
    const auto d_bag_ptr = custom_kernels::upload(bag_ptr, stream);
    const auto d_ids = custom_kernels::upload(ids, stream);
    core::device_buffer<float> out{std::size_t{bags} * dim};
    core::device_buffer<status> st{1};
    out.fill_bytes(0xA5, stream);  // poison: an unwritten value shows
    st.fill_bytes(0, stream);      // status::ok
    const auto blocks = static_cast<unsigned>((bags + warps_per_block - 1) / warps_per_block);
    embedding_bag_sum<<<blocks, 32 * warps_per_block, 0, stream>>>(
        data.device_data(), set.data.size(), d_offsets.data(), d_cb.ref(), d_bag_ptr.data(),
        d_ids.data(), bags, out.data(), st.data());
    SQUEEZE_CHECK_LAUNCH();
    std::vector<float> got(out.size());
    out.copy_to(std::span<float>{got}, stream);
    status s{};
    st.copy_to(std::span<status>{&s, 1}, stream);
    stream.synchronize();
    if (s != status::ok) {
      std::printf("custom_embedding_bag: the decoder reported %s\n", squeeze::to_string(s));
      return custom_kernels::exit_mismatch;
    }

    // The host reference: the same float additions, in the same order, of the original rows.
    int bad = 0;
    for (int b = 0; b < bags; ++b) {
      for (int f = 0; f < dim; ++f) {
        float want = 0.0f;
        for (int k = bag_ptr[b]; k < bag_ptr[b + 1]; ++k) want += table[ids[k] * dim + f];
        custom_kernels::close_enough(got[b * dim + f], want, 0.0, b * dim + f, bad);
      }
    }
    return custom_kernels::verdict("custom_embedding_bag", bad, static_cast<long long>(got.size()));
  });
}
