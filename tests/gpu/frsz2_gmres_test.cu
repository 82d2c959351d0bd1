// SPDX-License-Identifier: Apache-2.0
// frsz2::cb_gmres on the GPU against the host reference GMRES (tests/common/gmres_reference.hpp).
//
// float64 storage follows the reference step for step: the same iteration count (within one,
// or 2 % where GMRES(100) crawls along a plateau at the stopping point) and the same final
// residual. Every other storage is checked against the reference run with the same storage
// simulated on the host (each new basis vector replaced by its stored-and-decoded value, with
// the host reference encoders), so "reaches its target" is decided by the algorithm, not by a
// tolerance picked to pass: where the simulation converges the GPU must too, in about as many
// iterations; where it stagnates (bfloat16 on 1138_bus) the GPU must stop at the iteration cap.
// Every reported residual is checked against one recomputed on the host from the returned x,
// which is poisoned (NaN) before it is copied back.
#include <squeeze/core/buffer.hpp>
#include <squeeze/core/cuda_error.hpp>
#include <squeeze/frsz2/cb_gmres.cuh>
#include <squeeze/frsz2/format.hpp>
#include <squeeze/io/csr.hpp>
#include <squeeze/io/matrix_market.hpp>
#include <squeeze/io/stencil.hpp>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "common/gmres_reference.hpp"
#include "common/gpu_test.hpp"

namespace core = squeeze::core;
namespace frsz2 = squeeze::frsz2;
namespace io = squeeze::io;
using squeeze::test::gmres_reference;
using squeeze::test::gmres_reference_options;
using squeeze::test::gmres_reference_result;
using squeeze::test::host_relative_residual;

namespace frsz2_gmres_test {

using matrix = io::csr_matrix<double, std::int32_t>;

/// A x = b with x* = sin(i) normalized to unit norm and b = A x* (the paper's set-up).
struct problem {
  std::string name;
  matrix a;
  std::vector<double> b;
};

problem make_problem(std::string name, matrix a) {
  const auto n = static_cast<std::size_t>(a.rows);
  std::vector<double> x(n);
  double norm = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    x[i] = std::sin(static_cast<double>(i));
    norm += x[i] * x[i];
  }
  for (double& v : x) v /= std::sqrt(norm);
  problem p{std::move(name), std::move(a), std::vector<double>(n)};
  io::spmv_reference(p.a, x, std::span<double>{p.b});
  return p;
}

/// A random nonsymmetric matrix: `per_row` off-diagonal entries in [-1, 1] at random columns,
/// the diagonal `dominance` times the row's off-diagonal magnitude.
matrix random_dominant(std::int64_t n, int per_row, double dominance, std::uint64_t seed) {
  std::mt19937_64 rng{seed};
  std::uniform_real_distribution<double> value{-1.0, 1.0};
  std::uniform_int_distribution<std::int64_t> column{0, n - 1};
  std::vector<io::coordinate_entry<double>> entries;
  for (std::int64_t r = 0; r < n; ++r) {
    double sum = 0.0;
    for (int k = 0; k < per_row; ++k) {
      const std::int64_t c = column(rng);
      if (c == r) continue;
      const double v = value(rng);
      sum += std::abs(v);
      entries.push_back({r, c, v});
    }
    entries.push_back({r, r, dominance * sum + 1e-3});
  }
  return io::csr_from_coordinates<double, std::int32_t>(n, n, std::move(entries));
}

const problem& random_problem() {
  static const problem p = make_problem("random_1000", random_dominant(1000, 10, 1.05, 7));
  return p;
}
const problem& convection_problem() {
  static const problem p = make_problem("convection_12", io::convection_diffusion_3d(12, 12, 12));
  return p;
}

/// Where the shared Matrix Market files are: $SQUEEZE_MATRIX_DIR, else the directory the build
/// names, else ../shared/data/matrices beside the source tree.
std::filesystem::path matrix_dir() {
  if (const char* dir = std::getenv("SQUEEZE_MATRIX_DIR"); dir != nullptr && *dir != '\0') {
    return dir;
  }
#ifdef SQUEEZE_TEST_MATRIX_DIR
  return SQUEEZE_TEST_MATRIX_DIR;
#else
  return std::filesystem::path{__FILE__}.parent_path().parent_path().parent_path() / ".." /
         "shared" / "data" / "matrices";
#endif
}

// ---- simulated storage for the host reference --------------------------------------------------

