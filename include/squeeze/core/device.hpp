// squeeze/core/device.hpp: is there a GPU, and what is it?
//
// detect_devices() never throws: tests, benches and the tour call it to decide between
// running and reporting "skipped" with the reason the CUDA runtime gave.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdio>
#include <string>

#include "squeeze/core/cuda_error.hpp"

namespace squeeze::core {

struct device_presence {
  int count = 0;       ///< CUDA devices visible to this process
  std::string reason;  ///< why there are none, from the CUDA runtime; empty when count > 0
  [[nodiscard]] bool present() const noexcept { return count > 0; }
};

/// Counts the visible CUDA devices. Never throws.
inline device_presence detect_devices() noexcept {
  device_presence p;
  try {
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
      static_cast<void>(cudaGetLastError());
      p.reason = std::string{cudaGetErrorName(e)} + ": " + cudaGetErrorString(e);
      return p;
    }
    p.count = count;
    if (count == 0) p.reason = "no CUDA device is visible";
  } catch (...) {
    p.count = 0;
    p.reason = "out of memory while querying CUDA devices";
  }
  return p;
}

struct device_info {
  int ordinal = 0;
  std::string name;
  int cc_major = 0;
  int cc_minor = 0;
  int sm_count = 0;
  std::size_t global_memory_bytes = 0;
  std::size_t l2_bytes = 0;
  std::size_t shared_memory_per_block_optin = 0;  ///< after cudaFuncSetAttribute
  int max_threads_per_sm = 0;
  int pci_bus = 0;
  int pci_device = 0;
  bool can_map_host_memory = false;
  bool unified_addressing = false;
  bool pageable_memory_access = false;  ///< kernels may read ordinary malloc'd host memory

  [[nodiscard]] int compute_capability() const noexcept { return cc_major * 10 + cc_minor; }
};

/// Properties of device `ordinal` (the current device when negative).
inline device_info query_device(int ordinal = -1) {
  if (ordinal < 0) SQUEEZE_CUDA_TRY(cudaGetDevice(&ordinal));
  cudaDeviceProp prop{};
  SQUEEZE_CUDA_TRY(cudaGetDeviceProperties(&prop, ordinal));
  device_info info;
  info.ordinal = ordinal;
  info.name = prop.name;
  info.cc_major = prop.major;
  info.cc_minor = prop.minor;
  info.sm_count = prop.multiProcessorCount;
  info.global_memory_bytes = prop.totalGlobalMem;
  info.l2_bytes = static_cast<std::size_t>(prop.l2CacheSize);
  info.shared_memory_per_block_optin = prop.sharedMemPerBlockOptin;
  info.max_threads_per_sm = prop.maxThreadsPerMultiProcessor;
  info.pci_bus = prop.pciBusID;
  info.pci_device = prop.pciDeviceID;
  info.can_map_host_memory = prop.canMapHostMemory != 0;
  info.unified_addressing = prop.unifiedAddressing != 0;
  info.pageable_memory_access = prop.pageableMemoryAccess != 0;
  return info;
}

/// One line, e.g. "NVIDIA H200 (sm_90, 132 SMs, 139.8 GiB, L2 60.0 MiB)".
inline std::string describe(const device_info& d) {
  const auto gib = static_cast<double>(d.global_memory_bytes) / (1024.0 * 1024.0 * 1024.0);
  const auto l2_mib = static_cast<double>(d.l2_bytes) / (1024.0 * 1024.0);
  char numbers[128];
  std::snprintf(numbers, sizeof numbers, " (sm_%d%d, %d SMs, %.1f GiB, L2 %.1f MiB)", d.cc_major,
                d.cc_minor, d.sm_count, gib, l2_mib);
  return d.name + numbers;
}

/// Makes `device` the current device for its lifetime, then restores the one before.
class device_scope {
 public:
  explicit device_scope(int device) {
    SQUEEZE_CUDA_TRY(cudaGetDevice(&saved_));
    if (device != saved_) SQUEEZE_CUDA_TRY(cudaSetDevice(device));
  }
  ~device_scope() { static_cast<void>(cudaSetDevice(saved_)); }
  device_scope(const device_scope&) = delete;
  device_scope& operator=(const device_scope&) = delete;

 private:
  int saved_ = 0;
};

}  // namespace squeeze::core
