// SPDX-License-Identifier: Apache-2.0
// The ROAST blocks of the README (roast) and of docs/guides/roast.md (guide_roast), compiled
// as written for sm_90a (the tensor-core path): the blocks come from the Markdown files at
// configure time (readme_snippets.cmake); this file supplies what they use.
// Its tests run the README blocks on a GPU (skipped without one) and check what the
// README says they do.
// The blocks' heads in the files' order:
// clang-format off
#include "roast.head.inc"
#include "guide_roast.head.inc"
// clang-format on

#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "run_checks.hpp"

void readme_roast([[maybe_unused]] std::uint64_t K, [[maybe_unused]] std::uint64_t N,
                  [[maybe_unused]] double C, [[maybe_unused]] std::uint64_t m_size,
                  [[maybe_unused]] std::uint64_t batch, [[maybe_unused]] const __nv_bfloat16* m,
                  [[maybe_unused]] const __nv_bfloat16* x, [[maybe_unused]] __nv_bfloat16* y,
                  [[maybe_unused]] const __nv_bfloat16* dy, [[maybe_unused]] __nv_bfloat16* dx,
                  [[maybe_unused]] float* dm, [[maybe_unused]] cudaStream_t stream) {
#include "roast.body.inc"
}

// docs/guides/roast.md, each block in a namespace of its own (its names are its own).
namespace guide_roast {
#include "guide_roast.body.inc"
}  // namespace guide_roast

// ---- the README's blocks run (skipped without a GPU) -----------------------------------

namespace {
std::vector<__nv_bfloat16> random_bf16(std::size_t n, float scale, std::uint64_t seed) {
  std::mt19937_64 rng{seed};
  std::uniform_real_distribution<float> u{-scale, scale};
  std::vector<__nv_bfloat16> v(n);
  for (auto& e : v) e = __float2bfloat16(u(rng));
  return v;
}
float f(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
}  // namespace

// Y = X W, dX = dY W^T and dM += fold(X^T dY) against the host, W built from M by the same
// mapping (roast::materialize, roast::fold_gradient).
TEST(ReadmeRoast, ForwardAndBackwardMatchTheHost) {
  SNIPPET_REQUIRE_GPU();
  squeeze::core::stream stream;
  const std::uint64_t K = 512, N = 512, batch = 64, m_size = 1 << 16;
  const double C = 8;
  const auto m = random_bf16(m_size, 0.125f, 1), x = random_bf16(batch * K, 1.0f, 2),
             dy = random_bf16(batch * N, 1.0f, 3);
  const auto d_m = snippet_checks::upload(m, stream), d_x = snippet_checks::upload(x, stream),
             d_dy = snippet_checks::upload(dy, stream);
  auto d_y = snippet_checks::upload(std::vector<__nv_bfloat16>(batch * N), stream);
  auto d_dx = snippet_checks::upload(std::vector<__nv_bfloat16>(batch * K), stream);
  auto d_dm = snippet_checks::upload(std::vector<float>(m_size, 0.0f), stream);
  readme_roast(K, N, C, m_size, batch, d_m.data(), d_x.data(), d_y.data(), d_dy.data(), d_dx.data(),
               d_dm.data(), stream);
  const auto y = snippet_checks::download(d_y, stream);
  const auto dx = snippet_checks::download(d_dx, stream);
  const auto dm = snippet_checks::download(d_dm, stream);

  const roast::mapping layer{
      roast::module_desc{
          .rows = K, .cols = N, .tile = {64, 256}, .scale = roast::gms_scale(C, K), .seed = 1},
      m_size, sizeof(__nv_bfloat16)};
  const std::vector<float> w = roast::materialize(layer, m.data(), f);
  // Bound: bf16 output (2^-8 relative) of a sum whose terms add up to `mag`.
  const auto near = [](float got, double want, double mag) {
    return std::abs(got - want) <= 1e-2 * mag + 1e-6;
  };
  // The sum of term(i) over i < count, in double, and the sum of the terms' magnitudes.
  const auto sum = [](std::uint64_t count, auto&& term) {
    double s = 0, mag = 0;
    for (std::uint64_t i = 0; i < count; ++i) {
      const double t = term(i);
      s += t;
      mag += std::abs(t);
    }
    return std::pair{s, mag};
  };
  for (std::uint64_t b = 0; b < batch; b += 7) {
    for (std::uint64_t n = 0; n < N; ++n) {
      const auto [s, mag] =
          sum(K, [&](std::uint64_t k) { return double{f(x[b * K + k])} * w[k * N + n]; });
      ASSERT_TRUE(near(f(y[b * N + n]), s, mag)) << "Y " << b << ", " << n;
    }
    for (std::uint64_t k = 0; k < K; ++k) {
      const auto [s, mag] =
          sum(N, [&](std::uint64_t n) { return double{f(dy[b * N + n])} * w[k * N + n]; });
      ASSERT_TRUE(near(f(dx[b * K + k]), s, mag)) << "dX " << b << ", " << k;
    }
  }
  std::vector<float> dw(K * N);
  std::vector<double> mag_w(K * N);
  for (std::uint64_t k = 0; k < K; ++k) {
    for (std::uint64_t n = 0; n < N; ++n) {
      const auto [s, mag] =
          sum(batch, [&](std::uint64_t b) { return double{f(x[b * K + k])} * f(dy[b * N + n]); });
      dw[k * N + n] = static_cast<float>(s);
      mag_w[k * N + n] = mag;
    }
  }
  std::vector<double> want(m_size, 0.0), mag_m(m_size, 0.0);
  roast::fold_gradient(layer, dw.data(), want.data());
  std::vector<float> mag_f(mag_w.begin(), mag_w.end());
  roast::fold_gradient(layer, mag_f.data(), mag_m.data());
  for (std::uint64_t e = 0; e < m_size; ++e) {
    ASSERT_LE(std::abs(dm[e] - want[e]), 1e-4 * std::abs(mag_m[e]) + 1e-5) << "dM " << e;
  }
}
