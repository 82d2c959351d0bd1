// SPDX-License-Identifier: Apache-2.0
// squeeze/roast.cuh: ROAST tile-hashed parameter sharing (the mapping of a module's weights
// into one shared array M, ROAST-MM forward and backward on tensor cores, ROBE embedding
// lookups and bags). The tensor-core paths need the device pass built for sm_90a (CMake:
// squeeze_use_hopper_features(target)); elsewhere portable kernels compute the same result.
#pragma once

#include "squeeze/roast/fold.cuh"
#include "squeeze/roast/gemm.cuh"
#include "squeeze/roast/lookup.cuh"
#include "squeeze/roast/lookup.hpp"
#include "squeeze/roast/mapping.hpp"
