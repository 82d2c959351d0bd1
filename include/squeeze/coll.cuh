// SPDX-License-Identifier: Apache-2.0
// squeeze/coll.cuh: compressed allreduce (schedules, the codec and transport concepts, the
// allreducer, the selector). The transports are separate, since they need their library:
// include squeeze/coll/nccl.hpp (link NCCL) or squeeze/coll/mpi.hpp (link MPI) as well.
#pragma once

#include "squeeze/coll/allreduce.cuh"
#include "squeeze/coll/codec.hpp"
#include "squeeze/coll/schedule.hpp"
#include "squeeze/coll/selector.cuh"
#include "squeeze/coll/transport.hpp"
