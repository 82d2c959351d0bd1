// SPDX-License-Identifier: Apache-2.0
// squeeze/coll/allreduce.cuh: ring and recursive-doubling allreduce that compress on the
// wire (collective-level compression, Zhou et al., ISC 2024), over any coll::transport.
//
//   coll::nccl_transport net{comm};                                  // your communicator
//   coll::allreducer<coll::nccl_transport, frsz2::wire_codec<16>> ar{net};
//   ar(d_send, d_recv, count, coll::reduce_op::sum, stream);        // ring by default
//   ar(d_buf, d_buf, count, coll::reduce_op::max, stream,
//      {.algorithm = coll::algorithm::recursive_doubling});           // in place
//   ar.trace_next_call(); ar(...); for (auto t : ar.trace()) ...      // where the time went
//
// An allreducer owns what a call needs between calls (workspace for the messages, a side
// stream, events, the call signatures already checked) and is reused; it keeps a pointer to
// the transport. Calls are stream-ordered on `stream` for the NCCL transport (the host does
// not wait, unless the codec has variable sizes or a call's arguments are checked: by
// default only the first call of each signature is); with MPI the host drives the steps.
//
// Collective-level compression (options.collective = true, the default), as in Zhou et
// al., ISC 2024, §III-C..F:
//   * each message is encoded once per step, from the chunk just reduced, on `stream`;
//   * in the ring's allgather, the owner encodes its chunk once; every other rank forwards
//     the message it received unchanged and decodes it off the path of the next send (on a
//     side stream, or, in the pipelined executor below, while transfers run on their own);
//   * decoding and reduction are one kernel (codec.decode_reduce) on the stream the
//     receive completes on: no extra synchronization;
//   * with NCCL (stream-ordered transports) and fixed-size codecs, each step's chunk moves in
//     slices (allreduce_options::slice_bytes, up to max_slices) on a high-priority stream of
//     its own, so decoding, reducing and encoding slice s overlaps the transfer of slices
//     s + 1 ...; with two ranks and a transport that gathers (gathering_transport: NCCL),
//     each slice's exchange (messages of allreduce_options::gather_bytes or more) is one
//     in-place gather of the two ranks' messages, which NCCL runs on all of its channels;
//   * with MPI, the receive is posted before the send waits for its encoding, so encoding
//     overlaps the receive (transport.hpp).
// Lossy codecs keep every rank's result identical: values a rank keeps and also sends are
// replaced by their decoded form (schedule.hpp, round trips), and every op is commutative bit
// for bit (core::apply). The result then differs from the exact reduction by the codec's
// error, the same on every rank.
//
// Out of place (send != recv), the pipelined executor copies nothing first: a slice is
// encoded from send until recv holds it, and what arrives for it is reduced from send into
// recv (codecs with decode_reduce(in, bytes, n, src, dst, op, s), coll::decodes_reduce_from;
// others copy that slice just before). The other executors copy send into recv first.
//
// A codec whose decoders check what they read (checked_codec: ibp::wire_codec) makes every
// call end with its fault words exchanged: when one rank received a corrupted message, every
// rank throws format_error (and can call again), none waits for a peer that gave up.
//
// trace_next_call() makes the next call record CUDA events at each step's (and slice's)
// encode, transfer and decode; trace() returns them as step_trace rows, microseconds from
// the call's start. Untraced calls record nothing.
//
// options.collective = false is the naive point-to-point variant that work compares with:
// every send encodes on a side stream and waits for it, every receive decodes into scratch on
// the side stream, waits, then reduces; forwarded chunks are decoded and encoded again. It
// exists for benchmarks; ranks may end with slightly different values under a lossy codec.
//
// Workspace, at most (cw(n) = a codec message of n values): ring cw(count / N) x N, plus a
// chunk of count / N values for the naive variant; recursive doubling 3 cw(count). The raw
// codec (no_compression) needs 2 chunks of scratch (1 with a stream-ordered transport).
//
// The kernel that reduces a received chunk into the local one is in coll/detail/.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "squeeze/coll/codec.hpp"
#include "squeeze/coll/detail/allreduce_kernels.cuh"
#include "squeeze/coll/schedule.hpp"
#include "squeeze/coll/transport.hpp"
#include "squeeze/core/buffer.hpp"
#include "squeeze/core/cuda_error.hpp"
#include "squeeze/core/error.hpp"
#include "squeeze/core/reduce_op.hpp"
#include "squeeze/core/timer.hpp"

