// SPDX-License-Identifier: Apache-2.0
// squeeze/core/report.cuh: how kernels report a status to the host.
#pragma once

#include <cuda_runtime.h>

#include "squeeze/core/config.hpp"
#include "squeeze/core/status.hpp"

namespace squeeze::core {

/// Records `s` in *slot unless the slot is null, `s` is ok, or an earlier error is already
/// there: the first error wins, later ones are dropped (one atomicCAS).
SQUEEZE_DEVICE void report_status(status* slot, status s) {
  if (slot != nullptr && s != status::ok) {
    atomicCAS(reinterpret_cast<unsigned*>(slot), static_cast<unsigned>(status::ok),
              static_cast<unsigned>(s));
  }
}

}  // namespace squeeze::core
