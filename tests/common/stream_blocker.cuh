// SPDX-License-Identifier: Apache-2.0
// tests/common/stream_blocker.cuh: a kernel that holds a stream of its own until the host
// lets it go, to show that a call waits for its own stream only. A call that synchronized the
// device or the legacy default stream would return only once the kernel gave up (at its
// deadline), and still_blocking() would then say false.
//
// Allocate what the calls under test need before building the blocker, and free it after
// release(): allocations and frees (cudaMalloc, cudaHostAlloc, cudaFree) may serialize with
// running kernels by themselves. Launch every kernel the calls under test launch once before
// too: with lazy module loading (CUDA's default) a kernel's first launch loads its code,
// which waits for the kernels already running (the blocker's included).
#pragma once

#include <squeeze/core/arch.cuh>
#include <squeeze/core/buffer.hpp>
#include <squeeze/core/config.hpp>
#include <squeeze/core/cuda_error.hpp>

#include <chrono>
#include <cstdint>

namespace squeeze::test {

/// One thread spins until *go is nonzero or `deadline_ns` passed, then sets *done.
template <int = 0>
SQUEEZE_KERNEL(32)
void block_until_released(const volatile int* go, volatile int* done, std::uint64_t deadline_ns) {
  const std::uint64_t start = core::arch::global_timer_ns();
  while (*go == 0 && core::arch::global_timer_ns() - start < deadline_ns) {
  }
  __threadfence_system();
  *done = 1;
}

class stream_blocker {
 public:
  /// Launches the kernel on a stream of its own; it runs until release() or `deadline`.
  explicit stream_blocker(std::chrono::seconds deadline) : flags_{2, core::host_memory::mapped} {
    flag(0) = 0;
    flag(1) = 0;
    block_until_released<<<1, 1, 0, stream_>>>(
        flags_.device_data(), flags_.device_data() + 1,
        static_cast<std::uint64_t>(std::chrono::nanoseconds{deadline}.count()));
    SQUEEZE_CHECK_LAUNCH();
  }
  stream_blocker(const stream_blocker&) = delete;
  stream_blocker& operator=(const stream_blocker&) = delete;
  ~stream_blocker() {
    flag(0) = 1;
    static_cast<void>(cudaStreamSynchronize(stream_));
  }

  /// Whether the kernel is still waiting for release().
  [[nodiscard]] bool still_blocking() const { return flag(1) == 0; }
  /// Lets the kernel go and waits for it.
  void release() {
    flag(0) = 1;
    stream_.synchronize();
  }

 private:
  volatile int& flag(int i) const { return static_cast<volatile int*>(flags_.data())[i]; }

  core::pinned_buffer<int> flags_;  // [go, done], mapped
  core::stream stream_;
};

}  // namespace squeeze::test