namespace squeeze::coll {

/// How one allreduce call runs.
struct allreduce_options {
  coll::algorithm algorithm = coll::algorithm::ring;  ///< the schedule (coll/schedule.hpp)
  /// Collective-level compression; false: the naive point-to-point variant (benchmarks).
  bool collective = true;
  /// When to check that every rank passed the same count, value type, op, algorithm, codec,
  /// slice_bytes and gather_bytes (one small allreduce and a host synchronization per
  /// check): by default the first call of each signature (coll::verification).
  verification verify = verification::first_call;
  /// Stream-ordered transports (NCCL) with fixed-size codecs: each step's chunk moves in
  /// slices of about this many bytes of values (at most max_slices), so the codec's kernels
  /// for one slice overlap the transfer of the next. Every rank must pass the same value.
  /// Each slice costs a transfer's fixed time (10-16 us over shared memory between two
  /// H100s) and the first and last slices' codec time is not hidden: for 64 MiB of float on
  /// that link (2026-11-27) 16 MiB beat 4, 8 and 32 MiB (and 1, 2 and 64 MiB by send/recv);
  /// at 512 MiB 4-32 MiB (max_slices slices a chunk) were within 1 %.
  std::size_t slice_bytes = std::size_t{16} << 20;
  /// Two ranks over a transport that gathers (gathering_transport: NCCL): slices whose
  /// messages have at least this many bytes are exchanged by one in-place gather, smaller
  /// ones by send/recv. Over shared memory between two H100s (NCCL 2.28,
  /// NCCL_P2P_DISABLE=1, 2026-11-27), ncclAllGather against ncclSend/ncclRecv for the same
  /// bytes each way: 116 against 110 us at 2 MiB, 379 against ~394 us at 8.25 MiB, 1385
  /// against 1501 us at 32 MiB. Every rank must pass the same value.
  std::size_t gather_bytes = std::size_t{4} << 20;
};

/// A codec whose decoder reports malformed messages (ibp::wire_codec): take_fault(stream)
/// synchronizes and returns the first fault recorded since the last call (0: none), which
/// describe_fault() puts in words. Only the rank whose decoder met a corrupted message can
/// know of it, so at the end of each call the allreducer sends every rank's word to every
/// rank (one max_all) and, when any is nonzero, every rank throws format_error.
template <class C>
concept checked_codec = requires(C& c, cudaStream_t s, std::uint32_t word) {
  { c.take_fault(s) } -> std::same_as<std::uint32_t>;
  { C::describe_fault(word) } -> std::convertible_to<std::string>;
};

/// The most slices a chunk is cut into (each slice is one group of sends and receives).
inline constexpr int max_slices = 8;

/// Where a traced call's time went (allreducer::trace_next_call): for one step and slice of
/// the schedule, when its outgoing message was encoded, when its transfer ended and when what
/// arrived was decoded (and reduced), in microseconds from the call's start on the GPU's
/// clock (CUDA events on the streams that did the work). NaN where the step has no such
/// part (a send without a local encoding, a step that receives nothing). Executors without
/// slices report slice 0.
struct step_trace {
  int step = 0;           ///< the schedule's step
  int slice = 0;          ///< the slice of the step's chunk (0 without slices)
  float encoded_us = 0;   ///< the outgoing message was encoded
  float arrived_us = 0;   ///< the transfer ended
  float consumed_us = 0;  ///< what arrived was decoded (and reduced)
};

namespace detail {

/// FNV-1a of a codec's name: part of what `verify` compares across ranks.
inline std::uint64_t name_hash(const char* s) noexcept {
  std::uint64_t h = 1469598103934665603ull;
  for (; *s != '\0'; ++s) h = (h ^ static_cast<unsigned char>(*s)) * 1099511628211ull;
  return h;
}

constexpr std::size_t align16(std::size_t bytes) noexcept {
  return (bytes + 15) / 16 * 16;
}

}  // namespace detail

/// Ring and recursive-doubling allreduce over a transport, with a codec on the wire (see the
/// file comment). Not thread-safe: one call at a time, like the communicator under it.
template <transport Transport, class Codec = no_compression>
class allreducer {
 public:
  /// An allreducer over `transport` (kept by pointer: it must outlive the allreducer).
  explicit allreducer(Transport& transport, Codec codec = {})
      : transport_{&transport}, codec_{std::move(codec)} {}

  /// recv[i] = op over all ranks of send[i], i < count (device memory; send == recv for in
  /// place). Ordered on `stream`.
  template <class T>
  requires codec_for<Codec, T>
  void operator()(const T* send, T* recv, std::size_t count, reduce_op op, cudaStream_t stream,
                  const allreduce_options& options = {}) {
    SQUEEZE_EXPECTS((send != nullptr && recv != nullptr) || count == 0,
                    "coll::allreducer: null buffer");
    const int n = transport_->size();
    bytes_sent_ = 0;
    verify<T>(count, op, options, stream);
    trace_used_ = 0;
    tracing_ = std::exchange(trace_armed_, false);
    mark(-1, -1, encoded, stream);  // the call's start (index 0)
    const bool copy = send != recv && count > 0;
    if (n == 1 || count == 0) {
      if (copy) copy_values(recv, send, count, stream);
      return;
    }
    call_state<T> c{recv,    count,
                    op,      stream,
                    options, chunk_layout{count, chunks(options.algorithm, n), Codec::granule},
                    recv};
    prepare(c);
    // recv = send first; but the pipelined executor with a codec reads each slice of send
    // until recv holds it (encodes it, or reduces into recv from send): no copy.
    if (copy && pipelined(c) && !identity) {
      c.source = send;
      fresh_.assign(static_cast<std::size_t>(c.layout.parts) * static_cast<std::size_t>(slices_),
                    0);
    } else if (copy) {
      copy_values(recv, send, count, stream);
    }
    if (pipelined(c)) {
      run_pipelined(c);
    } else {
      const int total = steps(options.algorithm, n);
      for (int s = 0; s < total; ++s) {
        run_step(c, schedule_step(options.algorithm, transport_->rank(), n, s), s);
      }
    }
    if (side_used_) {  // the allgather's decodes
      side_done_.record(side_);
      SQUEEZE_CUDA_TRY(cudaStreamWaitEvent(stream, side_done_.get()));
      side_used_ = false;
    }
    // A codec that validates what it decodes (ibp) reports here, on every rank: the call
    // synchronizes and costs one max_all more.
    if constexpr (checked_codec<Codec>) report_faults(stream);
    // A host-progressed transport (MPI) posts the next call's first receive at once, into
    // a slot this call's last kernels may still read: such calls return complete, as
    // MPI_Allreduce does.
    if constexpr (!Transport::stream_ordered) SQUEEZE_CUDA_TRY(cudaStreamSynchronize(stream));
  }