template <class Basis>
std::function<void(std::span<double>)> round_trip() {
  if constexpr (std::is_same_v<Basis, double>) {
    return {};
  } else if constexpr (std::is_same_v<Basis, float>) {
    return [](std::span<double> v) {
      for (double& x : v) x = static_cast<double>(static_cast<float>(x));
    };
  } else if constexpr (std::is_same_v<Basis, __half>) {
    return [](std::span<double> v) {
      for (double& x : v) x = static_cast<double>(__half2float(__double2half(x)));
    };
  } else if constexpr (std::is_same_v<Basis, __nv_bfloat16>) {
    return [](std::span<double> v) {
      for (double& x : v) x = static_cast<double>(__bfloat162float(__double2bfloat16(x)));
    };
  } else {
    return [](std::span<double> v) {
      const auto encoded = frsz2::encode<Basis>(std::span<const double>{v.data(), v.size()});
      const std::vector<double> decoded = frsz2::decode<Basis>(encoded);
      std::copy(decoded.begin(), decoded.end(), v.begin());
    };
  }
}

template <class Basis>
gmres_reference_result reference(const problem& p, const frsz2::cb_gmres_options& o,
                                 std::vector<double> x0 = {}) {
  gmres_reference_options ro;
  ro.restart = o.restart;
  ro.tolerance = o.tolerance;
  ro.max_iterations = o.max_iterations;
  ro.eta = o.eta;
  ro.round_trip = round_trip<Basis>();
  if (x0.empty()) x0.assign(p.b.size(), 0.0);
  return gmres_reference(p.a, p.b, std::move(x0), ro);
}

// ---- the GPU run ------------------------------------------------------------------------------

struct gpu_solution {
  frsz2::cb_gmres_result result;
  std::vector<double> x;
  std::size_t stride = 0;
};

template <class Basis, class Policy = frsz2::default_cb_gmres_policy<Basis>>
gpu_solution solve_on_gpu(const problem& p, const frsz2::cb_gmres_options& o,
                          const std::vector<double>& x0 = {}, int solves = 1) {
  const std::size_t n = p.b.size();
  core::stream stream;  // declared first: the stream-ordered buffers are freed on it
  const frsz2::device_csr a{p.a.rows, p.a.cols, p.a.row_ptr, p.a.col_idx, p.a.values, stream};
  core::device_buffer<double> b{n, stream};
  core::device_buffer<double> x{n, stream};
  b.copy_from(std::span<const double>{p.b}, stream);
  frsz2::cb_gmres<Basis, Policy> solver{a.ref(), o, stream};
  gpu_solution s;
  s.stride = solver.stride();
  for (int k = 0; k < solves; ++k) {
    if (x0.empty())
      SQUEEZE_CUDA_TRY(cudaMemsetAsync(x.data(), 0, n * sizeof(double), stream));
    else
      x.copy_from(std::span<const double>{x0}, stream);
    s.result = solver.solve({b.data(), n}, {x.data(), n});
  }
  s.x.assign(n, std::numeric_limits<double>::quiet_NaN());  // poison
  x.copy_to(std::span<double>{s.x}, stream);
  stream.synchronize();
  return s;
}

/// The run is self-consistent: the reported residual is the one of the returned x, the flags
/// and counters agree with it, the timing is there.
void expect_consistent(const problem& p, const gpu_solution& s, const frsz2::cb_gmres_options& o) {
  const frsz2::cb_gmres_result& r = s.result;
  const double host = host_relative_residual(p.a, p.b, s.x);
  ASSERT_TRUE(std::isfinite(host)) << p.name << ": the returned x is not finite";
  EXPECT_NEAR(r.relative_residual, host, 0.05 * host + 1e-15) << p.name;
  EXPECT_EQ(r.converged, r.relative_residual <= o.tolerance) << p.name;
  EXPECT_EQ(r.converged, r.stop == frsz2::cb_gmres_stop::converged) << p.name;
  EXPECT_LE(r.iterations, o.max_iterations) << p.name;
  if (r.stop == frsz2::cb_gmres_stop::iteration_cap) EXPECT_EQ(r.iterations, o.max_iterations);
  EXPECT_LE(r.reorthogonalizations, r.iterations);
  EXPECT_GE(r.restarts, 0);
  EXPECT_LE(r.restarts, std::max(0, r.iterations - 1));  // every cycle takes a step
  if (r.iterations > 0) {
    EXPECT_GT(r.seconds, 0.0);
    EXPECT_DOUBLE_EQ(r.seconds_per_iteration, r.seconds / r.iterations);
  }
}

