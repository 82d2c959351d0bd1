// SPDX-License-Identifier: Apache-2.0
// squeeze/core.hpp: the host-compilable part of core:: (config, errors, bit utilities,
// buffers, timing, device query). Device-only helpers are in core/arch.cuh.
#pragma once

#include "squeeze/core/arch_policy.hpp"
#include "squeeze/core/backoff.hpp"
#include "squeeze/core/bits.hpp"
#include "squeeze/core/buffer.hpp"
#include "squeeze/core/checked.hpp"
#include "squeeze/core/config.hpp"
#include "squeeze/core/cuda_error.hpp"
#include "squeeze/core/device.hpp"
#include "squeeze/core/error.hpp"
#include "squeeze/core/launch.hpp"
#include "squeeze/core/status.hpp"
#include "squeeze/core/timer.hpp"
