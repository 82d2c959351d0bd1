// SPDX-License-Identifier: Apache-2.0
#include <squeeze/squeeze.cuh>

#include <cstdint>

SQUEEZE_KERNEL(256) void consumer_gather(squeeze::xfer::gather_args<std::int64_t> args) {
  squeeze::xfer::warp_gather_rows(args, 0, 1);
}

void consumer_launch(const squeeze::xfer::gather_args<std::int32_t>& args, cudaStream_t stream) {
  squeeze::xfer::gather_rows(args, stream);
}
