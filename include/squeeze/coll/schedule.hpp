// SPDX-License-Identifier: Apache-2.0
// squeeze/coll/schedule.hpp: the allreduce schedules, as pure functions of (rank, size, step).
//
// Host-compilable, no CUDA: the collectives in coll/allreduce.cuh walk these steps, and the
// host tests run every rank of N = 1 ... 64 in one process to check them.
//
// Ring (reduce-scatter, then allgather), N ranks, the buffer cut into N chunks
// (chunk_layout). Rank r sends to r + 1 and receives from r - 1 (mod N):
//
//   reduce-scatter, step i = 0 .. N-2:   send chunk r - i,      receive chunk r - i - 1, reduce
//   allgather,      step N-1 + j, j = 0 .. N-2:
//                                        send chunk r - j + 1,  receive chunk r - j,     replace
//
//   After the reduce-scatter rank r holds the whole sum of chunk r + 1. Allgather step 0
//   sends that chunk; every later allgather step sends the message received in the step
//   before it, unchanged (send_source::forward): a compressed chunk is compressed once,
//   by its owner, and forwarded N - 2 times without being decoded and encoded again.
//
//   N = 4, rank 0:     step 0    1    2  |  3    4    5
//     sends chunk        0    3    2  |  1    0f   3f      (f: forwarded as received)
//     receives chunk     3    2    1  |  0    3    2
//                        reduce ...     |  replace ...
//
// Recursive doubling (whole buffer, one chunk), with the pre- and post-steps for N that
// is not a power of two (MPICH's scheme, as in Algorithm 2 of Zhou et al., ISC 2024):
//   pof2 = the largest power of two <= N, rem = N - pof2.
//   pre-step (rem > 0): of ranks r < 2 rem, even r sends everything to r + 1 and sits out;
//     odd r receives and reduces. Ranks >= 2 rem idle.
//   log2(pof2) exchange steps among the pof2 active ranks: newrank = r / 2 (odd r < 2 rem)
//     or r - rem (r >= 2 rem); at step k the partner's newrank is newrank ^ 2^k. Both send,
//     both reduce.
//   post-step (rem > 0): odd r < 2 rem send the result to r - 1, which replaces its buffer.
//
// Keeping every rank's result identical under a lossy codec: a rank that keeps using (or
// keeps as its result) values it also sends compressed first replaces them by their
// decoded form (step_plan::round_trip). Peers then reduce exactly the operands it reduces,
// and with a commutative op every rank ends with the same bits. Ring: the owner's chunk at
// allgather step 0. Recursive doubling: every exchange step, and at the post-step every
// active rank (those that send and those that keep their result).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "squeeze/core/checked.hpp"
#include "squeeze/core/error.hpp"

namespace squeeze::coll {

/// The two allreduce algorithms squeeze implements.
enum class algorithm : std::uint8_t {
  ring,                ///< reduce-scatter + allgather over N chunks: 2 (N-1) steps
  recursive_doubling,  ///< pairwise exchange of the whole buffer: log2 N steps (+2)
};

/// "ring" or "recursive_doubling".
[[nodiscard]] inline const char* name(algorithm a) noexcept {
  return a == algorithm::ring ? "ring" : "recursive_doubling";
}

/// What a rank sends in a step.
enum class send_source : std::uint8_t {
  nothing,  ///< no send
  local,    ///< the current values of the send chunk (encoded now)
  forward,  ///< the message received in the previous step, as it arrived
};

/// What a rank does with the message it receives in a step.
enum class on_receive : std::uint8_t {
  nothing,  ///< no receive
  reduce,   ///< local chunk = op(local chunk, decoded message)
  replace,  ///< local chunk = decoded message
};

/// One rank's part of one step. Chunks index a chunk_layout of `chunks(algorithm, size)`.
struct step_plan {
  int send_peer = -1;                       ///< -1: no send
  int send_chunk = -1;                      ///< the chunk sent
  send_source send = send_source::nothing;  ///< what is sent
  int recv_peer = -1;                       ///< -1: no receive
  int recv_chunk = -1;                      ///< the chunk received
  on_receive recv = on_receive::nothing;    ///< what is done with it
  /// The rank keeps the decoded form of the message it sends from `round_trip_chunk` (or,
  /// without a send, of the message it would send) in place of its local values: lossy
  /// codecs, see the file comment. The decoded form of that very message, not an encode of
  /// the round-tripped values: a codec need not be idempotent.
  bool round_trip = false;
  int round_trip_chunk = -1;  ///< the chunk whose values are round-tripped