/// The GPU run matches the reference: convergence, iterations within `slack`, restarts within
/// one, and the final residual within a factor of 4 (below 1e-14 both count as 1e-14).
void expect_matches(const gmres_reference_result& ref, const gpu_solution& s, int slack,
                    const std::string& what) {
  const frsz2::cb_gmres_result& r = s.result;
  EXPECT_EQ(r.converged, ref.converged) << what;
  EXPECT_STREQ(frsz2::to_string(r.stop), frsz2::to_string(ref.stop)) << what;
  EXPECT_NEAR(r.iterations, ref.iterations, slack)
      << what << " (reference " << ref.iterations << " iterations)";
  EXPECT_NEAR(r.restarts, ref.restarts, 1) << what;
  const double got = std::max(r.relative_residual, 1e-14);
  const double want = std::max(ref.relative_residual, 1e-14);
  EXPECT_LE(got, 4.0 * want) << what << " (reference residual " << ref.relative_residual << ")";
  EXPECT_GE(got, want / 4.0) << what << " (reference residual " << ref.relative_residual << ")";
}

int float64_slack(const gmres_reference_result& ref) {
  return std::max(1, ref.iterations / 50);
}
int lossy_slack(const gmres_reference_result& ref) {
  return std::max(3, ref.iterations / 10);
}

// ---- (a) float64 storage against the reference -----------------------------------------------

struct float64_case {
  const char* name;
  const problem& (*make)();
  int restart;
};

class Float64Basis : public ::testing::TestWithParam<float64_case> {};

TEST_P(Float64Basis, MatchesTheHostReference) {
  SQUEEZE_REQUIRE_GPU();
  const problem& p = GetParam().make();
  const frsz2::cb_gmres_options o{
      .restart = GetParam().restart, .tolerance = 1e-12, .max_iterations = 2000};
  const gmres_reference_result ref = reference<double>(p, o);
  ASSERT_TRUE(ref.converged) << "the reference must converge here";
  const gpu_solution s = solve_on_gpu<double>(p, o);
  expect_consistent(p, s, o);
  expect_matches(ref, s, 1, p.name);
  EXPECT_EQ(s.result.basis_bytes, (o.restart + 1) * s.stride * sizeof(double));
  EXPECT_STREQ(s.result.storage, "float64");
}

const problem& dense_rows_problem() {  // 40 entries a row: 32 lanes a row in the SpMV
  static const problem p = make_problem("random_777_dense", random_dominant(777, 40, 1.02, 9));
  return p;
}
const problem& short_rows_problem() {  // 2 entries a row: 2 lanes a row
  static const problem p = make_problem("random_500_short", random_dominant(500, 1, 1.5, 5));
  return p;
}

INSTANTIATE_TEST_SUITE_P(Problems, Float64Basis,
                         ::testing::Values(float64_case{"Random", random_problem, 100},
                                           float64_case{"RandomRestart8", random_problem, 8},
                                           float64_case{"DenseRows", dense_rows_problem, 100},
                                           float64_case{"ShortRows", short_rows_problem, 100},
                                           float64_case{"Convection", convection_problem, 100},
                                           float64_case{"ConvectionRestart20", convection_problem,
                                                        20}),
                         [](const auto& info) { return std::string{info.param.name}; });

/// Small launch shapes: several multi-dot batches per step, several rounds of tiles per warp
/// (3 blocks: several blocks' sums), column batches with a remainder (3 in flight), and three
/// tiles a warp (a round past the vector's end clamps); a warp a tile, or (Groups = 2) both
/// warps of a block on one tile, each with half of the basis vectors.
template <int Groups>
struct tiny_policy {
  static constexpr int block_threads = 64;
  static constexpr int tiles_per_warp = 3;
  static constexpr int columns_in_flight = 3;
  static constexpr int min_blocks_per_sm = 1;
  static constexpr int max_blocks = 3;
  static constexpr int max_batch = 7;
  static constexpr int column_groups = Groups;
};

TEST(CbGmres, BatchedMultidotAndGridStrideMatchTheReference) {
  SQUEEZE_REQUIRE_GPU();
  const problem& p = convection_problem();
  const frsz2::cb_gmres_options o{.restart = 30, .tolerance = 1e-12, .max_iterations = 2000};
  const gmres_reference_result ref = reference<double>(p, o);
  ASSERT_TRUE(ref.converged);
  const gmres_reference_result ref21 = reference<frsz2::format<21>>(p, o);
  const auto check = [&]<int Groups>() {
    const std::string what = "tiny policy, " + std::to_string(Groups) + " warps a tile, ";
    const gpu_solution s = solve_on_gpu<double, tiny_policy<Groups>>(p, o);
    expect_consistent(p, s, o);
    expect_matches(ref, s, 1, what + "float64");
    const gpu_solution c = solve_on_gpu<frsz2::format<21>, tiny_policy<Groups>>(p, o);
    expect_consistent(p, c, o);
    expect_matches(ref21, c, 3, what + "frsz2_21");
  };
  check.template operator()<1>();
  check.template operator()<2>();
}

