// SPDX-License-Identifier: Apache-2.0
// squeeze/ibp.cuh: invariant bit packing (format, host reference, clustered codebooks, GPU
// preprocessing and compression, the warp decoder, the compressed gather and cache, the
// wire codec for collectives).
#pragma once

#include "squeeze/ibp/cache.cuh"
#include "squeeze/ibp/cache_ref.cuh"
#include "squeeze/ibp/cluster.hpp"
#include "squeeze/ibp/compress.cuh"
#include "squeeze/ibp/dataset.hpp"
#include "squeeze/ibp/decode.cuh"
#include "squeeze/ibp/format.hpp"
#include "squeeze/ibp/gather.cuh"
#include "squeeze/ibp/gather_args.cuh"
#include "squeeze/ibp/wire.cuh"
#include "squeeze/ibp/wire_format.hpp"
