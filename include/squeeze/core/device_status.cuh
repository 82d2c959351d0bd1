// SPDX-License-Identifier: Apache-2.0
// squeeze/core/device_status.cuh: core::device_status, the owner of one status word in GPU
// memory that kernels report to (first error wins), read back and turned into the matching
// exception on a stream you name.
//
//   core::device_status st{stream};                 // the word, zeroed on `stream`
//   kernel<<<grid, block, 0, stream>>>(..., st.data());
//                                                   // in the kernel: core::report_status(p, s)
//   st.check(stream, "my_op");                      // throws what a kernel reported, if any
//
// Every call is ordered on the stream it is given and waits for nothing else: construction
// and reset() zero the word on it, peek() and check() copy the word back on it and
// synchronize that stream only (never the device, never the legacy default stream). So they
// see what the kernels ordered before them on that stream reported; a kernel on another
// stream must be ordered before them (an event), and kernels that report must be ordered
// after the construction (or reset) on its stream.
//
// Host owners whose kernels report a status hold one (bam::array); kernels and argument
// structs take data(), a plain `status*`. Not thread-safe: one host thread at a time, like
// the other owners.
#pragma once

#include <cuda_runtime.h>

#include <string>
#include <string_view>

#include "squeeze/core/buffer.hpp"
#include "squeeze/core/cuda_error.hpp"
#include "squeeze/core/error.hpp"
#include "squeeze/core/report.cuh"
#include "squeeze/core/status.hpp"

namespace squeeze::core {

static_assert(sizeof(status) == sizeof(unsigned),
              "core::report_status updates a status word with a 32-bit atomicCAS");

/// One status word in GPU memory (first error wins) and a pinned host word to read it into.
/// Move-only; a moved-from device_status is empty: data() is null (report_status ignores a
/// null word), peek() says ok, check() and reset() do nothing.
class device_status {
 public:
  /// Allocates the word and zeroes it (status::ok) on `stream`. Throws cuda_error when the
  /// memory cannot be had.
  explicit device_status(cudaStream_t stream) : word_{1}, host_{1} { reset(stream); }

  /// Takes other's word; other is left empty.
  device_status(device_status&&) noexcept = default;
  /// Frees this word and takes other's.
  device_status& operator=(device_status&&) noexcept = default;
  device_status(const device_status&) = delete;
  device_status& operator=(const device_status&) = delete;
  ~device_status() = default;

  /// The word, for kernels (core::report_status) and argument structs.
  [[nodiscard]] status* data() const noexcept { return word_.data(); }

  /// The first status reported by the kernels ordered before this call on `stream` (since
  /// construction or the last reset), without clearing it. Copies the word on `stream` and
  /// synchronizes `stream`.
  [[nodiscard]] status peek(cudaStream_t stream) const {
    if (word_.empty()) return status::ok;
    SQUEEZE_CUDA_TRY(cudaMemcpyAsync(host_.data(), word_.data(), sizeof(status),
                                     cudaMemcpyDeviceToHost, stream));
    SQUEEZE_CUDA_TRY(cudaStreamSynchronize(stream));
    return *host_.data();
  }

  /// peek(stream); when a kernel reported an error, resets the word to ok on `stream` and
  /// throws the squeeze::error subclass that matches the status (throw_if_error: e.g.
  /// out_of_bounds -> invalid_argument, io_error -> io_error), its message
  /// "<what>: a kernel reported <status>", raised at the caller's line.
  void check(cudaStream_t stream, std::string_view what,
             const source_location& where = source_location::current()) {
    const status s = peek(stream);
    if (s == status::ok) return;
    reset(stream);
    throw_if_error(s, std::string{what} + ": a kernel reported " + to_string(s), where);
  }

  /// Sets the word back to status::ok on `stream` (asynchronous).
  void reset(cudaStream_t stream) {
    if (!word_.empty()) word_.fill_bytes(0, stream);
  }

 private:
  device_buffer<status> word_;  // [1], GPU memory
  pinned_buffer<status> host_;  // [1], page-locked: what peek() copies the word into
};

}  // namespace squeeze::core
