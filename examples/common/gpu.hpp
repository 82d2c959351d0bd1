// SPDX-License-Identifier: Apache-2.0
// examples/common/gpu.hpp: how every example ends on a machine without a usable GPU.
//
// It prints, on stderr,
//   <program>: no NVIDIA GPU or driver found (<CUDA error>: <what it means>); nothing ran
// (the wording is core::device_presence::message(), shared with the benches and the tour)
// and exits with 77, which CTest reads as "skipped" where a test sets SKIP_RETURN_CODE 77,
// and which a script sees as a failure: no example exits 0 without having run.
//
//   const auto presence = core::detect_devices();
//   if (!presence.present()) return squeeze_examples::exit_without_gpu("my_example", presence);
#pragma once

#include <squeeze/core/device.hpp>

#include <cstdio>

namespace squeeze_examples {

/// Exit status of an example that found no usable GPU and ran nothing: the SKIP_RETURN_CODE of
/// the examples registered as CTest tests, so such a run reports skipped.
inline constexpr int exit_no_gpu = 77;

/// Says on stderr that `program` found no GPU and ran nothing (presence.message(), the same
/// wording as the benches and the tour); returns exit_no_gpu, the status to exit with.
inline int exit_without_gpu(const char* program, const squeeze::core::device_presence& presence) {
  std::fprintf(stderr, "%s: %s; nothing ran\n", program, presence.message().c_str());
  return exit_no_gpu;
}

}  // namespace squeeze_examples
