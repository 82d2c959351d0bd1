// SPDX-License-Identifier: Apache-2.0
// squeeze/coll/mpi.hpp: the CUDA-aware MPI transport (MPI_Isend/MPI_Irecv on device
// buffers, over a duplicate of the caller's communicator).
//
//   coll::mpi_transport net{MPI_COMM_WORLD};
//   coll::allreducer<coll::mpi_transport, frsz2::wire_codec<8>> ar{net};
//
// Host-compilable (mpi.h, the CUDA runtime API). MPI is progressed by the host, so a step
// is the loop body of Algorithm 1 in Zhou et al. (ISC 2024): recv() posts MPI_Irecv at once
// (before the compression of this step's message has finished, so the two overlap), the
// first send() waits for the stream (the message is then ready) and posts MPI_Isend, and
// end() waits for both. The MPI library must be CUDA-aware (Open MPI built with CUDA,
// MVAPICH2-GDR, ...); with Open MPI this is checked at construction.
//
// The transport duplicates the communicator (its messages never match the caller's) and
// sets MPI_ERRORS_RETURN on the duplicate: a failing call throws coll::communication_error
// naming the call and MPI's error string. Messages of more than 2^31 - 1 bytes travel as
// several pieces.
#pragma once

#include <cuda_runtime_api.h>
#include <mpi.h>
#if defined(OPEN_MPI) && OPEN_MPI
#include <mpi-ext.h>
#endif

#include <algorithm>
#include <array>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "squeeze/core/buffer.hpp"
#include "squeeze/core/cuda_error.hpp"
#include "squeeze/core/error.hpp"
#include "squeeze/core/reduce_op.hpp"
#include "squeeze/coll/transport.hpp"

namespace squeeze::coll {

namespace detail {

[[noreturn]] inline void throw_mpi_error(int code, const char* call,
                                         const ::squeeze::source_location& where) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  std::string message{call};
  message += " failed: ";
  if (MPI_Error_string(code, text, &length) == MPI_SUCCESS) {
    message.append(text, static_cast<std::size_t>(length));
  } else {
    message += "MPI error " + std::to_string(code);
  }
  throw communication_error{code, std::move(message), where};
}

}  // namespace detail

/// Evaluates an MPI call; throws coll::communication_error unless it returned MPI_SUCCESS.
#define SQUEEZE_MPI_TRY(call)                                                         \
  do {                                                                                \
    if (const int squeeze_mpi_ = (call); squeeze_mpi_ != MPI_SUCCESS) {               \
      ::squeeze::coll::detail::throw_mpi_error(squeeze_mpi_, #call,                   \
                                               ::squeeze::source_location::current());      \
    }                                                                                 \
  } while (false)

/// MPI's data type and reduction for a value type and op.
template <class T>
inline MPI_Datatype mpi_type() noexcept {
  if constexpr (std::is_same_v<T, float>) return MPI_FLOAT;
  else if constexpr (std::is_same_v<T, double>) return MPI_DOUBLE;
  else if constexpr (std::is_same_v<T, std::uint64_t>) return MPI_UINT64_T;
  else if constexpr (std::is_same_v<T, int>) return MPI_INT;
  else static_assert(sizeof(T) == 0, "coll::mpi_type: float, double, uint64 or int");
}
/// The MPI operation of a reduce_op.
inline MPI_Op mpi_op(core::reduce_op op) noexcept {
  return op == core::reduce_op::sum ? MPI_SUM : op == core::reduce_op::min ? MPI_MIN : MPI_MAX;
}

/// Whether the MPI library says it is CUDA-aware: 1 yes, 0 no, -1 it cannot tell.
inline int mpi_cuda_aware() noexcept {
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
  return MPIX_Query_cuda_support() != 0 ? 1 : 0;
#elif defined(MPIX_CUDA_AWARE_SUPPORT)
  return 0;
#else
  return -1;
#endif
}

/// How the transport hands device buffers to MPI.
enum class mpi_staging : std::uint8_t {
  automatic,  ///< direct if the library says it is CUDA-aware, else host
  direct,     ///< device pointers to MPI: needs a CUDA-aware library
  host,       ///< through pinned host buffers: any MPI library
};

/// The MPI transport (see the file comment).
class mpi_transport {
 public:
  static constexpr bool stream_ordered = false;  ///< the host drives the steps