  /// Times the next call: events at each step's (and slice's) encode, transfer and decode,
  /// read back by trace(). Costs nothing on calls that are not traced.
  void trace_next_call() noexcept { trace_armed_ = true; }
  /// The traced call's timeline, in order of step and slice (waits for the call's work).
  /// Empty when no call was traced since the last trace().
  [[nodiscard]] std::vector<step_trace> trace() {
    std::vector<step_trace> out;
    if (trace_used_ == 0) return out;
    const auto ms_since_start = [&](std::size_t i) {
      trace_events_[i].synchronize();
      float ms = 0;
      SQUEEZE_CUDA_TRY(cudaEventElapsedTime(&ms, trace_events_[0].get(), trace_events_[i].get()));
      return ms * 1000.0f;
    };
    for (std::size_t i = 1; i < trace_used_; ++i) {
      const trace_mark& m = trace_marks_[i];
      auto it = std::find_if(out.begin(), out.end(), [&](const step_trace& t) {
        return t.step == m.step && t.slice == m.slice;
      });
      if (it == out.end()) {
        const float none = std::numeric_limits<float>::quiet_NaN();
        out.push_back({m.step, m.slice, none, none, none});
        it = out.end() - 1;
      }
      const float us = ms_since_start(i);
      (m.what == 0 ? it->encoded_us : m.what == 1 ? it->arrived_us : it->consumed_us) = us;
    }
    std::sort(out.begin(), out.end(), [](const step_trace& a, const step_trace& b) {
      return a.step != b.step ? a.step < b.step : a.slice < b.slice;
    });
    trace_used_ = 0;
    return out;
  }

  /// The codec the messages go through.
  [[nodiscard]] Codec& codec() noexcept { return codec_; }
  /// The call signatures checked so far (what verification::first_call skips).
  [[nodiscard]] const agreed_calls& agreed() const noexcept { return agreed_; }
  /// The transport the steps go over.
  [[nodiscard]] Transport& transport() noexcept { return *transport_; }
  /// Bytes this rank sent in the last call (message sizes: the compression the wire saw).
  [[nodiscard]] std::size_t bytes_sent() const noexcept { return bytes_sent_; }

 private:
  static constexpr bool identity = is_identity_codec<Codec>;

  template <class T>
  struct call_state {
    T* data;
    std::size_t count;
    reduce_op op;
    cudaStream_t stream;
    allreduce_options options;
    chunk_layout layout;
    const T* source;  // data, or the send buffer while slices of data lack its values (fresh_)
  };

  // The pipelined executor runs where every transfer is stream-ordered and message sizes
  // are known in advance; the step-by-step one everywhere else (MPI, variable sizes, the
  // naive variant).
  template <class T>
  [[nodiscard]] static bool pipelined(const call_state<T>& c) noexcept {
    if constexpr (!Transport::stream_ordered) {
      return false;
    } else if constexpr (identity) {
      return true;
    } else {
      return Codec::fixed_size && c.options.collective;
    }
  }

