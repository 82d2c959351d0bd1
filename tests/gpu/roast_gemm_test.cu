// SPDX-License-Identifier: Apache-2.0
// ROAST-MM on the GPU: forward, dX and dM against a host reference built from the
// materialized W (double accumulation), for fp32 (TF32 and exact), bf16 and fp16, shapes
// with tails, tiles narrower and wider than a block, sign hashes on and off, and both
// block widths of the tensor-core kernel (the mapping must not depend on them).
#include <squeeze/roast/gemm.cuh>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "common/gpu_test.hpp"
#include "common/roast_test.hpp"

namespace roast = squeeze::roast;
namespace core = squeeze::core;

namespace roast_gemm_test {

template <class T>
T from_f(float v) {
  return roast::detail::from_float<T>(v);
}
template <class T>
float to_f(T v) {
  return roast::detail::to_float<T>(v);
}

struct gemm_case {
  std::uint64_t batch;
  std::uint64_t k;
  std::uint64_t n;
  roast::tile_shape tile;
  bool signs;
  std::uint64_t memory;
  roast::gemm_options options{};
};

std::string describe(const gemm_case& c) {
  return std::to_string(c.batch) + "x" + std::to_string(c.k) + "x" + std::to_string(c.n) +
         " tile " + std::to_string(c.tile.k) + "x" + std::to_string(c.tile.n) +
         (c.signs ? " signs" : "") + " |M| " + std::to_string(c.memory) +
         (c.options.mode == roast::math::exact ? " exact" : "");
}

/// The tensor-core kernel's policy, in a test's trace.
template <class Policy>
std::string describe_policy() {
  return " block_m " + std::to_string(Policy::block_m) + " block_n " +
         std::to_string(Policy::block_n) + " stages of " +
         std::to_string(Policy::stage_budget_bytes) + " bytes, sources " +
         std::to_string(Policy::source_batch) + " at a time";
}

/// Relative error per unit of sum |a||b| the operand type and math allow.
template <class T>
double product_tolerance(const gemm_case& c, std::uint64_t depth) {
  const double accumulate = 4.0 * static_cast<double>(depth + 2) * std::ldexp(1.0, -24);
  if (std::is_same_v<T, float> && c.options.mode == roast::math::tensor_cores) {
    return std::ldexp(1.0, -9) * 1.1 + accumulate;  // both operands cut to TF32
  }
  return accumulate;
}

/// Rounding of the result to Out, relative.
template <class Out>
double output_rounding() {
  if (std::is_same_v<Out, __nv_bfloat16>) return std::ldexp(1.0, -8);
  if (std::is_same_v<Out, __half>) return std::ldexp(1.0, -11);
  return 0.0;
}

using squeeze::test::download;
using squeeze::test::upload;

template <class Out>
void expect_close(const std::vector<Out>& got, const squeeze::test::reference_product& ref,
                  double tolerance, const std::string& what) {
  int reported = 0;
  std::size_t bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double g = to_f(got[i]);
    const double bound =
        tolerance * ref.magnitude[i] + output_rounding<Out>() * std::fabs(ref.value[i]) + 1e-30;
    if (!(std::fabs(g - ref.value[i]) <= bound)) {
      ++bad;
      if (reported++ < 5) {
        ADD_FAILURE() << what << ": element " << i << " is " << g << ", reference " << ref.value[i]
                      << " (bound " << bound << ")";
      }
    }
  }
  EXPECT_EQ(bad, 0u) << what;
}

template <class T>
struct problem {
  gemm_case c;
  roast::mapping map;
  std::vector<T> memory;
  std::vector<float> w;  // materialized

  problem(const gemm_case& cs, std::uint64_t seed)
      : c{cs},
        map{roast::module_desc{cs.k, cs.n, cs.tile, 0.75f, seed, cs.signs}, cs.memory, sizeof(T)},
        memory{squeeze::test::random_values<T>(cs.memory, seed + 1, from_f<T>)},
        w{roast::materialize(map, memory.data(), to_f<T>)} {}
};

