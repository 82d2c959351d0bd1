// squeeze/roast/fold.cuh: the deterministic fold of a module's weight gradient into dM.
//
// backward_memory with a `gradient_fold` stores each tile's gradient in the fold's
// workspace (mapping::workspace_offset); then one thread per element e of M adds, in a fixed
// order (tiles sorted by their start in M, then by tile number), every workspace value that
// lives at e. No atomics: the same inputs give the same bits on every run. Build one fold per
// module, once (it sorts the module's tile starts on the host and holds a workspace of
// tiles_k * tiles_n * Z1 * Z2 floats, the size of the dense gradient), and pass it on every
// step through gemm_options::fold.
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

namespace squeeze::roast {
namespace detail {

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

}  // namespace detail

/// The sorted tile starts of one module and the workspace of its tiles' gradients. Calls
/// that share a fold must be ordered (one stream): each rewrites the workspace.
class gradient_fold {
 public:
  /// Synchronous (uploads the sorted tile starts); build once per module and keep it.
  explicit gradient_fold(const mapping& map)
      : map_{map},
        starts_{map.tiles_k() * map.tiles_n()},
        tiles_{starts_.size()},
        workspace_{starts_.size() * map.tile().k * map.tile().n} {
    std::vector<std::pair<std::uint64_t, std::uint64_t>> order(starts_.size());
    for (std::uint64_t t = 0; t < order.size(); ++t) {
      order[t] = {map.tile_offset(t / map.tiles_n(), t % map.tiles_n()), t};
    }
    std::sort(order.begin(), order.end());
    std::vector<std::uint64_t> starts(order.size());
    std::vector<std::uint64_t> tiles(order.size());
    for (std::size_t i = 0; i < order.size(); ++i) {
      starts[i] = order[i].first;
      tiles[i] = order[i].second;
    }
    starts_.copy_from(std::span<const std::uint64_t>{starts}, nullptr);
    tiles_.copy_from(std::span<const std::uint64_t>{tiles}, nullptr);
    SQUEEZE_CUDA_TRY(cudaStreamSynchronize(nullptr));  // the host vectors die here
  }

  [[nodiscard]] const mapping& map() const noexcept { return map_; }
  /// Where backward_memory stores the tiles' gradients (mapping::workspace_offset).
  [[nodiscard]] float* workspace() const noexcept { return workspace_.data(); }

  /// dM += the workspace, element by element in the fixed order. Asynchronous on `stream`.
  void fold_into(float* dmemory, cudaStream_t stream) const {
    const auto blocks =
        static_cast<unsigned>(std::min<std::uint64_t>((map_.memory_size() + 255) / 256, 65535));
    detail::fold_kernel<<<blocks, 256, 0, stream>>>(map_, starts_.data(), tiles_.data(),
                                                    starts_.size(), workspace_.data(), dmemory);
    SQUEEZE_CHECK_LAUNCH();
  }

 private:
  mapping map_;
  core::device_buffer<std::uint64_t> starts_;
  core::device_buffer<std::uint64_t> tiles_;
  core::device_buffer<float> workspace_;
};

}  // namespace squeeze::roast