/// The default shapes with a fixed number of warps a tile (1: each warp all basis vectors; 8:
/// every warp of a block on one tile).
template <int Groups>
struct groups_policy : frsz2::cb_gmres_policy {
  static constexpr int column_groups = Groups;
};

static_assert(frsz2::cb_gmres_policy_like<groups_policy<8>>);
static_assert(frsz2::cb_gmres_policy_like<tiny_policy<2>>);
static_assert(!frsz2::cb_gmres_policy_like<groups_policy<3>>);  // 8 warps: not a divisor
static_assert(!frsz2::cb_gmres_policy_like<groups_policy<-1>>);

TEST(CbGmres, WarpsSharingATileMatchTheReference) {
  SQUEEZE_REQUIRE_GPU();
  const problem& p = random_problem();
  const frsz2::cb_gmres_options o{.restart = 40, .tolerance = 1e-12, .max_iterations = 2000};
  const gmres_reference_result ref = reference<double>(p, o);
  const gmres_reference_result ref16 = reference<frsz2::format<16>>(p, o);
  ASSERT_TRUE(ref.converged);
  const auto check = [&]<int Groups>() {
    const std::string what = std::to_string(Groups) + " warps a tile, ";
    const gpu_solution s = solve_on_gpu<double, groups_policy<Groups>>(p, o);
    expect_consistent(p, s, o);
    expect_matches(ref, s, 1, what + "float64");
    const gpu_solution c = solve_on_gpu<frsz2::format<16>, groups_policy<Groups>>(p, o);
    expect_consistent(p, c, o);
    expect_matches(ref16, c, lossy_slack(ref16), what + "frsz2_16");
  };
  check.template operator()<1>();
  check.template operator()<4>();
  check.template operator()<8>();
}

/// The default shapes with one tile a warp, fixed.
struct one_tile_policy : frsz2::default_cb_gmres_policy<float> {
  static constexpr int tiles_per_warp = 1;
};

// On vectors too short to give every SM a block, 32- and 64-bit storage takes kernels of one
// tile a warp (twice the blocks): the same sums, bit for bit, as a policy of one tile a warp;
// on a vector long enough (48^3 rows), the policy's two tiles a warp, converging like the
// reference.
TEST(CbGmres, OneTileAWarpOnShortVectors) {
  SQUEEZE_REQUIRE_GPU();
  const problem& p = convection_problem();
  const frsz2::cb_gmres_options o{.restart = 30, .tolerance = 1e-11, .max_iterations = 500};
  const auto same = [&]<class S>(const char* what) {
    static_assert(frsz2::default_cb_gmres_policy<S>::min_blocks_per_sm ==
                  one_tile_policy::min_blocks_per_sm);
    const gpu_solution d = solve_on_gpu<S>(p, o);
    const gpu_solution one = solve_on_gpu<S, one_tile_policy>(p, o);
    expect_consistent(p, d, o);
    EXPECT_TRUE(d.result.converged) << what;
    EXPECT_EQ(d.result.iterations, one.result.iterations) << what;
    EXPECT_EQ(std::memcmp(d.x.data(), one.x.data(), d.x.size() * sizeof(double)), 0) << what;
  };
  same.template operator()<float>("float32");
  same.template operator()<double>("float64");
  same.template operator()<frsz2::format<32>>("frsz2_32");

  static const problem large =
      make_problem("convection_48", io::convection_diffusion_3d(48, 48, 48));
  const frsz2::cb_gmres_options lo{.restart = 40, .tolerance = 1e-9, .max_iterations = 2000};
  const gmres_reference_result ref = reference<frsz2::format<32>>(large, lo);
  ASSERT_TRUE(ref.converged);
  const gpu_solution s = solve_on_gpu<frsz2::format<32>>(large, lo);
  expect_consistent(large, s, lo);
  expect_matches(ref, s, lossy_slack(ref), "frsz2_32 at 48^3 rows");
}

TEST(CbGmres, StartsFromTheGivenGuess) {
  SQUEEZE_REQUIRE_GPU();
  const problem& p = random_problem();
  std::vector<double> x0(p.b.size());
  std::mt19937_64 rng{3};
  std::uniform_real_distribution<double> value{-0.05, 0.05};
  for (double& v : x0) v = value(rng);
  const frsz2::cb_gmres_options o{.restart = 10, .tolerance = 1e-11, .max_iterations = 500};
  const gmres_reference_result ref = reference<double>(p, o, x0);
  ASSERT_TRUE(ref.converged);
  const gpu_solution s = solve_on_gpu<double>(p, o, x0);
  expect_consistent(p, s, o);
  expect_matches(ref, s, 1, "x0 != 0");
}

