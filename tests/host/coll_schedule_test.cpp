// SPDX-License-Identifier: Apache-2.0
// coll:: allreduce schedules and core::reduce_op on the host. Every rank of N = 1 ... 64 runs
// in one process, step by step, over a simulated wire with mock codecs (exact, lossy and
// idempotent, lossy and not idempotent): every send meets exactly one receive, every rank
// ends with the reduction, and under a lossy codec all ranks end bit-identical (what the
// round_trip flags are for; the harness without them shows ranks diverging). Also: the
// ring's allgather encodes each chunk once and forwards it, step counts, per-step traffic,
// chunk_layout, apply's NaN and signed-zero rules, and argument checks.
#include <squeeze/coll/schedule.hpp>
#include <squeeze/coll/transport.hpp>
#include <squeeze/core/reduce_op.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace coll = squeeze::coll;
namespace core = squeeze::core;
using coll::algorithm;
using coll::on_receive;
using coll::send_source;
using coll::step_plan;
using core::reduce_op;

namespace {

constexpr algorithm algorithms[] = {algorithm::ring, algorithm::recursive_doubling};
constexpr reduce_op ops[] = {reduce_op::sum, reduce_op::min, reduce_op::max};
constexpr int max_ranks = 64;
constexpr std::size_t counts[] = {0, 1, 5, 31, 1000, 4099};
constexpr std::size_t granules[] = {1, 4, 32};

std::uint64_t bits(double x) {
  return std::bit_cast<std::uint64_t>(x);
}
std::uint32_t bits(float x) {
  return std::bit_cast<std::uint32_t>(x);
}

int floor_pow2(int n) {
  return static_cast<int>(std::bit_floor(static_cast<unsigned>(n)));
}

// ---- mock codecs: a message is a vector of 64-bit words -----------------------------------

using words = std::vector<std::uint64_t>;

/// Sends the values' bits: exact.
struct identity_codec {
  static constexpr const char* name = "identity";
  words encode(std::span<const double> x) const {
    words w(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) w[i] = bits(x[i]);
    return w;
  }
  void decode(const words& w, std::span<double> out) const {
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = std::bit_cast<double>(w[i]);
  }
  /// The largest |decode(encode(x)) - x| for |x| <= magnitude.
  double error_bound(double /*magnitude*/) const { return 0.0; }
};

/// Rounds to the nearest multiple of 2^-StepLog2 and decodes Offset (a fraction of a step)
/// above the grid point. Offset 0: decode(encode(x)) is a fixed point of the round trip
/// (idempotent). Offset > 0: a second round trip moves every value once more (not
/// idempotent): a stand-in for a block codec whose rounding carries a block's maximum into
/// the next binade, and so changes the block's grid when decoded values are encoded again.
template <int StepLog2, double Offset>
struct grid_codec_of {
  static constexpr const char* name = Offset == 0 ? "grid" : "offset grid";
  static constexpr double step = 1.0 / static_cast<double>(1ull << StepLog2);
  words encode(std::span<const double> x) const {
    words w(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
      w[i] = static_cast<std::uint64_t>(std::llround(x[i] / step));
    }
    return w;
  }
  void decode(const words& w, std::span<double> out) const {
    for (std::size_t i = 0; i < out.size(); ++i) {
      out[i] = (static_cast<double>(static_cast<std::int64_t>(w[i])) + Offset) * step;
    }
  }
  double error_bound(double) const { return Offset == 0 ? step / 2 : (0.5 + Offset) * step; }
};
using grid_codec = grid_codec_of<8, 0.0>;          // 2^-8, idempotent
using offset_grid_codec = grid_codec_of<10, 0.6>;  // 2^-10, decoded 0.6 of a step above

/// Rounds each value to float.
struct float_codec {
  static constexpr const char* name = "float";
  words encode(std::span<const double> x) const {
    words w(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) w[i] = bits(static_cast<float>(x[i]));
    return w;
  }
  void decode(const words& w, std::span<double> out) const {
    for (std::size_t i = 0; i < out.size(); ++i) {
      out[i] = std::bit_cast<float>(static_cast<std::uint32_t>(w[i]));
    }
  }
  double error_bound(double magnitude) const { return magnitude * 0x1p-24; }
};

/// frsz2-like: blocks of 4 values share the exponent of their largest magnitude; each value
/// keeps 8 significant bits at that exponent, rounded to nearest. A block maximum that
/// rounds up into the next binade makes a second round trip change the block (not
/// idempotent, as frsz2 with rounding::nearest).
struct block_codec {
  static constexpr const char* name = "block exponent, 8 bits";
  static constexpr std::size_t block = 4;
  static constexpr int kept_bits = 8;
  words encode(std::span<const double> x) const {
    words w;
    for (std::size_t first = 0; first < x.size(); first += block) {
      const std::size_t last = std::min(x.size(), first + block);
      double m = 0;
      for (std::size_t i = first; i < last; ++i) m = std::max(m, std::fabs(x[i]));
      const int e = m == 0 ? 0 : std::ilogb(m);
      w.push_back(static_cast<std::uint64_t>(static_cast<std::int64_t>(e)));
      for (std::size_t i = first; i < last; ++i) {
        w.push_back(static_cast<std::uint64_t>(std::llround(std::ldexp(x[i], kept_bits - 1 - e))));
      }
    }
    return w;
  }
  void decode(const words& w, std::span<double> out) const {
    std::size_t k = 0;
    for (std::size_t first = 0; first < out.size(); first += block) {
      const int e = static_cast<int>(static_cast<std::int64_t>(w[k++]));
      for (std::size_t i = first; i < std::min(out.size(), first + block); ++i) {
        out[i] =
            std::ldexp(static_cast<double>(static_cast<std::int64_t>(w[k++])), e - (kept_bits - 1));
      }
    }
  }
  double error_bound(double magnitude) const { return magnitude * std::ldexp(1.0, -kept_bits); }
};

template <class Codec>
std::vector<double> round_trip(const Codec& codec, std::span<const double> x) {
  std::vector<double> y(x.size());
  codec.decode(codec.encode(x), y);
  return y;
}

// ---- the simulated collective -------------------------------------------------------------

/// A message on the simulated wire, with what the checks need to know about it.
struct message {
  int chunk = -1;       ///< the chunk it carries
  int encoder = -1;     ///< the rank that encoded it
  int encoded_at = -1;  ///< the step in which it was encoded
  words payload;
};

/// How the harness treats step_plan::round_trip. Only `honored` is the schedule's contract;
/// the others exist to show that the checks catch their absence.
enum class round_trips {
  honored,    ///< encode once; keep the decoded message as the local values, send the message
  ignored,    ///< no round trips
  reencoded,  ///< round-trip the local values, then encode them again for the send
};

struct encode_record {
  int step;
  int rank;
  int chunk;
  bool sent;  ///< false: a round trip without a send
};

struct delivery_record {
  int step;
  int to;
  int chunk;
  int encoder;
  int encoded_at;
  bool forwarded;  ///< the sender passed on a message it had received
};

struct run_result {
  std::vector<std::vector<double>> values;  // [rank][count]
  std::vector<encode_record> encodes;
  std::vector<delivery_record> deliveries;
  int steps = 0;
};

/// The shape of one plan: peers and chunks in range and consistent with sends()/receives().
void check_plan(const step_plan& p, algorithm a, int rank, int n, int step) {
  SCOPED_TRACE("rank " + std::to_string(rank) + " step " + std::to_string(step));
  const int parts = coll::chunks(a, n);
  ASSERT_EQ(p.sends(), p.send_peer >= 0);
  ASSERT_EQ(p.sends(), p.send_chunk >= 0);
  ASSERT_EQ(p.receives(), p.recv_peer >= 0);
  ASSERT_EQ(p.receives(), p.recv_chunk >= 0);
  ASSERT_EQ(p.round_trip, p.round_trip_chunk >= 0);
  if (p.sends()) {
    ASSERT_LT(p.send_peer, n);
    ASSERT_NE(p.send_peer, rank);
    ASSERT_LT(p.send_chunk, parts);
  }
  if (p.receives()) {
    ASSERT_LT(p.recv_peer, n);
    ASSERT_NE(p.recv_peer, rank);
    ASSERT_LT(p.recv_chunk, parts);
  }
  if (p.round_trip) {
    ASSERT_LT(p.round_trip_chunk, parts);
    // The decoded message is what the rank keeps: a round trip beside a local send is of
    // the chunk it sends.
    if (p.send == send_source::local) {
      ASSERT_EQ(p.round_trip_chunk, p.send_chunk);
    }
  }
}

/// Every send of a step meets exactly one receive (the peer's, naming this rank and this
/// chunk), and every receive exactly one send: no rank waits forever.
void check_matching(const std::vector<step_plan>& plans, int step) {
  const int n = static_cast<int>(plans.size());
  for (int r = 0; r < n; ++r) {
    const step_plan& p = plans[r];
    if (p.sends()) {
      const step_plan& q = plans[p.send_peer];
      ASSERT_TRUE(q.receives() && q.recv_peer == r)
          << "step " << step << ": rank " << r << " sends to " << p.send_peer
          << ", which does not receive from it";
      ASSERT_EQ(q.recv_chunk, p.send_chunk)
          << "step " << step << ": rank " << r << " -> " << p.send_peer;
    }
    if (p.receives()) {
      const step_plan& q = plans[p.recv_peer];
      ASSERT_TRUE(q.sends() && q.send_peer == r)
          << "step " << step << ": rank " << r << " receives from " << p.recv_peer
          << ", which does not send to it";
    }
  }
}

using schedule = std::vector<std::vector<step_plan>>;  // [step][rank]

/// The plans of every rank and step of `a` for `n` ranks, checked (check_plan,
/// check_matching) the first time they are asked for; null after a failed check.
void checked_schedule(algorithm a, int n, const schedule*& out) {
  static std::map<std::pair<algorithm, int>, schedule> cache;
  out = nullptr;
  const auto key = std::make_pair(a, n);
  if (const auto it = cache.find(key); it != cache.end()) {
    out = &it->second;
    return;
  }
  schedule s(coll::steps(a, n), std::vector<step_plan>(n));
  for (int step = 0; step < coll::steps(a, n); ++step) {
    for (int r = 0; r < n; ++r) {
      s[step][r] = coll::schedule_step(a, r, n, step);
      ASSERT_NO_FATAL_FAILURE(check_plan(s[step][r], a, r, n, step));
    }
    ASSERT_NO_FATAL_FAILURE(check_matching(s[step], step));
  }
  out = &cache.emplace(key, std::move(s)).first->second;
}

/// Runs the collective for `inputs.size()` ranks. Messages are computed from the state at
/// the start of a step (all ranks exchange at once), then delivered.
template <class Codec>
void simulate(algorithm a, reduce_op op, std::size_t granule, const Codec& codec,
              std::vector<std::vector<double>> inputs, run_result& out,
              round_trips mode = round_trips::honored) {
  const int n = static_cast<int>(inputs.size());
  const std::size_t count = inputs.front().size();
  const coll::chunk_layout layout{count, coll::chunks(a, n), granule};
  out = run_result{};
  out.values = std::move(inputs);
  auto chunk_of = [&](int r, int c) {
    return std::span<double>{out.values[r]}.subspan(layout.first(c), layout.size(c));
  };

  const schedule* plan_table = nullptr;
  ASSERT_NO_FATAL_FAILURE(checked_schedule(a, n, plan_table));
  using message_ptr = std::shared_ptr<const message>;
  std::vector<message_ptr> received(n);  // in the previous step
  std::vector<double> decoded;
  const int total = coll::steps(a, n);
  ASSERT_EQ(plan_table->size(), static_cast<std::size_t>(total));
  for (int step = 0; step < total; ++step) {
    const std::vector<step_plan>& plans = (*plan_table)[step];

    // Sends, from the state at the start of the step.
    std::vector<message_ptr> outgoing(n);
    for (int r = 0; r < n; ++r) {
      const step_plan& p = plans[r];
      auto encode = [&](int c, bool sent) {
        out.encodes.push_back({step, r, c, sent});
        return std::make_shared<const message>(message{c, r, step, codec.encode(chunk_of(r, c))});
      };
      auto round_trip_alone = [&](int c) {
        codec.decode(encode(c, false)->payload, chunk_of(r, c));
      };
      const bool rt = p.round_trip && mode != round_trips::ignored;
      if (p.send == send_source::local) {
        if (rt && mode == round_trips::honored) {  // check_plan: round_trip_chunk == send_chunk
          outgoing[r] = encode(p.send_chunk, true);
          codec.decode(outgoing[r]->payload, chunk_of(r, p.send_chunk));  // what the peer decodes
        } else {
          if (rt) round_trip_alone(p.round_trip_chunk);
          outgoing[r] = encode(p.send_chunk, true);
        }
      } else {
        if (rt) round_trip_alone(p.round_trip_chunk);
        if (p.send == send_source::forward) {
          ASSERT_TRUE(received[r] != nullptr)
              << "step " << step << ": rank " << r << " forwards without a previous receive";
          ASSERT_EQ(received[r]->chunk, p.send_chunk)
              << "step " << step << ": rank " << r << " forwards a message of another chunk";
          outgoing[r] = received[r];  // unchanged
        }
      }
    }

    // Receives.
    std::vector<message_ptr> now(n);
    for (int r = 0; r < n; ++r) {
      const step_plan& p = plans[r];
      if (!p.receives()) continue;
      const message& m = *outgoing[p.recv_peer];  // check_matching: the peer sends to r
      ASSERT_EQ(m.chunk, p.recv_chunk) << "step " << step << ": rank " << r;
      out.deliveries.push_back({step, r, m.chunk, m.encoder, m.encoded_at,
                                plans[p.recv_peer].send == send_source::forward});
      const auto local = chunk_of(r, p.recv_chunk);
      decoded.resize(local.size());
      codec.decode(m.payload, decoded);
      if (p.recv == on_receive::reduce) {
        for (std::size_t i = 0; i < local.size(); ++i) {
          local[i] = core::apply(op, local[i], decoded[i]);
        }
      } else {
        std::copy(decoded.begin(), decoded.end(), local.begin());
      }
      now[r] = outgoing[p.recv_peer];
    }
    received = std::move(now);
    ++out.steps;
  }
}

/// n ranks' inputs of `count` values drawn from `dist`.
template <class Distribution>
std::vector<std::vector<double>> random_inputs(int n, std::size_t count, std::uint64_t seed,
                                               Distribution dist) {
  std::mt19937_64 rng{seed};
  std::vector<std::vector<double>> x(n, std::vector<double>(count));
  for (auto& v : x) {
    for (auto& e : v) e = static_cast<double>(dist(rng));
  }
  return x;
}

std::vector<std::vector<double>> random_integers(int n, std::size_t count, std::uint64_t seed) {
  return random_inputs(n, count, seed, std::uniform_int_distribution<int>{-1000, 1000});
}

/// Values in [-1, 1] on none of the codecs' grids.
std::vector<std::vector<double>> random_reals(int n, std::size_t count, std::uint64_t seed) {
  return random_inputs(n, count, seed, std::uniform_real_distribution<double>{-1.0, 1.0});
}

/// The reduction of all ranks' inputs, folded in rank order (in long double for sums).
std::vector<double> reference(const std::vector<std::vector<double>>& x, reduce_op op) {
  const std::size_t count = x.front().size();
  std::vector<double> y(count);
  for (std::size_t i = 0; i < count; ++i) {
    if (op == reduce_op::sum) {
      long double s = 0;
      for (const auto& v : x) s += v[i];
      y[i] = static_cast<double>(s);
    } else {
      double m = x.front()[i];
      for (const auto& v : x) m = core::apply(op, m, v[i]);
      y[i] = m;
    }
  }
  return y;
}

/// The first index where a and b differ in bits, or a.size() if none.
std::size_t first_difference(const std::vector<double>& a, const std::vector<double>& b) {
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (bits(a[i]) != bits(b[i])) return i;
  }
  return a.size();
}

