// SPDX-License-Identifier: Apache-2.0
// squeeze/ibp/compress.cuh: preprocessing and compression on the GPU.
//
//   counts = ibp::count_set_bits(rows, n, L, stream)        per-bit-position counters
//   sizes  = ibp::stored_sizes(rows, n, codebook, stream)   exact stored bytes per row
//   set    = ibp::compress_condensed(rows, n, codebook, stream)
//
// `rows` is [n, L] in any device-accessible memory: device memory, or mapped host memory
// for data sets larger than the GPU (read once per pass, 128 bytes per warp load). Every
// result is bit-identical to the host reference in ibp/dataset.hpp, which the tests check.
//
// Compression runs in two passes, as in Kamath et al., EuroSys 2026: exact stored sizes (warp
// per row, warp reduction), a prefix sum of them for the offsets (core/detail/scan.cuh: one
// launch up to 4096 rows), then warp-per-row encoding:
// lanes own 16 / C consecutive chunks, a warp scan of their payload lengths gives each
// field's bit offset, and fields are OR-ed into a zeroed shared-memory copy of the row
// (fields of neighbouring lanes share words) before the warp writes the row out.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>
#include <vector>

#include "squeeze/core/arch.cuh"
#include "squeeze/core/bits.hpp"
#include "squeeze/core/buffer.hpp"
#include "squeeze/core/config.hpp"
#include "squeeze/core/cuda_error.hpp"
#include "squeeze/core/detail/scan.cuh"
#include "squeeze/core/launch.hpp"
#include "squeeze/ibp/dataset.hpp"
#include "squeeze/ibp/decode.cuh"
#include "squeeze/ibp/detail/compress_kernels.cuh"
#include "squeeze/ibp/format.hpp"
#include "squeeze/xfer/async.cuh"
#include "squeeze/xfer/bounds.hpp"
#include "squeeze/xfer/copy.cuh"

