// SPDX-License-Identifier: Apache-2.0
// squeeze/coll/nccl.hpp: the NCCL transport (ncclSend/ncclRecv in group calls on the
// caller's stream, over the caller's communicator).
//
//   ncclComm_t comm = ...;                    // yours: squeeze neither creates nor frees it
//   coll::nccl_transport net{comm};
//   coll::allreducer<coll::nccl_transport, frsz2::wire_codec<16>> ar{net};
//
// Host-compilable (nccl.h, the CUDA runtime API). Every step is one ncclGroupStart /
// ncclGroupEnd on the stream the collective runs on, so nothing here blocks the host; only
// exchange_size and max_all synchronize. A failing call throws coll::communication_error naming
// the call, NCCL's error string and its last-error text.
//
// NCCL allows one rank per GPU and expects the operations on a communicator to be issued in
// the same order by every rank, from one thread at a time: use one nccl_transport per
// communicator and do not run two collectives on it concurrently.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>

#include "squeeze/core/buffer.hpp"
#include "squeeze/core/cuda_error.hpp"
#include "squeeze/core/error.hpp"
#include "squeeze/core/reduce_op.hpp"
#include "squeeze/coll/transport.hpp"

namespace squeeze::coll {

namespace detail {

[[noreturn]] inline void throw_nccl_error(ncclResult_t code, const char* call, ncclComm_t comm,
                                          const ::squeeze::source_location& where) {
  std::string message{call};
  message += " failed: ";
  message += ncclGetErrorString(code);
  if (comm != nullptr) {
    const char* last = ncclGetLastError(comm);
    if (last != nullptr && *last != '\0') {
      message += " (";
      message += last;
      message += ')';
    }
  }
  throw communication_error{static_cast<int>(code), std::move(message), where};
}

}  // namespace detail

/// Evaluates an NCCL call on communicator `comm`; throws coll::communication_error unless it
/// returned ncclSuccess (or ncclInProgress, for non-blocking communicators).
#define SQUEEZE_NCCL_TRY(comm, call)                                                  \
  do {                                                                                \
    if (const ncclResult_t squeeze_nccl_ = (call);                                    \
        squeeze_nccl_ != ncclSuccess && squeeze_nccl_ != ncclInProgress) {            \
      ::squeeze::coll::detail::throw_nccl_error(squeeze_nccl_, #call, (comm),         \
                                                ::squeeze::source_location::current());     \
    }                                                                                 \
  } while (false)

/// NCCL's data type and reduction for a value type and op.
template <class T>
constexpr ncclDataType_t nccl_type() noexcept {
  if constexpr (std::is_same_v<T, float>) return ncclFloat32;
  else if constexpr (std::is_same_v<T, double>) return ncclFloat64;
  else if constexpr (std::is_same_v<T, std::uint64_t>) return ncclUint64;
  else static_assert(sizeof(T) == 0, "coll::nccl_type: float, double or uint64");
}
/// The NCCL operation of a reduce_op.
constexpr ncclRedOp_t nccl_op(core::reduce_op op) noexcept {
  return op == core::reduce_op::sum ? ncclSum : op == core::reduce_op::min ? ncclMin : ncclMax;
}

/// The NCCL transport (see the file comment).
class nccl_transport {
 public:
  static constexpr bool stream_ordered = true;  ///< steps are ordered on the stream

  /// A transport over your communicator, which must outlive it.
  explicit nccl_transport(ncclComm_t comm) : comm_{comm} {
    SQUEEZE_EXPECTS(comm != nullptr, "coll::nccl_transport: null communicator");
    SQUEEZE_NCCL_TRY(comm_, ncclCommCount(comm_, &size_));
    SQUEEZE_NCCL_TRY(comm_, ncclCommUserRank(comm_, &rank_));
  }
  nccl_transport(const nccl_transport&) = delete;
  nccl_transport& operator=(const nccl_transport&) = delete;

  /// This rank.
  [[nodiscard]] int rank() const noexcept { return rank_; }
  /// The number of ranks.
  [[nodiscard]] int size() const noexcept { return size_; }
  /// The communicator.
  [[nodiscard]] ncclComm_t comm() const noexcept { return comm_; }

  /// Starts a step on `stream` (ncclGroupStart).
  void begin(cudaStream_t stream) {
    stream_ = stream;
    SQUEEZE_NCCL_TRY(comm_, ncclGroupStart());
    in_group_ = true;
  }
  /// Receives `bytes` bytes from `peer` into `buffer` in this step (ncclRecv).
  void recv(void* buffer, std::size_t bytes, int peer) {
    if (bytes == 0) return;
    guarded([&] {
      SQUEEZE_NCCL_TRY(comm_, ncclRecv(buffer, bytes, ncclUint8, peer, comm_, stream_));
    });
  }
  /// Sends `bytes` bytes of `buffer` to `peer` in this step (ncclSend).
  void send(const void* buffer, std::size_t bytes, int peer) {
    if (bytes == 0) return;
    guarded([&] {
      SQUEEZE_NCCL_TRY(comm_, ncclSend(buffer, bytes, ncclUint8, peer, comm_, stream_));
    });
  }
  /// Ends the step (ncclGroupEnd): its transfers are ordered on the stream.
  void end() {
    in_group_ = false;
    SQUEEZE_NCCL_TRY(comm_, ncclGroupEnd());
  }

