// SPDX-License-Identifier: Apache-2.0
// roast_gemv: a user's kernel that multiplies a batch of vectors by a ROAST layer's weight
// matrix W without ever storing W, reading each weight where roast::mapping says it lives in
// the shared parameter array M.
//
//   Y = X . W      X: [batch, K] float32, Y: [batch, N], W: K x N
//   W[k][n] = scale * g(kb, nb) * M[h(kb, nb) + o(k mod Z1, n mod Z2)]   (roast/mapping.hpp)
//
// The mapping is the user's policy: the tile shape Z1 x Z2 (here 64 x 64), the element size of
// M (4 bytes: float32), hashed signs g on, the scale lambda for M ~ U(-1/C, 1/C), and the seed
// that places the tiles. It is trivially copyable: the kernel takes it by value. One thread
// per output (b, n): for each tile (kb, nb) of its column it finds the tile's start
// h(kb, nb) once (map.tile_offset), reads the tile's column j = n mod Z2 in the in-tile order
// (map.layout().offset(i, j)), and applies the tile's factor scale * g (map.tile_sign) to the
// tile's partial sum. The check is against W materialized on the host (roast::materialize).
//
//   custom_roast_gemv        exit 0: matches the host; 1: mismatch; 77: no GPU (nothing ran)
#include <squeeze/core/buffer.hpp>
#include <squeeze/core/cuda_error.hpp>
#include <squeeze/roast/mapping.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <span>
#include <vector>

#include "support.hpp"

namespace core = squeeze::core;
namespace roast = squeeze::roast;

namespace {

/// y[b][n] = sum_k x[b][k] W[k][n]; the grid is (ceil(N / 128), batch).
__global__ void __launch_bounds__(128)
    roast_gemv(roast::mapping map, const float* m, const float* x, float* y) {
  const auto k_total = map.rows(), n_total = map.cols();
  const std::uint64_t n = blockIdx.x * 128ull + threadIdx.x, b = blockIdx.y;
  if (n >= n_total) return;
  const roast::tile_shape tile = map.tile();
  const std::uint64_t nb = n / tile.n;
  const auto j = static_cast<std::uint32_t>(n % tile.n);
  const float* xb = x + b * k_total;  // [K]
  float acc = 0.0f;
  for (std::uint64_t kb = 0; kb < map.tiles_k(); ++kb) {
    const float* t = m + map.tile_offset(kb, nb);  // tile (kb, nb): Z1 * Z2 values of M
    const std::uint64_t k0 = kb * tile.k;
    float part = 0.0f;
    for (std::uint32_t i = 0; i < tile.k && k0 + i < k_total; ++i) {
      part += xb[k0 + i] * t[map.layout().offset(i, j)];
    }
    acc += map.scale() * map.tile_sign(kb, nb) * part;
  }
  y[b * n_total + n] = acc;
}

}  // namespace

int main() {
  return custom_kernels::run("custom_roast_gemv", [] {
    const std::uint64_t k = 500, n = 300, batch = 64;  // tiles of 64 x 64, the last ones partial
    const double c = 1.0;
    const std::uint64_t memory_size = 1 << 14;  // |M|: 16 Ki floats for K x N = 150 K weights
    const roast::mapping map{roast::module_desc{.rows = k,
                                                .cols = n,
                                                .tile = {64, 64},
                                                .scale = roast::gms_scale(c, k),
                                                .seed = 42,
                                                .signs = true},
                             memory_size, sizeof(float)};

    std::mt19937_64 rng{3};
    std::uniform_real_distribution<float> u{static_cast<float>(-1 / c), static_cast<float>(1 / c)};
    std::normal_distribution<float> normal{0.0f, 1.0f};
    std::vector<float> m(memory_size), x(batch * k);
    for (auto& v : m) v = u(rng);
    for (auto& v : x) v = normal(rng);

    const auto d_m = custom_kernels::upload(m, nullptr);
    const auto d_x = custom_kernels::upload(x, nullptr);
    core::device_buffer<float> d_y{batch * n};
    d_y.fill_bytes(0xA5, nullptr);  // poison: an unwritten value shows
    roast_gemv<<<dim3{static_cast<unsigned>((n + 127) / 128), static_cast<unsigned>(batch)}, 128>>>(
        map, d_m.data(), d_x.data(), d_y.data());
    SQUEEZE_CHECK_LAUNCH();
    std::vector<float> y(batch * n);
    SQUEEZE_CUDA_TRY(cudaMemcpy(y.data(), d_y.data(), d_y.bytes(), cudaMemcpyDeviceToHost));

    // The host reference: W materialized from M, the product in double. The GPU sums in float
    // (in another order), so the two may differ by what K float roundings allow.
    const std::vector<float> w = roast::materialize(map, m.data(), [](float v) { return v; });
    int bad = 0;
    for (std::uint64_t b = 0; b < batch; ++b) {
      for (std::uint64_t j = 0; j < n; ++j) {
        double want = 0, abs_sum = 0;
        for (std::uint64_t i = 0; i < k; ++i) {
          want += double{x[b * k + i]} * double{w[i * n + j]};
          abs_sum += std::abs(double{x[b * k + i]} * double{w[i * n + j]});
        }
        const double tolerance =
            2.0 * double(k + 2) * std::numeric_limits<float>::epsilon() * abs_sum;
        custom_kernels::close_enough(y[b * n + j], want, tolerance,
                                     static_cast<long long>(b * n + j), bad);
      }
    }
    return custom_kernels::verdict("custom_roast_gemv", bad, static_cast<long long>(batch * n));
  });
}
