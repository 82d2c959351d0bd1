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
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "squeeze/core/error.hpp"

namespace squeeze::coll {

/// A transport call (NCCL, MPI) failed. code() is the library's own error code.
class communication_error : public error {
 public:
  communication_error(int code, std::string message,
                      const std::source_location& where = std::source_location::current())
      : error{std::move(message), where}, code_{code} {}
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

}  // namespace squeeze::coll
