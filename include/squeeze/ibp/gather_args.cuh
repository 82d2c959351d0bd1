// SPDX-License-Identifier: Apache-2.0
// squeeze/ibp/gather_args.cuh: what an IBP gather reads and writes (gather_args: the
// compressed set, the indices, the output rows), its tuning (gather_policy), and the shared
// memory a block of its kernel needs. ibp::gather_rows (ibp/gather.cuh) and
// ibp::gather_cached (ibp/cache.cuh) take them.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>

#include "squeeze/core/config.hpp"
#include "squeeze/core/status.hpp"
#include "squeeze/ibp/dataset.hpp"
#include "squeeze/ibp/decode.cuh"
#include "squeeze/ibp/format.hpp"

namespace squeeze::ibp {

/// What a compressed gather reads and writes (ibp::gather_rows): plain parameters, passed by
/// value to the kernel.
template <class Index>
struct gather_args {
  void* dst = nullptr;                     ///< [count, dst_stride] device memory
  std::size_t dst_stride = 0;              ///< bytes between output rows, >= tensor_bytes
  layout kind = layout::condensed;         ///< how `data` holds the rows
  const std::byte* data = nullptr;         ///< stored rows, device-accessible
  std::uint64_t data_bytes = 0;            ///< bytes in data (in place: rows · tensor_bytes)
  const std::uint64_t* offsets = nullptr;  ///< condensed: [rows + 1], device-accessible
  const std::uint32_t* raw = nullptr;      ///< in place: raw-row bitmask, [ceil(rows / 32)]
  std::uint64_t rows = 0;                  ///< rows in the set
  const Index* indices = nullptr;          ///< [count], device-accessible
  std::size_t count = 0;                   ///< rows to gather
  codebook_ref codebook;                   ///< mask / bitval in device-accessible memory
  cluster_ref clusters;                    ///< clusters > 0: per-row codebooks instead
  status* status_out = nullptr;            ///< optional: the first error; untouched on success
};

/// The compressed gather's launch: its block, its occupancy bound and its decoder's tuning.
struct gather_policy {
  static constexpr int block_threads = 128;  ///< threads a block (4 warps, a row each)
  /// The kernel's occupancy bound (__launch_bounds__): 5 blocks of 4 warps per SM.
  static constexpr int min_blocks_per_sm = 5;
  using decode = decode_policy;  ///< the warp decoder's tuning
};

// (clang-format 14 mangles concept definitions)
// clang-format off
template <class P>
concept gather_policy_like = requires {
  { P::block_threads } -> std::convertible_to<int>;
  { P::min_blocks_per_sm } -> std::convertible_to<int>;
  typename P::decode;
} && (P::block_threads % warp_threads == 0) && decode_policy_like<typename P::decode>;
// clang-format on

/// Dynamic shared memory a block of the gather kernel needs.
template <gather_policy_like Policy = gather_policy>
constexpr std::size_t gather_shared_bytes() {
  return sizeof(typename warp_decoder<typename Policy::decode>::TempStorage) *
         (Policy::block_threads / warp_threads);
}

}  // namespace squeeze::ibp