  // ---- workspace ---------------------------------------------------------------------
  // Ring, collective: slot c holds chunk c's message (received, then re-encoded in place for
  // the next send, then in the allgather the received message that is forwarded).
  // Recursive doubling and the naive variant: slot 0 the message sent, slots 1 and 2 the
  // messages received, alternating by step. Raw codec: slots of raw chunks for receives that
  // are reduced. Naive variant: one raw chunk of scratch after the slots.
  template <class T>
  void prepare(call_state<T>& c) {
    const bool ring_slots = c.options.algorithm == algorithm::ring && c.options.collective;
    const int recv_slots = Transport::stream_ordered ? 1 : 2;
    // Slices (pipelined executor): a multiple of the granule each, at most max_slices.
    slices_ = 1;
    slice_values_ = c.layout.per_chunk;
    pairwise_ = false;
    if (pipelined(c)) {
      const std::size_t bytes = c.layout.per_chunk * sizeof(T);
      const std::size_t want = std::max<std::size_t>(c.options.slice_bytes, 1);
      slices_ = static_cast<int>(std::clamp<std::size_t>((bytes + want - 1) / want, 1, max_slices));
      slice_values_ = chunk_layout{c.layout.per_chunk, slices_, Codec::granule}.per_chunk;
    }
    std::size_t per_slot = 0;
    int slots_needed = 0;
    if constexpr (identity) {
      per_slot = detail::align16(c.layout.per_chunk * sizeof(T));
      slots_needed = recv_slots;
    } else {
      slice_message_bytes_ = detail::align16(Codec::template max_wire_bytes<T>(slice_values_));
      // the same on every rank: slice_message_bytes_ depends on the call alone
      if constexpr (gathering_transport<Transport>) {
        pairwise_ = pipelined(c) && transport_->size() == 2 &&
                    slice_message_bytes_ >= c.options.gather_bytes;
      }
      per_slot = pipelined(c)
                     ? slice_message_bytes_ * static_cast<std::size_t>(slices_)
                     : detail::align16(Codec::template max_wire_bytes<T>(c.layout.per_chunk));
      slots_needed = ring_slots ? c.layout.parts : 1 + recv_slots;
    }
    slot_bytes_ = per_slot;
    recv_slot_count_ = recv_slots;
    scratch_offset_ = per_slot * static_cast<std::size_t>(slots_needed);
    std::size_t need = scratch_offset_;
    if (!identity && !c.options.collective) need += detail::align16(c.layout.per_chunk * sizeof(T));
    if (workspace_.bytes() < need) {
      workspace_ = core::device_buffer<std::byte>{need};
      // Messages go out at their bound (max_wire_bytes), bytes that an encoder leaves
      // unwritten inside it included: zero them once so that no undefined byte is sent.
      workspace_.fill_bytes(0, c.stream);
    }
    slot_sizes_.assign(static_cast<std::size_t>(std::max(slots_needed, 1)), 0);
    if constexpr (!identity) {
      if constexpr (!Codec::fixed_size) {
        if (message_size_.size() == 0) {
          message_size_ = core::pinned_buffer<std::uint64_t>{1, core::host_memory::mapped};
        }
      }
    }
  }

  [[nodiscard]] std::byte* slot(int i) const noexcept {
    return workspace_.data() + static_cast<std::size_t>(i) * slot_bytes_;
  }
  template <class T>
  [[nodiscard]] T* scratch() const noexcept {
    return reinterpret_cast<T*>(workspace_.data() + scratch_offset_);
  }

  // ---- the pipelined executor (stream-ordered transports, fixed-size messages) -----------
  // Transfers run on a high-priority stream of their own (comm_), codec and reduction
  // kernels on the caller's stream, slice by slice: slice s of step i is sent once its
  // encoding is done (event ready(i, s)), and decoded, reduced and encoded for step i + 1
  // once it has arrived (event arrived(i, s)), while slices s + 1 ... of step i are still on
  // the wire. The next message of slice s depends only on slice s of this step's receive: in
  // the ring the chunk received is the chunk sent next, in recursive doubling the whole
  // buffer is. With one slice there is nothing to overlap, and the transfers run on the
  // caller's stream (no hops between streams).
  //
  // Two ranks with a gathering transport (pairwise_): every step of either schedule sends
  // one message to the other rank and receives one, so slice s of a step is one in-place
  // gather of a pair of messages, this rank's at position rank (see outgoing()).
  template <class T>
  void run_pipelined(call_state<T>& c) {
    const int n = transport_->size(), rank = transport_->rank();
    const int total = steps(c.options.algorithm, n);
    const int S = slices_;
    const bool overlap = S > 1;
    const cudaStream_t comm = overlap ? comm_.get() : c.stream;
    if (overlap) {
      ensure_events(static_cast<std::size_t>(total + 1) * static_cast<std::size_t>(S));
      fork_.record(c.stream);  // transfers start after everything before the call
      SQUEEZE_CUDA_TRY(cudaStreamWaitEvent(comm_, fork_.get()));
    }
    step_plan p = schedule_step(c.options.algorithm, rank, n, 0);
    for (int s = 0; s < S; ++s) {
      prepare_slice(c, p, s);
      // the mark first: the transfer, which waits for ready(), then arrives after it
      if (encodes(p)) mark(0, s, encoded, c.stream);
      if (overlap) ready(0, s).record(c.stream);
    }
    for (int i = 0; i < total; ++i) {
      const step_plan next =
          i + 1 < total ? schedule_step(c.options.algorithm, rank, n, i + 1) : step_plan{};
      for (int s = 0; s < S; ++s) {
        if (overlap) SQUEEZE_CUDA_TRY(cudaStreamWaitEvent(comm_, ready(i, s).get()));
        transfer_slice(c, p, s, comm);
        mark(i, s, arrived_mark, comm);
        if (overlap) {
          arrived(i, s).record(comm_);
          SQUEEZE_CUDA_TRY(cudaStreamWaitEvent(c.stream, arrived(i, s).get()));
        }
        consume_slice(c, p, s);
        if (p.receives()) mark(i, s, consumed, c.stream);
        prepare_slice(c, next, s);
        if (i + 1 < total && encodes(next)) mark(i + 1, s, encoded, c.stream);
        if (overlap) ready(i + 1, s).record(c.stream);
      }
      p = next;
    }
    if (c.source != c.data) {  // slices no step wrote (none, in these schedules)
      for (int k = 0; k < c.layout.parts; ++k) {
        for (int s = 0; s < S; ++s) {
          if (!holds(c, k, s)) {
            copy_values(slice_values(c, k, s), local_values(c, k, s), slice_size(c, k, s),
                        c.stream);
          }
        }
      }
      c.source = c.data;
    }
  }

