// SPDX-License-Identifier: Apache-2.0
// squeeze/core/backoff.hpp: a bounded backoff for spin loops, host and device.
//
//   core::backoff wait;                      // or core::backoff wait{2048} for a longer cap
//   while (!ready()) wait.pause();
//
// Device: __nanosleep from 32 ns, doubling up to the cap (a fetch from GPU or host memory
// takes about 1-10 us; longer sleeps only add latency). Host: a few pause instructions, then
// std::this_thread::yield. The constants are not tuned by measurement yet.
#pragma once

#include <cstdint>
#include <thread>

#include "squeeze/core/config.hpp"

namespace squeeze::core {

/// A spin loop's wait: sleeps that double up to a cap on the device, spins then yields on
/// the host (see the top of this file).
class backoff {
 public:
  static constexpr std::uint32_t first_sleep_ns = 32;  ///< device: the first sleep
  static constexpr std::uint32_t host_spins = 64;      ///< host: pauses before yielding

  /// A backoff whose device sleeps stop doubling at max_sleep_ns.
  SQUEEZE_HOST_DEVICE explicit backoff(std::uint32_t max_sleep_ns = 1024) noexcept
      : max_sleep_ns_{max_sleep_ns} {}

  /// Waits a little, longer each call (up to the cap).
  SQUEEZE_HOST_DEVICE void pause() noexcept {
#if SQUEEZE_DEVICE_PASS
#if __CUDA_ARCH__ >= 700
    __nanosleep(sleep_ns_);
    if (sleep_ns_ < max_sleep_ns_) sleep_ns_ *= 2;
#endif
#else
    if (spins_ < host_spins) {
      ++spins_;
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#elif defined(__aarch64__)
      asm volatile("yield");
#endif
    } else {
      std::this_thread::yield();
    }
#endif
  }

 private:
  std::uint32_t max_sleep_ns_;
  std::uint32_t sleep_ns_ = first_sleep_ns;
  std::uint32_t spins_ = 0;
};

}  // namespace squeeze::core