/// pad: Y's rows are c.n + pad elements apart; the padding must keep its (poison) bytes.
template <class T, class Out, class Policy = roast::hopper_gemm_policy>
void check_forward(const gemm_case& c, std::uint64_t seed, std::uint64_t pad = 0) {
  SCOPED_TRACE(describe(c) + " row pitch " + std::to_string(c.n + pad) + describe_policy<Policy>());
  const problem<T> p{c, seed};
  const auto x = squeeze::test::random_values<T>(c.batch * c.k, seed + 2, from_f<T>);
  const auto ref = squeeze::test::multiply(
      c.batch, c.k, c.n, [&](std::uint64_t m, std::uint64_t k) { return to_f(x[m * c.k + k]); },
      [&](std::uint64_t k, std::uint64_t n) { return double{p.w[k * c.n + n]}; });

  auto d_memory = upload(p.memory);
  auto d_x = upload(x);
  const std::uint64_t ld = c.n + pad;
  core::device_buffer<Out> d_y{c.batch * ld};
  d_y.fill_bytes(0xFF, nullptr);  // NaN in every float type
  roast::forward<Policy>(d_x.data(), c.k, d_memory.data(), p.map, c.batch, d_y.data(), ld, nullptr,
                         c.options);
  SQUEEZE_CUDA_TRY(cudaDeviceSynchronize());
  const auto all = download(d_y);
  std::vector<Out> y(c.batch * c.n);
  std::size_t padding_written = 0;
  unsigned char poison[sizeof(Out)];
  std::memset(poison, 0xFF, sizeof(Out));
  for (std::uint64_t m = 0; m < c.batch; ++m) {
    for (std::uint64_t n = 0; n < ld; ++n) {
      if (n < c.n) {
        y[m * c.n + n] = all[m * ld + n];
      } else if (std::memcmp(&all[m * ld + n], poison, sizeof(Out)) != 0) {
        ++padding_written;
      }
    }
  }
  EXPECT_EQ(padding_written, 0u) << "forward wrote between Y's rows";
  expect_close(y, ref, product_tolerance<T>(c, c.k), "forward");
}

template <class T, class Out, class Policy = roast::hopper_gemm_policy>
void check_backward_input(const gemm_case& c, std::uint64_t seed) {
  SCOPED_TRACE(describe(c) + describe_policy<Policy>());
  const problem<T> p{c, seed};
  const auto dy = squeeze::test::random_values<T>(c.batch * c.n, seed + 3, from_f<T>);
  const auto ref = squeeze::test::multiply(
      c.batch, c.n, c.k, [&](std::uint64_t m, std::uint64_t n) { return to_f(dy[m * c.n + n]); },
      [&](std::uint64_t n, std::uint64_t k) { return double{p.w[k * c.n + n]}; });

  auto d_memory = upload(p.memory);
  auto d_dy = upload(dy);
  core::device_buffer<Out> d_dx{c.batch * c.k};
  d_dx.fill_bytes(0xFF, nullptr);
  roast::backward_input<Policy>(d_dy.data(), c.n, d_memory.data(), p.map, c.batch, d_dx.data(), c.k,
                                nullptr, c.options);
  SQUEEZE_CUDA_TRY(cudaDeviceSynchronize());
  expect_close(download(d_dx), ref, product_tolerance<T>(c, c.n), "backward_input");
}