TEST(CbGmres, RepeatedSolvesAreBitwiseIdentical) {
  SQUEEZE_REQUIRE_GPU();
  const problem& p = convection_problem();
  const frsz2::cb_gmres_options o{.restart = 25, .tolerance = 1e-11, .max_iterations = 500};
  const gpu_solution once = solve_on_gpu<frsz2::format<16>>(p, o, {}, 1);
  const gpu_solution twice = solve_on_gpu<frsz2::format<16>>(p, o, {}, 2);
  EXPECT_EQ(once.result.iterations, twice.result.iterations);
  EXPECT_EQ(once.result.relative_residual, twice.result.relative_residual);
  EXPECT_EQ(std::memcmp(once.x.data(), twice.x.data(), once.x.size() * sizeof(double)), 0);
}

/// With A scaled by 2^k the Arnoldi basis is the same and x scales by 2^-k: every storage
/// takes the same steps and returns x times 2^-k (at 12^3 rows, 13.5 tiles of 128, FRSZ2
/// bases end in whole blocks of zero padding).
template <class Basis>
void expect_scale_invariant(const problem& p, const frsz2::cb_gmres_options& o, const char* what) {
  const gpu_solution s = solve_on_gpu<Basis>(p, o);
  ASSERT_TRUE(s.result.converged) << what;
  for (const int k : {-450, 450}) {
    problem scaled = p;
    for (double& v : scaled.a.values) v = std::ldexp(v, k);
    const gpu_solution t = solve_on_gpu<Basis>(scaled, o);
    expect_consistent(scaled, t, o);
    EXPECT_EQ(t.result.iterations, s.result.iterations) << what << ", A times 2^" << k;
    double diff = 0.0, norm = 0.0;
    for (std::size_t i = 0; i < s.x.size(); ++i) {
      diff = std::max(diff, std::abs(std::ldexp(t.x[i], k) - s.x[i]));
      norm = std::max(norm, std::abs(s.x[i]));
    }
    EXPECT_LE(diff, 1e-12 * norm) << what << ", A times 2^" << k;
  }
}

TEST(CbGmres, ScalingTheMatrixByAPowerOfTwoScalesX) {
  SQUEEZE_REQUIRE_GPU();
  const problem& p = convection_problem();
  ASSERT_NE(p.b.size() % 128, 0u);  // the last tile holds padding
  const frsz2::cb_gmres_options o{.restart = 30, .tolerance = 1e-10, .max_iterations = 500};
  expect_scale_invariant<double>(p, o, "float64");
  expect_scale_invariant<frsz2::format<32>>(p, o, "frsz2_32");
  expect_scale_invariant<frsz2::format<21>>(p, o, "frsz2_21");
  expect_scale_invariant<frsz2::format<16>>(p, o, "frsz2_16");
}

TEST(CbGmres, StopsAtTheIterationCap) {
  SQUEEZE_REQUIRE_GPU();
  const problem& p = convection_problem();
  // float64 far from a target of 1e-14 after 25 steps: the same point as the reference.
  const frsz2::cb_gmres_options o{.restart = 100, .tolerance = 1e-14, .max_iterations = 25};
  const gmres_reference_result ref = reference<double>(p, o);
  ASSERT_FALSE(ref.converged);
  const gpu_solution s = solve_on_gpu<double>(p, o);
  expect_consistent(p, s, o);
  EXPECT_FALSE(s.result.converged);
  EXPECT_EQ(s.result.stop, frsz2::cb_gmres_stop::iteration_cap);
  EXPECT_EQ(s.result.iterations, 25);
  EXPECT_NEAR(s.result.relative_residual, ref.relative_residual, 0.01 * ref.relative_residual);
  // float16 needs about 155 steps for 1e-12 here (3 restarts); capped at 60 it stops there.
  const frsz2::cb_gmres_options h{.restart = 100, .tolerance = 1e-12, .max_iterations = 60};
  const gpu_solution s16 = solve_on_gpu<__half>(p, h);
  expect_consistent(p, s16, h);
  EXPECT_FALSE(s16.result.converged);
  EXPECT_EQ(s16.result.iterations, 60);
  EXPECT_GT(s16.result.relative_residual, 1e-12);
  // No steps at all: the residual of x0 = 0 is 1.
  const frsz2::cb_gmres_options z{.max_iterations = 0};
  const gpu_solution s0 = solve_on_gpu<double>(p, z);
  EXPECT_EQ(s0.result.iterations, 0);
  EXPECT_FALSE(s0.result.converged);
  EXPECT_EQ(s0.result.stop, frsz2::cb_gmres_stop::iteration_cap);
  EXPECT_NEAR(s0.result.relative_residual, 1.0, 1e-12);
}

