// SPDX-License-Identifier: Apache-2.0
// squeeze/core/device.hpp: is there a GPU, and what is it?
//
// detect_devices() never throws: tests, examples, benches and the tour call it to decide
// between running and reporting "skipped". Without a GPU, device_presence::message() is the
// line to show the user, the same everywhere:
//   "no NVIDIA GPU or driver found (cudaErrorInsufficientDriver: no NVIDIA driver is installed)"
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "squeeze/core/cuda_error.hpp"

namespace squeeze::core {

struct device_presence {
  int count = 0;                    ///< CUDA devices visible to this process
  cudaError_t error = cudaSuccess;  ///< what cudaGetDeviceCount returned
  /// Why there are none: the CUDA error's name and what it means here, e.g.
  /// "cudaErrorNoDevice: the NVIDIA driver finds no GPU"; empty when count > 0.
  std::string reason;
  [[nodiscard]] bool present() const noexcept { return count > 0; }
  /// The line to show the user when there is none: "no NVIDIA GPU or driver found (<reason>)";
  /// empty when count > 0.
  [[nodiscard]] std::string message() const {
    return present() ? std::string{} : "no NVIDIA GPU or driver found (" + reason + ")";
  }
};

namespace detail {

/// "<major>.<minor>" of a CUDA version number as the runtime reports it (12020: "12.2").
inline std::string cuda_version_text(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

/// device_presence::reason for cudaGetDeviceCount's result `e` and `count`. `driver` is
/// cudaDriverGetVersion's (0: no driver installed), `runtime` cudaRuntimeGetVersion's, and
/// `visible` the value of CUDA_VISIBLE_DEVICES (null when unset).
inline std::string absence_reason(cudaError_t e, int count, int driver, int runtime,
                                  const char* visible) {
  const std::string name =
      e == cudaSuccess ? std::string{} : cudaGetErrorName(e) + std::string{": "};
  const std::string among =
      visible != nullptr ? std::string{" among CUDA_VISIBLE_DEVICES=\""} + visible + '"' : "";
  switch (e) {
    case cudaSuccess: return count > 0 ? std::string{} : "the NVIDIA driver finds no GPU" + among;
    case cudaErrorNoDevice: return name + "the NVIDIA driver finds no GPU" + among;
    case cudaErrorInsufficientDriver:
      if (driver == 0) return name + "no NVIDIA driver is installed";
      return name + "the NVIDIA driver supports CUDA " + cuda_version_text(driver) +
             ", this program needs " + cuda_version_text(runtime) + " or newer";
    case cudaErrorStubLibrary:
      return name + "only CUDA's stub driver library was found, no NVIDIA driver";
    default: return name + cudaGetErrorString(e);
  }
}

}  // namespace detail

/// Counts the visible CUDA devices. Never throws.
inline device_presence detect_devices() noexcept {
  device_presence p;
  try {
    int count = 0;
    p.error = cudaGetDeviceCount(&count);
    if (p.error != cudaSuccess) {
      static_cast<void>(cudaGetLastError());
      count = 0;
    }
    p.count = count;
    if (count > 0) return p;
    int driver = 0;
    int runtime = 0;
    if (cudaDriverGetVersion(&driver) != cudaSuccess) driver = 0;
    if (cudaRuntimeGetVersion(&runtime) != cudaSuccess) runtime = CUDART_VERSION;
    static_cast<void>(cudaGetLastError());
    p.reason = detail::absence_reason(p.error, count, driver, runtime,
                                      std::getenv("CUDA_VISIBLE_DEVICES"));
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
