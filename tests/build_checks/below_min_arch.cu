// Compiled for an architecture below squeeze's minimum by the test build.min_arch_is_enforced:
// the build must stop with squeeze's own message, not with an undefined intrinsic.
#include <squeeze/core/config.hpp>

__global__ void kernel(int* out) { *out = 1; }
