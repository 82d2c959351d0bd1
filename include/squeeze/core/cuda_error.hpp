// SPDX-License-Identifier: Apache-2.0
// squeeze/core/cuda_error.hpp: SQUEEZE_CUDA_TRY, turning a failed CUDA runtime call
// into a squeeze::cuda_error that names the call, the error and the call site.
//
// Host-compilable: needs the CUDA runtime API header and libcudart, not nvcc.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "squeeze/core/error.hpp"

namespace squeeze::detail {

[[noreturn]] inline void throw_cuda_error(cudaError_t code, const char* call,
                                          const ::squeeze::source_location& where) {
  std::string message{call};
  message += " failed: ";
  message += cudaGetErrorName(code);
  message += " (";
  message += cudaGetErrorString(code);
  message += ')';
  throw cuda_error{static_cast<int>(code), std::move(message), where};
}

}  // namespace squeeze::detail

/// Evaluates a CUDA runtime call once; throws squeeze::cuda_error unless it returned
/// cudaSuccess. Also clears the sticky "last error" so a later check is not confused.
#define SQUEEZE_CUDA_TRY(call)                                                        \
  do {                                                                                \
    if (const cudaError_t squeeze_status_ = (call); squeeze_status_ != cudaSuccess) { \
      static_cast<void>(cudaGetLastError());                                          \
      ::squeeze::detail::throw_cuda_error(squeeze_status_, #call,                     \
                                          ::squeeze::source_location::current());           \
    }                                                                                 \
  } while (false)

/// Checks the launch just made on this thread (configuration errors such as too many
/// threads or too much shared memory surface here, not at the next synchronization).
#define SQUEEZE_CHECK_LAUNCH() SQUEEZE_CUDA_TRY(cudaGetLastError())