// fold_bytes: 0 for atomics, else the workspace of a gradient_fold (1: one tile row per
// strip, so many strips).
template <class T, class Policy = roast::hopper_gemm_policy>
void check_backward_memory(const gemm_case& c, std::uint64_t seed, std::uint64_t fold_bytes = 0) {
  SCOPED_TRACE(describe(c) + (fold_bytes != 0 ? " fold of " + std::to_string(fold_bytes) : "") +
               describe_policy<Policy>());
  const problem<T> p{c, seed};
  const auto x = squeeze::test::random_values<T>(c.batch * c.k, seed + 2, from_f<T>);
  const auto dy = squeeze::test::random_values<T>(c.batch * c.n, seed + 3, from_f<T>);
  // dW = X^T dY, then folded through the hash (and |.| of both for the bound).
  const auto dw = squeeze::test::multiply(
      c.k, c.batch, c.n, [&](std::uint64_t k, std::uint64_t m) { return to_f(x[m * c.k + k]); },
      [&](std::uint64_t m, std::uint64_t n) { return double{to_f(dy[m * c.n + n])}; });
  const auto initial =
      squeeze::test::random_values<float>(c.memory, seed + 4, [](float v) { return v; });
  squeeze::test::reference_product ref{std::vector<double>(initial.begin(), initial.end()),
                                       std::vector<double>(c.memory, 0.0)};
  for (std::uint64_t k = 0; k < c.k; ++k) {
    for (std::uint64_t n = 0; n < c.n; ++n) {
      const std::uint64_t e = p.map.element_offset(k, n);
      const double f = p.map.element_factor(k, n);
      ref.value[e] += f * dw.value[k * c.n + n];
      ref.magnitude[e] += std::fabs(f) * dw.magnitude[k * c.n + n];
    }
  }
  for (std::uint64_t e = 0; e < c.memory; ++e) ref.magnitude[e] += std::fabs(ref.value[e]);

  auto d_x = upload(x);
  auto d_dy = upload(dy);
  auto d_dm = upload(initial);
  std::optional<roast::gradient_fold> fold;
  roast::gemm_options options = c.options;
  if (fold_bytes != 0) {
    options.fold = &fold.emplace(p.map, nullptr, fold_bytes);
    const auto strips = fold->strips();
    ASSERT_GE(strips, 1u);
    EXPECT_EQ(fold->strip_at(0).k_begin, 0u);
    EXPECT_EQ(fold->strip_at(strips - 1).k_end, c.k);
    for (std::uint64_t i = 1; i < strips; ++i) {
      EXPECT_EQ(fold->strip_at(i).k_begin, fold->strip_at(i - 1).k_end);
    }
    if (fold_bytes == 1) EXPECT_EQ(strips, p.map.tiles_k());
  }
  roast::backward_memory<Policy>(d_x.data(), c.k, d_dy.data(), c.n, p.map, c.batch, d_dm.data(),
                                 nullptr, options);
  SQUEEZE_CUDA_TRY(cudaDeviceSynchronize());
  expect_close(download(d_dm), ref, product_tolerance<T>(c, c.batch), "backward_memory");
}

const std::vector<gemm_case>& cases_fp32() {
  static const std::vector<gemm_case> cases{
      {200, 324, 200, {32, 64}, false, 40000},  // tails everywhere (K tail inside an atom)
      {130, 256, 520, {64, 256}, true, 70000},  // signs, tiles as wide as a block
      {64, 96, 72, {32, 72}, true, 5000},       // signs on tiles of 72: portable path
      {97, 301, 77, {32, 16}, false, 3000},     // K misaligned for 16-byte copies
      {512, 640, 768, {64, 128}, true, 50000},  // compression 9.8x, many overlaps
  };
  return cases;
}

const std::vector<gemm_case>& cases_16bit() {
  static const std::vector<gemm_case> cases{
      {200, 328, 200, {64, 64}, false, 40000},  {130, 256, 520, {64, 256}, true, 70000},
      {64, 128, 72, {64, 72}, true, 9000},      {97, 301, 77, {64, 16}, false, 5000},
      {512, 640, 768, {128, 128}, true, 50000},
  };
  return cases;
}

TEST(RoastGemm, ForwardTf32) {
  SQUEEZE_REQUIRE_GPU();
  std::uint64_t seed = 100;
  for (const auto& c : cases_fp32()) check_forward<float, float>(c, seed++);
}

TEST(RoastGemm, ForwardExactFp32) {
  SQUEEZE_REQUIRE_GPU();
  std::uint64_t seed = 200;
  for (auto c : cases_fp32()) {
    c.options.mode = roast::math::exact;
    check_forward<float, float>(c, seed++);
  }
}