  // Slice s of step p's messages on the wire, ordered on `comm`.
  template <class T>
  void transfer_slice(call_state<T>& c, const step_plan& p, int s, cudaStream_t comm) {
    if constexpr (gathering_transport<Transport> && !identity) {
      if (pairwise_) {
        SQUEEZE_EXPECTS(p.sends() && p.receives(),
                        "coll::allreducer: a step of two ranks sends and receives");
        transport_->gather_in_place(pair(s), slice_message_bytes_, comm);
        bytes_sent_ += slice_message_bytes_;
        return;
      }
    }
    transport_->begin(comm);
    if (p.receives()) {
      transport_->recv(incoming(c, p, s), slice_message_size(c, p.recv_chunk, s), p.recv_peer);
    }
    if (p.sends()) {
      const std::size_t bytes = slice_message_size(c, p.send_chunk, s);
      transport_->send(outgoing(c, p, s), bytes, p.send_peer);
      bytes_sent_ += bytes;
    }
    transport_->end();
  }

  // Slice s of chunk k: values [first, first + size) of the chunk.
  template <class T>
  [[nodiscard]] std::size_t slice_first(const call_state<T>& c, int k, int s) const noexcept {
    return std::min(static_cast<std::size_t>(s) * slice_values_, c.layout.size(k));
  }
  template <class T>
  [[nodiscard]] std::size_t slice_size(const call_state<T>& c, int k, int s) const noexcept {
    return slice_first(c, k, s + 1) - slice_first(c, k, s);
  }
  template <class T>
  [[nodiscard]] T* slice_values(call_state<T>& c, int k, int s) const noexcept {
    return chunk(c, k) + slice_first(c, k, s);
  }
  template <class T>
  [[nodiscard]] std::size_t slice_message_size(const call_state<T>& c, int k,
                                               int s) const noexcept {
    if constexpr (identity) {
      return slice_size(c, k, s) * sizeof(T);
    } else {
      return Codec::template max_wire_bytes<T>(slice_size(c, k, s));
    }
  }
  // Where slice s of a step's messages live: the ring keeps chunk k's message in slot k,
  // recursive doubling sends from slot 0 and receives into slot 1. Two ranks that gather
  // (pairwise_) keep slice s's pair of messages together, [rank 0's | rank 1's], and every
  // step sends this rank's position and receives the other's. The raw codec sends from the
  // buffer, receives replaced values into it and reduced ones into slot 0.
  [[nodiscard]] std::byte* message(int slot_index, int s) const noexcept {
    return slot(slot_index) + static_cast<std::size_t>(s) * slice_message_bytes_;
  }
  [[nodiscard]] std::byte* pair(int s) const noexcept {
    return workspace_.data() + 2 * static_cast<std::size_t>(s) * slice_message_bytes_;
  }
  template <class T>
  [[nodiscard]] void* outgoing(call_state<T>& c, const step_plan& p, int s) const noexcept {
    if constexpr (identity) {
      return slice_values(c, p.send_chunk, s);
    } else {
      if (pairwise_) return pair(s) + transport_->rank() * slice_message_bytes_;
      return message(c.options.algorithm == algorithm::ring ? p.send_chunk : 0, s);
    }
  }
  template <class T>
  [[nodiscard]] void* incoming(call_state<T>& c, const step_plan& p, int s) const noexcept {
    if constexpr (identity) {
      if (p.recv == on_receive::replace) return slice_values(c, p.recv_chunk, s);
      return reinterpret_cast<T*>(slot(0)) + slice_first(c, p.recv_chunk, s);
    } else {
      if (pairwise_) return pair(s) + (1 - transport_->rank()) * slice_message_bytes_;
      return message(c.options.algorithm == algorithm::ring ? p.recv_chunk : 1, s);
    }
  }

  // What arrived in slice s: reduced or decoded into the buffer.
  template <class T>
  void consume_slice(call_state<T>& c, const step_plan& p, int s) {
    if (!p.receives()) return;
    const std::size_t values = slice_size(c, p.recv_chunk, s);
    T* into = slice_values(c, p.recv_chunk, s);
    if constexpr (identity) {
      if (p.recv == on_receive::reduce) {
        detail::launch_reduce(into, static_cast<const T*>(incoming(c, p, s)), values, c.op,
                              c.stream);
      }
    } else {
      const auto* in = static_cast<const std::byte*>(incoming(c, p, s));
      const std::size_t bytes = Codec::template max_wire_bytes<T>(values);
      if (p.recv == on_receive::reduce && holds(c, p.recv_chunk, s)) {
        codec_.decode_reduce(in, bytes, values, into, c.op, c.stream);
      } else if (p.recv == on_receive::reduce) {  // into holds no values yet: from send
        const T* from = local_values(c, p.recv_chunk, s);
        if constexpr (decodes_reduce_from<Codec, T>) {
          codec_.decode_reduce(in, bytes, values, from, into, c.op, c.stream);
        } else {
          copy_values(into, from, values, c.stream);
          codec_.decode_reduce(in, bytes, values, into, c.op, c.stream);
        }
      } else {
        codec_.decode(in, bytes, values, into, c.stream);
      }
      hold(c, p.recv_chunk, s);
    }
  }