  /// A transport over a duplicate of `comm` (MPI must be initialized); device buffers are
  /// staged through pinned host memory when `staging` says so, or, by default, when MPI is
  /// not CUDA-aware.
  explicit mpi_transport(MPI_Comm comm, mpi_staging staging = mpi_staging::automatic) {
    int initialized = 0;
    MPI_Initialized(&initialized);
    SQUEEZE_EXPECTS(initialized != 0, "coll::mpi_transport: MPI is not initialized");
    staged_ = staging == mpi_staging::host ||
              (staging == mpi_staging::automatic && mpi_cuda_aware() != 1);
    SQUEEZE_MPI_TRY(MPI_Comm_dup(comm, &comm_));
    SQUEEZE_MPI_TRY(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
    SQUEEZE_MPI_TRY(MPI_Comm_rank(comm_, &rank_));
    SQUEEZE_MPI_TRY(MPI_Comm_size(comm_, &size_));
  }
  mpi_transport(const mpi_transport&) = delete;
  mpi_transport& operator=(const mpi_transport&) = delete;
  ~mpi_transport() {
    if (copies_done_ != nullptr) {
      if (copies_pending_) static_cast<void>(cudaEventSynchronize(copies_done_));
      static_cast<void>(cudaEventDestroy(copies_done_));
    }
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (comm_ != MPI_COMM_NULL && finalized == 0) static_cast<void>(MPI_Comm_free(&comm_));
  }

  /// This process's rank.
  [[nodiscard]] int rank() const noexcept { return rank_; }
  /// The number of ranks.
  [[nodiscard]] int size() const noexcept { return size_; }
  /// The transport's own communicator (a duplicate of the one given).
  [[nodiscard]] MPI_Comm comm() const noexcept { return comm_; }
  /// Whether device buffers go through pinned host buffers.
  [[nodiscard]] bool staged() const noexcept { return staged_; }

  /// Starts a step whose messages are ready once the work enqueued on `stream` is done.
  void begin(cudaStream_t stream) {
    stream_ = stream;
    stream_done_ = false;
    requests_.clear();
    landings_.clear();
    used_ = 0;
    // The previous step's host-to-device copies read the staging buffers: let them finish.
    if (copies_pending_) {
      SQUEEZE_CUDA_TRY(cudaEventSynchronize(copies_done_));
      copies_pending_ = false;
    }
  }
  /// Posts the receive of `bytes` bytes from `peer` into `buffer` (MPI_Irecv).
  void recv(void* buffer, std::size_t bytes, int peer) {
    if (bytes == 0) return;
    void* into = buffer;
    if (staged_) {
      into = staging(bytes);
      landings_.push_back({buffer, into, bytes});
    }
    pieces(into, bytes, [&](void* p, int n) {
      MPI_Request r;
      SQUEEZE_MPI_TRY(MPI_Irecv(p, n, MPI_BYTE, peer, tag, comm_, &r));
      requests_.push_back(r);
    });
  }
  /// Sends `bytes` bytes of `buffer` to `peer` (MPI_Isend), after the stream's earlier work.
  void send(const void* buffer, std::size_t bytes, int peer) {
    if (bytes == 0) return;
    if (!stream_done_) {  // the message is ready once the stream's earlier work is
      SQUEEZE_CUDA_TRY(cudaStreamSynchronize(stream_));
      stream_done_ = true;
    }
    void* from = const_cast<void*>(buffer);
    if (staged_) {
      from = staging(bytes);
      SQUEEZE_CUDA_TRY(cudaMemcpyAsync(from, buffer, bytes, cudaMemcpyDeviceToHost, stream_));
      SQUEEZE_CUDA_TRY(cudaStreamSynchronize(stream_));
    }
    pieces(from, bytes, [&](void* p, int n) {
      MPI_Request r;
      SQUEEZE_MPI_TRY(MPI_Isend(p, n, MPI_BYTE, peer, tag, comm_, &r));
      requests_.push_back(r);
    });
  }
  /// Waits for the step's sends and receives (MPI_Waitall); staged receives land on the stream.
  void end() {
    if (!requests_.empty()) {
      const int rc =
          MPI_Waitall(static_cast<int>(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE);
      requests_.clear();
      if (rc != MPI_SUCCESS) {
        detail::throw_mpi_error(rc, "MPI_Waitall", ::squeeze::source_location::current());
      }
    }
    for (const auto& l : landings_) {  // staged receives: to the device, on the stream
      SQUEEZE_CUDA_TRY(cudaMemcpyAsync(l.device, l.host, l.bytes, cudaMemcpyHostToDevice, stream_));
    }
    if (!landings_.empty()) {
      if (copies_done_ == nullptr) {
        SQUEEZE_CUDA_TRY(cudaEventCreateWithFlags(&copies_done_, cudaEventDisableTiming));
      }
      SQUEEZE_CUDA_TRY(cudaEventRecord(copies_done_, stream_));
      copies_pending_ = true;
    }
  }

  /// Sends `mine` to send_peer and returns what recv_peer sent (either peer may be -1).
  std::uint64_t exchange_size(std::uint64_t mine, int send_peer, int recv_peer,
                              cudaStream_t /*stream*/) {
    std::uint64_t theirs = 0;
    SQUEEZE_MPI_TRY(MPI_Sendrecv(&mine, send_peer >= 0 ? 1 : 0, MPI_UINT64_T,
                                 send_peer >= 0 ? send_peer : MPI_PROC_NULL, size_tag, &theirs,
                                 recv_peer >= 0 ? 1 : 0, MPI_UINT64_T,
                                 recv_peer >= 0 ? recv_peer : MPI_PROC_NULL, size_tag, comm_,
                                 MPI_STATUS_IGNORE));
    return theirs;
  }

  /// values[i] = the maximum of values[i] over the ranks: one MPI_Allreduce.
  void max_all(std::span<std::uint64_t> values, cudaStream_t /*stream*/) {
    if (values.empty()) return;
    SQUEEZE_MPI_TRY(MPI_Allreduce(MPI_IN_PLACE, values.data(), static_cast<int>(values.size()),
                                  MPI_UINT64_T, MPI_MAX, comm_));
  }

  /// MPI_Allreduce itself (waits for the stream first; staged through host memory like the
  /// steps when the library is not CUDA-aware): the MPI baseline. Returns complete.
  template <class T>
  void native_allreduce(const T* send, T* recv, std::size_t count, core::reduce_op op,
                        cudaStream_t stream) {
    SQUEEZE_EXPECTS(count <= static_cast<std::size_t>(INT_MAX),
                    "coll::mpi_transport::native_allreduce: count above INT_MAX");
    SQUEEZE_CUDA_TRY(cudaStreamSynchronize(stream));
    if (!staged_) {
      SQUEEZE_MPI_TRY(MPI_Allreduce(send == recv ? MPI_IN_PLACE : send, recv,
                                    static_cast<int>(count), mpi_type<T>(), mpi_op(op), comm_));
      return;
    }
    if (copies_pending_) {
      SQUEEZE_CUDA_TRY(cudaEventSynchronize(copies_done_));
      copies_pending_ = false;
    }
    used_ = 0;
    void* host = staging(count * sizeof(T));
    SQUEEZE_CUDA_TRY(cudaMemcpyAsync(host, send, count * sizeof(T), cudaMemcpyDeviceToHost, stream));
    SQUEEZE_CUDA_TRY(cudaStreamSynchronize(stream));
    SQUEEZE_MPI_TRY(MPI_Allreduce(MPI_IN_PLACE, host, static_cast<int>(count), mpi_type<T>(),
                                  mpi_op(op), comm_));
    SQUEEZE_CUDA_TRY(cudaMemcpyAsync(recv, host, count * sizeof(T), cudaMemcpyHostToDevice, stream));
    SQUEEZE_CUDA_TRY(cudaStreamSynchronize(stream));
  }

 private:
  static constexpr int tag = 0x5C;
  static constexpr int size_tag = 0x5D;
  static constexpr std::size_t piece_bytes = std::size_t{1} << 30;

  template <class F>
  static void pieces(void* buffer, std::size_t bytes, F&& post) {
    auto* p = static_cast<std::byte*>(buffer);
    for (std::size_t done = 0; done < bytes; done += piece_bytes) {
      post(p + done, static_cast<int>(std::min(piece_bytes, bytes - done)));
    }
  }

  // The next free pinned staging buffer of at least `bytes` (one per operation of a step,
  // kept and grown across steps: a buffer is only reallocated between steps, once the
  // copies that read it have finished).
  void* staging(std::size_t bytes) {
    if (used_ == buffers_.size()) buffers_.emplace_back();
    auto& b = buffers_[used_++];
    if (b.bytes() < bytes) b = core::pinned_buffer<std::byte>{bytes};
    return b.data();
  }

  struct landing {
    void* device;
    void* host;
    std::size_t bytes;
  };

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  bool staged_ = false;
  cudaStream_t stream_ = nullptr;
  bool stream_done_ = false;
  std::vector<MPI_Request> requests_;
  std::vector<core::pinned_buffer<std::byte>> buffers_;
  std::size_t used_ = 0;
  std::vector<landing> landings_;
  cudaEvent_t copies_done_ = nullptr;
  bool copies_pending_ = false;
};

}  // namespace squeeze::coll
