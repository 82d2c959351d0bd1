// SPDX-License-Identifier: Apache-2.0
// examples/custom_kernels/support.hpp: what the custom-kernel examples share: how they end
// on a machine without a GPU, how they report errors, and how they compare with the host.
#pragma once

#include <squeeze/core/buffer.hpp>
#include <squeeze/core/device.hpp>

#include <cmath>
#include <cstdio>
#include <exception>
#include <span>
#include <vector>

#include "common/gpu.hpp"

namespace custom_kernels {

/// Exit status of an example that found no usable GPU and ran nothing (common/gpu.hpp): CTest's
/// SKIP_RETURN_CODE (examples/custom_kernels/CMakeLists.txt), so such a run reports skipped.
inline constexpr int exit_no_gpu = squeeze_examples::exit_no_gpu;
/// Exit status of an example whose GPU result differs from the host reference.
inline constexpr int exit_mismatch = 1;
/// Exit status of an example that stopped on an error (a CUDA call, a bad argument).
inline constexpr int exit_error = 2;

/// Runs body() (which returns the program's exit status) when a GPU is there: without one
/// (cudaGetDeviceCount fails or finds none), says so on stderr and returns exit_no_gpu, as
/// every example does (squeeze_examples::exit_without_gpu). An exception is reported on stderr
/// as exit_error.
template <class Body>
int run(const char* program, Body&& body) {
  const auto presence = squeeze::core::detect_devices();
  if (!presence.present()) return squeeze_examples::exit_without_gpu(program, presence);
  try {
    return body();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    return exit_error;
  }
}

/// A device copy of `host`, ordered on `stream`.
template <class T>
squeeze::core::device_buffer<T> upload(const std::vector<T>& host, cudaStream_t stream) {
  squeeze::core::device_buffer<T> d{host.size()};
  d.copy_from(std::span<const T>{host}, stream);
  return d;
}

/// Whether |got - want| <= tolerance; prints the first few mismatches (counted in `bad`).
inline bool close_enough(double got, double want, double tolerance, long long index, int& bad) {
  if (std::abs(got - want) <= tolerance) return true;
  if (bad++ < 5) {
    std::printf("MISMATCH at %lld: got %.17g, want %.17g (tolerance %.3g)\n", index, got, want,
                tolerance);
  }
  return false;
}

/// The program's ending: a line with the verdict, and its exit status.
inline int verdict(const char* program, int bad, long long checked) {
  if (bad != 0) {
    std::printf("%s: %d of %lld values differ from the host reference\n", program, bad, checked);
    return exit_mismatch;
  }
  std::printf("%s: all %lld values match the host reference\n", program, checked);
  return 0;
}

}  // namespace custom_kernels
