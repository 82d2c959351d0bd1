// SPDX-License-Identifier: Apache-2.0
// row_gather: a user's kernel that gathers weighted rows of a table kept in host memory,
// reading each row through a small shared-memory stage with xfer::warp_copy_bounded.
//
//   out[r][:] = weight[r] * table[ids[r]][:]     table: [rows, 250 float32] in mapped host
//                                                 memory (1000 B rows: not a multiple of the
//                                                 128-byte segment, so most rows start inside
//                                                 one)
//
// One warp per output row. The warp copies its row into its 1 KiB stage chunk by chunk:
//
//   n = xfer::warp_copy_bounded<Policy>(stage, src + done, lower, upper);
//
//   lower  the least the copy takes (when that much is left). The copy then runs on to the
//          source's next 128-byte segment boundary, so it takes at most lower + 127 bytes:
//          lower = stage_bytes - 128 keeps every chunk inside the stage.
//   upper  the most it may take: what is left of the row.
//
// It returns n (the same in every lane), so every chunk after the first starts on a segment
// boundary of the source and is read as whole 128-byte requests, whatever the row's alignment.
// The policy (xfer::copy_policy_like) is the user's: two waves of 512 B in flight per warp,
// which is a whole stage.
//
//   custom_row_gather        exit 0: matches the host; 1: mismatch; 77: no GPU (nothing ran)
#include <squeeze/core.hpp>
#include <squeeze/xfer/copy.cuh>
#include <squeeze/xfer/mapped_memory.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <random>
#include <span>
#include <vector>

#include "support.hpp"

namespace core = squeeze::core;
namespace xfer = squeeze::xfer;

namespace {

constexpr int warps_per_block = 4;
constexpr std::size_t stage_bytes = 1024;

/// The copy policy this kernel picks: 2 waves (2 x 512 B a warp) in flight, a whole stage.
struct stage_policy {
  static constexpr int waves_in_flight = 2;
};

template <xfer::copy_policy_like Policy>
__global__ void __launch_bounds__(32 * warps_per_block)
    weighted_gather(const float* table, std::size_t row_floats, const std::int64_t* ids,
                    const float* weights, std::size_t count, float* out) {
  __shared__ alignas(16) float stage[warps_per_block][stage_bytes / sizeof(float)];
  const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const std::size_t row_bytes = row_floats * sizeof(float);
  // r is the same in every lane: the whole warp calls the copy, converged.
  for (std::size_t r = blockIdx.x * warps_per_block + warp; r < count;
       r += std::size_t{gridDim.x} * warps_per_block) {
    const auto* src = reinterpret_cast<const std::byte*>(table + ids[r] * row_floats);
    float* dst = out + r * row_floats;
    const float w = weights[r];
    for (std::size_t done = 0; done < row_bytes;) {
      const std::size_t n = xfer::warp_copy_bounded<Policy>(stage[warp], src + done,
                                                            stage_bytes - 128, row_bytes - done);
      __syncwarp();  // the chunk is in the stage
      // n is a multiple of 4: rows and segment boundaries are.
      for (std::size_t k = lane; k < n / sizeof(float); k += 32) {
        dst[done / sizeof(float) + k] = w * stage[warp][k];
      }
      __syncwarp();  // every lane is done with the stage before the next chunk lands
      done += n;
    }
  }
}

}  // namespace

int main() {
  return custom_kernels::run("custom_row_gather", [] {
    const std::size_t rows = 8192, row_floats = 250, count = 4096;
    std::mt19937_64 rng{2024};
    std::normal_distribution<float> normal{0.0f, 1.0f};
    auto table = xfer::allocate_mapped<float>(rows * row_floats);  // [rows, row_floats]
    for (std::size_t i = 0; i < table.size(); ++i) table[i] = normal(rng);
    std::vector<std::int64_t> ids(count);
    std::vector<float> weights(count);
    for (std::size_t r = 0; r < count; ++r) {
      ids[r] = static_cast<std::int64_t>(rng() % rows);
      weights[r] = 0.5f + normal(rng) * 0.25f;
    }

    core::stream stream;
    const auto d_ids = custom_kernels::upload(ids, stream);
    const auto d_weights = custom_kernels::upload(weights, stream);
    core::device_buffer<float> out{count * row_floats};  // [count, row_floats]
    out.fill_bytes(0xA5, stream);                        // poison: an unwritten value shows
    const auto blocks = static_cast<unsigned>(
        std::min<std::size_t>(core::div_ceil<std::size_t>(count, warps_per_block), 1024));
    weighted_gather<stage_policy><<<blocks, 32 * warps_per_block, 0, stream>>>(
        table.device_data(), row_floats, d_ids.data(), d_weights.data(), count, out.data());
    SQUEEZE_CHECK_LAUNCH();
    std::vector<float> got(count * row_floats);
    out.copy_to(std::span<float>{got}, stream);
    stream.synchronize();

    // The host reference: the same float products, so the bits must match.
    int bad = 0;
    for (std::size_t r = 0; r < count; ++r) {
      const float* want = table.data() + static_cast<std::size_t>(ids[r]) * row_floats;
      for (std::size_t f = 0; f < row_floats; ++f) {
        custom_kernels::close_enough(got[r * row_floats + f], weights[r] * want[f], 0.0,
                                     static_cast<long long>(r * row_floats + f), bad);
      }
    }
    return custom_kernels::verdict("custom_row_gather", bad,
                                   static_cast<long long>(count * row_floats));
  });
}