TEST(RoastGemm, ForwardBf16) {
  SQUEEZE_REQUIRE_GPU();
  std::uint64_t seed = 300;
  for (const auto& c : cases_16bit()) {
    check_forward<__nv_bfloat16, float>(c, seed);
    check_forward<__nv_bfloat16, __nv_bfloat16>(c, seed++);
  }
}

TEST(RoastGemm, ForwardFp16) {
  SQUEEZE_REQUIRE_GPU();
  std::uint64_t seed = 400;
  for (const auto& c : cases_16bit()) {
    check_forward<__half, float>(c, seed);
    check_forward<__half, __half>(c, seed++);
  }
}

// Y with a row pitch wider than N: 16-byte aligned rows (the epilogue's vector stores) and
// rows that are not (element stores), for 16-bit and fp32 outputs; tails in both.
TEST(RoastGemm, ForwardStridedOutput) {
  SQUEEZE_REQUIRE_GPU();
  for (const std::uint64_t pad : {8u, 13u}) {
    for (const gemm_case& c : {gemm_case{200, 328, 200, {64, 64}, false, 40000},
                               gemm_case{130, 256, 520, {64, 256}, true, 70000}}) {
      check_forward<__nv_bfloat16, __nv_bfloat16>(c, 900 + pad, pad);
      check_forward<__nv_bfloat16, float>(c, 950 + pad, pad);
      check_forward<float, float>(c, 980 + pad, pad);
    }
  }
}

// The tensor-core kernel's block width is a tuning choice: every width reads the same W and
// computes the same gradients.
TEST(RoastGemm, ForwardMappingIndependentOfBlockWidth) {
  SQUEEZE_REQUIRE_GPU();
  const gemm_case c{256, 512, 640, {64, 64}, true, 30000};
  const auto at = [&]<int BlockN>() {
    using policy = roast::hopper_gemm_policy_n<BlockN>;
    check_forward<__nv_bfloat16, float, policy>(c, 500);
    check_forward<float, float, policy>(c, 501);
    check_backward_input<__nv_bfloat16, float, policy>(c, 502);
    check_backward_memory<__nv_bfloat16, policy>(c, 503);
  };
  at.template operator()<64>();
  at.template operator()<128>();
  at.template operator()<256>();
}

// Tile signs over reductions of more than 32 stages (the consumers work them out 32 stages
// at a time): K = 2176 and N = 2112 are 34 and 33 stages of bf16, K 68 of fp32. At
// block width 64 a stage's whole wgmma takes its tile's sign; at 128 and 256 the 64-wide
// tiles give each column block its own sign, applied by flipping its sum.
TEST(RoastGemm, SignsOverManyStages) {
  SQUEEZE_REQUIRE_GPU();
  const gemm_case c{64, 2176, 2112, {64, 64}, true, 60000};
  std::uint64_t seed = 1300;
  const auto at = [&]<int BlockN>() {
    using policy = roast::hopper_gemm_policy_n<BlockN>;
    check_forward<__nv_bfloat16, float, policy>(c, seed++);
    check_forward<float, float, policy>(c, seed++);
    check_backward_input<__nv_bfloat16, float, policy>(c, seed++);
  };
  at.template operator()<64>();
  at.template operator()<128>();
  at.template operator()<256>();
}

// A policy of the user's own: a shallower ring (96 KiB: 2, 3 and 4 stages at block_n 256,
// 128 and 64) and B's sources worked out 32 stages at a time, over a reduction of 37 stages
// (more than one batch of sources per tile, a partial last one) and several tiles per
// cluster (the ring's phases carry over from tile to tile).
struct shallow_ring_policy : roast::hopper_gemm_policy {
  static constexpr int stage_budget_bytes = 96 * 1024;
  static constexpr int source_batch = 32;
};