bool ranks_identical(const run_result& r) {
  for (const auto& v : r.values) {
    if (v.size() != r.values.front().size() ||
        std::memcmp(v.data(), r.values.front().data(), v.size() * sizeof(double)) != 0) {
      return false;
    }
  }
  return true;
}

std::string describe(algorithm a, int n, std::size_t count, std::size_t granule, reduce_op op) {
  return std::string{coll::name(a)} + " N=" + std::to_string(n) +
         " count=" + std::to_string(count) + " granule=" + std::to_string(granule) +
         " op=" + core::to_string(op);
}

/// Granules that change anything for `a`: recursive doubling sends one chunk (parts = 1).
std::vector<std::size_t> granules_for(algorithm a) {
  if (a == algorithm::ring) return {std::begin(granules), std::end(granules)};
  return {1};
}

/// How far a result may be from the exact reduction: each round trip moves a value by at most
/// `delta`; sums add those moves up along the reduction tree, min and max do not.
double error_bound(algorithm a, int n, reduce_op op, double delta) {
  const int total = coll::steps(a, n);
  double trips = total + 1;
  if (op == reduce_op::sum) {
    // ring: N - 1 reduce-scatter hops and the owner's round trip. Recursive doubling: the
    // pre-step, then e' = 2 e + 2 delta per exchange step, then the post-step.
    trips = a == algorithm::ring ? n : 3.0 * floor_pow2(n) + 1;
  }
  return trips * delta + 1e-12 * n;  // + double rounding of sums of up to 64 values in [-1, 1]
}

