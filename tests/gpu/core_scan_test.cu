// SPDX-License-Identifier: Apache-2.0
// core::detail's device-wide prefix sum on the GPU: inclusive and exclusive, in place and out
// of place, from 16-byte aligned buffers (vector loads) and from buffers one value off (scalar
// loads), equal value by value to std::inclusive_scan / std::exclusive_scan for every size
// around the design's boundaries (a warp, a tile, the single-block limit, the grid cap, runs
// of several tiles per block) up to 2^24 + 5; outputs poisoned first, the values around them
// left untouched, the workspace exactly scan_workspace_bytes(n) in its own allocation. A
// small policy reaches the multi-tile and multi-block cases with few values. Wrong arguments
// throw before anything is launched (checked without a GPU too).
#include <squeeze/core/buffer.hpp>
#include <squeeze/core/cuda_error.hpp>
#include <squeeze/core/detail/scan.cuh>
#include <squeeze/core/error.hpp>

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "common/gpu_test.hpp"

namespace core = squeeze::core;
namespace scan = squeeze::core::detail;

namespace core_scan_test {

// Small tiles (64 threads x 1 vector: 128 64-bit values), at most 3 blocks, up to 2 tiles in
// one block: several tiles per block and per run with few values.
struct small_policy {
  static constexpr int block_threads = 64;
  static constexpr int vectors_per_thread = 1;
  static constexpr unsigned max_blocks = 3;
  static constexpr unsigned single_block_tiles = 2;
};
static_assert(scan::scan_policy_like<scan::scan_policy>);
static_assert(scan::scan_policy_like<small_policy>);
static_assert(!scan::scan_types<std::uint64_t, std::uint32_t>);  // Out narrower than In
static_assert(!scan::scan_types<int, long>);                     // signed
static_assert(!scan::scan_types<bool, std::uint64_t>);

constexpr std::uint64_t tile64 = scan::scan_tile_items<std::uint64_t>;
static_assert(tile64 == 4096 && scan::scan_tile_items<std::uint32_t> == 8192);
// One block up to a tile, no workspace; then one partial sum per block, at most 1024.
static_assert(scan::scan_workspace_bytes<std::uint64_t, std::uint64_t>(0) == 0);
static_assert(scan::scan_workspace_bytes<std::uint64_t, std::uint64_t>(tile64) == 0);
static_assert(scan::scan_workspace_bytes<std::uint64_t, std::uint64_t>(tile64 + 1) == 16);
static_assert(scan::scan_workspace_bytes<std::uint32_t, std::uint32_t>(8192 * 3 + 1) == 16);
static_assert(scan::scan_workspace_bytes<std::uint64_t, std::uint64_t>(1024 * tile64) == 8192);
static_assert(scan::scan_workspace_bytes<std::uint64_t, std::uint64_t>(std::size_t{1} << 40) ==
              8192);

enum class place { out_of_place, in_place };
enum class kind { inclusive, exclusive };

/// n random values of In, below 2^36 (2^32 for 32-bit values): sums of up to 2^28 values fit.
template <class In>
std::vector<In> random_values(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng{seed};
  std::vector<In> v(n);
  for (auto& x : v) x = static_cast<In>(rng() & ((std::uint64_t{1} << 36) - 1));
  return v;
}

/// Runs one scan of `in` on the GPU and compares it with the host's, value by value. The
/// output lies at `lead` values into a buffer of lead + n + 2 values poisoned with 0xFF (lead
/// = 16 bytes: vector path; one value: scalar path); every value outside [lead, lead + n)
/// must keep its poison.
template <class In, class Out, class Policy = scan::scan_policy>
::testing::AssertionResult scan_matches(const std::vector<In>& in, kind k, place p, bool aligned,
                                        cudaStream_t s) {
  const std::size_t n = in.size();
  const std::size_t lead = aligned ? 16 / sizeof(Out) : 1;
  const std::size_t size = lead + n + 2;
  std::vector<Out> expected(n);
  if (k == kind::inclusive) {
    std::inclusive_scan(in.begin(), in.end(), expected.begin(), std::plus<Out>{}, Out{0});
  } else {
    std::exclusive_scan(in.begin(), in.end(), expected.begin(), Out{0}, std::plus<Out>{});
  }

  core::device_buffer<Out> out{size};
  out.fill_bytes(0xFF, s);
  core::device_buffer<In> separate;
  const In* d_in = nullptr;
  if (p == place::in_place) {
    static_assert(sizeof(In) <= sizeof(Out));
    if constexpr (sizeof(In) == sizeof(Out)) {
      if (n != 0) {
        SQUEEZE_CUDA_TRY(cudaMemcpyAsync(out.data() + lead, in.data(), n * sizeof(In),
                                         cudaMemcpyHostToDevice, s));
      }
      d_in = reinterpret_cast<const In*>(out.data() + lead);
    } else {
      return ::testing::AssertionFailure() << "in place needs In and Out of one size";
    }
  } else {
    const std::size_t in_lead = aligned ? 16 / sizeof(In) : 1;
    separate = core::device_buffer<In>{in_lead + n};
    if (n != 0) {
      SQUEEZE_CUDA_TRY(cudaMemcpyAsync(separate.data() + in_lead, in.data(), n * sizeof(In),
                                       cudaMemcpyHostToDevice, s));
    }
    d_in = separate.data() + in_lead;
  }
  // The workspace in its own allocation of exactly the bytes asked for (none: null).
  const std::size_t bytes = scan::scan_workspace_bytes<In, Out, Policy>(n);
  core::device_buffer<std::byte> workspace{bytes};
  if (bytes != 0) workspace.fill_bytes(0xFF, s);
  if (k == kind::inclusive) {
    scan::inclusive_sum<In, Out, Policy>(workspace.data(), bytes, d_in, out.data() + lead, n, s);
  } else {
    scan::exclusive_sum<In, Out, Policy>(workspace.data(), bytes, d_in, out.data() + lead, n, s);
  }
  std::vector<Out> got(size);
  SQUEEZE_CUDA_TRY(
      cudaMemcpyAsync(got.data(), out.data(), size * sizeof(Out), cudaMemcpyDeviceToHost, s));
  SQUEEZE_CUDA_TRY(cudaStreamSynchronize(s));

  Out poison;
  std::memset(&poison, 0xFF, sizeof poison);
  std::size_t wrong = 0;
  std::size_t first = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (got[lead + i] != expected[i] && wrong++ == 0) first = i;
  }
  if (wrong != 0) {
    return ::testing::AssertionFailure()
           << wrong << " of " << n << " values wrong; the first at " << first << ": "
           << got[lead + first] << ", expected " << expected[first];
  }
  for (std::size_t i = 0; i < size; ++i) {
    if ((i < lead || i >= lead + n) && got[i] != poison) {
      return ::testing::AssertionFailure() << "value " << i << " outside the output was written";
    }
  }
  return ::testing::AssertionSuccess();
}

