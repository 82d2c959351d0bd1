// SPDX-License-Identifier: Apache-2.0
// bench/common/l2_flush.hpp: writing twice the L2's size before a timed run, so that a
// benchmark whose input would fit the L2 (60 MB on an H200) measures the memory or link
// it is about, not the cache.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "squeeze/core/buffer.hpp"
#include "squeeze/core/device.hpp"

namespace squeeze::bench {

class l2_flusher {
 public:
  l2_flusher() : buffer_{2 * core::query_device().l2_bytes + 1} {}
  /// Enqueues the flush on `stream`.
  void flush(cudaStream_t stream) { buffer_.fill_bytes(0, stream); }

 private:
  core::device_buffer<std::byte> buffer_;  // [2 x L2 bytes]
};

}  // namespace squeeze::bench