/// Rank counts that also run the large sizes of the lossy sweeps (keeps them to seconds).
constexpr int spot_ranks[] = {1, 2, 3, 5, 8, 13, 31, 32, 33, 63, 64};

/// Runs check(granule, op, exact) for every granule of algorithm `a` and every op, with
/// `exact` the op's reduction of x (each computed once), under a trace naming the case;
/// stops at the first fatal failure, as an ASSERT in the loop would.
template <class Check>
void for_each_granule_and_op(algorithm a, int n, std::size_t count,
                             const std::vector<std::vector<double>>& x, Check&& check) {
  const std::vector<double> exact_of[] = {reference(x, ops[0]), reference(x, ops[1]),
                                          reference(x, ops[2])};
  for (std::size_t granule : granules_for(a)) {
    for (int o = 0; o < 3; ++o) {
      SCOPED_TRACE(describe(a, n, count, granule, ops[o]));
      check(granule, ops[o], exact_of[o]);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

/// Every rank ends bit-identical to the others and within the codec's error of the exact
/// reduction, for both algorithms, all ops, N = 1 ... 64 with `sizes`, and N in spot_ranks
/// with `spot_sizes` too.
template <class Codec>
void check_identical_ranks(const Codec& codec, std::span<const std::size_t> sizes,
                           std::span<const std::size_t> spot_sizes) {
  SCOPED_TRACE(Codec::name);
  run_result out;
  for (algorithm a : algorithms) {
    for (int n = 1; n <= max_ranks; ++n) {
      std::vector<std::size_t> all{sizes.begin(), sizes.end()};
      if (std::find(std::begin(spot_ranks), std::end(spot_ranks), n) != std::end(spot_ranks)) {
        all.insert(all.end(), spot_sizes.begin(), spot_sizes.end());
      }
      for (std::size_t count : all) {
        const auto x = random_reals(n, count, 1000003u * n + count);
        for_each_granule_and_op(
            a, n, count, x,
            [&](std::size_t granule, reduce_op op, const std::vector<double>& exact) {
              ASSERT_NO_FATAL_FAILURE(simulate(a, op, granule, codec, x, out));
              ASSERT_EQ(out.steps, coll::steps(a, n));
              for (int r = 1; r < n; ++r) {
                const std::size_t i = first_difference(out.values[r], out.values[0]);
                ASSERT_EQ(i, count) << "rank " << r << " differs from rank 0 at " << i << ": "
                                    << out.values[r][i] << " vs " << out.values[0][i];
              }
              if (count == 0) return;
              const double magnitude = (op == reduce_op::sum ? n : 1) * 1.01;
              const double bound = error_bound(a, n, op, codec.error_bound(magnitude));
              auto error = [&](std::size_t i) { return std::fabs(out.values[0][i] - exact[i]); };
              std::size_t worst = 0;
              for (std::size_t i = 0; i < count; ++i) {
                if (!(error(i) <= error(worst))) worst = i;  // NaN counts as worst
              }
              ASSERT_LE(std::fabs(out.values[0][worst] - exact[worst]), bound)
                  << "i=" << worst << " got " << out.values[0][worst] << " exact " << exact[worst];
            });
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  }
}

// ---- whole collectives ------------------------------------------------------------------

TEST(CollSchedule, ExactCodecGivesEveryRankTheExactReduction) {
  run_result out;
  for (algorithm a : algorithms) {
    for (int n = 1; n <= max_ranks; ++n) {
      for (std::size_t count : counts) {
        const auto x = random_integers(n, count, 7919u * n + count);
        for_each_granule_and_op(
            a, n, count, x,
            [&](std::size_t granule, reduce_op op, const std::vector<double>& exact) {
              ASSERT_NO_FATAL_FAILURE(simulate(a, op, granule, identity_codec{}, x, out));
              ASSERT_EQ(out.steps, coll::steps(a, n));
              for (int r = 0; r < n; ++r) {
                const std::size_t i = first_difference(out.values[r], exact);
                ASSERT_EQ(i, count) << "rank " << r << " at " << i << ": " << out.values[r][i]
                                    << ", exact " << exact[i];
              }
            });
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  }
}

constexpr std::size_t lossy_counts[] = {0, 1, 5, 31, 1000};
constexpr std::size_t lossy_spot_counts[] = {4099};

TEST(CollSchedule, ExactCodecOnRealsLeavesRanksBitIdentical) {
  check_identical_ranks(identity_codec{}, lossy_counts, lossy_spot_counts);
}

TEST(CollSchedule, IdempotentLossyCodecLeavesRanksBitIdentical) {
  check_identical_ranks(grid_codec{}, lossy_counts, lossy_spot_counts);
}

TEST(CollSchedule, NonIdempotentLossyCodecLeavesRanksBitIdentical) {
  // The mock codec really is not idempotent: a second round trip changes the values.
  const std::vector<double> x{0.3, -0.7, 0.001};
  const auto once = round_trip(offset_grid_codec{}, x);
  const auto twice = round_trip(offset_grid_codec{}, once);
  ASSERT_NE(first_difference(once, twice), once.size());
  check_identical_ranks(offset_grid_codec{}, lossy_counts, lossy_spot_counts);
}

TEST(CollSchedule, FloatCodecLeavesRanksBitIdentical) {
  constexpr std::size_t sizes[] = {0, 5, 1000};
  check_identical_ranks(float_codec{}, sizes, lossy_spot_counts);
}

TEST(CollSchedule, BlockExponentCodecLeavesRanksBitIdentical) {
  // Like frsz2 with rounding to nearest, a second round trip sometimes changes a block.
  const auto x = random_reals(1, 4000, 5).front();
  const auto once = round_trip(block_codec{}, x);
  ASSERT_NE(first_difference(once, round_trip(block_codec{}, once)), once.size());
  constexpr std::size_t sizes[] = {1, 31, 257};
  constexpr std::size_t spot_sizes[] = {1000};
  check_identical_ranks(block_codec{}, sizes, spot_sizes);
}

// The checks above can fail: without the round trips (or with a round trip followed by a
// second encode of the round-tripped values) the ranks end with different bits.
// (For min and max a rank keeps an unrounded value only where its own input is the extremum:
// 1000 elements make that happen for every N.)
TEST(CollSchedule, WithoutRoundTripsRanksDiverge) {
  run_result out;
  for (algorithm a : algorithms) {
    for (int n = 2; n <= max_ranks; ++n) {
      const auto x = random_reals(n, 1000, 31u * n);
      for (reduce_op op : ops) {
        SCOPED_TRACE(describe(a, n, 1000, 1, op));
        ASSERT_NO_FATAL_FAILURE(simulate(a, op, 1, grid_codec{}, x, out));
        ASSERT_TRUE(ranks_identical(out));
        ASSERT_NO_FATAL_FAILURE(simulate(a, op, 1, grid_codec{}, x, out, round_trips::ignored));
        EXPECT_FALSE(ranks_identical(out));
      }
    }
  }
}

TEST(CollSchedule, RoundTripKeepsTheDecodedMessageNotASecondRoundTrip) {
  // With a codec that is not idempotent, a rank that round-trips its values and then
  // encodes them again sends something whose decoded form differs from what it keeps.
  run_result out;
  for (algorithm a : algorithms) {
    int diverged = 0;
    for (int n = 2; n <= max_ranks; ++n) {
      SCOPED_TRACE(describe(a, n, 100, 1, reduce_op::sum));
      const auto x = random_reals(n, 100, 37u * n);
      ASSERT_NO_FATAL_FAILURE(
          simulate(a, reduce_op::sum, 1, offset_grid_codec{}, x, out, round_trips::reencoded));
      const bool differ = !ranks_identical(out);
      diverged += differ;
      // Ring: the owner keeps one round trip, the others two. Recursive doubling: at least
      // at the post-step, where the partners of the odd ranks get two.
      if (a == algorithm::ring || n != floor_pow2(n)) {
        EXPECT_TRUE(differ);
      }
    }
    EXPECT_GT(diverged, 0);
  }
}

TEST(CollSchedule, RingAllgatherEncodesEachChunkOnceAndForwardsIt) {
  run_result out;
  for (int n = 2; n <= max_ranks; ++n) {
    SCOPED_TRACE("N=" + std::to_string(n));
    const auto x = random_reals(n, 1000, 11u * n);
    ASSERT_NO_FATAL_FAILURE(simulate(algorithm::ring, reduce_op::sum, 4, grid_codec{}, x, out));
    ASSERT_EQ(out.steps, 2 * (n - 1));
    // Reduce-scatter: each rank encodes one chunk per step. Allgather: one encode per chunk,
    // by its owner (rank c - 1) in the first allgather step; nothing else is encoded.
    std::vector<int> allgather_encodes(n, 0);
    int reduce_scatter_encodes = 0;
    for (const encode_record& e : out.encodes) {
      ASSERT_TRUE(e.sent) << "the ring round-trips only what it sends";
      if (e.step < n - 1) {
        ++reduce_scatter_encodes;
        continue;
      }
      ++allgather_encodes[e.chunk];
      EXPECT_EQ(e.rank, (e.chunk + n - 1) % n) << "chunk " << e.chunk;
      EXPECT_EQ(e.step, n - 1) << "chunk " << e.chunk;
    }
    EXPECT_EQ(reduce_scatter_encodes, n * (n - 1));
    for (int c = 0; c < n; ++c) EXPECT_EQ(allgather_encodes[c], 1) << "chunk " << c;
    // Every allgather delivery of chunk c carries the owner's one message; all but the first
    // hop of each chunk are forwards.
    int forwards = 0;
    for (const delivery_record& d : out.deliveries) {
      if (d.step < n - 1) {
        EXPECT_FALSE(d.forwarded);
        continue;
      }
      EXPECT_EQ(d.encoder, (d.chunk + n - 1) % n);
      EXPECT_EQ(d.encoded_at, n - 1);
      EXPECT_EQ(d.forwarded, d.step > n - 1);
      forwards += d.forwarded;
    }
    EXPECT_EQ(forwards, n * (n - 2));
    EXPECT_EQ(out.deliveries.size(), static_cast<std::size_t>(2 * n * (n - 1)));
  }
}

// ---- schedules, plan by plan ------------------------------------------------------------

TEST(CollSchedule, StepCountsAndChunks) {
  static_assert(coll::steps(algorithm::ring, 1) == 0);
  static_assert(coll::steps(algorithm::ring, 4) == 6);
  static_assert(coll::steps(algorithm::recursive_doubling, 8) == 3);
  static_assert(coll::steps(algorithm::recursive_doubling, 6) == 4);
  for (int n = 1; n <= 300; ++n) {
    SCOPED_TRACE("N=" + std::to_string(n));
    const int pof2 = floor_pow2(n);
    const int log2 = std::countr_zero(static_cast<unsigned>(pof2));
    ASSERT_EQ(coll::steps(algorithm::ring, n), 2 * (n - 1));
    ASSERT_EQ(coll::steps(algorithm::recursive_doubling, n), log2 + (n != pof2 ? 2 : 0));
    ASSERT_EQ(coll::chunks(algorithm::ring, n), n);
    ASSERT_EQ(coll::chunks(algorithm::recursive_doubling, n), 1);
    for (algorithm a : algorithms) {
      const int total = coll::steps(a, n);
      for (int r = 0; r < n; r += std::max(1, n / 7)) {  // a few ranks, the last included
        for (int rank : {r, n - 1}) {
          if (total > 0) {
            EXPECT_NO_THROW((void)coll::schedule_step(a, rank, n, total - 1));
          }
          EXPECT_THROW((void)coll::schedule_step(a, rank, n, total), squeeze::invalid_argument);
        }
      }
    }
  }
  EXPECT_STREQ(coll::name(algorithm::ring), "ring");
  EXPECT_STREQ(coll::name(algorithm::recursive_doubling), "recursive_doubling");
}

TEST(CollSchedule, RingMatchesTheDocumentedExample) {
  // N = 4, rank 0 (schedule.hpp's file comment).
  const int sends[] = {0, 3, 2, 1, 0, 3};
  const int recvs[] = {3, 2, 1, 0, 3, 2};
  for (int step = 0; step < 6; ++step) {
    const step_plan p = coll::ring_step(0, 4, step);
    EXPECT_EQ(p.send_peer, 1);
    EXPECT_EQ(p.recv_peer, 3);
    EXPECT_EQ(p.send_chunk, sends[step]) << "step " << step;
    EXPECT_EQ(p.recv_chunk, recvs[step]) << "step " << step;
    EXPECT_EQ(p.send, step < 4 ? send_source::local : send_source::forward) << "step " << step;
    EXPECT_EQ(p.recv, step < 3 ? on_receive::reduce : on_receive::replace) << "step " << step;
    EXPECT_EQ(p.round_trip, step == 3) << "step " << step;
    EXPECT_EQ(p.round_trip_chunk, step == 3 ? 1 : -1) << "step " << step;
    EXPECT_EQ(p, coll::schedule_step(algorithm::ring, 0, 4, step));
  }
}

TEST(CollSchedule, RingSendsOneChunkPerRankPerStep) {
  for (int n = 2; n <= max_ranks; ++n) {
    for (int step = 0; step < coll::steps(algorithm::ring, n); ++step) {
      SCOPED_TRACE("N=" + std::to_string(n) + " step " + std::to_string(step));
      const bool reduce_scatter = step < n - 1;
      std::vector<int> sent(n, 0);
      std::vector<int> received(n, 0);
      for (int r = 0; r < n; ++r) {
        const step_plan p = coll::ring_step(r, n, step);
        ASSERT_EQ(p.send_peer, (r + 1) % n);
        ASSERT_EQ(p.recv_peer, (r + n - 1) % n);
        ASSERT_EQ(p.send,
                  reduce_scatter || step == n - 1 ? send_source::local : send_source::forward);
        ASSERT_EQ(p.recv, reduce_scatter ? on_receive::reduce : on_receive::replace);
        ASSERT_EQ(p.round_trip, step == n - 1);
        if (p.round_trip) {
          // The owner's chunk: the one it finished reducing in the last reduce-scatter step.
          ASSERT_EQ(p.round_trip_chunk, coll::ring_step(r, n, n - 2).recv_chunk);
        }
        ++sent[p.send_chunk];
        ++received[p.recv_chunk];
      }
      // Each chunk travels exactly once per step: the whole buffer moves every step.
      for (int c = 0; c < n; ++c) {
        ASSERT_EQ(sent[c], 1) << "chunk " << c;
        ASSERT_EQ(received[c], 1) << "chunk " << c;
      }
    }
  }
}

TEST(CollSchedule, RecursiveDoublingMatchesAWorkedExample) {
  // N = 6: pof2 = 4, rem = 2. Ranks 0 and 2 sit out; newranks 1->0, 3->1, 4->2, 5->3.
  using rd = step_plan;
  auto exchange = [](int peer) {
    return rd{peer, 0, send_source::local, peer, 0, on_receive::reduce, true, 0};
  };
  const rd idle{};
  const rd expected[4][6] = {
      // pre-step: 0 -> 1, 2 -> 3
      {rd{1, 0, send_source::local}, rd{-1, -1, send_source::nothing, 0, 0, on_receive::reduce},
       rd{3, 0, send_source::local}, rd{-1, -1, send_source::nothing, 2, 0, on_receive::reduce},
       idle, idle},
      // newrank ^ 1: 1 <-> 3, 4 <-> 5
      {idle, exchange(3), idle, exchange(1), exchange(5), exchange(4)},
      // newrank ^ 2: 1 <-> 4, 3 <-> 5
      {idle, exchange(4), idle, exchange(5), exchange(1), exchange(3)},
      // post-step: 1 -> 0, 3 -> 2; every active rank round-trips
      {rd{-1, -1, send_source::nothing, 1, 0, on_receive::replace},
       rd{0, 0, send_source::local, -1, -1, on_receive::nothing, true, 0},
       rd{-1, -1, send_source::nothing, 3, 0, on_receive::replace},
       rd{2, 0, send_source::local, -1, -1, on_receive::nothing, true, 0},
       rd{-1, -1, send_source::nothing, -1, -1, on_receive::nothing, true, 0},
       rd{-1, -1, send_source::nothing, -1, -1, on_receive::nothing, true, 0}},
  };
  ASSERT_EQ(coll::steps(algorithm::recursive_doubling, 6), 4);
  for (int step = 0; step < 4; ++step) {
    for (int r = 0; r < 6; ++r) {
      EXPECT_EQ(coll::recursive_doubling_step(r, 6, step), expected[step][r])
          << "rank " << r << " step " << step;
    }
  }
}

TEST(CollSchedule, RecursiveDoublingTraffic) {
  for (int n = 2; n <= max_ranks; ++n) {
    const int pof2 = floor_pow2(n);
    const int rem = n - pof2;
    const int total = coll::steps(algorithm::recursive_doubling, n);
    const int first_exchange = rem > 0 ? 1 : 0;
    const int exchanges = std::countr_zero(static_cast<unsigned>(pof2));
    std::vector<std::set<int>> partners(n);
    for (int step = 0; step < total; ++step) {
      SCOPED_TRACE("N=" + std::to_string(n) + " step " + std::to_string(step));
      int senders = 0, receivers = 0, round_trips = 0;
      for (int r = 0; r < n; ++r) {
        const step_plan p = coll::recursive_doubling_step(r, n, step);
        senders += p.sends();
        receivers += p.receives();
        round_trips += p.round_trip;
        const bool paired = r < 2 * rem;
        if (rem > 0 && step == 0) {  // pre-step: even r < 2 rem send to r + 1, which reduces
          if (!paired) {
            ASSERT_EQ(p, step_plan{}) << "rank " << r << " idles";
          } else if (r % 2 == 0) {
            ASSERT_EQ(p, (step_plan{r + 1, 0, send_source::local})) << "rank " << r;
          } else {
            ASSERT_EQ(p, (step_plan{-1, -1, send_source::nothing, r - 1, 0, on_receive::reduce}))
                << "rank " << r;
          }
        } else if (rem > 0 && step == total - 1) {  // post-step
          if (paired && r % 2 == 0) {
            ASSERT_EQ(p, (step_plan{-1, -1, send_source::nothing, r + 1, 0, on_receive::replace}))
                << "rank " << r;
          } else {
            ASSERT_TRUE(p.round_trip && p.round_trip_chunk == 0) << "rank " << r;
            ASSERT_FALSE(p.receives()) << "rank " << r;
            ASSERT_EQ(p.sends(), paired) << "rank " << r;
            if (paired) {
              ASSERT_EQ(p.send_peer, r - 1);
            }
          }
        } else {  // exchange step k
          const int k = step - first_exchange;
          if (paired && r % 2 == 0) {
            ASSERT_EQ(p, step_plan{}) << "rank " << r << " sits out";
            continue;
          }
          ASSERT_EQ(p.send_peer, p.recv_peer) << "rank " << r;
          ASSERT_EQ(p.send, send_source::local);
          ASSERT_EQ(p.recv, on_receive::reduce);
          ASSERT_TRUE(p.round_trip && p.round_trip_chunk == 0);
          const int peer = p.send_peer;
          ASSERT_EQ(coll::recursive_doubling_step(peer, n, step).send_peer, r) << "pairwise";
          auto newrank = [&](int q) { return q < 2 * rem ? q / 2 : q - rem; };
          ASSERT_FALSE(peer < 2 * rem && peer % 2 == 0) << "peer " << peer << " sits out";
          ASSERT_EQ(newrank(r) ^ newrank(peer), 1 << k) << "rank " << r << " peer " << peer;
          partners[r].insert(peer);
        }
      }
      if (rem > 0 && step == 0) {
        EXPECT_EQ(senders, rem);
        EXPECT_EQ(receivers, rem);
        EXPECT_EQ(round_trips, 0);
      } else if (rem > 0 && step == total - 1) {
        EXPECT_EQ(senders, rem);
        EXPECT_EQ(receivers, rem);
        EXPECT_EQ(round_trips, pof2);
      } else {
        EXPECT_EQ(senders, pof2);
        EXPECT_EQ(receivers, pof2);
        EXPECT_EQ(round_trips, pof2);
      }
    }
    // Each active rank meets log2(pof2) different partners.
    for (int r = 0; r < n; ++r) {
      const bool sits_out = r < 2 * rem && r % 2 == 0;
      EXPECT_EQ(partners[r].size(), sits_out ? 0u : static_cast<std::size_t>(exchanges))
          << "N=" << n << " rank " << r;
    }
  }
}

TEST(CollSchedule, BadArgumentsThrowInvalidArgument) {
  for (algorithm a : algorithms) {
    SCOPED_TRACE(coll::name(a));
    EXPECT_THROW((void)coll::schedule_step(a, -1, 4, 0), squeeze::invalid_argument);
    EXPECT_THROW((void)coll::schedule_step(a, 4, 4, 0), squeeze::invalid_argument);
    EXPECT_THROW((void)coll::schedule_step(a, 0, 0, 0), squeeze::invalid_argument);
    EXPECT_THROW((void)coll::schedule_step(a, 0, -2, 0), squeeze::invalid_argument);
    EXPECT_THROW((void)coll::schedule_step(a, 0, 4, -1), squeeze::invalid_argument);
    EXPECT_THROW((void)coll::schedule_step(a, 0, 4, coll::steps(a, 4)), squeeze::invalid_argument);
    EXPECT_THROW((void)coll::schedule_step(a, 0, 1, 0), squeeze::invalid_argument);  // no steps
  }
  EXPECT_THROW((void)coll::ring_step(3, 3, 0), squeeze::invalid_argument);
  EXPECT_THROW((void)coll::ring_step(0, 3, 4), squeeze::invalid_argument);
  EXPECT_THROW((void)coll::recursive_doubling_step(5, 5, 0), squeeze::invalid_argument);
  EXPECT_THROW((void)coll::recursive_doubling_step(0, 5, 4), squeeze::invalid_argument);
  try {
    (void)coll::ring_step(7, 4, 0);
    ADD_FAILURE() << "no exception";
  } catch (const squeeze::invalid_argument& e) {
    EXPECT_NE(e.message().find("coll::ring_step: rank 7 outside [0, 4)"), std::string::npos)
        << e.message();
  }
  EXPECT_THROW((coll::chunk_layout{10, 0}), squeeze::invalid_argument);
  EXPECT_THROW((coll::chunk_layout{10, -3, 4}), squeeze::invalid_argument);
  EXPECT_THROW((coll::chunk_layout{10, 4, 0}), squeeze::invalid_argument);
  EXPECT_THROW((coll::chunk_layout{0, 1, 0}), squeeze::invalid_argument);
}

// ---- chunk_layout -------------------------------------------------------------------------

TEST(CollChunkLayout, CoversTheBufferInOrderOnGranuleBoundaries) {
  std::vector<std::size_t> sizes;
  for (std::size_t c = 0; c <= 130; ++c) sizes.push_back(c);
  for (std::size_t c : {1000u, 4096u, 4099u, 12345u}) sizes.push_back(c);
  for (std::size_t count : sizes) {
    for (std::size_t granule : {1u, 2u, 3u, 4u, 7u, 32u, 128u}) {
      for (int parts = 1; parts <= 70; ++parts) {
        const coll::chunk_layout l{count, parts, granule};
        SCOPED_TRACE("count=" + std::to_string(count) + " parts=" + std::to_string(parts) +
                     " granule=" + std::to_string(granule));
        ASSERT_EQ(l.count, count);
        ASSERT_EQ(l.parts, parts);
        ASSERT_EQ(l.per_chunk % granule, 0u);
        // The smallest multiple of the granule that fits the buffer in `parts` chunks.
        ASSERT_GE(l.per_chunk * parts, count);
        if (l.per_chunk > 0) {
          ASSERT_LT((l.per_chunk - granule) * parts, count);
        }
        ASSERT_EQ(l.first(0), 0u);
        ASSERT_EQ(l.first(parts), count);
        std::size_t total = 0;
        bool short_seen = false;  // after a short chunk, only empty ones
        for (int c = 0; c < parts; ++c) {
          ASSERT_EQ(l.first(c), total) << "chunk " << c << " leaves a gap or overlaps";
          ASSERT_EQ(l.size(c), l.first(c + 1) - l.first(c));
          ASSERT_LE(l.size(c), l.per_chunk);
          if (l.size(c) > 0) {
            ASSERT_EQ(l.first(c) % granule, 0u) << "chunk " << c;
          }
          if (short_seen) {
            ASSERT_EQ(l.size(c), 0u) << "chunk " << c;
          }
          short_seen = short_seen || l.size(c) < l.per_chunk;
          total += l.size(c);
        }
        ASSERT_EQ(total, count);
      }
    }
  }
}

TEST(CollChunkLayout, OnePartIsTheWholeBuffer) {
  for (std::size_t count : {0u, 1u, 5u, 31u, 1000u, 4099u}) {
    for (std::size_t granule : {1u, 4u, 32u, 5000u}) {
      const coll::chunk_layout l{count, 1, granule};
      EXPECT_EQ(l.first(0), 0u);
      EXPECT_EQ(l.size(0), count) << "count=" << count << " granule=" << granule;
    }
  }
  const coll::chunk_layout empty;
  EXPECT_EQ(empty.parts, 1);
  EXPECT_EQ(empty.size(0), 0u);
}

TEST(CollChunkLayout, SmallBuffersLeaveTrailingChunksEmpty) {
  const coll::chunk_layout l{5, 8, 1};  // count < parts
  EXPECT_EQ(l.per_chunk, 1u);
  for (int c = 0; c < 8; ++c) EXPECT_EQ(l.size(c), c < 5 ? 1u : 0u) << "chunk " << c;
  const coll::chunk_layout g{1000, 64, 32};  // 32 granules for 64 parts
  EXPECT_EQ(g.per_chunk, 32u);
  EXPECT_EQ(g.size(30), 32u);
  EXPECT_EQ(g.size(31), 8u);
  EXPECT_EQ(g.size(32), 0u);
  EXPECT_EQ(g.first(63), 1000u);
  const coll::chunk_layout z{0, 4, 4};
  for (int c = 0; c < 4; ++c) EXPECT_EQ(z.size(c), 0u);
}

// ---- core::apply --------------------------------------------------------------------------

static_assert(core::apply(reduce_op::sum, 1.5, 2.25) == 3.75);
static_assert(core::apply(reduce_op::min, 1.5, -2.0) == -2.0);
static_assert(core::apply(reduce_op::max, 1.5f, -2.0f) == 1.5f);
static_assert(std::bit_cast<std::uint64_t>(core::apply(reduce_op::min, 0.0, -0.0)) ==
              0x8000'0000'0000'0000u);
static_assert(core::apply(reduce_op::max, std::numeric_limits<double>::quiet_NaN(), 3.0) == 3.0);

template <class T>
void check_ordinary_values() {
  const T inf = std::numeric_limits<T>::infinity();
  EXPECT_EQ(core::apply(reduce_op::sum, T(1.5), T(-4)), T(-2.5));
  EXPECT_EQ(core::apply(reduce_op::min, T(1.5), T(-4)), T(-4));
  EXPECT_EQ(core::apply(reduce_op::max, T(1.5), T(-4)), T(1.5));
  EXPECT_EQ(core::apply(reduce_op::min, -inf, T(-4)), -inf);
  EXPECT_EQ(core::apply(reduce_op::max, inf, T(-4)), inf);
  EXPECT_EQ(core::apply(reduce_op::max, -inf, T(-4)), T(-4));
  EXPECT_EQ(core::apply(reduce_op::sum, inf, T(-4)), inf);
  EXPECT_TRUE(std::isnan(core::apply(reduce_op::sum, inf, -inf)));
  const T tiny = std::numeric_limits<T>::denorm_min();
  EXPECT_EQ(core::apply(reduce_op::min, tiny, -tiny), -tiny);
  EXPECT_EQ(core::apply(reduce_op::max, tiny, T(0)), tiny);
}

TEST(CoreReduceOp, SumMinMaxOfOrdinaryValues) {
  check_ordinary_values<double>();
  check_ordinary_values<float>();
  EXPECT_STREQ(core::to_string(reduce_op::sum), "sum");
  EXPECT_STREQ(core::to_string(reduce_op::min), "min");
  EXPECT_STREQ(core::to_string(reduce_op::max), "max");
}

template <class T>
void check_nan_operand() {
  const T nans[] = {std::numeric_limits<T>::quiet_NaN(), -std::numeric_limits<T>::quiet_NaN(),
                    std::numeric_limits<T>::signaling_NaN()};
  const T inf = std::numeric_limits<T>::infinity();
  const T others[] = {T(1), T(-2.5), T(0), -T(0), inf, -inf, std::numeric_limits<T>::denorm_min()};
  for (T nan : nans) {
    for (T x : others) {
      for (reduce_op op : {reduce_op::min, reduce_op::max}) {
        EXPECT_EQ(bits(core::apply(op, nan, x)), bits(x)) << core::to_string(op) << " " << x;
        EXPECT_EQ(bits(core::apply(op, x, nan)), bits(x)) << core::to_string(op) << " " << x;
      }
      EXPECT_TRUE(std::isnan(core::apply(reduce_op::sum, nan, x)));
      EXPECT_TRUE(std::isnan(core::apply(reduce_op::sum, x, nan)));
    }
    for (reduce_op op : ops) EXPECT_TRUE(std::isnan(core::apply(op, nan, nan)));
  }
}

TEST(CoreReduceOp, MinMaxReturnTheOtherOperandOfANaN) {
  check_nan_operand<double>();
  check_nan_operand<float>();
}

template <class T>
void check_signed_zeros() {
  const T pz = T(0);
  const T nz = -T(0);
  ASSERT_TRUE(std::signbit(nz));
  EXPECT_EQ(bits(core::apply(reduce_op::min, pz, nz)), bits(nz));
  EXPECT_EQ(bits(core::apply(reduce_op::min, nz, pz)), bits(nz));
  EXPECT_EQ(bits(core::apply(reduce_op::max, pz, nz)), bits(pz));
  EXPECT_EQ(bits(core::apply(reduce_op::max, nz, pz)), bits(pz));
  EXPECT_EQ(bits(core::apply(reduce_op::min, nz, nz)), bits(nz));
  EXPECT_EQ(bits(core::apply(reduce_op::max, pz, pz)), bits(pz));
  EXPECT_EQ(bits(core::apply(reduce_op::sum, pz, nz)), bits(pz));
  EXPECT_EQ(bits(core::apply(reduce_op::sum, nz, pz)), bits(pz));
  EXPECT_EQ(bits(core::apply(reduce_op::sum, nz, nz)), bits(nz));
}

TEST(CoreReduceOp, NegativeZeroOrdersBelowPositiveZero) {
  check_signed_zeros<double>();
  check_signed_zeros<float>();
}

template <class T>
void check_operand_order(std::uint64_t seed) {
  std::mt19937_64 rng{seed};
  const T inf = std::numeric_limits<T>::infinity();
  using lim = std::numeric_limits<T>;
  const T special[] = {T(0), -T(0), inf, -inf, lim::quiet_NaN(), lim::denorm_min(), -lim::max()};
  std::uniform_real_distribution<T> real{T(-10), T(10)};
  auto draw = [&] {
    const auto kind = rng() % 8;
    if (kind == 0) return special[rng() % std::size(special)];
    if (kind == 1) return std::bit_cast<T>(static_cast<decltype(bits(T{}))>(rng()));  // any bits
    return std::round(real(rng) * T(4)) / T(4);  // frequent ties
  };
  for (int i = 0; i < 200000; ++i) {
    const T a = draw();
    const T b = draw();
    for (reduce_op op : ops) {
      const T ab = core::apply(op, a, b);
      const T ba = core::apply(op, b, a);
      if (std::isnan(a) && std::isnan(b)) {  // NaN payloads aside
        ASSERT_TRUE(std::isnan(ab) && std::isnan(ba));
        continue;
      }
      if (op == reduce_op::sum && std::isnan(ab)) {
        ASSERT_TRUE(std::isnan(ba)) << a << " + " << b;
        continue;
      }
      ASSERT_EQ(bits(ab), bits(ba)) << core::to_string(op) << "(" << a << ", " << b << ")";
      if (op != reduce_op::sum) {
        // The result is one of the operands, and agrees with fmin/fmax on numbers: not at
        // zero ties (fmin may return either zero), not with a NaN (glibc's fmin returns NaN
        // for a signaling one, apply the other operand for every NaN).
        ASSERT_TRUE(bits(ab) == bits(a) || bits(ab) == bits(b));
        if (!(a == 0 && b == 0) && !std::isnan(a) && !std::isnan(b)) {
          const T ref = op == reduce_op::min ? std::fmin(a, b) : std::fmax(a, b);
          ASSERT_EQ(bits(ab), bits(ref)) << core::to_string(op) << "(" << a << ", " << b << ")";
        }
      }
    }
  }
}

TEST(CoreReduceOp, OperandOrderNeverChangesTheBits) {
  check_operand_order<double>(1);
  check_operand_order<float>(2);
}

// ---- agreed_calls: which calls are checked across the ranks ------------------------------

/// A transport of no bytes whose max_all raises every value to what `others` hold (the
/// element-wise maximum with another rank's values), counting its rounds.
struct agreement_transport {
  static constexpr bool stream_ordered = true;
  std::vector<std::uint64_t> others;  // empty: every other rank passed the same values
  int rounds = 0;
  int rank() const { return 0; }
  int size() const { return 2; }
  void begin(cudaStream_t) {}
  void recv(void*, std::size_t, int) {}
  void send(const void*, std::size_t, int) {}
  void end() {}
  std::uint64_t exchange_size(std::uint64_t v, int, int, cudaStream_t) { return v; }
  void max_all(std::span<std::uint64_t> values, cudaStream_t) {
    ++rounds;
    for (std::size_t i = 0; i < values.size() && i < others.size(); ++i) {
      values[i] = std::max(values[i], others[i]);
    }
  }
};
static_assert(coll::transport<agreement_transport>);

TEST(CollAgreedCalls, FirstCallOfEachSignatureIsChecked) {
  agreement_transport t;
  coll::agreed_calls off, first, every;
  const std::array<std::uint64_t, 2> a{1000, 4}, b{2000, 4};
  for (int call = 0; call < 3; ++call) {
    EXPECT_TRUE(off.agree(t, a, coll::verification::off, nullptr));
    EXPECT_TRUE(first.agree(t, a, coll::verification::first_call, nullptr));
    EXPECT_TRUE(every.agree(t, a, coll::verification::every_call, nullptr));
  }
  EXPECT_EQ(off.checks(), 0u);
  EXPECT_EQ(first.checks(), 1u);
  EXPECT_EQ(every.checks(), 3u);
  EXPECT_TRUE(first.agree(t, b, coll::verification::first_call, nullptr));  // a new one
  EXPECT_TRUE(first.agree(t, a, coll::verification::first_call, nullptr));  // remembered
  EXPECT_EQ(first.checks(), 2u);
  // the oldest is forgotten after `capacity` newer ones
  for (std::uint64_t k = 0; k < coll::agreed_calls::capacity; ++k) {
    const std::array<std::uint64_t, 2> other{10 + k, 4};
    EXPECT_TRUE(first.agree(t, other, coll::verification::first_call, nullptr));
  }
  const std::uint64_t before = first.checks();
  EXPECT_TRUE(first.agree(t, a, coll::verification::first_call, nullptr));
  EXPECT_EQ(first.checks(), before + 1);
  EXPECT_EQ(t.rounds, static_cast<int>(first.checks() + every.checks()));
}

TEST(CollAgreedCalls, DisagreementIsReportedAndNotRemembered) {
  agreement_transport t;
  const std::array<std::uint64_t, 2> mine{1000, 4};
  t.others = {1500, 4, ~std::uint64_t{1500}, ~std::uint64_t{4}};  // another rank passed 1500
  coll::agreed_calls calls;
  std::uint64_t largest = 0;
  EXPECT_FALSE(calls.agree(t, mine, coll::verification::first_call, nullptr, &largest));
  EXPECT_EQ(largest, 1500u);
  t.others.clear();
  EXPECT_TRUE(calls.agree(t, mine, coll::verification::first_call, nullptr));  // checked again
  EXPECT_EQ(calls.checks(), 2u);
  const std::array<std::uint64_t, 9> too_many{};
  EXPECT_THROW(calls.agree(t, too_many, coll::verification::every_call, nullptr),
               squeeze::invalid_argument);
}

// Sizes near the limits: ranks beyond max_ranks are refused, layouts of counts near 2^64
// tile the whole count, and a count whose chunk size cannot be represented is refused.
TEST(CollSchedule, LimitsAreCheckedNotWrapped) {
  EXPECT_THROW(static_cast<void>(coll::ring_step(0, coll::max_ranks + 1, 0)),
               squeeze::invalid_argument);
  EXPECT_THROW(static_cast<void>(coll::recursive_doubling_step(0, std::numeric_limits<int>::max(), 0)),
               squeeze::invalid_argument);
  EXPECT_EQ(coll::steps(algorithm::ring, std::numeric_limits<int>::max()),
            2 * (coll::max_ranks - 1));
  EXPECT_EQ(coll::ring_step(coll::max_ranks - 1, coll::max_ranks, 0).send_peer, 0);
  const std::size_t top = std::numeric_limits<std::size_t>::max();
  for (int parts : {1, 3, 64}) {
    const coll::chunk_layout lay{top, parts, 1};
    EXPECT_EQ(lay.first(0), 0u);
    EXPECT_EQ(lay.first(parts), top);
    std::size_t sum = 0;
    for (int c = 0; c < parts; ++c) sum += lay.size(c);
    EXPECT_EQ(sum, top);
  }
  EXPECT_THROW((coll::chunk_layout{top, 1, std::size_t{1} << 63}), squeeze::invalid_argument);
  const coll::chunk_layout small{top - 5, 2, 32};
  EXPECT_EQ(small.first(2), top - 5);
}

}  // namespace
