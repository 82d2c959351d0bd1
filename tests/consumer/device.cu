// SPDX-License-Identifier: Apache-2.0
// The .cuh headers through nvcc, as a consumer's kernel uses them (compiled, not run: CI has
// no GPU). The checks here are the compiler's: the calls below must compile, and the
// static_asserts state what a kernel relies on.
#include <squeeze/squeeze.cuh>

#include <cstdint>
#include <type_traits>

static_assert(std::is_trivially_copyable_v<squeeze::xfer::gather_args<std::int64_t>>,
              "argument structs are passed to kernels by value");
static_assert(squeeze::xfer::gather_policy_like<squeeze::xfer::gather_policy>);
static_assert(squeeze::roast::hopper_gemm_tuning<squeeze::roast::hopper_gemm_policy>);
static_assert(squeeze::core::compiled_arch == 0 || squeeze::core::compiled_arch >= 80,
              "squeeze builds for sm_80 or newer");

SQUEEZE_KERNEL(256) void consumer_gather(squeeze::xfer::gather_args<std::int64_t> args) {
  squeeze::xfer::warp_gather_rows(args, 0, 1);
}

void consumer_launch(const squeeze::xfer::gather_args<std::int32_t>& args, cudaStream_t stream) {
  squeeze::xfer::gather_rows(args, stream);
}
