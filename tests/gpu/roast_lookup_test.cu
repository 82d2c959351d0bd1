// SPDX-License-Identifier: Apache-2.0
// ROBE lookups on the GPU against the host references of lookup.hpp: lookup and bag forward
// bit for bit (the kernels add in the reference's order, one fma per value), bag backward
// within the fp32 bound of atomics in any order; the float4 and scalar paths (chunk and dim
// multiples of 4 or not, misaligned pointers), groups of 1 to 32 lanes per row, empty bags,
// repeated indices; bad indices and offsets give zeros and a status, never a read past M
// (M is allocated to exactly |M| values). Outputs are poisoned with 0xFF bytes first; inputs
// are random with fixed seeds.
#include <squeeze/core/buffer.hpp>
#include <squeeze/core/cuda_error.hpp>
#include <squeeze/core/status.hpp>
#include <squeeze/roast/lookup.cuh>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "common/gpu_test.hpp"

namespace roast = squeeze::roast;
namespace core = squeeze::core;
using squeeze::status;

// Named, not anonymous: SQUEEZE_KERNEL gives kernels hidden visibility, which needs
// external linkage.
namespace roast_lookup_test {

struct lookup_case {
  std::uint64_t rows;
  std::uint32_t dim;
  std::uint32_t chunk;
  std::uint64_t memory;
  bool signs;
  float scale;
  std::uint64_t skew;  // M starts this many floats into its allocation (misaligns when odd)
};

std::string describe(const lookup_case& c) {
  return std::to_string(c.rows) + " rows x " + std::to_string(c.dim) + ", Z " +
         std::to_string(c.chunk) + ", |M| " + std::to_string(c.memory) +
         (c.signs ? ", signs" : "") + ", scale " + std::to_string(c.scale) + ", skew " +
         std::to_string(c.skew);
}

// float4 path (Z, dim multiples of 4), lanes per row 1 .. 32 and rows longer than a warp's
// pass; scalar path (dim 50, Z 5, misaligned M); a chunk wider than the row.
const std::vector<lookup_case>& cases() {
  static const std::vector<lookup_case> all{
      {1000, 64, 32, 50000, false, 1.0f, 0},
      {777, 128, 16, 8192, true, 0.3f, 0},
      {300, 4, 4, 64, true, 1.5f, 0},
      {5000, 512, 128, 100003, true, 0.7f, 0},
      {400, 50, 16, 3000, true, 0.9f, 0},
      {400, 37, 5, 2000, false, 1.0f, 0},
      {400, 64, 32, 10000, true, 0.5f, 1},
      {100, 24, 64, 64, false, 2.0f, 0},
      {2000, 1000, 100, 1 << 20, true, 0.1f, 2},
  };
  return all;
}

using squeeze::test::download;  // both wait for the device (see gpu_test.hpp)
using squeeze::test::upload;

std::vector<float> random_floats(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng{seed};
  std::uniform_real_distribution<float> u{-1.0f, 1.0f};
  std::vector<float> v(n);
  for (auto& e : v) e = u(rng);
  return v;
}

/// M on the device: exactly |M| values (plus `skew` floats before it), random.
struct device_memory {
  std::vector<float> host;
  core::device_buffer<float> buffer;
  float* data = nullptr;