namespace squeeze::ibp {

/// Longest stored row compress_condensed encodes in shared memory; longer ones are
/// encoded with atomics straight into the (zeroed) output.
inline constexpr std::uint32_t compress_workspace_bytes = 4096;

/// The tunables of IBP's preprocessing and compression (count_set_bits, stored_sizes,
/// sweep_threshold_on_gpu, compress_condensed take it as their template argument; pass a
/// struct with the same members to change them). Being templates, those functions compile
/// their kernels only in the translation units that call them.
struct compress_policy {
  /// Longest stored row encoded in shared memory (compress_workspace_bytes).
  static constexpr std::uint32_t workspace_bytes = compress_workspace_bytes;
  /// count_set_bits: row slices for about this many waves of 8 blocks per SM ...
  static constexpr std::size_t count_waves = 4;
  /// ... of at least this many rows each.
  static constexpr std::size_t count_min_slice_rows = 64;
};

/// A policy with compress_policy's members.
template <class P>
concept compress_policy_like = requires {
  { P::workspace_bytes } -> std::convertible_to<std::uint32_t>;
  { P::count_waves } -> std::convertible_to<std::size_t>;
  { P::count_min_slice_rows } -> std::convertible_to<std::size_t>;
}
&&P::workspace_bytes % 4 == 0 && P::workspace_bytes > 0 && P::count_waves > 0;

/// Per-bit-position counters of n rows of row_bytes: [8 * row_bytes], host vector (the
/// threshold sweep runs on the host over these few kilobytes).
template <compress_policy_like Policy = compress_policy>
std::vector<std::uint64_t> count_set_bits(const std::byte* rows, std::size_t n,
                                          std::uint32_t row_bytes, cudaStream_t stream) {
  SQUEEZE_EXPECTS(row_bytes > 0, "ibp::count_set_bits: row_bytes must be positive");
  SQUEEZE_EXPECTS(rows != nullptr || n == 0, "ibp::count_set_bits: rows is null");
  core::device_buffer<unsigned long long> counts{8 * std::size_t{row_bytes}, stream};
  SQUEEZE_CUDA_TRY(cudaMemsetAsync(counts.data(), 0, counts.bytes(), stream));
  if (n > 0) {
    const std::uint32_t columns = (row_bytes + 3) / 4;
    const dim3 block{256};
    // Enough row slices for ~count_waves waves of 8 blocks per SM, at least
    // count_min_slice_rows rows each.
    const int sms = core::sm_count();
    const std::size_t slices_wanted =
        std::max<std::size_t>(1, static_cast<std::size_t>(sms) * 8 * Policy::count_waves /
                                     core::div_ceil<std::uint32_t>(columns, 256));
    const std::size_t rows_per_slice =
        std::max<std::size_t>(Policy::count_min_slice_rows, core::div_ceil(n, slices_wanted));
    const dim3 grid{core::div_ceil<std::uint32_t>(columns, 256),
                    static_cast<unsigned>(core::div_ceil(n, rows_per_slice))};
    if (row_bytes <= detail::count_staged_row_limit) {
      detail::count_staged_kernel<256>
          <<<grid, block, 0, stream>>>(rows, n, row_bytes, rows_per_slice, counts.data());
    } else {
      detail::count_kernel<256>
          <<<grid, block, 0, stream>>>(rows, n, row_bytes, rows_per_slice, counts.data());
    }
    SQUEEZE_CHECK_LAUNCH();
  }
  std::vector<std::uint64_t> host(counts.size());
  SQUEEZE_CUDA_TRY(
      cudaMemcpyAsync(host.data(), counts.data(), counts.bytes(), cudaMemcpyDeviceToHost, stream));
  SQUEEZE_CUDA_TRY(cudaStreamSynchronize(stream));
  return host;
}

/// Stored bytes of each of n rows under a codebook whose mask and bitval are in device-
/// accessible memory, into sizes[n] (device); and/or their sum into *total (device).
template <compress_policy_like Policy = compress_policy>
void stored_sizes(const std::byte* rows, std::size_t n, const codebook_ref& cb,
                  std::uint64_t* sizes, unsigned long long* total, cudaStream_t stream) {
  SQUEEZE_EXPECTS(valid_chunk_bytes(cb.chunk_bytes),
                  "ibp::stored_sizes: chunk_bytes must be 1, 2, 4 or 8");
  if (n == 0) return;
  detail::dispatch_chunk(cb.chunk_bytes, [&](auto c) {
    detail::sizes_kernel<decltype(c)::value>
        <<<detail::grid_for(n, 8), 256, 0, stream>>>(rows, n, cb, sizes, total);
    SQUEEZE_CHECK_LAUNCH();
  });
}

/// The threshold sweep of Kamath et al., EuroSys 2026, on the GPU: for `steps` + 1 (<= 64)
/// thresholds T evenly spaced from 0.70 n to n, the codebooks make_codebook builds from
/// `counts` are sent to the GPU and the rows' total stored size under each measured there,
/// in one pass over the rows (rows up to 4 KiB: each warp stages a row in shared memory and
/// measures it under every codebook; longer rows or more thresholds: one pass per T); the
/// codebook with the smallest total is kept (ties: the larger T). Pass a sample of the rows
/// (and counts over the same sample) to preprocess faster still.
template <compress_policy_like Policy = compress_policy>
sweep_result sweep_threshold_on_gpu(const std::byte* rows, std::size_t n,
                                    std::span<const std::uint64_t> counts,
                                    std::uint32_t chunk_bytes, int steps, cudaStream_t stream) {
  const auto row_bytes = static_cast<std::uint32_t>(counts.size() / 8);
  SQUEEZE_EXPECTS(valid_chunk_bytes(chunk_bytes),
                  "ibp::sweep_threshold_on_gpu: chunk_bytes must be 1, 2, 4 or 8");
  return sweep_thresholds_batched(
      counts, n, chunk_bytes, steps, [&](std::span<const codebook> books) {
        const std::size_t k = books.size();
        std::vector<std::byte> masks(k * row_bytes), bitvals(k * row_bytes);
        for (std::size_t t = 0; t < k; ++t) {
          std::copy(books[t].mask.begin(), books[t].mask.end(), masks.begin() + t * row_bytes);
          std::copy(books[t].bitval.begin(), books[t].bitval.end(),
                    bitvals.begin() + t * row_bytes);
        }
        core::device_buffer<std::byte> d_masks{masks.size(), stream};
        core::device_buffer<std::byte> d_bitvals{bitvals.size(), stream};
        core::device_buffer<unsigned long long> d_totals{k, stream};
        d_masks.copy_from(std::span<const std::byte>{masks}, stream);
        d_bitvals.copy_from(std::span<const std::byte>{bitvals}, stream);
        d_totals.fill_bytes(0, stream);
        if (row_bytes <= detail::sweep_row_limit && k <= detail::max_sweep_books) {
          // One pass over the rows for every threshold.
          detail::dispatch_chunk(chunk_bytes, [&](auto c) {
            detail::sweep_kernel<decltype(c)::value><<<detail::grid_for(n, 4), 128, 0, stream>>>(
                rows, n, row_bytes, d_masks.data(), d_bitvals.data(), static_cast<std::uint32_t>(k),
                d_totals.data());
            SQUEEZE_CHECK_LAUNCH();
          });
        } else {  // longer rows: one pass per threshold
          for (std::size_t t = 0; t < k; ++t) {
            stored_sizes<Policy>(
                rows, n,
                codebook_ref{d_masks.data() + t * row_bytes, d_bitvals.data() + t * row_bytes,
                             row_bytes, chunk_bytes},
                nullptr, d_totals.data() + t, stream);
          }
        }
        std::vector<unsigned long long> totals(k);
        d_totals.copy_to(std::span<unsigned long long>{totals}, stream);
        SQUEEZE_CUDA_TRY(cudaStreamSynchronize(stream));
        return std::vector<std::uint64_t>(totals.begin(), totals.end());
      });
}

/// A codebook's Mask and Bitval copied to device memory; ref() is what kernels take.
class device_codebook {
 public:
  device_codebook() = default;
  /// Copies cb (validated) on `stream`; the copy is ordered before work on that stream.
  explicit device_codebook(const codebook& cb, cudaStream_t stream)
      : mask_{validated(cb).tensor_bytes},
        bitval_{cb.tensor_bytes},
        tensor_bytes_{cb.tensor_bytes},
        chunk_bytes_{cb.chunk_bytes} {
    mask_.copy_from(std::span<const std::byte>{cb.mask}, stream);
    bitval_.copy_from(std::span<const std::byte>{cb.bitval}, stream);
  }
  [[nodiscard]] codebook_ref ref() const noexcept {
    return {mask_.data(), bitval_.data(), tensor_bytes_, chunk_bytes_};
  }