TEST(RoastGemm, UserPolicy) {
  SQUEEZE_REQUIRE_GPU();
  std::uint64_t seed = 1200;
  for (const gemm_case& c : {gemm_case{512, 2368, 2368, {64, 128}, true, 90000},
                             gemm_case{200, 2368, 328, {64, 64}, false, 40000}}) {
    check_forward<__nv_bfloat16, float, shallow_ring_policy>(c, seed++);
    check_backward_input<__nv_bfloat16, __nv_bfloat16, shallow_ring_policy>(c, seed++);
    check_backward_memory<__nv_bfloat16, shallow_ring_policy>(c, seed++);
  }
}

// At BN >= 128, where the rows make whole pairs of 128-row blocks, the two blocks of a
// cluster lie one above the other and each copies half of every B stage for both (half of
// each run, or in dX every other whole 8 KiB block): tails in every dimension (dX's last
// column block has fewer 8 KiB blocks than a stage holds), tiles narrower than a block (B
// in several runs), signs, and more cluster tiles than fit on the GPU at once (2048 x 2048
// at BN = 128).
TEST(RoastGemm, BlocksPairedAlongRows) {
  SQUEEZE_REQUIRE_GPU();
  std::uint64_t seed = 1100;
  const auto at = [&]<int BlockN>() {
    using policy = roast::hopper_gemm_policy_n<BlockN>;
    for (const gemm_case& c : {gemm_case{256, 328, 520, {64, 64}, true, 40000},
                               gemm_case{200, 200, 384, {64, 256}, false, 70000},
                               gemm_case{2048, 136, 2048, {64, 128}, false, 60000}}) {
      check_forward<__nv_bfloat16, __nv_bfloat16, policy>(c, seed++);
      check_forward<float, float, policy>(c, seed++);
      check_backward_input<__nv_bfloat16, float, policy>(c, seed++);
    }
  };
  at.template operator()<128>();
  at.template operator()<256>();
}

// Blocks of 64 rows (one consumer warpgroup, each stage's wgmma left in flight while the
// next arrives): pairs one above the other sharing B where the rows make whole pairs (256,
// 2048 rows), side by side sharing nothing where not (200, 97 rows); tails in every
// dimension, signs (a stage's wgmma take the tile's sign at block width 64; flips at 128),
// tiles narrower than a block, reductions of many stages (the ring wraps, 12 stages at
// 64 x 64) and more cluster tiles than fit at once. The memory pass keeps 128 rows.
template <int BlockN>
struct rows64_policy : roast::hopper_gemm_policy {
  static constexpr int block_m = 64;
  static constexpr int block_n = BlockN;
};

TEST(RoastGemm, BlocksOf64Rows) {
  SQUEEZE_REQUIRE_GPU();
  std::uint64_t seed = 1400;
  const auto at = [&]<int BlockN>() {
    using policy = rows64_policy<BlockN>;
    for (const gemm_case& c : {gemm_case{256, 328, 520, {64, 64}, true, 40000},
                               gemm_case{200, 2176, 384, {64, 256}, false, 70000},
                               gemm_case{97, 301, 77, {64, 16}, false, 5000},
                               gemm_case{2048, 136, 2048, {64, 128}, true, 60000}}) {
      check_forward<__nv_bfloat16, __nv_bfloat16, policy>(c, seed++);
      check_forward<__half, float, policy>(c, seed++);
      check_forward<float, float, policy>(c, seed++);
      check_backward_input<__nv_bfloat16, float, policy>(c, seed++);
    }
    check_backward_memory<__nv_bfloat16, policy>(gemm_case{256, 328, 520, {64, 64}, true, 40000},
                                                 seed++);
  };
  at.template operator()<64>();
  at.template operator()<128>();
  at.template operator()<0>();
}

TEST(RoastGemm, BackwardInput) {
  SQUEEZE_REQUIRE_GPU();
  std::uint64_t seed = 600;
  for (const auto& c : cases_fp32()) check_backward_input<float, float>(c, seed++);
  for (const auto& c : cases_16bit()) {
    check_backward_input<__nv_bfloat16, float>(c, seed);
    check_backward_input<__half, __half>(c, seed++);
  }
}

