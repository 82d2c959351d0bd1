// SPDX-License-Identifier: Apache-2.0
// squeeze/squeeze.cuh: everything. Include the family headers instead to compile less.
#pragma once

#include "squeeze/bam.cuh"
#include "squeeze/coll.cuh"
#include "squeeze/core.hpp"
#include "squeeze/core/arch.cuh"
#include "squeeze/core/device_status.cuh"
#include "squeeze/core/report.cuh"
#include "squeeze/frsz2.cuh"
#include "squeeze/ibp.cuh"
#include "squeeze/io.hpp"
#include "squeeze/roast.cuh"
#include "squeeze/xfer.cuh"
