// SPDX-License-Identifier: Apache-2.0
// coll:: on the GPU. N ranks run as threads sharing device 0 through the local test transport
// (tests/common/coll_local.hpp, NCCL's stream-ordered contract): ring and recursive doubling,
// raw and compressed, collective and naive, float and double, sum/min/max, in place and not,
// N = 1 ... 8 including non-powers of two. Checked against a host reduction of the same
// inputs (exact for the raw codec on integer-valued inputs, within the codec's bound
// otherwise), every rank bit-identical to every other under a lossy codec, outputs poisoned,
// repeated calls bit-identical, mismatched calls refused on every rank. The frsz2 wire codec
// is checked against the host reference, and a variable-size mock codec drives the size
// exchange. With two or more GPUs the same checks run over NCCL, one thread per GPU.
#include <squeeze/coll/allreduce.cuh>
#include <squeeze/coll/nccl.hpp>
#include <squeeze/coll/selector.cuh>
#include <squeeze/core/buffer.hpp>
#include <squeeze/frsz2/format.hpp>
#include <squeeze/frsz2/wire.cuh>
#include <squeeze/ibp/wire.cuh>

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/coll_local.hpp"
#include "common/coll_test.hpp"
#include "common/gpu_test.hpp"

namespace coll = squeeze::coll;
namespace core = squeeze::core;
namespace frsz2 = squeeze::frsz2;
namespace test = squeeze::test;