TEST(RoastGemm, BackwardMemory) {
  SQUEEZE_REQUIRE_GPU();
  std::uint64_t seed = 700;
  for (const auto& c : cases_fp32()) check_backward_memory<float>(c, seed++);
  for (const auto& c : cases_16bit()) check_backward_memory<__nv_bfloat16>(c, seed++);
}

// The deterministic fold: the same bits on every run, and the same values as the reference.
TEST(RoastGemm, BackwardMemoryDeterministic) {
  SQUEEZE_REQUIRE_GPU();
  std::uint64_t seed = 800;
  for (const std::uint64_t bytes : {roast::gradient_fold::default_workspace_bytes, 1ul}) {
    for (const auto& c : cases_16bit()) check_backward_memory<__nv_bfloat16>(c, seed++, bytes);
    for (const auto& c : cases_fp32()) check_backward_memory<float>(c, seed++, bytes);
  }
  // Bit-identical repeats, on a case with many tiles sharing each element of M.
  const gemm_case c{512, 640, 768, {128, 128}, true, 20000};
  const problem<__nv_bfloat16> p{c, 900};
  const auto x =
      squeeze::test::random_values<__nv_bfloat16>(c.batch * c.k, 901, from_f<__nv_bfloat16>);
  const auto dy =
      squeeze::test::random_values<__nv_bfloat16>(c.batch * c.n, 902, from_f<__nv_bfloat16>);
  auto d_x = upload(x);
  auto d_dy = upload(dy);
  roast::gradient_fold fold{p.map, nullptr, 1};  // five strips of one tile row each
  ASSERT_EQ(fold.strips(), 5u);
  roast::gemm_options det;
  det.fold = &fold;
  std::vector<float> first;
  for (int run = 0; run < 3; ++run) {
    core::device_buffer<float> d_dm{c.memory};
    d_dm.fill_bytes(0, nullptr);
    roast::backward_memory(d_x.data(), c.k, d_dy.data(), c.n, p.map, c.batch, d_dm.data(), nullptr,
                           det);
    const auto got = download(d_dm);
    if (run == 0) {
      first = got;
    } else {
      ASSERT_EQ(std::memcmp(first.data(), got.data(), got.size() * sizeof(float)), 0)
          << "run " << run << " differs";
    }
  }
}

TEST(RoastGemm, RejectsBadArguments) {
  const roast::mapping map{roast::module_desc{256, 256, {64, 64}}, 8192, 2};
  const roast::mapping map32{roast::module_desc{256, 256, {64, 64}}, 8192, 4};
  alignas(16) static float m32[16];
  alignas(16) static __nv_bfloat16 m16[16];
  // M of the wrong element size for the mapping's in-tile order.
  EXPECT_THROW(roast::forward(m32, 256, m32, map, 1, m32, 256, nullptr), squeeze::invalid_argument);
  // Leading dimensions smaller than the rows.
  EXPECT_THROW(roast::forward(m16, 100, m16, map, 1, m16, 256, nullptr), squeeze::invalid_argument);
  EXPECT_THROW(roast::backward_input(m32, 100, m32, map32, 1, m32, 256, nullptr),
               squeeze::invalid_argument);
  // Misaligned M.
  EXPECT_THROW(roast::forward(m32, 256, m32 + 1, map32, 1, m32, 256, nullptr),
               squeeze::invalid_argument);
  SQUEEZE_REQUIRE_GPU();
  // A fold built for another module.
  const roast::mapping other{roast::module_desc{256, 256, {64, 64}, 1.0f, 99}, 8192, 2};
  roast::gradient_fold fold{other, nullptr};
  roast::gemm_options wrong_fold;
  wrong_fold.fold = &fold;
  EXPECT_THROW(roast::backward_memory(m16, 256, m16, 256, map, 1, m32, nullptr, wrong_fold),
               squeeze::invalid_argument);
}

}  // namespace roast_gemm_test
