// SPDX-License-Identifier: Apache-2.0
// squeeze/coll/transport.hpp: what a collective asks of a transport, and its error type.
//
// Host-compilable. A transport moves bytes between the ranks of the user's communicator
// (coll/nccl.hpp: ncclSend/ncclRecv; coll/mpi.hpp: CUDA-aware MPI_Isend/MPI_Irecv). The
// collectives speak to it in steps:
//
//   t.begin(stream);                 // a step: its receives, then its sends
//   t.recv(buffer, bytes, peer);     // lands before work enqueued on `stream` after end()
//   t.send(buffer, bytes, peer);     // sends what `buffer` holds once the work enqueued on
//                                    // `stream` before begin() is done
//   t.end();                         // the step's sends and receives are complete, or
//                                    // (stream-ordered transports) ordered on `stream`
//
// Buffer rules every collective keeps, so that one algorithm is right for both kinds:
//   * a send buffer is not written by anything until the step's end();
//   * a receive buffer is not read or written by work enqueued after the previous step's
//     begin() (a host-progressed transport posts its receives at recv(), while kernels
//     enqueued in the step before may still run); collectives alternate receive buffers.
//
// Small host values travel outside the steps: exchange_size (a variable-size codec's
// message sizes) and max_all (the element-wise maximum over the ranks of a few integers:
// the collectives' check that every rank passed the same call, the selector's agreement on
// its measurements). Both synchronize the host.
//
// A transport may also gather (gathering_transport): every rank contributes the same number
// of bytes to one buffer, in place, ordered on a stream. With two ranks that is the
// symmetric exchange every step of both schedules makes, and NCCL runs it on all of its
// collective channels where send/recv between two GPUs of one host gets two (coll/nccl.hpp).
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "squeeze/core/error.hpp"

namespace squeeze::coll {

/// A transport call (NCCL, MPI) failed. code() is the library's own error code.
class communication_error : public error {
 public:
  /// The library's error `code`, with `message` (which names the call).
  communication_error(int code, std::string message,
                      const ::squeeze::source_location& where = ::squeeze::source_location::current())
      : error{std::move(message), where}, code_{code} {}
  /// The library's own error code (ncclResult_t, an MPI error code).
  [[nodiscard]] int code() const noexcept { return code_; }

 private:
  int code_;
};

/// See the file comment.
template <class T>
concept transport = requires(T& t, void* p, const void* cp, std::size_t bytes, int peer,
                             cudaStream_t s, std::uint64_t v,
                             std::span<std::uint64_t> values) {
  { T::stream_ordered } -> std::convertible_to<bool>;
  { t.rank() } -> std::convertible_to<int>;
  { t.size() } -> std::convertible_to<int>;
  t.begin(s);
  t.recv(p, bytes, peer);
  t.send(cp, bytes, peer);
  t.end();
  { t.exchange_size(v, peer, peer, s) } -> std::same_as<std::uint64_t>;
  t.max_all(values, s);
};

/// A stream-ordered transport that can gather in place: buffer[r * bytes, (r + 1) * bytes)
/// is rank r's part; each rank provides its own and receives every other's, ordered on
/// `stream` (after the work enqueued before, before the work enqueued after).
template <class T>
concept gathering_transport =
    transport<T> && T::stream_ordered &&
    requires(T& t, void* p, std::size_t bytes, cudaStream_t s) { t.gather_in_place(p, bytes, s); };

/// Whether every rank passed the same `values` (up to 8): one max_all of the values and
/// their complements (all equal iff each value's maximum and its complement's are the
/// rank's own). Collective: every rank calls it. `largest`, when given, receives the
/// maximum of values[0] over the ranks (for messages).
template <transport T>
bool ranks_agree(T& t, std::span<const std::uint64_t> values, cudaStream_t stream,
                 std::uint64_t* largest = nullptr) {
  constexpr std::size_t most = 8;
  SQUEEZE_EXPECTS(values.size() <= most, "coll::ranks_agree: at most 8 values");
  std::array<std::uint64_t, 2 * most> all{};
  const std::size_t n = values.size();
  for (std::size_t i = 0; i < n; ++i) {
    all[i] = values[i];
    all[n + i] = ~values[i];
  }
  t.max_all(std::span<std::uint64_t>{all.data(), 2 * n}, stream);
  if (largest != nullptr && n > 0) *largest = all[0];
  bool same = true;
  for (std::size_t i = 0; i < n; ++i) same = same && all[i] == values[i] && all[n + i] == ~values[i];
  return same;
}

/// When the collectives check that every rank makes the same call (count, value type, op,
/// algorithm, codec, slicing) before any data moves.
enum class verification : std::uint8_t {
  /// Never: mismatched calls hang or corrupt memory, as with ncclAllReduce or MPI_Allreduce.
  off,
  /// The first call of each signature (default): that call costs one small allreduce and a
  /// host synchronization; a signature every rank has been checked to agree on is not
  /// checked again. A rank that passes a new signature while another repeats an agreed one
  /// is not caught (the first waits in the check while the other moves data): use
  /// every_call to find such a bug.
  first_call,
  /// Every call (one host round trip each): for debugging.
  every_call,
};

/// "off", "first_call" or "every_call".
[[nodiscard]] inline const char* name(verification v) noexcept {
  return v == verification::off ? "off" : v == verification::first_call ? "first_call" : "every_call";
}

/// The call signatures (up to 8 values each) that every rank has been checked to agree on:
/// each rank adds a signature only after ranks_agree() said yes on every rank, so every
/// rank holds the same list, and remembers the most recent `capacity`.
class agreed_calls {
 public:
  static constexpr std::size_t capacity = 16;    ///< signatures remembered
  static constexpr std::size_t most_values = 8;  ///< values in a signature

  /// Whether the ranks agree on `values`: checked across the ranks (collective) unless
  /// `v` is first_call and the signature was agreed before; true without a check when `v`
  /// is off. `largest` as in ranks_agree, when a check runs.
  template <transport T>
  bool agree(T& t, std::span<const std::uint64_t> values, verification v, cudaStream_t stream,
             std::uint64_t* largest = nullptr) {
    SQUEEZE_EXPECTS(values.size() <= most_values, "coll::agreed_calls: at most 8 values");
    if (v == verification::off) return true;
    entry e{};
    std::copy(values.begin(), values.end(), e.values.begin());
    e.size = values.size();
    if (v == verification::first_call && known(e)) return true;
    ++checks_;
    if (!ranks_agree(t, values, stream, largest)) return false;
    remember(e);
    return true;
  }
  /// Checks run since construction (for tests).
  [[nodiscard]] std::uint64_t checks() const noexcept { return checks_; }

 private:
  struct entry {
    std::array<std::uint64_t, most_values> values;
    std::size_t size;
    bool operator==(const entry&) const = default;
  };
  [[nodiscard]] bool known(const entry& e) const {
    return std::find(list_.begin(), list_.end(), e) != list_.end();
  }
  void remember(const entry& e) {
    if (known(e)) return;
    if (list_.size() == capacity) list_.erase(list_.begin());
    list_.push_back(e);
  }
  std::vector<entry> list_;
  std::uint64_t checks_ = 0;
};

}  // namespace squeeze::coll