namespace coll_allreduce_test {

using test::data_kind;
using test::host_reduce;
using test::make_inputs;
using test::max_abs;
using test::max_abs_difference;
using test::same_bits;
using test::trim_codec;
static_assert(coll::wire_codec_for<frsz2::wire_codec<16>, float>);
static_assert(coll::wire_codec_for<frsz2::wire_codec<8>, double>);

template <class T>
struct outcome {
  std::vector<std::vector<T>> results;   // per rank, after the first call
  std::vector<std::vector<T>> repeated;  // per rank, after a second identical call
  std::vector<std::size_t> bytes_sent;
  std::vector<int> steps;             // transport steps (begin/end pairs), gathers included
  std::vector<int> gathers;           // in-place gathers (a gathering transport's)
  std::vector<std::uint64_t> checks;  // argument checks across the ranks
};

template <class Codec, class T, class Transport = test::local_transport>
outcome<T> run_local(const std::vector<std::vector<T>>& inputs, core::reduce_op op,
                     const coll::allreduce_options& options, bool in_place) {
  const int ranks = static_cast<int>(inputs.size());
  const std::size_t count = inputs.front().size();
  outcome<T> out;
  out.results.resize(inputs.size());
  out.repeated.resize(inputs.size());
  out.bytes_sent.resize(inputs.size());
  out.steps.resize(inputs.size());
  out.gathers.resize(inputs.size());
  out.checks.resize(inputs.size());
  test::local_hub hub{ranks};
  test::run_ranks(ranks, [&](int r) {
    const auto ri = static_cast<std::size_t>(r);
    Transport t{hub, r};
    core::stream s;
    core::device_buffer<T> send{count}, recv{count};
    coll::allreducer<Transport, Codec> ar{t};
    for (int call = 0; call < 2; ++call) {
      send.copy_from(std::span<const T>{inputs[ri]}, s);
      recv.fill_bytes(0xA5, s);  // poison
      T* dst = in_place ? send.data() : recv.data();
      ar(send.data(), dst, count, op, s, options);
      auto& into = call == 0 ? out.results[ri] : out.repeated[ri];
      into.resize(count);
      if (count > 0) {
        SQUEEZE_CUDA_TRY(
            cudaMemcpyAsync(into.data(), dst, count * sizeof(T), cudaMemcpyDeviceToHost, s));
      }
      s.synchronize();
    }
    out.bytes_sent[ri] = ar.bytes_sent();
    out.steps[ri] = t.steps_taken();
    if constexpr (requires { t.gathers(); }) out.gathers[ri] = t.gathers();
    out.checks[ri] = ar.agreed().checks();
  });
  return out;
}

struct case_params {
  int ranks;
  std::size_t count;
  coll::algorithm algorithm;
};
std::string case_name(const testing::TestParamInfo<case_params>& info) {
  // (appended piece by piece: "N" + std::to_string(...) trips g++ 12's -Wrestrict at -O3)
  std::string name{"N"};
  name += std::to_string(info.param.ranks);
  name += "_n";
  name += std::to_string(info.param.count);
  name += '_';
  name += coll::name(info.param.algorithm);
  return name;
}

class CollLocal : public testing::TestWithParam<case_params> {};

// The raw codec: exact on integer-valued data for sum, min and max, both types, in place
// and not; ranks identical; repeat identical.
TEST_P(CollLocal, RawExact) {
  SQUEEZE_REQUIRE_GPU();
  const auto p = GetParam();
  for (auto op : {core::reduce_op::sum, core::reduce_op::min, core::reduce_op::max}) {
    SCOPED_TRACE(core::to_string(op));
    const auto in_f = make_inputs<float>(p.ranks, p.count, data_kind::integers, 11 + p.count);
    const auto want_f = host_reduce(in_f, op);
    const auto got_f = run_local<coll::no_compression>(in_f, op, {.algorithm = p.algorithm},
                                                       op == core::reduce_op::sum);
    for (int r = 0; r < p.ranks; ++r) {
      EXPECT_TRUE(same_bits(got_f.results[static_cast<std::size_t>(r)], want_f)) << "rank " << r;
      EXPECT_TRUE(same_bits(got_f.repeated[static_cast<std::size_t>(r)], want_f)) << "rank " << r;
    }
    const auto in_d = make_inputs<double>(p.ranks, p.count, data_kind::integers, 12 + p.count);
    const auto want_d = host_reduce(in_d, op);
    const auto got_d = run_local<coll::no_compression>(in_d, op, {.algorithm = p.algorithm},
                                                       op != core::reduce_op::sum);
    for (int r = 0; r < p.ranks; ++r) {
      EXPECT_TRUE(same_bits(got_d.results[static_cast<std::size_t>(r)], want_d)) << "rank " << r;
    }
  }
}

// FRSZ2 on the wire: every rank holds the same bits, close to the exact reduction, and the
// bytes sent shrink by the codec's rate.
template <int Bits, class T>
void check_frsz2(const case_params& p, core::reduce_op op, bool collective) {
  using codec = frsz2::wire_codec<Bits>;
  SCOPED_TRACE(std::string{codec::name()} + (sizeof(T) == 4 ? " float" : " double") +
               (collective ? " collective" : " naive") + " " + core::to_string(op));
  const auto in = make_inputs<T>(p.ranks, p.count, data_kind::normal, 21 + p.count + Bits);
  const auto want = host_reduce(in, op);
  const auto got =
      run_local<codec>(in, op, {.algorithm = p.algorithm, .collective = collective}, false);
  // Each value passes the codec at most (N + 2) times, each time with an error of at most
  // 2^(2-l) of its block's largest magnitude, itself at most N max|x|.
  const double bound = (p.ranks + 2) * std::ldexp(1.0, 2 - Bits) * p.ranks * max_abs(in);
  double worst = 0;
  for (int r = 0; r < p.ranks; ++r) {
    const auto& mine = got.results[static_cast<std::size_t>(r)];
    ASSERT_EQ(mine.size(), want.size());
    for (std::size_t i = 0; i < want.size(); ++i) {
      ASSERT_FALSE(std::isnan(static_cast<double>(mine[i]))) << "rank " << r << " value " << i;
      worst =
          std::max(worst, std::abs(static_cast<double>(mine[i]) - static_cast<double>(want[i])));
    }
    if (collective) {
      EXPECT_TRUE(same_bits(mine, got.results[0])) << "rank " << r << " differs from rank 0";
    }
    EXPECT_TRUE(same_bits(mine, got.repeated[static_cast<std::size_t>(r)]))
        << "rank " << r << ": a repeated call gave other bits";
  }
  EXPECT_LE(worst, bound);
  if (p.ranks > 1 && p.count >= 1000) {
    // bytes on the wire against the raw codec's: about Bits / (8 sizeof(T))
    const double raw =
        p.algorithm == coll::algorithm::ring
            ? 2.0 * (p.ranks - 1) * static_cast<double>(p.count) / p.ranks * sizeof(T)
            : 0.0;
    if (raw > 0 && collective) {
      const double ratio = static_cast<double>(got.bytes_sent[1]) / raw;
      EXPECT_NEAR(ratio, (Bits + 0.5) / (8.0 * sizeof(T)), 0.05);
    }
  }
}

TEST_P(CollLocal, Frsz2Collective) {
  SQUEEZE_REQUIRE_GPU();
  const auto p = GetParam();
  check_frsz2<16, float>(p, core::reduce_op::sum, true);
  check_frsz2<8, float>(p, core::reduce_op::sum, true);
  check_frsz2<32, double>(p, core::reduce_op::sum, true);
  check_frsz2<16, double>(p, core::reduce_op::max, true);
  check_frsz2<16, float>(p, core::reduce_op::min, true);
}

// Many small slices: the pipelined executor's slice bookkeeping (the default slice of 8 MiB
// leaves these sizes in one slice).
TEST_P(CollLocal, SlicedPipeline) {
  SQUEEZE_REQUIRE_GPU();
  const auto p = GetParam();
  for (std::size_t slice : {std::size_t{128}, std::size_t{4096}}) {
    SCOPED_TRACE("slice_bytes " + std::to_string(slice));
    const auto in = make_inputs<float>(p.ranks, p.count, data_kind::integers, 41 + p.count);
    const auto want = host_reduce(in, core::reduce_op::sum);
    const auto raw = run_local<coll::no_compression>(
        in, core::reduce_op::sum, {.algorithm = p.algorithm, .slice_bytes = slice}, false);
    const auto z = run_local<frsz2::wire_codec<32>>(
        in, core::reduce_op::sum, {.algorithm = p.algorithm, .slice_bytes = slice}, true);
    const auto normal = make_inputs<double>(p.ranks, p.count, data_kind::normal, 43 + p.count);
    const auto z16 = run_local<frsz2::wire_codec<16>>(
        normal, core::reduce_op::sum, {.algorithm = p.algorithm, .slice_bytes = slice}, false);
    const auto unsliced = run_local<frsz2::wire_codec<16>>(normal, core::reduce_op::sum,
                                                           {.algorithm = p.algorithm}, false);
    for (int r = 0; r < p.ranks; ++r) {
      const auto ri = static_cast<std::size_t>(r);
      EXPECT_TRUE(same_bits(raw.results[ri], want)) << "rank " << r;
      // small integers are exact in frsz2_32 (32 bits for a float)
      EXPECT_TRUE(same_bits(z.results[ri], want)) << "rank " << r;
      EXPECT_TRUE(same_bits(z16.results[ri], z16.results[0])) << "rank " << r;
      // slices start on codec blocks, so slicing changes no bit of the result
      EXPECT_TRUE(same_bits(z16.results[ri], unsliced.results[ri])) << "rank " << r;
    }
  }
}

// A transport that gathers (as NCCL's does): two ranks exchange each slice's pair of
// messages by one in-place gather, other rank counts keep their sends and receives. The
// arithmetic is the same, so every result equals the point-to-point transport's bit for
// bit, sliced or not, ring or recursive doubling.
TEST_P(CollLocal, GatheringTransport) {
  SQUEEZE_REQUIRE_GPU();
  const auto p = GetParam();
  for (std::size_t slice : {std::size_t{4096}, std::size_t{16} << 20}) {
    SCOPED_TRACE("slice_bytes " + std::to_string(slice));
    // every slice through the gather (the default gathers slices of 4 MiB or more)
    const coll::allreduce_options o{
        .algorithm = p.algorithm, .slice_bytes = slice, .gather_bytes = 0};
    const auto in = make_inputs<float>(p.ranks, p.count, data_kind::normal, 61 + p.count);
    const auto want = run_local<frsz2::wire_codec<16>>(in, core::reduce_op::sum, o, false);
    const auto got = run_local<frsz2::wire_codec<16>, float, test::local_gathering_transport>(
        in, core::reduce_op::sum, o, false);
    const auto in_d = make_inputs<double>(p.ranks, p.count, data_kind::normal, 62 + p.count);
    const auto want_d = run_local<frsz2::wire_codec<8>>(in_d, core::reduce_op::max, o, true);
    const auto got_d = run_local<frsz2::wire_codec<8>, double, test::local_gathering_transport>(
        in_d, core::reduce_op::max, o, true);
    for (int r = 0; r < p.ranks; ++r) {
      const auto ri = static_cast<std::size_t>(r);
      EXPECT_TRUE(same_bits(got.results[ri], want.results[ri])) << "rank " << r;
      EXPECT_TRUE(same_bits(got.repeated[ri], want.results[ri])) << "rank " << r;
      EXPECT_TRUE(same_bits(got_d.results[ri], want_d.results[ri])) << "rank " << r;
      EXPECT_TRUE(same_bits(got.results[ri], got.results[0])) << "rank " << r;
      if (p.ranks == 2 && p.count > 0) {
        // every transfer was a gather
        EXPECT_GT(got.gathers[ri], 0) << "rank " << r;
        EXPECT_EQ(got.gathers[ri], got.steps[ri]) << "rank " << r;
      } else {
        EXPECT_EQ(got.gathers[ri], 0) << "rank " << r;
      }
    }
  }
  // below gather_bytes, two ranks keep send/recv
  if (p.ranks == 2 && p.count > 0) {
    const coll::allreduce_options o{.algorithm = p.algorithm, .gather_bytes = std::size_t{1} << 40};
    const auto in = make_inputs<float>(p.ranks, p.count, data_kind::normal, 63 + p.count);
    const auto got = run_local<frsz2::wire_codec<16>, float, test::local_gathering_transport>(
        in, core::reduce_op::sum, o, false);
    EXPECT_EQ(got.gathers[0], 0);
    EXPECT_GT(got.steps[0], 0);
  }
}

TEST_P(CollLocal, Frsz2Naive) {
  SQUEEZE_REQUIRE_GPU();
  const auto p = GetParam();
  check_frsz2<16, float>(p, core::reduce_op::sum, false);
  check_frsz2<8, double>(p, core::reduce_op::sum, false);
}

// IBP on the wire (lossless, variable size): the results of the raw codec, bit for bit. The
// two codecs cut chunks on different granules (32 and 4 values), which changes the order in
// which the ring adds a value's terms, so the sums are of values whose sums are exact in
// any order (multiples of 2^-10 that also compress: few exponents, short significands);
// max over random doubles does not depend on the order.
TEST_P(CollLocal, IbpLossless) {
  SQUEEZE_REQUIRE_GPU();
  const auto p = GetParam();
  for (bool collective : {true, false}) {
    SCOPED_TRACE(collective ? "collective" : "naive");
    auto in = make_inputs<float>(p.ranks, p.count, data_kind::integers, 51 + p.count);
    for (auto& v : in)
      for (auto& x : v) x *= 0x1p-10f;
    const coll::allreduce_options o{.algorithm = p.algorithm, .collective = collective};
    const auto raw = run_local<coll::no_compression>(in, core::reduce_op::sum, o, false);
    const auto got = run_local<squeeze::ibp::wire_codec>(in, core::reduce_op::sum, o, true);
    const auto in_d = make_inputs<double>(p.ranks, p.count, data_kind::normal, 52 + p.count);
    const auto raw_d = run_local<coll::no_compression>(in_d, core::reduce_op::max, o, false);
    const auto got_d = run_local<squeeze::ibp::wire_codec>(in_d, core::reduce_op::max, o, false);
    for (int r = 0; r < p.ranks; ++r) {
      const auto ri = static_cast<std::size_t>(r);
      EXPECT_TRUE(same_bits(got.results[ri], raw.results[ri])) << "rank " << r;
      EXPECT_TRUE(same_bits(got.repeated[ri], raw.results[ri])) << "rank " << r;
      EXPECT_TRUE(same_bits(got_d.results[ri], raw_d.results[ri])) << "rank " << r;
    }
    if (collective && p.ranks > 1 && p.count >= 65536 && p.algorithm == coll::algorithm::ring) {
      EXPECT_LT(got.bytes_sent[0], raw.bytes_sent[0]) << "gradient-like floats did not shrink";
    }
  }
}

// A variable-size lossless codec: exact results, and each message's size travels first.
TEST_P(CollLocal, VariableSizeCodec) {
  SQUEEZE_REQUIRE_GPU();
  const auto p = GetParam();
  for (bool collective : {true, false}) {
    SCOPED_TRACE(collective ? "collective" : "naive");
    auto in = make_inputs<float>(p.ranks, p.count, data_kind::trailing_zeros, 31 + p.count);
    for (auto& v : in)
      for (auto& x : v) x = std::round(x * 8.0f);  // integer-valued: the sum is exact
    const auto want = host_reduce(in, core::reduce_op::sum);
    const auto got = run_local<trim_codec>(
        in, core::reduce_op::sum, {.algorithm = p.algorithm, .collective = collective}, true);
    for (int r = 0; r < p.ranks; ++r) {
      EXPECT_TRUE(same_bits(got.results[static_cast<std::size_t>(r)], want)) << "rank " << r;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, CollLocal,
    testing::Values(
        case_params{1, 1000, coll::algorithm::ring}, case_params{2, 0, coll::algorithm::ring},
        case_params{2, 1, coll::algorithm::ring}, case_params{2, 4099, coll::algorithm::ring},
        case_params{3, 33, coll::algorithm::ring}, case_params{3, 100003, coll::algorithm::ring},
        case_params{4, 65536, coll::algorithm::ring}, case_params{5, 1000, coll::algorithm::ring},
        case_params{8, 70001, coll::algorithm::ring},
        case_params{1, 1000, coll::algorithm::recursive_doubling},
        case_params{2, 4099, coll::algorithm::recursive_doubling},
        case_params{3, 100003, coll::algorithm::recursive_doubling},
        case_params{4, 1, coll::algorithm::recursive_doubling},
        case_params{5, 1000, coll::algorithm::recursive_doubling},
        case_params{6, 33, coll::algorithm::recursive_doubling},
        case_params{7, 70001, coll::algorithm::recursive_doubling},
        case_params{8, 65536, coll::algorithm::recursive_doubling}),
    case_name);

// A rank that passes another count, algorithm, op, slicing or gather threshold makes every
// rank throw, before any data moves.
TEST(CollLocalErrors, MismatchedCallsAreRefusedEverywhere) {
  SQUEEZE_REQUIRE_GPU();
  for (int mismatch = 0; mismatch < 5; ++mismatch) {
    const int ranks = 3;
    test::local_hub hub{ranks};
    std::vector<int> refused(ranks, 0);
    test::run_ranks(ranks, [&](int r) {
      test::local_transport t{hub, r};
      core::stream s;
      core::device_buffer<float> buf{1024};
      buf.fill_bytes(0, s);
      coll::allreducer<test::local_transport, frsz2::wire_codec<16>> ar{t};
      std::size_t count = 1000;
      coll::allreduce_options o;
      auto op = core::reduce_op::sum;
      if (r == 1) {
        if (mismatch == 0) count = 999;
        if (mismatch == 1) o.algorithm = coll::algorithm::recursive_doubling;
        if (mismatch == 2) op = core::reduce_op::max;
        if (mismatch == 3) o.slice_bytes = 4096;
        if (mismatch == 4) o.gather_bytes = 0;
      }
      try {
        ar(buf.data(), buf.data(), count, op, s, o);
      } catch (const squeeze::invalid_argument& e) {
        refused[static_cast<std::size_t>(r)] = 1;
        EXPECT_NE(std::string{e.what()}.find("disagree"), std::string::npos) << e.what();
      }
      EXPECT_EQ(t.steps_taken(), 0) << "rank " << r << " moved data";
    });
    for (int r = 0; r < ranks; ++r)
      EXPECT_EQ(refused[static_cast<std::size_t>(r)], 1) << "rank " << r;
  }
}

// verification::first_call checks a signature once, every_call every time, off never;
// a call with a new count or op is checked again. Results are the same whatever checks.
TEST(CollLocalErrors, EachSignatureIsCheckedOnce) {
  SQUEEZE_REQUIRE_GPU();
  const int ranks = 3;
  const std::size_t count = 1000;
  const auto in = make_inputs<float>(ranks, 2 * count, data_kind::integers, 71);
  const auto want_sum = host_reduce(in, core::reduce_op::sum);
  for (auto v :
       {coll::verification::off, coll::verification::first_call, coll::verification::every_call}) {
    SCOPED_TRACE(coll::name(v));
    test::local_hub hub{ranks};
    std::vector<std::uint64_t> checks(ranks);
    std::vector<std::vector<float>> last(ranks);
    test::run_ranks(ranks, [&](int r) {
      const auto ri = static_cast<std::size_t>(r);
      test::local_transport t{hub, r};
      core::stream s;
      core::device_buffer<float> buf{2 * count};
      coll::allreducer<test::local_transport, frsz2::wire_codec<32>> ar{t};
      // (count, sum) three times, (2 count, sum), (count, sum), (count, max): three signatures
      const std::size_t counts[] = {count, count, count, 2 * count, count, count};
      const core::reduce_op ops[] = {core::reduce_op::sum, core::reduce_op::sum,
                                     core::reduce_op::sum, core::reduce_op::sum,
                                     core::reduce_op::sum, core::reduce_op::max};
      for (int call = 0; call < 6; ++call) {
        buf.copy_from(std::span<const float>{in[ri]}, s);
        ar(buf.data(), buf.data(), counts[call], ops[call], s, {.verify = v});
      }
      buf.copy_from(std::span<const float>{in[ri]}, s);
      ar(buf.data(), buf.data(), 2 * count, core::reduce_op::sum, s, {.verify = v});
      last[ri].resize(2 * count);
      buf.copy_to(std::span<float>{last[ri]}, s);
      s.synchronize();
      checks[ri] = ar.agreed().checks();
    });
    const std::uint64_t expected = v == coll::verification::off          ? 0
                                   : v == coll::verification::first_call ? 3
                                                                         : 7;
    for (int r = 0; r < ranks; ++r) {
      const auto ri = static_cast<std::size_t>(r);
      EXPECT_EQ(checks[ri], expected) << "rank " << r;
      // small integers are exact in frsz2_32
      EXPECT_TRUE(same_bits(last[ri], want_sum)) << "rank " << r;
    }
  }
}

// ibp::wire_codec whose encode number `spoil_at` on this rank (counted from 0 over the
// allreducer's life) is spoiled after it is written: a header field changed (its check word
// no longer matches), or the announced size cut below a header's.
enum class spoil : int { header_field, truncated };

__global__ void spoil_message_kernel(std::byte* wire, std::uint64_t* size, spoil how) {
  if (how == spoil::header_field) {
    reinterpret_cast<unsigned char*>(wire)[offsetof(squeeze::ibp::wire_header, values)] ^= 1u;
  } else {
    *size = 8;
  }
}

struct spoiling_codec : squeeze::ibp::wire_codec {
  long spoil_at = -1;
  spoil how = spoil::header_field;
  long encodes = 0;
  template <class T>
  void encode(const T* src, std::size_t n, std::byte* wire, std::uint64_t* size, cudaStream_t s) {
    squeeze::ibp::wire_codec::encode(src, n, wire, size, s);
    if (encodes++ == spoil_at) {
      spoil_message_kernel<<<1, 1, 0, s>>>(wire, size, how);
      SQUEEZE_CHECK_LAUNCH();
    }
  }
};
static_assert(coll::wire_codec_for<spoiling_codec, float>);
static_assert(coll::checked_codec<spoiling_codec>);

// One rank sends a corrupted message (its first, or its last of a call; a changed header or
// a cut length): only its receiver's decoder can tell, yet every rank throws format_error,
// no rank waits for ever (the test ends the process after 60 s a case), and the next call, clean,
// is exact on every rank.
TEST(CollLocalErrors, CorruptedMessageFailsEveryRank) {
  SQUEEZE_REQUIRE_GPU();
  const std::size_t count = 20000;
  for (const int ranks : {2, 3, 5}) {
    for (const auto algorithm : {coll::algorithm::ring, coll::algorithm::recursive_doubling}) {
      for (const spoil how : {spoil::header_field, spoil::truncated}) {
        SCOPED_TRACE(std::to_string(ranks) + " ranks, " + coll::name(algorithm) +
                     (how == spoil::header_field ? ", a header field" : ", a cut length"));
        auto in = make_inputs<float>(ranks, count, data_kind::integers, 91 + ranks);
        const auto want = host_reduce(in, core::reduce_op::sum);
        const int victim = ranks - 1;
        test::local_hub hub{ranks};
        std::vector<std::vector<int>> failed(static_cast<std::size_t>(ranks));
        std::vector<std::vector<int>> exact(static_cast<std::size_t>(ranks));
        test::run_ranks_within(
            ranks, test::hang_limit(std::chrono::seconds{60}), "CorruptedMessageFailsEveryRank",
            [&](int r) {
              const auto ri = static_cast<std::size_t>(r);
              test::local_transport t{hub, r};
              core::stream s;
              core::device_buffer<float> buf{count};
              coll::allreducer<test::local_transport, spoiling_codec> ar{t};
              std::vector<float> got(count);
              // call 0 clean (counts the victim's encodes a call: e), call 1 spoils its first
              // message, call 2 clean, call 3 spoils its last, call 4 clean
              long e = 0;
              for (int call = 0; call < 5; ++call) {
                if (call == 1 && r == victim) ar.codec().spoil_at = e;
                if (call == 3 && r == victim) ar.codec().spoil_at = 4 * e - 1;
                ar.codec().how = how;
                buf.copy_from(std::span<const float>{in[ri]}, s);
                try {
                  ar(buf.data(), buf.data(), count, core::reduce_op::sum, s,
                     {.algorithm = algorithm});
                  failed[ri].push_back(0);
                } catch (const squeeze::format_error& err) {
                  failed[ri].push_back(1);
                  EXPECT_NE(std::string{err.what()}.find("corrupted message"), std::string::npos)
                      << err.what();
                }
                if (call == 0) e = ar.codec().encodes;
                buf.copy_to(std::span<float>{got}, s);
                s.synchronize();
                exact[ri].push_back(same_bits(got, want) ? 1 : 0);
              }
            });
        for (int r = 0; r < ranks; ++r) {
          const auto ri = static_cast<std::size_t>(r);
          EXPECT_EQ(failed[ri], (std::vector<int>{0, 1, 0, 1, 0})) << "rank " << r;
          for (int call : {0, 2, 4}) {
            EXPECT_EQ(exact[ri][static_cast<std::size_t>(call)], 1)
                << "rank " << r << ", call " << call;
          }
        }
      }
    }
  }
}

// A traced call reports every step (and slice) of its schedule: a message is encoded before
// it arrives and decoded after, all within the call; untraced calls report nothing.
TEST(CollTrace, EveryStepAndSliceInOrder) {
  SQUEEZE_REQUIRE_GPU();
  const int ranks = 3;
  const std::size_t count = 30000;
  const auto in = make_inputs<float>(ranks, count, data_kind::normal, 83);
  for (auto alg : {coll::algorithm::ring, coll::algorithm::recursive_doubling}) {
    SCOPED_TRACE(coll::name(alg));
    test::local_hub hub{ranks};
    test::run_ranks(ranks, [&](int r) {
      const auto ri = static_cast<std::size_t>(r);
      test::local_transport t{hub, r};
      core::stream s;
      core::device_buffer<float> buf{count};
      const coll::allreduce_options o{.algorithm = alg, .slice_bytes = 16384};
      coll::allreducer<test::local_transport, frsz2::wire_codec<16>> sliced{t};
      coll::allreducer<test::local_transport, squeeze::ibp::wire_codec> stepwise{t};
      const auto check = [&](auto& ar, bool slices) {
        buf.copy_from(std::span<const float>{in[ri]}, s);
        ar(buf.data(), buf.data(), count, core::reduce_op::sum, s, o);
        EXPECT_TRUE(ar.trace().empty());  // not traced
        buf.copy_from(std::span<const float>{in[ri]}, s);
        ar.trace_next_call();
        core::event_timer whole{s};
        whole.start();
        ar(buf.data(), buf.data(), count, core::reduce_op::sum, s, o);
        whole.stop();
        const float total_us = whole.elapsed_ms() * 1000.0f;
        const auto steps = ar.trace();
        ASSERT_FALSE(steps.empty());
        EXPECT_TRUE(ar.trace().empty());  // read once
        const int want_steps = coll::steps(alg, ranks);
        EXPECT_EQ(steps.back().step, want_steps - 1);
        int max_slice = 0;
        for (const auto& st : steps) {
          SCOPED_TRACE("step " + std::to_string(st.step) + "." + std::to_string(st.slice));
          max_slice = std::max(max_slice, st.slice);
          const std::array<float, 3> times{st.encoded_us, st.arrived_us, st.consumed_us};
          for (const float t_us : times) {
            if (std::isnan(t_us)) continue;
            EXPECT_GE(t_us, 0.0f);
            EXPECT_LE(t_us, total_us + 1.0f);
          }
          if (!std::isnan(st.encoded_us) && !std::isnan(st.arrived_us)) {
            EXPECT_LE(st.encoded_us, st.arrived_us);
          }
          if (!std::isnan(st.consumed_us)) EXPECT_LE(st.arrived_us, st.consumed_us);
        }
        EXPECT_EQ(max_slice > 0, slices);
      };
      check(sliced, true);
      check(stepwise, false);
    });
  }
}

// ---- the selector ----------------------------------------------------------------------
// Every rank calibrates on the same link, so every rank chooses the same candidate for
// every size; the results are right whichever it takes.
TEST(CollSelector, RanksChooseAlikeAndResultsHold) {
  SQUEEZE_REQUIRE_GPU();
  const int ranks = 3;
  const std::vector<std::size_t> sizes{1000, 20'000, 70'000, 200'000, 1'000'000};
  std::vector<std::vector<int>> chosen(ranks);
  std::vector<std::vector<std::vector<float>>> results(ranks);
  std::vector<std::vector<std::vector<float>>> inputs;
  for (std::size_t count : sizes) {
    inputs.push_back(make_inputs<float>(ranks, count, data_kind::normal, count));
  }
  test::local_hub hub{ranks};
  test::run_ranks(ranks, [&](int r) {
    const auto ri = static_cast<std::size_t>(r);
    test::local_transport t{hub, r};
    core::stream s;
    coll::selector<test::local_transport, frsz2::wire_codec<16>> sel{
        t, {}, {.ladder = {16u << 10, 64u << 10, 256u << 10, 1u << 20}, .repeats = 3}};
    EXPECT_EQ(sel.choose(1u << 20), coll::path::native);  // not calibrated yet
    sel.calibrate<float>(s);
    EXPECT_EQ(sel.choose(1000), coll::path::native);  // below the ladder
    for (std::size_t k = 0; k < sizes.size(); ++k) {
      const std::size_t count = sizes[k];
      core::device_buffer<float> buf{count};
      buf.copy_from(std::span<const float>{inputs[k][ri]}, s);
      sel(buf.data(), buf.data(), count, core::reduce_op::sum, s);
      chosen[ri].push_back(static_cast<int>(sel.last_choice()));
      results[ri].emplace_back(count);
      buf.copy_to(std::span<float>{results[ri].back()}, s);
      s.synchronize();
    }
  });
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    const auto want = host_reduce(inputs[k], core::reduce_op::sum);
    const double bound = (ranks + 2) * std::ldexp(1.0, 2 - 16) * ranks * max_abs(inputs[k]);
    for (int r = 0; r < ranks; ++r) {
      const auto ri = static_cast<std::size_t>(r);
      EXPECT_EQ(chosen[ri][k], chosen[0][k]) << "rank " << r << " size " << sizes[k];
      const double worst = max_abs_difference(results[ri][k], want);
      EXPECT_LE(worst, bound) << "rank " << r << " size " << sizes[k] << " path "
                              << coll::name(static_cast<coll::path>(chosen[ri][k]));
    }
  }
}

// The choice from a given table: interpolation between rungs, proportion above, the
// margin that keeps the native allreduce unless another candidate is clearly faster.
TEST(CollSelector, ChoosesFromTheTable) {
  SQUEEZE_REQUIRE_GPU();
  test::local_hub hub{1};
  test::local_transport t{hub, 0};
  coll::selector<test::local_transport, frsz2::wire_codec<16>> sel{
      t, {}, {.ladder = {1u << 20, 4u << 20, 16u << 20}}};
  // native: 0.1 + 1 ms/MiB; ring+codec: 0.8 + 0.5 ms/MiB; the others slower.
  std::vector<std::array<double, coll::path_count>> ms;
  for (double mib : {1.0, 4.0, 16.0}) {
    ms.push_back({0.1 + mib, 0.2 + 1.1 * mib, 0.2 + 1.2 * mib, 0.8 + 0.5 * mib, 0.9 + 0.6 * mib});
  }
  sel.set_measurements(ms);
  EXPECT_EQ(sel.choose(512u << 10), coll::path::native);  // below the ladder
  EXPECT_EQ(sel.choose(1u << 20), coll::path::native);    // 1.1 ms against 1.3
  EXPECT_NEAR(sel.predict(coll::path::native, 2u << 20), 2.1, 1e-12);
  EXPECT_EQ(sel.choose(2u << 20), coll::path::ring_compressed);  // 2.1 ms against 1.8
  // above the ladder: in proportion to the top rung (8.8 ms at 16 MiB), not along the line
  // through the last two rungs (32.8 ms)
  EXPECT_NEAR(sel.predict(coll::path::ring_compressed, 64u << 20), 35.2, 1e-9);
  EXPECT_NEAR(sel.predict(coll::path::native, 64u << 20), 64.4, 1e-9);
  EXPECT_EQ(sel.choose(256u << 20), coll::path::ring_compressed);
  // codecs 60 % slower than native at 4 MiB and 3 % slower at 16 MiB: the line through
  // those rungs is flatter than native's and would call them 16 % faster at 512 MiB; in
  // proportion to the top rung they stay 3 % slower, and native stays
  {
    auto steep = ms;
    for (std::size_t c : {3u, 4u}) {
      steep[1][c] = steep[1][0] * 1.6;
      steep[2][c] = steep[2][0] * 1.03;
    }
    sel.set_measurements(steep);
    EXPECT_EQ(sel.choose(512u << 20), coll::path::native);
    sel.set_measurements(ms);
  }
  // within the margin: native stays
  for (auto& row : ms) row[3] = row[4] = row[0] * 0.97;
  sel.set_measurements(ms);
  EXPECT_EQ(sel.choose(8u << 20), coll::path::native);
  EXPECT_THROW(sel.set_measurements({}), squeeze::invalid_argument);
  // one rung: every size in proportion to it, below it too
  coll::selector<test::local_transport, frsz2::wire_codec<16>> one{t, {}, {.ladder = {4u << 20}}};
  one.set_measurements({{4.0, 5.0, 5.0, 2.0, 3.0}});
  EXPECT_NEAR(one.predict(coll::path::ring_compressed, 1u << 20), 0.5, 1e-12);
  EXPECT_NEAR(one.predict(coll::path::native, 16u << 20), 16.0, 1e-12);
}

// A codec of variable size (IBP) is chosen only when it was timed on the caller's data: the
// same table without that leaves the native allreduce or a raw schedule.
TEST(CollSelector, VariableSizeCodecOnlyOnTheCallersData) {
  SQUEEZE_REQUIRE_GPU();
  test::local_hub hub{1};
  test::local_transport t{hub, 0};
  coll::selector<test::local_transport, squeeze::ibp::wire_codec> sel{
      t, {}, {.ladder = {1u << 20, 4u << 20}}};
  // the codec's columns 5x faster than native, the raw schedules 2 % slower
  std::vector<std::array<double, coll::path_count>> ms;
  for (double mib : {1.0, 4.0}) ms.push_back({mib, 1.02 * mib, 1.02 * mib, 0.2 * mib, 0.2 * mib});
  sel.set_measurements(ms);  // as calibrate(stream) leaves it: no sample
  EXPECT_FALSE(sel.codec_candidates());
  EXPECT_EQ(sel.choose(2u << 20), coll::path::native);
  sel.set_measurements(ms, true);  // as calibrate(stream, sample) leaves it
  EXPECT_TRUE(sel.codec_candidates());
  EXPECT_EQ(sel.choose(2u << 20), coll::path::ring_compressed);
  // calibrated without a sample on this transport: the codec is neither timed nor chosen
  core::stream s;
  coll::selector<test::local_transport, squeeze::ibp::wire_codec> cal{
      t, {}, {.ladder = {64u << 10, 256u << 10}, .warmup = 0, .repeats = 1}};
  cal.calibrate<float>(s);
  EXPECT_FALSE(cal.codec_candidates());
  for (const auto& row : cal.measurements()) {
    EXPECT_EQ(row[static_cast<std::size_t>(coll::path::ring_compressed)], 0.0);
    EXPECT_GT(row[static_cast<std::size_t>(coll::path::native)], 0.0);
  }
  // with a sample (90 % zeros) it is timed
  std::vector<float> host(10000, 0.0f);
  for (std::size_t i = 0; i < host.size(); i += 10) host[i] = 0.25f * static_cast<float>(i % 7 + 1);
  core::device_buffer<float> sample{host.size()};
  sample.copy_from(std::span<const float>{host}, s);
  cal.calibrate<float>(s, std::span<const float>{sample.data(), sample.size()});
  EXPECT_TRUE(cal.codec_candidates());
  for (const auto& row : cal.measurements()) {
    EXPECT_GT(row[static_cast<std::size_t>(coll::path::ring_compressed)], 0.0);
  }
  EXPECT_THROW(cal.calibrate<float>(s, std::span<const float>{}), squeeze::invalid_argument);
}

// ---- the frsz2 wire codec against the host reference ------------------------------------
template <int Bits, class T>
void check_wire_codec(std::size_t n) {
  using codec = frsz2::wire_codec<Bits>;
  using F = frsz2::format<Bits, T, 32>;
  SCOPED_TRACE(std::string{codec::name()} + " n=" + std::to_string(n));
  std::mt19937_64 rng{n * 7 + Bits};
  std::normal_distribution<double> normal{0.0, 3.0};
  std::vector<T> x(n), base(n);
  for (auto& v : x) v = static_cast<T>(normal(rng));
  for (auto& v : base) v = static_cast<T>(normal(rng));
  const std::size_t bytes = codec::template max_wire_bytes<T>(n);
  EXPECT_EQ(bytes % 16, 0u);
  EXPECT_GE(bytes, F::payload_words(n) * 4 + F::blocks(n) * 2);
  core::device_buffer<T> dx{n}, dy{n};
  core::device_buffer<std::byte> wire{std::max<std::size_t>(bytes, 16)};
  dx.copy_from(std::span<const T>{x}, nullptr);
  wire.fill_bytes(0xA5, nullptr);
  codec c;
  c.encode(dx.data(), n, wire.data(), nullptr, nullptr);
  // the payload and exponents match the host encoder bit for bit
  const auto ref = frsz2::encode<F>(std::span<const T>{x}, frsz2::rounding::nearest);
  std::vector<std::byte> got(bytes);
  if (bytes > 0)
    SQUEEZE_CUDA_TRY(cudaMemcpy(got.data(), wire.data(), bytes, cudaMemcpyDeviceToHost));
  ASSERT_EQ(std::memcmp(got.data(), ref.payload.data(), ref.payload.size() * 4), 0);
  ASSERT_EQ(std::memcmp(got.data() + ref.payload.size() * 4, ref.exponents.data(),
                        ref.exponents.size() * 2),
            0);
  const auto decoded = frsz2::decode<F>(ref);
  // decode
  dy.fill_bytes(0xA5, nullptr);
  c.decode(wire.data(), bytes, n, dy.data(), nullptr);
  std::vector<T> y(n);
  dy.copy_to(std::span<T>{y}, nullptr);
  SQUEEZE_CUDA_TRY(cudaDeviceSynchronize());
  EXPECT_TRUE(same_bits(y, decoded));
  // decode_reduce for each op
  for (auto op : {core::reduce_op::sum, core::reduce_op::min, core::reduce_op::max}) {
    dy.copy_from(std::span<const T>{base}, nullptr);
    c.decode_reduce(wire.data(), bytes, n, dy.data(), op, nullptr);
    dy.copy_to(std::span<T>{y}, nullptr);
    SQUEEZE_CUDA_TRY(cudaDeviceSynchronize());
    std::vector<T> want(n);
    for (std::size_t i = 0; i < n; ++i) want[i] = core::apply(op, base[i], decoded[i]);
    EXPECT_TRUE(same_bits(y, want)) << core::to_string(op);
    // the same with the other operand from a second array (poisoned output first)
    core::device_buffer<T> dbase{n};
    dbase.copy_from(std::span<const T>{base}, nullptr);
    dy.fill_bytes(0xA5, nullptr);
    c.decode_reduce(wire.data(), bytes, n, static_cast<const T*>(dbase.data()), dy.data(), op,
                    nullptr);
    dy.copy_to(std::span<T>{y}, nullptr);
    SQUEEZE_CUDA_TRY(cudaDeviceSynchronize());
    EXPECT_TRUE(same_bits(y, want)) << core::to_string(op) << ", from a second array";
  }
  static_assert(coll::decodes_reduce_from<codec, T>);
  static_assert(!coll::decodes_reduce_from<squeeze::ibp::wire_codec, T>);
  // a message of the wrong size is refused
  EXPECT_THROW(c.decode(wire.data(), bytes + 16, n, dy.data(), nullptr), squeeze::format_error);
  if (n > 0) {
    EXPECT_THROW(c.decode(wire.data() + 8, bytes, n, dy.data(), nullptr),
                 squeeze::invalid_argument);
  }
}

TEST(CollWireCodec, Frsz2MatchesHostReference) {
  SQUEEZE_REQUIRE_GPU();
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{31}, std::size_t{32},
                        std::size_t{33}, std::size_t{1000}, std::size_t{65536 + 7}}) {
    check_wire_codec<8, float>(n);
    check_wire_codec<16, float>(n);
    check_wire_codec<21, float>(n);
    check_wire_codec<32, float>(n);
    check_wire_codec<16, double>(n);
    check_wire_codec<32, double>(n);
    check_wire_codec<40, double>(n);
  }
}

// ---- NCCL ------------------------------------------------------------------------------
#define NCCL_OK(call) ASSERT_EQ((call), ncclSuccess) << #call

TEST(CollNccl, OneRankCommunicator) {
  SQUEEZE_REQUIRE_GPU();
  ncclComm_t comm = nullptr;
  int device = 0;
  NCCL_OK(ncclCommInitAll(&comm, 1, &device));
  {
    coll::nccl_transport t{comm};
    EXPECT_EQ(t.size(), 1);
    EXPECT_EQ(t.rank(), 0);
    core::stream s;
    std::array<std::uint64_t, 2> v{5, 7};
    t.max_all(v, s);
    EXPECT_EQ(v[0], 5u);
    EXPECT_EQ(v[1], 7u);
    const auto in = make_inputs<float>(1, 4099, data_kind::normal, 5);
    core::device_buffer<float> send{4099}, recv{4099};
    send.copy_from(std::span<const float>{in[0]}, s);
    recv.fill_bytes(0xA5, s);
    coll::allreducer<coll::nccl_transport, frsz2::wire_codec<16>> ar{t};
    ar(send.data(), recv.data(), 4099, core::reduce_op::sum, s);
    std::vector<float> out(4099);
    recv.copy_to(std::span<float>{out}, s);
    s.synchronize();
    EXPECT_TRUE(same_bits(out, in[0]));  // one rank: a copy, no codec
    // A failing NCCL call surfaces as an exception that names it (a peer outside the
    // communicator), and the transport is usable afterwards.
    t.begin(s);
    try {
      t.send(send.data(), 64, 5);
      t.end();
      ADD_FAILURE() << "ncclSend to rank 5 of 1 did not fail";
    } catch (const coll::communication_error& e) {
      EXPECT_NE(std::string{e.what()}.find("ncclSend"), std::string::npos) << e.what();
    }
    std::array<std::uint64_t, 1> w{9};
    t.max_all(w, s);
    EXPECT_EQ(w[0], 9u);
  }
  ncclCommDestroy(comm);
}

int device_count() {
  int devices = 0;
  SQUEEZE_CUDA_TRY(cudaGetDeviceCount(&devices));
  return devices;
}

/// One NCCL communicator per GPU 0 ... ranks - 1, made by one process (ncclCommInitAll).
class gpu_communicators {
 public:
  explicit gpu_communicators(int ranks) : comms_(static_cast<std::size_t>(ranks)) {
    std::vector<int> list(comms_.size());
    for (int r = 0; r < ranks; ++r) list[static_cast<std::size_t>(r)] = r;
    const ncclResult_t made = ncclCommInitAll(comms_.data(), ranks, list.data());
    if (made != ncclSuccess) {
      throw std::runtime_error{std::string{"ncclCommInitAll: "} + ncclGetErrorString(made)};
    }
  }
  ~gpu_communicators() {
    for (auto c : comms_) ncclCommDestroy(c);
  }
  gpu_communicators(const gpu_communicators&) = delete;
  gpu_communicators& operator=(const gpu_communicators&) = delete;
  [[nodiscard]] ncclComm_t operator[](int r) const { return comms_[static_cast<std::size_t>(r)]; }

