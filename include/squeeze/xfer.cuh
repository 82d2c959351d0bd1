// SPDX-License-Identifier: Apache-2.0
// squeeze/xfer.cuh: the transfer layer (mapped memory, aligned copies, asynchronous
// loads into shared memory, row gather).
#pragma once

#include "squeeze/xfer/async.cuh"
#include "squeeze/xfer/bounds.hpp"
#include "squeeze/xfer/copy.cuh"
#include "squeeze/xfer/gather.cuh"
#include "squeeze/xfer/mapped_memory.hpp"
#include "squeeze/xfer/warp_gather.cuh"
