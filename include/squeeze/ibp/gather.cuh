// SPDX-License-Identifier: Apache-2.0
// squeeze/ibp/gather.cuh: batched gather of IBP-compressed rows by index, from mapped host
// memory or device memory into a device tensor, decompressing on the way.
//
//   dst[i, :] = decode(row indices[i])     dst: [count, dst_stride B], rows of tensor_bytes
//
// The rows come from a compressed set (ibp/dataset.hpp) in either layout:
//   condensed   stored rows back to back in `data`, row r in [offsets[r], offsets[r+1]);
//               a row as long as tensor_bytes is raw
//   in place    row r in its slot data + r · tensor_bytes, raw when bit r of `raw` is
//               set; a compressed row's length is read from its participation bits
// and with one codebook, or one per cluster (ibp/cluster.hpp: `clusters`).
// One warp decodes one row at a time on a persistent grid, through one workspace. Before
// decoding a row, the warp issues the loads of its next row into registers
// (warp_decoder::prefetch: its first decode_policy::prefetch_waves · 512 bytes), so they
// are on their way while it decodes; they land in the workspace after the decode.
//
// Bad input is reported, never followed: an index >= rows -> status::out_of_bounds, the
// output row untouched; offsets that are not monotone, leave `data` or exceed
// tensor_bytes, or a cluster id >= clusters -> status::corrupt, the row untouched; a
// stream that does not decode -> status::truncated or status::corrupt. The first status
// is written to status_out.
//
// The arguments and the policy are in ibp/gather_args.cuh, the kernel in ibp/detail/.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "squeeze/core/error.hpp"
#include "squeeze/ibp/dataset.hpp"
#include "squeeze/ibp/detail/gather_kernels.cuh"
#include "squeeze/ibp/format.hpp"
#include "squeeze/ibp/gather_args.cuh"

namespace squeeze::ibp {

/// The codebook rows of the set decode with (the first cluster's for clustered sets).
template <class Index>
codebook_ref row_codebook(const gather_args<Index>& a) {
  return a.clusters.clusters != 0 ? a.clusters.unchecked_book(0) : a.codebook;
}

/// Checks the set a gather reads (all but dst, indices and count); throws
/// squeeze::invalid_argument naming the bad field. `who` names the caller.
template <class Index>
void validate_set(const gather_args<Index>& a, const char* who) {
  if (a.clusters.clusters != 0) {
    const cluster_ref& c = a.clusters;
    SQUEEZE_EXPECTS(c.masks != nullptr && c.bitvals != nullptr,
                    std::string{who} + ": the clusters' masks or bitvals are null");
    SQUEEZE_EXPECTS(c.id_bits <= 32 && (c.id_bits == 0 || c.ids != nullptr),
                    std::string{who} + ": cluster ids are null or wider than 32 bits");
    SQUEEZE_EXPECTS(
        c.clusters == 1 || (c.id_bits > 0 && (std::uint64_t{1} << c.id_bits) >= c.clusters),
        std::string{who} + ": id_bits cannot name every cluster");
  } else {
    SQUEEZE_EXPECTS(a.codebook.mask != nullptr && a.codebook.bitval != nullptr,
                    std::string{who} + ": the codebook's mask or bitval is null");
  }
  const codebook_ref cb = row_codebook(a);
  SQUEEZE_EXPECTS(valid_chunk_bytes(cb.chunk_bytes),
                  std::string{who} + ": chunk_bytes must be 1, 2, 4 or 8");
  SQUEEZE_EXPECTS(cb.tensor_bytes > 0, std::string{who} + ": tensor_bytes must be positive");
  SQUEEZE_EXPECTS(a.data != nullptr || a.data_bytes == 0, std::string{who} + ": data is null");
  if (a.kind == layout::in_place) {
    SQUEEZE_EXPECTS(a.raw != nullptr || a.rows == 0,
                    std::string{who} + ": an in-place set needs its raw bitmask");
    SQUEEZE_EXPECTS(a.data_bytes / cb.tensor_bytes >= a.rows,
                    std::string{who} + ": an in-place set of " + std::to_string(a.rows) +
                        " rows of " + std::to_string(cb.tensor_bytes) + " B needs " +
                        std::to_string(a.rows * cb.tensor_bytes) + " data bytes, has " +
                        std::to_string(a.data_bytes));
  } else {
    SQUEEZE_EXPECTS(a.offsets != nullptr, std::string{who} + ": offsets is null");
  }
}

/// Checks a gather's arguments; throws squeeze::invalid_argument naming the bad one.
template <class Index>
void validate(const gather_args<Index>& a) {
  if (a.count == 0) return;
  SQUEEZE_EXPECTS(a.dst != nullptr, "ibp::gather_rows: dst is null");
  SQUEEZE_EXPECTS(a.indices != nullptr, "ibp::gather_rows: indices is null");
  validate_set(a, "ibp::gather_rows");
  SQUEEZE_EXPECTS(a.dst_stride >= row_codebook(a).tensor_bytes,
                  "ibp::gather_rows: dst_stride must be at least tensor_bytes");
}

/// Gathers and decodes a.count rows on `stream` (asynchronous; read a.status_out after
/// synchronizing). Rows of any length: those longer than Policy::decode::workspace_bytes
/// are streamed through the workspace.
template <gather_policy_like Policy = gather_policy, class Index>
requires std::is_integral_v<Index>
void gather_rows(const gather_args<Index>& a, cudaStream_t stream) {
  validate(a);
  if (a.count == 0) return;
  detail::with_kernel_shape<Policy>(row_codebook(a), [&](auto streaming, auto chunk) {
    detail::launch_persistent<Policy, detail::gather_kernel<Policy, decltype(streaming)::value,
                                                            decltype(chunk)::value, Index>>(
        a, a.count, stream);
  });
}

}  // namespace squeeze::ibp