 private:
  std::vector<ncclComm_t> comms_;
};

// Two or more GPUs: one thread per GPU, the NCCL transport, checked like the local runs.
TEST(CollNccl, MultiGpu) {
  SQUEEZE_REQUIRE_GPU();
  const int ranks = std::min(device_count(), 8);
  if (ranks < 2) GTEST_SKIP() << "one GPU: NCCL allows one rank per GPU";
  const gpu_communicators comms{ranks};
  for (auto algorithm : {coll::algorithm::ring, coll::algorithm::recursive_doubling}) {
    SCOPED_TRACE(coll::name(algorithm));
    const std::size_t count = 1'000'003;
    const auto in = make_inputs<float>(ranks, count, data_kind::normal, 77);
    const auto exact = make_inputs<float>(ranks, count, data_kind::integers, 78);
    const auto want = host_reduce(in, core::reduce_op::sum);
    const auto want_exact = host_reduce(exact, core::reduce_op::sum);
    std::vector<std::vector<float>> got(static_cast<std::size_t>(ranks)),
        got_raw(static_cast<std::size_t>(ranks)), native(static_cast<std::size_t>(ranks));
    std::vector<std::exception_ptr> errors(static_cast<std::size_t>(ranks));
    std::vector<std::thread> threads;
    for (int r = 0; r < ranks; ++r) {
      threads.emplace_back([&, r] {
        const auto ri = static_cast<std::size_t>(r);
        try {
          SQUEEZE_CUDA_TRY(cudaSetDevice(r));
          coll::nccl_transport t{comms[r]};
          core::stream s;
          core::device_buffer<float> a{count}, b{count};
          coll::allreducer<coll::nccl_transport, frsz2::wire_codec<16>> ar{t};
          coll::allreducer<coll::nccl_transport> raw{t};
          a.copy_from(std::span<const float>{in[ri]}, s);
          ar(a.data(), a.data(), count, core::reduce_op::sum, s, {.algorithm = algorithm});
          got[ri].resize(count);
          a.copy_to(std::span<float>{got[ri]}, s);
          b.copy_from(std::span<const float>{exact[ri]}, s);
          raw(b.data(), a.data(), count, core::reduce_op::sum, s, {.algorithm = algorithm});
          got_raw[ri].resize(count);
          a.copy_to(std::span<float>{got_raw[ri]}, s);
          t.native_allreduce(b.data(), b.data(), count, core::reduce_op::sum, s);
          native[ri].resize(count);
          b.copy_to(std::span<float>{native[ri]}, s);
          s.synchronize();
        } catch (...) {
          errors[ri] = std::current_exception();
        }
      });
    }
    for (auto& th : threads) th.join();
    for (auto& e : errors) {
      if (e) std::rethrow_exception(e);
    }
    const double bound = (ranks + 2) * std::ldexp(1.0, 2 - 16) * ranks * max_abs(in);
    for (int r = 0; r < ranks; ++r) {
      const auto ri = static_cast<std::size_t>(r);
      EXPECT_TRUE(same_bits(got[ri], got[0])) << "rank " << r;
      EXPECT_TRUE(same_bits(got_raw[ri], want_exact)) << "rank " << r;
      EXPECT_TRUE(same_bits(native[ri], want_exact)) << "rank " << r;
      const double worst = max_abs_difference(got[ri], want);
      EXPECT_LE(worst, bound) << "rank " << r;
    }
  }
}

// Over NCCL, one GPU per rank: the last rank's first IBP message (in the first call) is
// corrupted; every rank throws, none hangs (the process ends after 60 s), the second call
// is exact on every rank.
TEST(CollNccl, CorruptedMessageFailsEveryRank) {
  SQUEEZE_REQUIRE_GPU();
  const int ranks = std::min(device_count(), 8);
  if (ranks < 2) GTEST_SKIP() << "one GPU: NCCL allows one rank per GPU";
  const gpu_communicators comms{ranks};
  const std::size_t count = 300'007;
  const auto in = make_inputs<float>(ranks, count, data_kind::integers, 79);
  const auto want = host_reduce(in, core::reduce_op::sum);
  for (auto algorithm : {coll::algorithm::ring, coll::algorithm::recursive_doubling}) {
    SCOPED_TRACE(coll::name(algorithm));
    std::vector<std::vector<int>> failed(static_cast<std::size_t>(ranks));
    std::vector<int> exact(static_cast<std::size_t>(ranks), 0);
    test::run_ranks_within(
        ranks, test::hang_limit(std::chrono::seconds{60}), "CollNccl.CorruptedMessage", [&](int r) {
          const auto ri = static_cast<std::size_t>(r);
          SQUEEZE_CUDA_TRY(cudaSetDevice(r));
          coll::nccl_transport t{comms[r]};
          core::stream s;
          core::device_buffer<float> buf{count};
          coll::allreducer<coll::nccl_transport, spoiling_codec> ar{t};
          ar.codec().spoil_at = r == ranks - 1 ? 0 : -1;
          for (int call = 0; call < 2; ++call) {
            buf.copy_from(std::span<const float>{in[ri]}, s);
            try {
              ar(buf.data(), buf.data(), count, core::reduce_op::sum, s, {.algorithm = algorithm});
              failed[ri].push_back(0);
            } catch (const squeeze::format_error& err) {
              failed[ri].push_back(1);
              EXPECT_NE(std::string{err.what()}.find("corrupted message"), std::string::npos)
                  << err.what();
            }
          }
          std::vector<float> got(count);
          buf.copy_to(std::span<float>{got}, s);
          s.synchronize();
          exact[ri] = same_bits(got, want) ? 1 : 0;
        });
    for (int r = 0; r < ranks; ++r) {
      const auto ri = static_cast<std::size_t>(r);
      EXPECT_EQ(failed[ri], (std::vector<int>{1, 0})) << "rank " << r;
      EXPECT_EQ(exact[ri], 1) << "rank " << r << ": the call after the failed one";
    }
  }
}

}  // namespace coll_allreduce_test