TEST(CbGmres, ZeroRightHandSideGivesZero) {
  SQUEEZE_REQUIRE_GPU();
  problem p = random_problem();
  std::fill(p.b.begin(), p.b.end(), 0.0);
  std::vector<double> x0(p.b.size(), 0.25);  // must be overwritten
  const gpu_solution s = solve_on_gpu<float>(p, {}, x0);
  EXPECT_TRUE(s.result.converged);
  EXPECT_EQ(s.result.iterations, 0);
  EXPECT_EQ(s.result.relative_residual, 0.0);
  for (double v : s.x) ASSERT_EQ(v, 0.0);
}

// ---- (b) every storage on small problems --------------------------------------------------------

template <class Basis>
class EveryStorage : public ::testing::Test {};

struct storage_names {
  template <class T>
  static std::string GetName(int) {
    return frsz2::storage_traits<T>::name();
  }
};

using storages = ::testing::Types<double, float, __half, __nv_bfloat16, frsz2::format<16>,
                                  frsz2::format<21>, frsz2::format<32>>;
TYPED_TEST_SUITE(EveryStorage, storages, storage_names);

// With restarts (the true residual recomputed in fp64) every storage reaches 1e-12 on these
// problems, the low-precision ones in 1.5 to 4 times the steps (the host simulation says so
// too; float64 takes 31 and 48 steps, float16 68 and 155, bfloat16 85 and 204).
TYPED_TEST(EveryStorage, ReachesTheTargetLikeTheSimulatedReference) {
  SQUEEZE_REQUIRE_GPU();
  using Basis = TypeParam;
  for (const problem* p : {&random_problem(), &convection_problem()}) {
    const frsz2::cb_gmres_options o{.restart = 100, .tolerance = 1e-12, .max_iterations = 1000};
    const gmres_reference_result ref = reference<Basis>(*p, o);
    ASSERT_TRUE(ref.converged) << p->name << ": the simulated reference must converge";
    const gpu_solution s = solve_on_gpu<Basis>(*p, o);
    expect_consistent(*p, s, o);
    expect_matches(ref, s, std::is_same_v<Basis, double> ? 1 : lossy_slack(ref),
                   p->name + " " + frsz2::storage_traits<Basis>::name());
    EXPECT_TRUE(s.result.converged) << p->name;
    EXPECT_STREQ(s.result.storage, frsz2::storage_traits<Basis>::name());
    const std::size_t values = (o.restart + 1) * s.stride;
    if constexpr (frsz2::format_like<Basis>)
      EXPECT_EQ(s.result.basis_bytes, Basis::bytes(values));
    else
      EXPECT_EQ(s.result.basis_bytes, values * sizeof(Basis));
  }
}

// Rows scaled by 10^U(0, 7), restart 100 > n = 30: the Krylov space is exhausted inside a
// cycle. Before the restart rules a frsz2_16 basis ended 20 000 steps at relative residuals
// of 0.19 to 2e+35 here and returned that x (so did the host simulation of that code). Now
// every storage returns the best x it saw: float64, float32 and frsz2_32 converge, like their
// simulations; the others stop where the simulation does (float16, bfloat16 and frsz2_16
// stagnate near 1e-7 .. 3e-5, frsz2_21 converges), within the bound below. Under a compute
// sanitizer one seed runs: the stagnating storages take all 20 000 steps, and the tools slow
// every launch a hundredfold.
TYPED_TEST(EveryStorage, BadlyScaledNeverReturnsAWorseX) {
  SQUEEZE_REQUIRE_GPU();
  using Basis = TypeParam;
  constexpr bool exact_enough = std::is_same_v<Basis, double> || std::is_same_v<Basis, float> ||
                                std::is_same_v<Basis, frsz2::format<32>>;
  const std::uint64_t seeds = squeeze::test::under_sanitizer() ? 1 : 4;
  for (std::uint64_t seed = 1; seed <= seeds; ++seed) {
    const problem p = make_problem("badly_scaled_30_seed" + std::to_string(seed),
                                   squeeze::test::badly_scaled(30, 4, seed));
    const frsz2::cb_gmres_options o{.restart = 100, .tolerance = 1e-10, .max_iterations = 20000};
    const gmres_reference_result ref = reference<Basis>(p, o);
    const gpu_solution s = solve_on_gpu<Basis>(p, o);
    const std::string what = p.name + " " + frsz2::storage_traits<Basis>::name();
    expect_consistent(p, s, o);
    EXPECT_LE(host_relative_residual(p.a, p.b, s.x), 1e-3) << what << " (x0 = 0 has 1)";
    EXPECT_LE(s.result.iterations, 20000);
    if constexpr (exact_enough) {
      ASSERT_TRUE(ref.converged) << what << ": the simulation must converge";
      EXPECT_TRUE(s.result.converged) << what << ": " << frsz2::to_string(s.result.stop);
    } else {
      EXPECT_NE(s.result.stop, frsz2::cb_gmres_stop::breakdown) << what;
    }
  }
}