  device_memory(std::uint64_t size, std::uint64_t skew, std::uint64_t seed)
      : host{random_floats(size, seed)}, buffer{size + skew} {
    data = buffer.data() + skew;
    SQUEEZE_CUDA_TRY(cudaMemcpy(data, host.data(), size * sizeof(float), cudaMemcpyHostToDevice));
    SQUEEZE_CUDA_TRY(cudaDeviceSynchronize());
  }
};

struct bags_input {
  std::vector<std::int64_t> indices;
  std::vector<std::int64_t> offsets;
};

/// Bags of 0 .. max_size indices drawn from `hot` rows (few: atomics collide in backward).
bags_input random_bags(std::uint64_t bags, std::uint64_t rows, int max_size, std::uint64_t seed,
                       std::uint64_t hot = 0) {
  std::mt19937_64 rng{seed};
  bags_input in;
  in.offsets.push_back(0);
  const std::uint64_t range = hot != 0 && hot < rows ? hot : rows;
  for (std::uint64_t b = 0; b < bags; ++b) {
    const auto size = static_cast<int>(rng() % static_cast<std::uint64_t>(max_size + 1));
    for (int k = 0; k < size; ++k) in.indices.push_back(static_cast<std::int64_t>(rng() % range));
    in.offsets.push_back(static_cast<std::int64_t>(in.indices.size()));
  }
  return in;
}

constexpr int poison_byte = 0xFF;  // every output float starts as a NaN

core::device_buffer<status> fresh_status() {
  core::device_buffer<status> s{1};
  SQUEEZE_CUDA_TRY(cudaMemset(s.data(), 0, sizeof(status)));
  SQUEEZE_CUDA_TRY(cudaDeviceSynchronize());
  return s;
}

status read_status(const core::device_buffer<status>& s) {
  status h = status::ok;
  SQUEEZE_CUDA_TRY(cudaMemcpy(&h, s.data(), sizeof(status), cudaMemcpyDeviceToHost));
  return h;
}

/// Index of the first float whose bits differ (NaN poison included), or -1.
long long first_bit_mismatch(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) return static_cast<long long>(i);
  }
  return -1;
}

roast::lookup_mapping make_map(const lookup_case& c, std::uint64_t seed) {
  return roast::lookup_mapping{roast::lookup_desc{c.rows, c.dim, c.chunk, c.scale, seed, c.signs},
                               c.memory};
}

TEST(RoastLookupGpu, LookupMatchesReferenceBitForBit) {
  SQUEEZE_REQUIRE_GPU();
  std::uint64_t seed = 100;
  for (const lookup_case& c : cases()) {
    ++seed;
    SCOPED_TRACE(describe(c));
    const auto map = make_map(c, seed);
    const device_memory m{c.memory, c.skew, seed};
    std::mt19937_64 rng{seed};
    std::vector<std::int64_t> indices(3001);
    for (auto& i : indices) i = static_cast<std::int64_t>(rng() % c.rows);
    indices[0] = 0;
    indices[1] = static_cast<std::int64_t>(c.rows - 1);
    const auto d_indices = upload(indices);
    core::device_buffer<float> out{indices.size() * c.dim};
    core::stream stream;
    out.fill_bytes(poison_byte, stream);
    auto st = fresh_status();
    roast::lookup_forward(m.data, map, d_indices.data(), indices.size(), out.data(), stream,
                          st.data());
    stream.synchronize();
    std::vector<float> expected(indices.size() * c.dim);
    ASSERT_EQ(roast::reference_lookup(map, m.host.data(), indices.data(), indices.size(),
                                      expected.data()),
              status::ok);
    EXPECT_EQ(read_status(st), status::ok);
    const auto got = download(out.data(), out.size());
    EXPECT_EQ(first_bit_mismatch(got, expected), -1);
    // And against the materialized rows (the definition of W).
    EXPECT_EQ(first_bit_mismatch(got, roast::materialize_rows(map, m.host.data(), indices)), -1);
  }
}

TEST(RoastLookupGpu, LookupOutOfRangeGivesZerosAndStatus) {
  SQUEEZE_REQUIRE_GPU();
  for (const lookup_case& c : {cases()[0], cases()[5]}) {  // float4 and scalar paths
    SCOPED_TRACE(describe(c));
    const auto map = make_map(c, 5);
    const device_memory m{c.memory, c.skew, 6};
    const std::vector<std::int64_t> indices{3,
                                            -1,
                                            static_cast<std::int64_t>(c.rows),
                                            std::numeric_limits<std::int64_t>::max(),
                                            std::numeric_limits<std::int64_t>::min(),
                                            static_cast<std::int64_t>(c.rows - 1),
                                            std::int64_t{1} << 40};
    const auto d_indices = upload(indices);
    core::device_buffer<float> out{indices.size() * c.dim};
    core::stream stream;
    out.fill_bytes(poison_byte, stream);
    auto st = fresh_status();
    roast::lookup_forward(m.data, map, d_indices.data(), indices.size(), out.data(), stream,
                          st.data());
    stream.synchronize();
    EXPECT_EQ(read_status(st), status::out_of_bounds);
    std::vector<float> expected(indices.size() * c.dim);
    EXPECT_EQ(roast::reference_lookup(map, m.host.data(), indices.data(), indices.size(),
                                      expected.data()),
              status::out_of_bounds);
    const auto got = download(out.data(), out.size());
    EXPECT_EQ(first_bit_mismatch(got, expected), -1);
    for (std::uint32_t j = 0; j < c.dim; ++j) {
      EXPECT_EQ(got[1 * c.dim + j], 0.0f);
      EXPECT_EQ(got[3 * c.dim + j], 0.0f);
    }
    // Without a status pointer the bad rows are still zeros and nothing faults.
    out.fill_bytes(poison_byte, stream);
    roast::lookup_forward(m.data, map, d_indices.data(), indices.size(), out.data(), stream);
    stream.synchronize();
    EXPECT_EQ(first_bit_mismatch(download(out.data(), out.size()), expected), -1);
  }
}