  // Slice s of the message step p sends from local values, and the round trip that keeps
  // the rank's values equal to what its peers decode.
  template <class T>
  void prepare_slice(call_state<T>& c, const step_plan& p, int s) {
    if constexpr (!identity) {
      if (!encodes(p)) return;
      const int k = p.send == send_source::local ? p.send_chunk : p.round_trip_chunk;
      const std::size_t values = slice_size(c, k, s);
      // A round trip without a send (recursive doubling's post-step) uses the place of the
      // outgoing message, which that step leaves free.
      std::byte* out = static_cast<std::byte*>(outgoing(c, p, s));
      codec_.encode(local_values(c, k, s), values, out, static_cast<std::uint64_t*>(nullptr),
                    c.stream);
      if (p.round_trip && !Codec::lossless) {
        codec_.decode(out, Codec::template max_wire_bytes<T>(values), values, slice_values(c, k, s),
                      c.stream);
        hold(c, k, s);
      }
    } else {
      static_cast<void>(c), static_cast<void>(p), static_cast<void>(s);
    }
  }

  // Out of place, slice s of chunk k of the buffer holds the caller's values once a step has
  // written it (a round trip, or what arrived reduced or decoded into it); until then they
  // are read from the send buffer.
  template <class T>
  [[nodiscard]] bool holds(const call_state<T>& c, int k, int s) const noexcept {
    return c.source == c.data || fresh_[static_cast<std::size_t>(k * slices_ + s)] != 0;
  }
  template <class T>
  void hold(const call_state<T>& c, int k, int s) noexcept {
    if (c.source != c.data) fresh_[static_cast<std::size_t>(k * slices_ + s)] = 1;
  }
  template <class T>
  [[nodiscard]] const T* local_values(call_state<T>& c, int k, int s) const noexcept {
    return holds(c, k, s) ? slice_values(c, k, s)
                          : c.source + c.layout.first(k) + slice_first(c, k, s);
  }

  template <class T>
  static void copy_values(T* to, const T* from, std::size_t n, cudaStream_t s) {
    if (n == 0) return;
    SQUEEZE_CUDA_TRY(cudaMemcpyAsync(to, from, n * sizeof(T), cudaMemcpyDeviceToDevice, s));
  }

  void ensure_events(std::size_t per_kind) {
    while (ready_.size() < per_kind) {
      ready_.emplace_back(cudaEventDisableTiming);
      arrived_.emplace_back(cudaEventDisableTiming);
    }
  }
  core::event& ready(int step, int s) {
    return ready_[static_cast<std::size_t>(step * slices_ + s)];
  }
  core::event& arrived(int step, int s) {
    return arrived_[static_cast<std::size_t>(step * slices_ + s)];
  }

  // ---- one step ----------------------------------------------------------------------
  template <class T>
  void run_step(call_state<T>& c, const step_plan& p, int step) {
    if constexpr (identity) {
      raw_step(c, p, step);
    } else if (c.options.collective) {
      collective_step(c, p, step);
    } else {
      naive_step(c, p, step);
    }
  }

  template <class T>
  [[nodiscard]] T* chunk(call_state<T>& c, int k) const noexcept {
    return c.data + c.layout.first(k);
  }

  // The raw codec: sends straight from the buffer, receives for a replace straight into it,
  // receives for a reduce into an alternating scratch chunk.
  template <class T>
  void raw_step(call_state<T>& c, const step_plan& p, int step) {
    std::byte* landing = slot(step % recv_slot_count_);
    transport_->begin(c.stream);
    if (p.receives()) {
      void* into = p.recv == on_receive::replace ? static_cast<void*>(chunk(c, p.recv_chunk))
                                                 : static_cast<void*>(landing);
      transport_->recv(into, c.layout.size(p.recv_chunk) * sizeof(T), p.recv_peer);
    }
    if (p.sends()) {
      const std::size_t bytes = c.layout.size(p.send_chunk) * sizeof(T);
      transport_->send(chunk(c, p.send_chunk), bytes, p.send_peer);
      bytes_sent_ += bytes;
    }
    transport_->end();
    mark(step, 0, arrived_mark, c.stream);
    if (p.recv == on_receive::reduce) {
      detail::launch_reduce(chunk(c, p.recv_chunk), reinterpret_cast<const T*>(landing),
                            c.layout.size(p.recv_chunk), c.op, c.stream);
      mark(step, 0, consumed, c.stream);
    }
  }