  /// Whether the rank sends in this step.
  [[nodiscard]] constexpr bool sends() const noexcept { return send != send_source::nothing; }
  /// Whether the rank receives in this step.
  [[nodiscard]] constexpr bool receives() const noexcept { return recv != on_receive::nothing; }
  friend constexpr bool operator==(const step_plan&, const step_plan&) = default;
};

/// The most ranks the schedules take (far beyond any job; it keeps every step and chunk
/// index computation inside an int).
inline constexpr int max_ranks = 1 << 24;

namespace detail {

constexpr int mod(int a, int n) noexcept { return ((a % n) + n) % n; }

/// The largest power of two <= n (n >= 1).
constexpr int floor_pow2(int n) noexcept {
  int p = 1;
  while (p <= n / 2) p *= 2;
  return p;
}

constexpr int log2_exact(int p) noexcept {
  int k = 0;
  while ((1 << k) < p) ++k;
  return k;
}

inline void check_rank(int rank, int size, const char* who) {
  SQUEEZE_EXPECTS(size >= 1 && size <= max_ranks,
                  std::string{who} + ": size = " + std::to_string(size) + " (1 to " +
                      std::to_string(max_ranks) + " ranks)");
  SQUEEZE_EXPECTS(rank >= 0 && rank < size, std::string{who} + ": rank " +
                                                std::to_string(rank) + " outside [0, " +
                                                std::to_string(size) + ")");
}

}  // namespace detail

/// Chunks the buffer is cut into.
[[nodiscard]] constexpr int chunks(algorithm a, int size) noexcept {
  return a == algorithm::ring ? size : 1;
}

/// Steps of the collective for `size` ranks (every rank walks the same number; a rank with
/// nothing to do in a step gets an empty step_plan). Sizes above max_ranks, which the step
/// functions refuse, count as max_ranks.
[[nodiscard]] constexpr int steps(algorithm a, int size) noexcept {
  if (size <= 1) return 0;
  if (size > max_ranks) size = max_ranks;
  if (a == algorithm::ring) return 2 * (size - 1);
  const int pof2 = detail::floor_pow2(size);
  return detail::log2_exact(pof2) + (size > pof2 ? 2 : 0);
}

/// Step `step` of ring allreduce for `rank` of `size`.
[[nodiscard]] inline step_plan ring_step(int rank, int size, int step) {
  detail::check_rank(rank, size, "coll::ring_step");
  SQUEEZE_EXPECTS(step >= 0 && step < steps(algorithm::ring, size),
                  "coll::ring_step: step " + std::to_string(step) + " outside [0, " +
                      std::to_string(steps(algorithm::ring, size)) + ")");
  const int n = size;
  step_plan p;
  p.send_peer = detail::mod(rank + 1, n);
  p.recv_peer = detail::mod(rank - 1, n);
  if (step < n - 1) {  // reduce-scatter
    p.send_chunk = detail::mod(rank - step, n);
    p.send = send_source::local;
    p.recv_chunk = detail::mod(rank - step - 1, n);
    p.recv = on_receive::reduce;
  } else {  // allgather
    const int j = step - (n - 1);
    p.send_chunk = detail::mod(rank - j + 1, n);
    p.send = j == 0 ? send_source::local : send_source::forward;
    p.recv_chunk = detail::mod(rank - j, n);
    p.recv = on_receive::replace;
    if (j == 0) {
      p.round_trip = true;
      p.round_trip_chunk = p.send_chunk;
    }
  }
  return p;
}

/// Step `step` of recursive-doubling allreduce for `rank` of `size`.
[[nodiscard]] inline step_plan recursive_doubling_step(int rank, int size, int step) {
  detail::check_rank(rank, size, "coll::recursive_doubling_step");
  const int total = steps(algorithm::recursive_doubling, size);
  SQUEEZE_EXPECTS(step >= 0 && step < total,
                  "coll::recursive_doubling_step: step " + std::to_string(step) +
                      " outside [0, " + std::to_string(total) + ")");
  const int pof2 = detail::floor_pow2(size);
  const int rem = size - pof2;
  const bool paired = rank < 2 * rem;  // takes part in the pre- and post-steps
  const bool sits_out = paired && rank % 2 == 0;
  const int newrank = paired ? (sits_out ? -1 : rank / 2) : rank - rem;
  step_plan p;
  int k = step;
  if (rem > 0) {
    if (step == 0) {  // pre-step
      if (paired && sits_out) {
        p.send_peer = rank + 1;
        p.send_chunk = 0;
        p.send = send_source::local;
      } else if (paired) {
        p.recv_peer = rank - 1;
        p.recv_chunk = 0;
        p.recv = on_receive::reduce;
      }
      return p;
    }
    if (step == total - 1) {  // post-step
      if (paired && sits_out) {
        p.recv_peer = rank + 1;
        p.recv_chunk = 0;
        p.recv = on_receive::replace;
      } else {
        if (paired) {
          p.send_peer = rank - 1;
          p.send_chunk = 0;
          p.send = send_source::local;
        }
        p.round_trip = true;
        p.round_trip_chunk = 0;
      }
      return p;
    }
    k = step - 1;
  }
  if (newrank < 0) return p;  // sitting out the exchange steps
  const int newpeer = newrank ^ (1 << k);
  const int peer = newpeer < rem ? newpeer * 2 + 1 : newpeer + rem;
  p.send_peer = peer;
  p.send_chunk = 0;
  p.send = send_source::local;
  p.recv_peer = peer;
  p.recv_chunk = 0;
  p.recv = on_receive::reduce;
  p.round_trip = true;
  p.round_trip_chunk = 0;
  return p;
}

/// Step `step` of `a` for `rank` of `size`.
[[nodiscard]] inline step_plan schedule_step(algorithm a, int rank, int size, int step) {
  return a == algorithm::ring ? ring_step(rank, size, step)
                              : recursive_doubling_step(rank, size, step);
}

/// How `count` elements are cut into `parts` chunks: every chunk but the last ones holds
/// `per_chunk` elements, a multiple of `granule` (a codec's block, a vector width), so
/// chunks start on granule boundaries; trailing chunks may be short or empty.
struct chunk_layout {
  std::size_t count = 0;      ///< elements in all
  int parts = 1;              ///< chunks
  std::size_t per_chunk = 0;  ///< elements of a full chunk