TEST(RoastLookupGpu, BagForwardMatchesReferenceBitForBit) {
  SQUEEZE_REQUIRE_GPU();
  std::uint64_t seed = 200;
  for (const lookup_case& c : cases()) {
    for (roast::bag_mode mode : {roast::bag_mode::sum, roast::bag_mode::mean}) {
      ++seed;
      SCOPED_TRACE(describe(c) + (mode == roast::bag_mode::sum ? ", sum" : ", mean"));
      const auto map = make_map(c, seed);
      const device_memory m{c.memory, c.skew, seed};
      const std::uint64_t bags = 700;
      const auto in = random_bags(bags, c.rows, 40, seed);
      const auto d_indices = upload(in.indices);
      const auto d_offsets = upload(in.offsets);
      core::device_buffer<float> out{bags * c.dim};
      core::stream stream;
      out.fill_bytes(poison_byte, stream);
      auto st = fresh_status();
      roast::bag_forward(m.data, map, d_indices.data(), in.indices.size(), d_offsets.data(), bags,
                         mode, out.data(), stream, st.data());
      stream.synchronize();
      std::vector<float> expected(bags * c.dim);
      ASSERT_EQ(
          roast::reference_bag_forward(map, m.host.data(), in.indices.data(), in.indices.size(),
                                       in.offsets.data(), bags, mode, expected.data()),
          status::ok);
      EXPECT_EQ(read_status(st), status::ok);
      EXPECT_EQ(first_bit_mismatch(download(out.data(), out.size()), expected), -1);
    }
  }
}

TEST(RoastLookupGpu, BagForwardBadInputGivesZerosAndStatus) {
  SQUEEZE_REQUIRE_GPU();
  for (const lookup_case& c : {cases()[1], cases()[4]}) {  // float4 and scalar paths
    SCOPED_TRACE(describe(c));
    const auto map = make_map(c, 9);
    const device_memory m{c.memory, c.skew, 10};
    const auto rows = static_cast<std::int64_t>(c.rows);
    // Bag 0 {1, rows, 2}: rows skipped; bag 1 {-3, 4}; bag 2 empty; bag 3 decreasing;
    // bag 4 passes count; bag 5 {5, 6} fine.
    const std::vector<std::int64_t> indices{1, rows, 2, -3, 4, 5, 6};
    const std::vector<std::int64_t> offsets{0, 3, 5, 5, 2, 9, 7};
    const std::vector<std::int64_t> fine_offsets{0, 3, 5, 5, 5, 5, 7};  // bags 3, 4 empty
    const std::uint64_t bags = 6;
    const auto d_indices = upload(indices);
    for (const auto* offs : {&offsets, &fine_offsets}) {
      for (roast::bag_mode mode : {roast::bag_mode::sum, roast::bag_mode::mean}) {
        const auto d_offsets = upload(*offs);
        core::device_buffer<float> out{bags * c.dim};
        core::stream stream;
        out.fill_bytes(poison_byte, stream);
        auto st = fresh_status();
        roast::bag_forward(m.data, map, d_indices.data(), indices.size(), d_offsets.data(), bags,
                           mode, out.data(), stream, st.data());
        stream.synchronize();
        std::vector<float> expected(bags * c.dim);
        EXPECT_EQ(roast::reference_bag_forward(map, m.host.data(), indices.data(), indices.size(),
                                               offs->data(), bags, mode, expected.data()),
                  status::out_of_bounds);
        EXPECT_EQ(read_status(st), status::out_of_bounds);
        const auto got = download(out.data(), out.size());
        EXPECT_EQ(first_bit_mismatch(got, expected), -1);
        for (std::uint32_t j = 0; j < c.dim; ++j) {
          for (std::uint64_t b : {2u, 3u, 4u}) EXPECT_EQ(got[b * c.dim + j], 0.0f);
        }
      }
    }
  }
}

