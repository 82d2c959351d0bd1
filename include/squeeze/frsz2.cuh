// SPDX-License-Identifier: Apache-2.0
// squeeze/frsz2.cuh: the FRSZ2 block-exponent codec (format and host reference, accessors,
// vector and tile reads, warp compression and decode, owning arrays in any storage) and
// compressed-basis GMRES; the fixed-rate wire codec for coll's allreduce.
#pragma once

#include "squeeze/frsz2/accessor.hpp"
#include "squeeze/frsz2/array.cuh"
#include "squeeze/frsz2/basis.cuh"
#include "squeeze/frsz2/cb_gmres.cuh"
#include "squeeze/frsz2/compress.cuh"
#include "squeeze/frsz2/csr.cuh"
#include "squeeze/frsz2/format.hpp"
#include "squeeze/frsz2/gmres_control.hpp"
#include "squeeze/frsz2/warp_codec.cuh"
#include "squeeze/frsz2/wire.cuh"
