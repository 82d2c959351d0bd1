// SPDX-License-Identifier: Apache-2.0
// squeeze/bam.cuh: arrays larger than the GPU behind a GPU software cache (bam::array over GPU
// memory, pinned host memory, a file, or a backing of yours, directly or behind the cache),
// the cache's state machine, graph traversals, and the submission/completion queues and host
// I/O service for file storage.
#pragma once

#include "squeeze/bam/array.cuh"
#include "squeeze/bam/backing.cuh"
#include "squeeze/bam/cache.cuh"
#include "squeeze/bam/cache_state.hpp"
#include "squeeze/bam/graph.cuh"
#include "squeeze/bam/graph_ref.cuh"
#include "squeeze/bam/io_service.hpp"
#include "squeeze/bam/queue.hpp"