// b in the null space of a singular A: A v_0 = 0, the first step breaks down and the restart
// cannot do better; the solve says so at once and returns x0.
TEST(CbGmres, ReportsAnUnproductiveBreakdown) {
  SQUEEZE_REQUIRE_GPU();
  const std::int64_t n = 300;
  std::vector<io::coordinate_entry<double>> entries;
  for (std::int64_t r = 0; r + 1 < n; ++r) entries.push_back({r, r, 1.0 + static_cast<double>(r)});
  entries.push_back({n - 1, n - 1, 0.0});
  problem p{"singular", io::csr_from_coordinates<double, std::int32_t>(n, n, std::move(entries)),
            std::vector<double>(n, 0.0)};
  p.b[n - 1] = 3.0;
  const frsz2::cb_gmres_options o{.restart = 20, .tolerance = 1e-10, .max_iterations = 1000};
  const gmres_reference_result ref = reference<double>(p, o);
  ASSERT_EQ(ref.stop, frsz2::cb_gmres_stop::breakdown);
  const gpu_solution s = solve_on_gpu<frsz2::format<21>>(p, o);
  EXPECT_EQ(s.result.stop, frsz2::cb_gmres_stop::breakdown);
  EXPECT_FALSE(s.result.converged);
  EXPECT_EQ(s.result.iterations, 1);
  EXPECT_DOUBLE_EQ(s.result.relative_residual, 1.0);
  for (const double v : s.x) ASSERT_EQ(v, 0.0);
}

// ---- (c) the shared SuiteSparse / Ginkgo matrices -----------------------------------------------

struct shared_case {
  const char* file;
  double tolerance;
  int max_iterations;
};
// Targets: what float64 GMRES(100) reaches in a few hundred steps. 1138_bus is badly
// conditioned: 1e-6 takes float64 about 490 steps, float16 730, and bfloat16 stays above it
// (the simulation sits at 3e-6 .. 7e-5 through 4000 steps, with new bests often enough not
// to count as stagnated), so it must stop at the cap.
constexpr shared_case shared_cases[] = {
    {"ani1_nonsymm.mtx", 1e-12, 1000}, {"ani4.mtx", 1e-10, 1500}, {"1138_bus.mtx", 1e-6, 1500}};

template <class Basis>
class SharedMatrices : public ::testing::Test {};
TYPED_TEST_SUITE(SharedMatrices, storages, storage_names);

TYPED_TEST(SharedMatrices, MatchTheSimulatedReference) {
  SQUEEZE_REQUIRE_GPU();
  using Basis = TypeParam;
  const std::filesystem::path dir = matrix_dir();
  for (const shared_case& c : shared_cases) {
    if (!std::filesystem::exists(dir / c.file)) {
      GTEST_SKIP() << (dir / c.file).string()
                   << " is absent (set SQUEEZE_MATRIX_DIR to the folder holding the shared "
                      "matrices)";
    }
  }
  for (const shared_case& c : shared_cases) {
    const problem p = make_problem(c.file, io::read_matrix_market<double>(dir / c.file));
    const frsz2::cb_gmres_options o{
        .restart = 100, .tolerance = c.tolerance, .max_iterations = c.max_iterations};
    const gmres_reference_result ref = reference<Basis>(p, o);
    const bool must_converge =
        !std::is_same_v<Basis, __nv_bfloat16> || std::string{c.file} != "1138_bus.mtx";
    ASSERT_EQ(ref.converged, must_converge) << c.file << ": the simulation changed its verdict";
    const gpu_solution s = solve_on_gpu<Basis>(p, o);
    expect_consistent(p, s, o);
    const int slack = std::is_same_v<Basis, double> ? float64_slack(ref) : lossy_slack(ref);
    expect_matches(ref, s, slack, std::string{c.file} + " " + frsz2::storage_traits<Basis>::name());
  }
}

