// SPDX-License-Identifier: Apache-2.0
// squeeze/ibp/wire.cuh: IBP as a lossless, variable-size wire codec for collectives.
//
//   ibp::wire_codec codec;                            // owns a small device workspace
//   codec.encode(src, n, wire, size, s);              // wire: max_wire_bytes<T>(n) bytes;
//                                                     // *size (device-visible) = its length
//   codec.decode(wire, bytes, n, dst, s);             // dst[i] = value i
//   codec.decode_reduce(wire, bytes, n, dst, op, s);  // dst[i] = op(dst[i], value i)
//   codec.check(s);                                   // throws format_error if a decode
//                                                     // since the last check met bad input
//                                                     // (take_fault(s): the same, as a word)
//
// T is float or double. The message is ibp/wire_format.hpp's (rows of 512 B, one codebook,
// the best of eight thresholds, or the values raw when that would not be shorter), written
// bit for bit as ibp::wire_encode writes it, with no host round trip. Encoding is six
// kernels on the stream, three of which read the values:
//
//   count     per-bit-position counts over the rows          bit-sliced counters, summed
//                                                             per block; reads n·V
//   books     Mask and Bitval for the eight thresholds        one block per threshold
//   measure   each row's stored size under each codebook,     reads n·V once (a 16-byte
//             and the totals                                  load per lane; the codebooks
//                                                             in shared memory)
//   tiles     the winner: its codebook, sizes, raw bits into the message; tile sums;
//             compressed or raw
//   scan      tile sums -> bases                              core/detail/scan.cuh: one
//                                                             block up to 4095 tiles
//   encode    each row into the payload (or the values after  ibp's warp encoder; reads n·V,
//             the header); the header; *size                  writes the message
//
// Decoding is one pass: a warp per row reads the header (every warp checks it), its tile's
// sizes and bases, loads the stored row into shared memory and runs ibp's warp decoder
// (decode.cuh), writing the row to dst, or, for decode_reduce, to shared memory and then
// dst[i] = op(dst[i], v). Malformed input never leads a read outside [wire, wire + bytes)
// or a write outside dst[0, n): each fault is recorded (the first one wins) in a device
// word that check() reads.
//
// Workspace: the encoder's (41 KiB + 18.3 B per 512-byte row, and past 4095 tiles, 64 MiB
// of values, up to 8 KiB for the scan) grows on the stream it is called with
// (stream-ordered allocation, no synchronization), and is then reused: once warmed up (or
// after reserve()), encode and decode allocate nothing and never wait for the host. Encodes
// share the workspace, so encodes on different streams must not run at the same time (order
// them, or use one codec per stream); decodes share only the fault word and may run
// anywhere at once.
//
// This header meets coll::wire_codec_for by shape and includes nothing from coll::.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

#include "squeeze/core/arch.cuh"
#include "squeeze/core/bits.hpp"
#include "squeeze/core/config.hpp"
#include "squeeze/core/cuda_error.hpp"
#include "squeeze/core/detail/scan.cuh"
#include "squeeze/core/error.hpp"
#include "squeeze/core/launch.hpp"
#include "squeeze/core/reduce_op.hpp"
#include "squeeze/core/status.hpp"
#include "squeeze/ibp/compress.cuh"
#include "squeeze/ibp/decode.cuh"
#include "squeeze/ibp/detail/wire_kernels.cuh"
#include "squeeze/ibp/format.hpp"
#include "squeeze/ibp/wire_format.hpp"
#include "squeeze/xfer/bounds.hpp"
#include "squeeze/xfer/copy.cuh"

namespace squeeze::ibp {

/// IBP as a collective's codec (see the file comment). Move-only: it owns device memory,
/// on the device that was current when it was first used (one codec per device).
class wire_codec {
 public:
  static constexpr bool lossless = true;     ///< every value arrives as sent
  static constexpr bool fixed_size = false;  ///< a message's size depends on the data
  /// Chunks start on multiples of 32 values (128 or 256 bytes), so a chunk of an aligned
  /// buffer is 16-byte aligned and the kernels use vector loads and stores.
  static constexpr std::size_t granule = 32;
  /// "ibp".
  static const char* name() noexcept { return "ibp"; }

  /// The buffer encode needs for n values: the compressed layout with every row raw. The
  /// message it leaves there is never longer than 64 + n · sizeof(T) bytes.
  template <class T>
  static constexpr std::size_t max_wire_bytes(std::size_t n) noexcept {
    check_type<T>();
    return static_cast<std::size_t>(wire_max_bytes(n, sizeof(T)));
  }

  wire_codec() = default;