// dM0 + backward against dM0 + the double reference. Per element e hit by m_e contributions
// t_i (each fl(fl(grad / n) * factor): two roundings) added by atomics in any order, the
// fp32 error is at most (m_e + 2) * 2^-24 * (|dM0_e| + sum |t_i|) to first order.
TEST(RoastLookupGpu, BagBackwardMatchesReferenceWithinRounding) {
  SQUEEZE_REQUIRE_GPU();
  std::uint64_t seed = 300;
  for (const lookup_case& c : cases()) {
    for (roast::bag_mode mode : {roast::bag_mode::sum, roast::bag_mode::mean}) {
      ++seed;
      SCOPED_TRACE(describe(c) + (mode == roast::bag_mode::sum ? ", sum" : ", mean"));
      const auto map = make_map(c, seed);
      const std::uint64_t bags = 500;
      // Half the cases draw from 16 hot rows, so atomics to one address collide.
      const auto in = random_bags(bags, c.rows, 30, seed, seed % 2 == 0 ? 16 : 0);
      const auto grad = random_floats(bags * c.dim, seed + 1);
      // dM starts random (accumulated into, not cleared), `skew` floats into its buffer.
      const device_memory dm{c.memory, c.skew, seed + 2};
      const auto d_indices = upload(in.indices);
      const auto d_offsets = upload(in.offsets);
      core::device_buffer<float> d_grad{grad.size() + c.skew};
      SQUEEZE_CUDA_TRY(cudaMemcpy(d_grad.data() + c.skew, grad.data(), grad.size() * sizeof(float),
                                  cudaMemcpyHostToDevice));
      core::stream stream;
      auto st = fresh_status();
      roast::bag_backward(map, d_indices.data(), in.indices.size(), d_offsets.data(), bags, mode,
                          d_grad.data() + c.skew, dm.data, stream, st.data());
      stream.synchronize();
      EXPECT_EQ(read_status(st), status::ok);

      std::vector<double> expected(c.memory, 0.0);
      ASSERT_EQ(roast::reference_bag_backward(map, in.indices.data(), in.indices.size(),
                                              in.offsets.data(), bags, mode, grad.data(),
                                              expected.data()),
                status::ok);
      std::vector<double> magnitude(c.memory, 0.0);
      std::vector<std::uint64_t> hits(c.memory, 0);
      for (std::uint64_t b = 0; b < bags; ++b) {
        const auto first = static_cast<std::uint64_t>(in.offsets[b]);
        const auto last = static_cast<std::uint64_t>(in.offsets[b + 1]);
        const double n = mode == roast::bag_mode::mean && last > first ? double(last - first) : 1.0;
        for (std::uint64_t k = first; k < last; ++k) {
          const auto row = static_cast<std::uint64_t>(in.indices[k]);
          for (std::uint32_t j = 0; j < c.dim; ++j) {
            const std::uint64_t e = map.element_offset(row, j);
            magnitude[e] += std::fabs(map.element_factor(row, j) * grad[b * c.dim + j] / n);
            ++hits[e];
          }
        }
      }
      const auto got = download(dm.data, c.memory);
      std::uint64_t touched = 0;
      for (std::uint64_t e = 0; e < c.memory; ++e) {
        const double start = dm.host[e];
        const double want = start + expected[e];
        const double bound = static_cast<double>(hits[e] + 2) * std::ldexp(1.0, -24) *
                                 (std::fabs(start) + magnitude[e]) * 1.01 +
                             1e-37;
        touched += hits[e] > 0;
        if (hits[e] == 0) {
          ASSERT_EQ(got[e], dm.host[e]) << "element " << e << " was not addressed";
        } else {
          ASSERT_NEAR(got[e], want, bound) << "element " << e << ", " << hits[e] << " hits";
        }
      }
      EXPECT_GT(touched, 0u);
    }
  }
}