// ---- (d) bad arguments
// ---------------------------------------------------------------------------

TEST(CbGmres, RejectsBadArguments) {
  SQUEEZE_REQUIRE_GPU();
  using squeeze::invalid_argument;
  core::stream stream;
  const matrix m = random_dominant(64, 3, 1.1, 1);
  const std::vector<std::int32_t> row_ptr = m.row_ptr;
  const std::vector<std::int32_t> col_idx = m.col_idx;
  const std::vector<double> values = m.values;

  // The matrix upload checks its arrays.
  EXPECT_THROW((frsz2::device_csr{64, 64, std::span{row_ptr}.first(64), col_idx, values, stream}),
               invalid_argument);
  EXPECT_THROW((frsz2::device_csr{64, 64, row_ptr, std::span{col_idx}.first(10), values, stream}),
               invalid_argument);
  EXPECT_THROW((frsz2::device_csr{64, 32, row_ptr, col_idx, values, stream}), invalid_argument);
  EXPECT_THROW((frsz2::device_csr{-1, 64, row_ptr, col_idx, values, stream}), invalid_argument);
  std::vector<std::int32_t> bad_rows = row_ptr;
  std::swap(bad_rows[10], bad_rows[11]);
  EXPECT_THROW((frsz2::device_csr{64, 64, bad_rows, col_idx, values, stream}), invalid_argument);
  std::vector<std::int32_t> bad_cols = col_idx;
  bad_cols[5] = 64;
  EXPECT_THROW((frsz2::device_csr{64, 64, row_ptr, bad_cols, values, stream}), invalid_argument);

  const frsz2::device_csr a{64, 64, row_ptr, col_idx, values, stream};
  frsz2::csr_ref rect = a.ref();
  rect.cols = 63;
  EXPECT_THROW((frsz2::cb_gmres<double>{rect, {}, stream}), invalid_argument);
  frsz2::csr_ref empty = a.ref();
  empty.rows = empty.cols = 0;
  EXPECT_THROW((frsz2::cb_gmres<double>{empty, {}, stream}), invalid_argument);
  frsz2::csr_ref null_values = a.ref();
  null_values.values = nullptr;
  EXPECT_THROW((frsz2::cb_gmres<double>{null_values, {}, stream}), invalid_argument);
  const auto with = [](auto change) {
    frsz2::cb_gmres_options o;
    change(o);
    return o;
  };
  const frsz2::cb_gmres_options bad_options[] = {
      with([](auto& o) { o.restart = 0; }),
      with([](auto& o) { o.restart = -5; }),
      with([](auto& o) { o.tolerance = -1e-10; }),
      with([](auto& o) { o.tolerance = std::numeric_limits<double>::quiet_NaN(); }),
      with([](auto& o) { o.max_iterations = -1; }),
      with([](auto& o) { o.eta = 1.5; }),
      with([](auto& o) { o.eta = -0.1; }),
      with([](auto& o) { o.eta = std::numeric_limits<double>::quiet_NaN(); }),
      with([](auto& o) { o.stagnation_restarts = 0; }),
  };
  for (const auto& o : bad_options) {
    EXPECT_THROW((frsz2::cb_gmres<frsz2::format<21>>{a.ref(), o, stream}), invalid_argument);
  }

  frsz2::cb_gmres<float> solver{a.ref(), {.restart = 5}, stream};
  core::device_buffer<double> b{65, stream};
  core::device_buffer<double> x{65, stream};
  b.fill_bytes(0, stream);
  x.fill_bytes(0, stream);
  EXPECT_THROW(solver.solve({b.data(), 63}, {x.data(), 64}), invalid_argument);
  EXPECT_THROW(solver.solve({b.data(), 64}, {x.data(), 65}), invalid_argument);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  SQUEEZE_CUDA_TRY(cudaMemcpyAsync(b.data() + 7, &nan, sizeof nan, cudaMemcpyHostToDevice, stream));
  EXPECT_THROW(solver.solve({b.data(), 64}, {x.data(), 64}), invalid_argument);
  // The solver is still usable after a rejected call.
  SQUEEZE_CUDA_TRY(cudaMemsetAsync(b.data() + 7, 0, sizeof(double), stream));
  std::vector<double> one(64, 1.0);
  b.copy_from(std::span<const double>{one}, stream);
  const frsz2::cb_gmres_result r = solver.solve({b.data(), 64}, {x.data(), 64});
  EXPECT_TRUE(r.converged);
  stream.synchronize();
}

}  // namespace frsz2_gmres_test