  // Collective-level compression (the file comment).
  template <class T>
  void collective_step(call_state<T>& c, const step_plan& p, int step) {
    const bool ring = c.options.algorithm == algorithm::ring;
    // Where this step's outgoing message is, and where the incoming one lands.
    const int out_slot = ring ? p.send_chunk : 0;
    const int in_slot = ring ? p.recv_chunk : 1 + step % recv_slot_count_;
    std::size_t send_bytes = 0;
    bool round_trip_pending = false;
    if (p.send == send_source::local) {
      send_bytes = encode(c, p.send_chunk, slot(out_slot));
      slot_sizes_[static_cast<std::size_t>(out_slot)] = send_bytes;
      round_trip_pending = p.round_trip;
    } else if (p.send == send_source::forward) {
      send_bytes = slot_sizes_[static_cast<std::size_t>(out_slot)];  // as it arrived
    } else if (p.round_trip && !Codec::lossless) {  // keeps its values as the others have them
      slot_sizes_[0] = encode(c, p.round_trip_chunk, slot(0));
      round_trip(c, p.round_trip_chunk, 0);
    }
    if (encodes(p)) mark(step, 0, encoded, c.stream);
    const std::size_t recv_bytes = incoming_bytes<T>(c, p, send_bytes);
    if (p.receives()) slot_sizes_[static_cast<std::size_t>(in_slot)] = recv_bytes;

    transport_->begin(c.stream);
    if (p.receives()) transport_->recv(slot(in_slot), recv_bytes, p.recv_peer);
    if (p.sends()) transport_->send(slot(out_slot), send_bytes, p.send_peer);
    transport_->end();
    bytes_sent_ += p.sends() ? send_bytes : 0;
    mark(step, 0, arrived_mark, c.stream);

    if (round_trip_pending) round_trip(c, p.send_chunk, out_slot);
    const std::size_t values = p.receives() ? c.layout.size(p.recv_chunk) : 0;
    if (p.recv == on_receive::reduce) {
      codec_.decode_reduce(slot(in_slot), recv_bytes, values, chunk(c, p.recv_chunk), c.op,
                           c.stream);
    } else if (p.recv == on_receive::replace) {
      if (ring) {  // off the path of the next send: the side stream
        fork_side(c.stream);
        codec_.decode(slot(in_slot), recv_bytes, values, chunk(c, p.recv_chunk), side_);
      } else {
        codec_.decode(slot(in_slot), recv_bytes, values, chunk(c, p.recv_chunk), c.stream);
      }
    }
    if (p.receives()) {
      mark(step, 0, consumed, p.recv == on_receive::replace && ring ? side_.get() : c.stream);
    }
  }

  // The naive variant: the codec lives inside each send and receive.
  template <class T>
  void naive_step(call_state<T>& c, const step_plan& p, int step) {
    const int in_slot = 1 + step % recv_slot_count_;
    std::size_t send_bytes = 0;
    if (p.sends()) {  // encode inside the send, and wait for it
      fork_side(c.stream);
      send_bytes = encode_on(c, p.send_chunk, slot(0), side_);
      SQUEEZE_CUDA_TRY(cudaStreamSynchronize(side_));
    }
    const std::size_t recv_bytes = incoming_bytes<T>(c, p, send_bytes);
    transport_->begin(c.stream);
    if (p.receives()) transport_->recv(slot(in_slot), recv_bytes, p.recv_peer);
    if (p.sends()) transport_->send(slot(0), send_bytes, p.send_peer);
    transport_->end();
    bytes_sent_ += p.sends() ? send_bytes : 0;
    if (!p.receives()) return;
    // decode inside the receive (side stream), wait, then reduce on the collective's stream
    const std::size_t values = c.layout.size(p.recv_chunk);
    fork_side(c.stream);
    T* into = p.recv == on_receive::replace ? chunk(c, p.recv_chunk) : scratch<T>();
    codec_.decode(slot(in_slot), recv_bytes, values, into, side_);
    SQUEEZE_CUDA_TRY(cudaStreamSynchronize(side_));
    if (p.recv == on_receive::reduce) {
      detail::launch_reduce(chunk(c, p.recv_chunk), scratch<T>(), values, c.op, c.stream);
    }
  }

  // ---- helpers -----------------------------------------------------------------------
  // Trace marks (trace_next_call): one timing event per mark, recorded only when tracing.
  static constexpr int encoded = 0, arrived_mark = 1, consumed = 2;
  struct trace_mark {
    int step, slice, what;
  };
  void mark(int step, int slice, int what, cudaStream_t s) {
    if (!tracing_) return;
    if (trace_used_ == trace_events_.size()) {
      trace_events_.emplace_back();
      trace_marks_.emplace_back();
    }
    trace_marks_[trace_used_] = {step, slice, what};
    trace_events_[trace_used_++].record(s);
  }
  // Whether step p encodes local values: for a message, or for a lossy codec's round trip.
  [[nodiscard]] static bool encodes(const step_plan& p) noexcept {
    return !identity && (p.send == send_source::local || (p.round_trip && !Codec::lossless));
  }

  template <class T>
  std::size_t encode(call_state<T>& c, int k, std::byte* out) {
    return encode_on(c, k, out, c.stream);
  }
  template <class T>
  std::size_t encode_on(call_state<T>& c, int k, std::byte* out, cudaStream_t s) {
    const std::size_t values = c.layout.size(k);
    if constexpr (Codec::fixed_size) {
      codec_.encode(chunk(c, k), values, out, static_cast<std::uint64_t*>(nullptr), s);
      return Codec::template max_wire_bytes<T>(values);
    } else {
      codec_.encode(chunk(c, k), values, out, message_size_.device_data(), s);
      SQUEEZE_CUDA_TRY(cudaStreamSynchronize(s));
      const std::uint64_t bytes = message_size_[0];
      SQUEEZE_EXPECTS(bytes <= Codec::template max_wire_bytes<T>(values),
                      std::string{"coll::allreducer: codec "} + Codec::name() + " wrote " +
                          std::to_string(bytes) + " bytes, more than its bound");
      return static_cast<std::size_t>(bytes);
    }
  }