/// Every kind, placement and alignment of a scan of n random values.
template <class In, class Out, class Policy = scan::scan_policy>
void check_all(std::size_t n, std::uint64_t seed, cudaStream_t s) {
  const std::vector<In> in = random_values<In>(n, seed);
  for (const kind k : {kind::inclusive, kind::exclusive}) {
    for (const place p : {place::out_of_place, place::in_place}) {
      if (p == place::in_place && sizeof(In) != sizeof(Out)) continue;
      for (const bool aligned : {true, false}) {
        EXPECT_TRUE((scan_matches<In, Out, Policy>(in, k, p, aligned, s)))
            << "n = " << n << (k == kind::inclusive ? ", inclusive" : ", exclusive")
            << (p == place::in_place ? ", in place" : ", out of place")
            << (aligned ? ", 16-byte aligned" : ", one value off 16 bytes");
      }
    }
  }
}

/// The sizes around the default policy's boundaries for In: a warp, a tile (one block up to
/// it), the grid cap (1024 tiles: one tile a block; one more: two-tile runs), and large n.
template <class In>
std::vector<std::size_t> boundary_sizes(bool large) {
  const std::size_t t = scan::scan_tile_items<In>;
  std::vector<std::size_t> sizes{0, 1, 2, 31, 32, 33, t - 1, t, t + 1, 3 * t + 7};
  if (large) {
    sizes.insert(sizes.end(), {1024 * t, 1024 * t + 1, 1'000'003, (std::size_t{1} << 24) + 5});
  }
  return sizes;
}

}  // namespace core_scan_test

using namespace core_scan_test;

TEST(CoreScan, Uint64MatchesTheHostAtEveryBoundary) {
  SQUEEZE_REQUIRE_GPU();
  core::stream s;
  for (const std::size_t n : boundary_sizes<std::uint64_t>(true)) {
    check_all<std::uint64_t, std::uint64_t>(n, n * 7 + 1, s);
  }
}

