// squeeze/roast/detail/fold.cuh: the deterministic fold of a module's weight gradient into
// dM. The GEMM stores each tile's gradient in a workspace (mapping::workspace_offset); then
// one thread per element e of M adds, in a fixed order (tiles sorted by their start in M,
// then by tile number), every workspace value that lives at e. No atomics: the same inputs
// give the same bits on every run. The workspace holds tiles_k * tiles_n * Z1 * Z2 floats
// (the size of the dense gradient).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "squeeze/core/buffer.hpp"
#include "squeeze/core/config.hpp"
#include "squeeze/core/cuda_error.hpp"
#include "squeeze/roast/mapping.hpp"

namespace squeeze::roast::detail {

template <int = 0>
SQUEEZE_KERNEL(256)
void fold_kernel(mapping map, const std::uint64_t* starts, const std::uint64_t* tiles,
                 std::uint64_t count, const float* workspace, float* dmemory) {
  const std::uint64_t tile_values = std::uint64_t{map.tile().k} * map.tile().n;
  for (std::uint64_t e = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x;
       e < map.memory_size(); e += std::uint64_t{gridDim.x} * blockDim.x) {
    // The first tile whose range [start, start + Z1*Z2) can hold e.
    const std::uint64_t low = e + 1 > tile_values ? e + 1 - tile_values : 0;
    std::uint64_t first = 0;
    std::uint64_t span = count;
    while (span > 0) {
      const std::uint64_t half = span / 2;
      if (starts[first + half] < low) {
        first += half + 1;
        span -= half + 1;
      } else {
        span = half;
      }
    }
    float sum = 0.0f;
    bool any = false;
    for (std::uint64_t t = first; t < count && starts[t] <= e; ++t) {
      const auto o = static_cast<std::uint32_t>(e - starts[t]);
      std::uint32_t i = 0;
      std::uint32_t j = 0;
      map.layout().position(o, i, j);
      const std::uint64_t kb = tiles[t] / map.tiles_n();
      const std::uint64_t nb = tiles[t] % map.tiles_n();
      if (kb * map.tile().k + i < map.rows() && nb * map.tile().n + j < map.cols()) {
        sum += workspace[tiles[t] * tile_values + o];
        any = true;
      }
    }
    if (any) dmemory[e] += sum;
  }
}

/// Tile starts sorted (with their tile numbers), uploaded on `stream`, and the workspace.
struct fold_plan {
  core::device_buffer<std::uint64_t> starts;
  core::device_buffer<std::uint64_t> tiles;
  core::device_buffer<float> workspace;

  fold_plan(const mapping& map, cudaStream_t stream) {
    const std::uint64_t count = map.tiles_k() * map.tiles_n();
    std::vector<std::pair<std::uint64_t, std::uint64_t>> order(count);
    for (std::uint64_t t = 0; t < count; ++t) {
      order[t] = {map.tile_offset(t / map.tiles_n(), t % map.tiles_n()), t};
    }
    std::sort(order.begin(), order.end());
    std::vector<std::uint64_t> s(count);
    std::vector<std::uint64_t> t(count);
    for (std::uint64_t i = 0; i < count; ++i) {
      s[i] = order[i].first;
      t[i] = order[i].second;
    }
    starts = core::device_buffer<std::uint64_t>{count, stream};
    tiles = core::device_buffer<std::uint64_t>{count, stream};
    workspace = core::device_buffer<float>{count * map.tile().k * map.tile().n, stream};
    starts.copy_from(std::span<const std::uint64_t>{s}, stream);
    tiles.copy_from(std::span<const std::uint64_t>{t}, stream);
    // The host vectors die here: finish the copies first.
    SQUEEZE_CUDA_TRY(cudaStreamSynchronize(stream));
  }

  void fold(const mapping& map, float* dmemory, cudaStream_t stream) const {
    const auto blocks =
        static_cast<unsigned>(std::min<std::uint64_t>((map.memory_size() + 255) / 256, 65535));
    fold_kernel<<<blocks, 256, 0, stream>>>(map, starts.data(), tiles.data(), starts.size(),
                                            workspace.data(), dmemory);
    SQUEEZE_CHECK_LAUNCH();
  }
};

}  // namespace squeeze::roast::detail