  template <class T>
  void round_trip(call_state<T>& c, int k, int slot_index) {
    if constexpr (!Codec::lossless) {
      codec_.decode(slot(slot_index), slot_sizes_[static_cast<std::size_t>(slot_index)],
                    c.layout.size(k), chunk(c, k), c.stream);
    }
  }

  // The size of the message this step receives: known for fixed-size codecs, told by the
  // sender otherwise.
  template <class T>
  std::size_t incoming_bytes(call_state<T>& c, const step_plan& p, std::size_t send_bytes) {
    if constexpr (Codec::fixed_size) {
      static_cast<void>(send_bytes);
      return p.receives() ? Codec::template max_wire_bytes<T>(c.layout.size(p.recv_chunk)) : 0;
    } else {
      if (!p.sends() && !p.receives()) return 0;
      const std::uint64_t told = transport_->exchange_size(
          send_bytes, p.sends() ? p.send_peer : -1, p.receives() ? p.recv_peer : -1, c.stream);
      if (!p.receives()) return 0;
      const std::size_t bound = Codec::template max_wire_bytes<T>(c.layout.size(p.recv_chunk));
      if (told > bound) {
        throw format_error{"coll::allreducer: rank " + std::to_string(p.recv_peer) +
                           " announced a message of " + std::to_string(told) + " bytes for " +
                           std::to_string(c.layout.size(p.recv_chunk)) + " values; codec " +
                           Codec::name() + " never exceeds " + std::to_string(bound)};
      }
      return static_cast<std::size_t>(told);
    }
  }

  void fork_side(cudaStream_t stream) {
    fork_.record(stream);
    SQUEEZE_CUDA_TRY(cudaStreamWaitEvent(side_, fork_.get()));
    side_used_ = true;
  }

  template <class T>
  void verify(std::size_t count, reduce_op op, const allreduce_options& o, cudaStream_t stream) {
    const std::uint64_t desc = sizeof(T) | std::uint64_t(op) << 8 |
                               std::uint64_t(o.algorithm) << 16 | std::uint64_t(o.collective) << 24;
    const std::array<std::uint64_t, 5> mine{count, desc, detail::name_hash(Codec::name()),
                                            o.slice_bytes, o.gather_bytes};
    std::uint64_t largest = 0;
    const bool same = agreed_.agree(*transport_, mine, o.verify, stream, &largest);
    if (!same) {
      throw invalid_argument{"coll::allreducer: the ranks disagree on the call: rank " +
                             std::to_string(transport_->rank()) + " passed count " +
                             std::to_string(count) + ", " + std::to_string(sizeof(T)) +
                             "-byte values, op " + core::to_string(op) + ", " + name(o.algorithm) +
                             (o.collective ? "" : " (naive)") + ", codec " + Codec::name() +
                             ", slice_bytes " + std::to_string(o.slice_bytes) + ", gather_bytes " +
                             std::to_string(o.gather_bytes) + " (the largest count passed: " +
                             std::to_string(largest) + "); every rank must pass the same"};
    }
  }

  // Every rank's first decoder fault to every rank: (word << 32 | rank) under max picks the
  // largest word and, among the ranks that saw it, the highest.
  void report_faults(cudaStream_t stream) {
    const std::uint64_t word = codec_.take_fault(stream);
    std::array<std::uint64_t, 1> worst{
        word == 0 ? 0 : word << 32 | static_cast<std::uint32_t>(transport_->rank())};
    transport_->max_all(worst, stream);
    if (worst[0] == 0) return;
    const auto found = static_cast<std::uint32_t>(worst[0] >> 32);
    throw format_error{"coll::allreducer: rank " + std::to_string(worst[0] & 0xFFFFFFFFu) +
                       " received a corrupted message (codec " + Codec::name() + ", " +
                       std::string{Codec::describe_fault(found)} +
                       "); every rank throws this, and recv holds unspecified values"};
  }

  Transport* transport_;
  Codec codec_;
  core::device_buffer<std::byte> workspace_;
  std::size_t slot_bytes_ = 0;
  std::size_t scratch_offset_ = 0;
  int recv_slot_count_ = 1;
  std::vector<std::size_t> slot_sizes_;
  core::pinned_buffer<std::uint64_t> message_size_;
  core::stream side_;
  core::stream comm_{core::stream::greatest_priority()};  // the pipelined executor's transfers
  agreed_calls agreed_;
  bool pairwise_ = false;
  std::vector<core::event> ready_, arrived_;
  int slices_ = 1;
  std::size_t slice_values_ = 0;
  std::size_t slice_message_bytes_ = 0;
  core::event fork_{cudaEventDisableTiming};
  core::event side_done_{cudaEventDisableTiming};
  bool side_used_ = false;
  std::vector<std::uint8_t> fresh_;  // [chunk][slice]: holds(), out-of-place pipelined calls
  bool trace_armed_ = false, tracing_ = false;
  std::vector<core::event> trace_events_;  // [0]: the traced call's start
  std::vector<trace_mark> trace_marks_;
  std::size_t trace_used_ = 0;
  std::size_t bytes_sent_ = 0;
};

}  // namespace squeeze::coll