 private:
  static const codebook& validated(const codebook& cb) {
    validate(cb);  // before anything is allocated
    return cb;
  }
  core::device_buffer<std::byte> mask_;
  core::device_buffer<std::byte> bitval_;
  std::uint32_t tensor_bytes_ = 0;
  std::uint32_t chunk_bytes_ = 4;
};

/// A condensed set in device memory (data and offsets), as ibp::gather_rows reads it.
struct device_set {
  core::device_buffer<std::byte> data;         ///< data_bytes used, padded to whole words
  std::uint64_t data_bytes = 0;                ///< the stored rows' total
  core::device_buffer<std::uint64_t> offsets;  ///< [rows + 1]
  std::uint64_t rows = 0;
};

/// Compresses n rows (device-accessible) into a condensed set in device memory; the
/// codebook's mask and bitval must be device-accessible. Synchronizes once, to size the
/// output. Rows of any length (stored rows longer than compress_workspace_bytes are
/// encoded more slowly, with global atomics).
template <compress_policy_like Policy = compress_policy>
device_set compress_condensed(const std::byte* rows, std::size_t n, const codebook_ref& cb,
                              cudaStream_t stream) {
  SQUEEZE_EXPECTS(cb.tensor_bytes > 0, "ibp::compress_condensed: tensor_bytes must be positive");
  SQUEEZE_EXPECTS(rows != nullptr || n == 0, "ibp::compress_condensed: rows is null");
  device_set set;
  set.rows = n;
  set.offsets = core::device_buffer<std::uint64_t>{n + 1};
  SQUEEZE_CUDA_TRY(cudaMemsetAsync(set.offsets.data(), 0, set.offsets.bytes(), stream));
  if (n == 0) return set;
  stored_sizes<Policy>(rows, n, cb, set.offsets.data() + 1, nullptr, stream);
  const std::size_t scan_bytes =
      core::detail::scan_workspace_bytes<std::uint64_t, std::uint64_t>(n);
  core::device_buffer<std::byte> scan_space{scan_bytes, stream};  // none up to 4096 rows
  core::detail::inclusive_sum(scan_space.data(), scan_bytes, set.offsets.data() + 1,
                              set.offsets.data() + 1, n, stream);
  std::uint64_t total = 0;
  SQUEEZE_CUDA_TRY(cudaMemcpyAsync(&total, set.offsets.data() + n, sizeof total,
                                   cudaMemcpyDeviceToHost, stream));
  SQUEEZE_CUDA_TRY(cudaStreamSynchronize(stream));
  // Padded to whole words for the atomics of long rows, which need the output zeroed.
  set.data_bytes = total;
  set.data = core::device_buffer<std::byte>{core::align_up<std::uint64_t>(total, 4)};
  if (cb.tensor_bytes > Policy::workspace_bytes) set.data.fill_bytes(0, stream);
  constexpr int workspace_words = static_cast<int>(Policy::workspace_bytes / 4 + 1);
  detail::dispatch_chunk(cb.chunk_bytes, [&](auto c) {
    detail::encode_kernel<decltype(c)::value, workspace_words>
        <<<detail::grid_for(n, 4), 128, 0, stream>>>(rows, n, cb, set.offsets.data(),
                                                     set.data.data());
    SQUEEZE_CHECK_LAUNCH();
  });
  return set;
}

/// A device set's copy on the host (for the host reference, files, or a cache's insert):
/// data, offsets and the raw-row bitmask (a row as long as tensor_bytes is raw).
/// Synchronizes `stream`.
inline compressed_set to_host(const device_set& set, std::uint32_t tensor_bytes,
                              cudaStream_t stream) {
  compressed_set out;
  out.kind = layout::condensed;
  out.rows = set.rows;
  out.data.resize(set.data_bytes);
  out.offsets.resize(set.rows + 1);
  set.data.copy_to(std::span<std::byte>{out.data}, stream);
  set.offsets.copy_to(std::span<std::uint64_t>{out.offsets}, stream);
  SQUEEZE_CUDA_TRY(cudaStreamSynchronize(stream));
  out.raw.assign((set.rows + 31) / 32, 0);
  for (std::uint64_t r = 0; r < set.rows; ++r) {
    if (out.offsets[r + 1] - out.offsets[r] == tensor_bytes) out.raw[r / 32] |= 1u << (r % 32);
  }
  return out;
}

}  // namespace squeeze::ibp