  /// buffer[r * bytes, (r + 1) * bytes) from rank r to every rank, in place: ncclAllGather,
  /// ordered on `stream` (outside a step). NCCL runs a collective on all of its collective
  /// channels, send/recv between two GPUs of one host on two per peer (four against two
  /// over shared memory on a 2 x H100 machine with NCCL_P2P_DISABLE=1, 2026-11-27: an
  /// exchange of 32 MiB each way at 24.2 GB/s through ncclAllGather, 22.4 through
  /// ncclSend/ncclRecv), so the collectives exchange through this where two ranks do.
  void gather_in_place(void* buffer, std::size_t bytes, cudaStream_t stream) {
    if (bytes == 0) return;
    auto* base = static_cast<std::byte*>(buffer);
    SQUEEZE_NCCL_TRY(comm_, ncclAllGather(base + static_cast<std::size_t>(rank_) * bytes, base,
                                          bytes, ncclUint8, comm_, stream));
  }

  /// Sends `mine` to send_peer and returns what recv_peer sent (either peer may be -1).
  std::uint64_t exchange_size(std::uint64_t mine, int send_peer, int recv_peer,
                              cudaStream_t stream) {
    ensure_scratch();
    host_[0] = mine;
    SQUEEZE_CUDA_TRY(cudaMemcpyAsync(scratch_.data(), host_.data(), 8, cudaMemcpyHostToDevice,
                                     stream));
    begin(stream);
    if (recv_peer >= 0) recv(scratch_.data() + 1, 8, recv_peer);
    if (send_peer >= 0) send(scratch_.data(), 8, send_peer);
    end();
    SQUEEZE_CUDA_TRY(cudaMemcpyAsync(host_.data() + 1, scratch_.data() + 1, 8,
                                     cudaMemcpyDeviceToHost, stream));
    SQUEEZE_CUDA_TRY(cudaStreamSynchronize(stream));
    return host_[1];
  }

  /// values[i] = the maximum of values[i] over the ranks: one ncclAllReduce and a host
  /// synchronization.
  void max_all(std::span<std::uint64_t> values, cudaStream_t stream) {
    if (values.empty()) return;
    ensure_scratch(values.size());
    const std::size_t bytes = values.size_bytes();
    std::copy(values.begin(), values.end(), host_.data());
    SQUEEZE_CUDA_TRY(
        cudaMemcpyAsync(scratch_.data(), host_.data(), bytes, cudaMemcpyHostToDevice, stream));
    SQUEEZE_NCCL_TRY(comm_, ncclAllReduce(scratch_.data(), scratch_.data(), values.size(),
                                          ncclUint64, ncclMax, comm_, stream));
    SQUEEZE_CUDA_TRY(
        cudaMemcpyAsync(host_.data(), scratch_.data(), bytes, cudaMemcpyDeviceToHost, stream));
    SQUEEZE_CUDA_TRY(cudaStreamSynchronize(stream));
    std::copy(host_.data(), host_.data() + values.size(), values.begin());
  }

  /// ncclAllReduce itself: the baseline, and what the selector picks on fast links.
  template <class T>
  void native_allreduce(const T* send, T* recv, std::size_t count, core::reduce_op op,
                        cudaStream_t stream) {
    SQUEEZE_NCCL_TRY(comm_, ncclAllReduce(send, recv, count, nccl_type<T>(), nccl_op(op), comm_,
                                          stream));
  }

 private:
  void ensure_scratch(std::size_t values = 2) {
    if (scratch_.size() < values) {
      const std::size_t n = std::max<std::size_t>(values, 16);
      scratch_ = core::device_buffer<std::uint64_t>{n};
      host_ = core::pinned_buffer<std::uint64_t>{n};
    }
  }
  // Ends an open group before an error leaves this transport, so the next step starts clean.
  template <class F>
  void guarded(F&& call) {
    try {
      call();
    } catch (...) {
      if (in_group_) {
        in_group_ = false;
        static_cast<void>(ncclGroupEnd());
      }
      throw;
    }
  }

  ncclComm_t comm_ = nullptr;
  int rank_ = 0;
  int size_ = 1;
  cudaStream_t stream_ = nullptr;
  bool in_group_ = false;
  core::device_buffer<std::uint64_t> scratch_;
  core::pinned_buffer<std::uint64_t> host_;
};

}  // namespace squeeze::coll