// The wire codec's types: unsigned long long tile sums into std::uint64_t bases.
TEST(CoreScan, UnsignedLongLongIntoUint64) {
  SQUEEZE_REQUIRE_GPU();
  core::stream s;
  for (const std::size_t n : boundary_sizes<unsigned long long>(false)) {
    check_all<unsigned long long, std::uint64_t>(n, n * 5 + 2, s);
  }
  check_all<unsigned long long, std::uint64_t>(1'000'003, 3, s);
}

// 32-bit values: summed in 64 bits, or in 32 bits (modulo 2^32, as the host's sums).
TEST(CoreScan, Uint32IntoUint64AndUint32) {
  SQUEEZE_REQUIRE_GPU();
  core::stream s;
  for (const std::size_t n : boundary_sizes<std::uint32_t>(false)) {
    check_all<std::uint32_t, std::uint64_t>(n, n * 3 + 4, s);
    check_all<std::uint32_t, std::uint32_t>(n, n * 3 + 5, s);
  }
  check_all<std::uint32_t, std::uint64_t>(1'000'003, 6, s);
  check_all<std::uint32_t, std::uint32_t>(1'000'003, 7, s);
}

// A small policy: 128-value tiles, one block up to 2 tiles (a loop over tiles with the
// totals double buffered), then at most 3 blocks with runs of many tiles, the last short.
TEST(CoreScan, SmallTilesReachEveryPath) {
  SQUEEZE_REQUIRE_GPU();
  core::stream s;
  constexpr std::size_t t = scan::scan_tile_items<std::uint64_t, small_policy>;
  static_assert(t == 128);
  for (const std::size_t n :
       {std::size_t{1}, t - 1, t, t + 1, 2 * t - 1, 2 * t, 2 * t + 1, 3 * t, 3 * t + 1, 4 * t - 1,
        9 * t, 9 * t + 1, 9 * t + 7 * t + 3, t * t, t * t + 1, std::size_t{1'000'003}}) {
    check_all<std::uint64_t, std::uint64_t, small_policy>(n, n + 11, s);
  }
  constexpr std::size_t t32 = scan::scan_tile_items<std::uint32_t, small_policy>;
  static_assert(t32 == 256);
  for (const std::size_t n : {std::size_t{33}, 2 * t32 + 1, 6 * t32 - 1, 14 * t32 + 13}) {
    check_all<std::uint32_t, std::uint64_t, small_policy>(n, n + 12, s);
  }
}

// Wrong arguments are rejected before any launch (no device needed: nothing is launched).
TEST(CoreScan, RejectsShortWorkspaceNullAndOverlap) {
  using u64 = std::uint64_t;
  auto* buffer = reinterpret_cast<u64*>(std::uintptr_t{1} << 20);
  auto* other = reinterpret_cast<u64*>(std::uintptr_t{1} << 30);
  auto* ws = reinterpret_cast<void*>(std::uintptr_t{1} << 32);
  const u64* no_input = nullptr;
  const std::size_t n = tile64 + 1;  // two blocks: a workspace of 16 bytes
  const std::size_t bytes = scan::scan_workspace_bytes<u64, u64>(n);
  EXPECT_THROW(scan::inclusive_sum(ws, bytes - 1, buffer, other, n, nullptr),
               squeeze::invalid_argument);
  EXPECT_THROW(scan::exclusive_sum(nullptr, bytes, buffer, other, n, nullptr),
               squeeze::invalid_argument);
  EXPECT_THROW(scan::inclusive_sum(nullptr, 0, no_input, other, 5, nullptr),
               squeeze::invalid_argument);
  // Overlapping without being the same values; in place with a wider output.
  EXPECT_THROW(scan::inclusive_sum(nullptr, 0, buffer, buffer + 1, 5, nullptr),
               squeeze::invalid_argument);
  EXPECT_THROW(scan::exclusive_sum(nullptr, 0, buffer + 4, buffer, 5, nullptr),
               squeeze::invalid_argument);
  EXPECT_THROW(scan::inclusive_sum(nullptr, 0, reinterpret_cast<const std::uint32_t*>(buffer),
                                   buffer, 5, nullptr),
               squeeze::invalid_argument);
  // n = 0 launches nothing and checks nothing.
  EXPECT_NO_THROW(scan::inclusive_sum(nullptr, 0, no_input, other, 0, nullptr));
}