  /// Allocates the encoder's workspace for messages of up to max_values values of T and
  /// the decoders' fault word, and synchronizes `s` once: later calls then allocate
  /// nothing (up to that size) and may run on any stream.
  template <class T>
  void reserve(std::size_t max_values, cudaStream_t s) {
    check_type<T>();
    const wire_layout lay = wire_layout_for(max_values, sizeof(T));
    if (lay.rows > 0) reserve_workspace<T>(lay, s);
    fault_word(s);
    SQUEEZE_CUDA_TRY(cudaStreamSynchronize(s));
  }

  /// Writes the message of src[0, n) to wire (max_wire_bytes<T>(n) bytes, 16-byte aligned)
  /// and its length to *size (device-visible), ordered on s.
  template <class T>
  void encode(const T* src, std::size_t n, std::byte* wire, std::uint64_t* size, cudaStream_t s) {
    check_type<T>();
    SQUEEZE_EXPECTS(src != nullptr || n == 0, "ibp::wire_codec::encode: src is null");
    check_wire(wire, "encode");
    SQUEEZE_EXPECTS(size != nullptr, "ibp::wire_codec::encode: size is null");
    const wire_layout lay = wire_layout_for(n, sizeof(T));
    if (lay.rows == 0) {
      detail::wire_empty_kernel<T><<<1, 32, 0, s>>>(wire, size);
      SQUEEZE_CHECK_LAUNCH();
      return;
    }
    const detail::wire_workspace_ref ws = reserve_workspace<T>(lay, s);
    const auto* bytes = reinterpret_cast<const std::byte*>(src);
    const int sms = core::sm_count();

    // count: per-bit-position counts over the whole rows, then the short last row's bytes.
    SQUEEZE_CUDA_TRY(cudaMemsetAsync(ws.counts, 0,
                                     reinterpret_cast<std::byte*>(ws.totals + wire_candidates) -
                                         reinterpret_cast<std::byte*>(ws.counts),
                                     s));
    const std::uint64_t whole = lay.last_row_bytes == lay.row_bytes ? lay.rows : lay.rows - 1;
    constexpr int count_columns = wire_max_row_bytes / 4;  // a thread per 4-byte column ...
    constexpr int count_groups = 4;                        // ... and row group
    // Row slices for ~2 blocks (32 warps) per SM, at least 64 rows each: a slice's counts
    // leave the block once.
    const std::uint64_t per_slice = std::max<std::uint64_t>(
        64, core::div_ceil<std::uint64_t>(whole, static_cast<std::uint64_t>(sms) * 2));
    if (whole > 0) {
      detail::count_grouped_kernel<count_columns, count_groups>
          <<<static_cast<unsigned>(core::div_ceil(whole, per_slice)), count_columns * count_groups,
             0, s>>>(bytes, whole, lay.row_bytes, per_slice, ws.counts);
      SQUEEZE_CHECK_LAUNCH();
    }
    if (whole < lay.rows) {
      detail::count_kernel<count_columns><<<1, count_columns, 0, s>>>(
          bytes + whole * lay.row_bytes, 1, lay.last_row_bytes, 1, ws.counts);
      SQUEEZE_CHECK_LAUNCH();
    }
    // books, measure, tiles, scan, encode.
    detail::wire_books_kernel<T><<<wire_candidates, lay.row_bytes, 0, s>>>(lay, ws);
    SQUEEZE_CHECK_LAUNCH();
    const unsigned row_blocks = grid(lay.rows, sms);
    detail::wire_measure_kernel<T>
        <<<row_blocks, detail::wire_block_threads, 0, s>>>(bytes, lay, ws);
    SQUEEZE_CHECK_LAUNCH();
    detail::wire_tiles_kernel<T>
        <<<grid(lay.tiles, sms), detail::wire_block_threads, 0, s>>>(wire, lay, ws);
    SQUEEZE_CHECK_LAUNCH();
    core::detail::exclusive_sum(ws.scan, scan_capacity_, ws.tile_sums,
                                reinterpret_cast<std::uint64_t*>(wire + lay.bases), lay.tiles + 1,
                                s);
    detail::wire_encode_kernel<T>
        <<<row_blocks, detail::wire_block_threads, 0, s>>>(bytes, wire, lay, ws, size);
    SQUEEZE_CHECK_LAUNCH();
  }

  /// dst[i] = value i of the message at wire (16-byte aligned; `bytes` readable, of which
  /// the message may use fewer), which must hold n values of T. Problems go to check().
  template <class T>
  void decode(const std::byte* wire, std::size_t bytes, std::size_t n, T* dst, cudaStream_t s) {
    launch_decode<T, false>(wire, bytes, n, dst, core::reduce_op::sum, s, "decode");
  }

  /// dst[i] = core::apply(op, dst[i], value i), fused into the decoder.
  template <class T>
  void decode_reduce(const std::byte* wire, std::size_t bytes, std::size_t n, T* dst,
                     core::reduce_op op, cudaStream_t s) {
    launch_decode<T, true>(wire, bytes, n, dst, op, s, "decode_reduce");
  }