TEST(RoastLookupGpu, BagBackwardSkipsBadInput) {
  SQUEEZE_REQUIRE_GPU();
  const lookup_case c = cases()[1];
  const auto map = make_map(c, 12);
  const auto rows = static_cast<std::int64_t>(c.rows);
  const std::vector<std::int64_t> indices{1, rows, 2, -3, 4, 5, 6};
  const std::vector<std::int64_t> offsets{0, 3, 5, 5, 2, 9, 7};
  const std::uint64_t bags = 6;
  const auto grad = random_floats(bags * c.dim, 13);
  const device_memory dm{c.memory, 0, 14};
  const auto d_indices = upload(indices);
  const auto d_offsets = upload(offsets);
  const auto d_grad = upload(grad);
  core::stream stream;
  auto st = fresh_status();
  roast::bag_backward(map, d_indices.data(), indices.size(), d_offsets.data(), bags,
                      roast::bag_mode::mean, d_grad.data(), dm.data, stream, st.data());
  stream.synchronize();
  EXPECT_EQ(read_status(st), status::out_of_bounds);
  std::vector<double> expected(c.memory, 0.0);
  EXPECT_EQ(roast::reference_bag_backward(map, indices.data(), indices.size(), offsets.data(), bags,
                                          roast::bag_mode::mean, grad.data(), expected.data()),
            status::out_of_bounds);
  const auto got = download(dm.data, c.memory);
  for (std::uint64_t e = 0; e < c.memory; ++e) {
    // Few contributions per element here (rows 1, 2, 4 of the valid bags), each below 1.
    const double want = dm.host[e] + expected[e];
    EXPECT_NEAR(got[e], want, 32 * std::ldexp(1.0, -24) * (std::fabs(dm.host[e]) + 4.0))
        << "element " << e;
  }
}

TEST(RoastLookupGpu, LaunchersValidateArguments) {
  SQUEEZE_REQUIRE_GPU();
  const lookup_case c = cases()[0];
  const auto map = make_map(c, 1);
  const device_memory m{c.memory, 0, 2};
  const auto d_indices = upload(std::vector<std::int64_t>{0, 1, 2});
  const auto d_offsets = upload(std::vector<std::int64_t>{0, 3});
  core::device_buffer<float> out{3 * c.dim};
  core::stream stream;
  using squeeze::invalid_argument;
  EXPECT_THROW(roast::lookup_forward(m.data, roast::lookup_mapping{}, d_indices.data(), 3,
                                     out.data(), stream),
               invalid_argument);
  EXPECT_THROW(roast::lookup_forward(nullptr, map, d_indices.data(), 3, out.data(), stream),
               invalid_argument);
  EXPECT_THROW(roast::lookup_forward(m.data, map, nullptr, 3, out.data(), stream),
               invalid_argument);
  EXPECT_THROW(roast::lookup_forward(m.data, map, d_indices.data(), 3, nullptr, stream),
               invalid_argument);
  EXPECT_NO_THROW(roast::lookup_forward(m.data, map, nullptr, 0, nullptr, stream));
  EXPECT_THROW(roast::bag_forward(m.data, map, nullptr, 3, d_offsets.data(), 1,
                                  roast::bag_mode::sum, out.data(), stream),
               invalid_argument);
  EXPECT_THROW(roast::bag_forward(m.data, map, d_indices.data(), 3, nullptr, 1,
                                  roast::bag_mode::sum, out.data(), stream),
               invalid_argument);
  EXPECT_THROW(roast::bag_forward(m.data, map, d_indices.data(), 3, d_offsets.data(), 1,
                                  static_cast<roast::bag_mode>(7), out.data(), stream),
               invalid_argument);
  EXPECT_THROW(roast::bag_backward(map, d_indices.data(), 3, d_offsets.data(), 1,
                                   roast::bag_mode::sum, nullptr, out.data(), stream),
               invalid_argument);
  EXPECT_THROW(roast::bag_backward(map, d_indices.data(), 3, d_offsets.data(), 1,
                                   roast::bag_mode::sum, out.data(), nullptr, stream),
               invalid_argument);
  try {
    roast::bag_forward(m.data, map, d_indices.data(), 3, nullptr, 1, roast::bag_mode::mean,
                       out.data(), stream);
    FAIL() << "a null offsets array was accepted";
  } catch (const invalid_argument& e) {
    EXPECT_NE(std::string{e.what()}.find("offsets is null"), std::string::npos) << e.what();
  }
  stream.synchronize();
}

}  // namespace roast_lookup_test
