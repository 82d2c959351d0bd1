// SPDX-License-Identifier: Apache-2.0
#include <squeeze/core.hpp>
#include <squeeze/xfer/mapped_memory.hpp>

#include <cstdio>

bool report_transports();  // comm.cpp

int main() {
  static_assert(squeeze::core::popcount(0xF0F0u) == 8);
  if (!report_transports()) return 1;
  const auto presence = squeeze::core::detect_devices();
  std::printf("consumer ok: squeeze %d.%d.%d, %d CUDA device(s)\n", SQUEEZE_VERSION_MAJOR,
              SQUEEZE_VERSION_MINOR, SQUEEZE_VERSION_PATCH, presence.count);
  return 0;
}