  /// Synchronizes s; throws squeeze::format_error if a decode ordered before it on s (since
  /// the last check) met a malformed or truncated message, and clears the record.
  void check(cudaStream_t s) {
    if (const std::uint32_t word = take_fault(s); word != 0) {
      throw format_error{
          std::string{"ibp::wire_codec: a message decoded since the last check is "} +
          describe_fault(word) + " (the values it should have written are unspecified)"};
    }
  }

  /// As check(), without throwing: synchronizes s and returns the first fault the decodes
  /// ordered before it on s recorded since the last call (0: none), clearing the record.
  /// A collective sends the word to every rank (coll::allreducer), so that all of them fail
  /// when one rank's decoder meets a corrupted message.
  [[nodiscard]] std::uint32_t take_fault(cudaStream_t s) {
    if (fault_.data() == nullptr) return 0;
    std::uint32_t word = 0;
    SQUEEZE_CUDA_TRY(cudaMemcpyAsync(&word, fault_.data(), sizeof word, cudaMemcpyDeviceToHost, s));
    SQUEEZE_CUDA_TRY(cudaStreamSynchronize(s));
    if (word != 0) SQUEEZE_CUDA_TRY(cudaMemsetAsync(fault_.data(), 0, sizeof word, s));
    return word;
  }

  /// What a nonzero take_fault() word means, in words ("corrupt data: ...").
  [[nodiscard]] static std::string describe_fault(std::uint32_t word) {
    const auto f = static_cast<wire_fault>(word >> 8);
    const auto st = static_cast<status>(word & 0xFFu);
    return std::string{to_string(st)} + ": " + to_string(f);
  }

 private:
  template <class T>
  static constexpr void check_type() {
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                  "ibp::wire_codec: values are float or double");
  }
  static void check_wire(const void* wire, const char* who) {
    SQUEEZE_EXPECTS(wire != nullptr, std::string{"ibp::wire_codec::"} + who + ": null message");
    SQUEEZE_EXPECTS(
        reinterpret_cast<std::uintptr_t>(wire) % 16 == 0,
        std::string{"ibp::wire_codec::"} + who + ": the message must start on a 16-byte boundary");
  }

  /// Blocks of 4 warps for `items` warp-sized items: ~16 blocks per SM at most.
  static unsigned grid(std::uint64_t items, int sms) {
    return core::grid_for(items, detail::wire_warps, std::size_t(sms) * 16);
  }

  /// The workspace for a message of `lay`'s rows (grown on s when too small). A template
  /// (on the values' type, as its callers), so that the scan's kernels are compiled only
  /// where a codec encodes.
  template <class T>
  detail::wire_workspace_ref reserve_workspace(const wire_layout& lay, cudaStream_t s) {
    const std::size_t scan_bytes =
        core::detail::scan_workspace_bytes<unsigned long long, std::uint64_t>(lay.tiles + 1);
    if (lay.rows > rows_capacity_ || scan_bytes > scan_capacity_) {
      rows_capacity_ = std::max(rows_capacity_, lay.rows);
      scan_capacity_ = std::max(scan_capacity_, scan_bytes);
    }
    const auto plan = detail::wire_workspace_plan::of(rows_capacity_, scan_capacity_);
    workspace_.reserve(plan.bytes, s);
    return plan.carve(workspace_.data(), rows_capacity_);
  }

  /// The decoders' fault word (allocated and zeroed on s the first time).
  std::uint32_t* fault_word(cudaStream_t s) {
    if (fault_.reserve(sizeof(std::uint32_t), s)) {
      SQUEEZE_CUDA_TRY(cudaMemsetAsync(fault_.data(), 0, sizeof(std::uint32_t), s));
    }
    return reinterpret_cast<std::uint32_t*>(fault_.data());
  }

  template <class T, bool Reduce>
  void launch_decode(const std::byte* wire, std::size_t bytes, std::size_t n, T* dst,
                     core::reduce_op op, cudaStream_t s, const char* who) {
    check_type<T>();
    check_wire(wire, who);
    SQUEEZE_EXPECTS(dst != nullptr || n == 0,
                    std::string{"ibp::wire_codec::"} + who + ": dst is null");
    std::uint32_t* fault = fault_word(s);
    const unsigned blocks = grid(wire_layout_for(n, sizeof(T)).rows, core::sm_count());
    detail::wire_decode_kernel<T, Reduce>
        <<<blocks, detail::wire_block_threads, 0, s>>>(wire, bytes, n, dst, op, fault);
    SQUEEZE_CHECK_LAUNCH();
  }

  detail::wire_memory workspace_;
  detail::wire_memory fault_;
  std::uint64_t rows_capacity_ = 0;
  std::size_t scan_capacity_ = 0;
};

}  // namespace squeeze::ibp
