// SPDX-License-Identifier: Apache-2.0
// squeeze/core/tensor_map.hpp: TMA tensor maps (CUtensorMap) for row-major 2-D matrices.
//
// The driver's encoder is reached through the runtime (cudaGetDriverEntryPointByVersion),
// so nothing links libcuda. Host-only; the maps are passed to kernels as
// `const __grid_constant__ CUtensorMap`.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <mutex>
#include <string>

#include "squeeze/core/cuda_error.hpp"
#include "squeeze/core/error.hpp"

namespace squeeze::core {

namespace detail {
inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static PFN_cuTensorMapEncodeTiled_v12000 encode = nullptr;
  static std::once_flag once;
  std::call_once(once, [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    SQUEEZE_CUDA_TRY(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000,
                                                      cudaEnableDefault, &found));
    if (found != cudaDriverEntryPointSuccess || fn == nullptr) {
      throw cuda_error(cudaErrorNotSupported, "cuTensorMapEncodeTiled is not available");
    }
    encode = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  });
  return encode;
}
}  // namespace detail

/// A map over the row-major matrix at `base` (rows x cols elements of `type`, rows
/// `row_pitch_bytes` apart; base and pitch multiples of 16 bytes) that loads boxes of
/// box_rows x box_cols with the 128-byte swizzle (box_cols * element size must be 128).
/// Reads outside the matrix fill zeros.
inline CUtensorMap tensor_map_2d_swizzled(const void* base, CUtensorMapDataType type,
                                          std::uint64_t rows, std::uint64_t cols,
                                          std::uint64_t row_pitch_bytes, std::uint32_t box_rows,
                                          std::uint32_t box_cols) {
  SQUEEZE_EXPECTS(reinterpret_cast<std::uintptr_t>(base) % 16 == 0 && row_pitch_bytes % 16 == 0,
                  "tensor_map_2d_swizzled: base and row pitch must be multiples of 16 bytes");
  CUtensorMap map{};
  const cuuint64_t dims[2] = {cols, rows};
  const cuuint64_t strides[1] = {row_pitch_bytes};
  const cuuint32_t box[2] = {box_cols, box_rows};
  const cuuint32_t element_strides[2] = {1, 1};
  const CUresult r = detail::tensor_map_encoder()(
      &map, type, 2, const_cast<void*>(base), dims, strides, box, element_strides,
      CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    throw cuda_error(static_cast<int>(r), "cuTensorMapEncodeTiled failed with CUresult " +
                                              std::to_string(static_cast<int>(r)));
  }
  return map;
}

}  // namespace squeeze::core