  chunk_layout() = default;
  /// `count_` elements in `parts_` chunks on `granule` boundaries; throws invalid_argument
  /// for parts_ < 1, granule 0 or sizes that do not fit.
  chunk_layout(std::size_t count_, int parts_, std::size_t granule = 1)
      : count{count_}, parts{parts_} {
    SQUEEZE_EXPECTS(parts_ >= 1, "coll::chunk_layout: parts = " + std::to_string(parts_));
    SQUEEZE_EXPECTS(granule >= 1, "coll::chunk_layout: granule = 0");
    const std::size_t p = static_cast<std::size_t>(parts_);
    const std::size_t granules = count_ / granule + (count_ % granule != 0 ? 1 : 0);
    const std::size_t per = granules / p + (granules % p != 0 ? 1 : 0);
    const auto elements = core::checked_mul<std::size_t>(per, granule);
    SQUEEZE_EXPECTS(elements.has_value(),
                    "coll::chunk_layout: " + std::to_string(count_) + " elements in granules of " +
                        std::to_string(granule) + " do not fit a chunk size");
    per_chunk = *elements;
  }
  /// First element of chunk c (c in [0, parts]; count for every chunk past the data).
  [[nodiscard]] std::size_t first(int c) const noexcept {
    if (c <= 0 || per_chunk == 0) return 0;  // per_chunk is 0 only when count is
    const auto uc = static_cast<std::size_t>(c);
    return uc > count / per_chunk ? count : uc * per_chunk;  // no product above count
  }
  /// Elements of chunk c.
  [[nodiscard]] std::size_t size(int c) const noexcept { return first(c + 1) - first(c); }
};

}  // namespace squeeze::coll
