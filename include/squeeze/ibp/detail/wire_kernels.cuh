// SPDX-License-Identifier: Apache-2.0
// squeeze/ibp/detail/wire_kernels.cuh: the IBP wire codec's kernels (books, measure, tiles,
// encode, decode), the encoder's workspace layout, and the stream-ordered memory the codec
// grows. Internal: ibp/wire.cuh's wire_codec launches them.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

#include "squeeze/core/arch.cuh"
#include "squeeze/core/bits.hpp"
#include "squeeze/core/config.hpp"
#include "squeeze/core/cuda_error.hpp"
#include "squeeze/core/device.hpp"
#include "squeeze/core/error.hpp"
#include "squeeze/core/reduce_op.hpp"
#include "squeeze/core/status.hpp"
#include "squeeze/ibp/compress.cuh"
#include "squeeze/ibp/decode.cuh"
#include "squeeze/ibp/format.hpp"
#include "squeeze/ibp/wire_format.hpp"
#include "squeeze/xfer/bounds.hpp"
#include "squeeze/xfer/copy.cuh"

namespace squeeze::ibp {

namespace detail {

inline constexpr int wire_block_threads = 128;
inline constexpr int wire_warps = wire_block_threads / warp_threads;

/// The decoder's policy: a row of a message is at most 512 bytes, so that is the workspace
/// (no streaming path), loaded with ordinary loads (the message is in device memory).
struct wire_decode_policy {
  static constexpr std::uint32_t workspace_bytes = wire_max_row_bytes;
  static constexpr bool async_loads = false;
  static constexpr unsigned prefetch_waves = 1;
};

/// The encoder's device workspace, carved from one allocation for up to `stride` rows.
struct wire_workspace_ref {
  unsigned long long* counts = nullptr;     ///< [8 · 512] set bits per bit position
  unsigned long long* totals = nullptr;     ///< [candidates] stored bytes of all rows
  std::uint32_t* best = nullptr;            ///< [2] the winning candidate; 1: send raw
  std::byte* masks = nullptr;               ///< [candidates, 512]
  std::byte* bitvals = nullptr;             ///< [candidates, 512]
  std::uint16_t* sizes = nullptr;           ///< [candidates, stride] stored bytes per row
  std::uint16_t* intra = nullptr;           ///< [stride] offset of a row inside its tile
  unsigned long long* tile_sums = nullptr;  ///< [tiles(stride) + 1] (the last one 0)
  void* scan = nullptr;                     ///< the bases' prefix sum's workspace
  std::uint64_t stride = 0;
};

/// Byte offsets of the workspace's parts for `rows` rows and `scan_bytes` of scan workspace
/// (core::detail::scan_workspace_bytes of the tile sums).
struct wire_workspace_plan {
  std::size_t counts = 0, totals = 0, best = 0, masks = 0, bitvals = 0, sizes = 0, intra = 0,
              tile_sums = 0, scan = 0, bytes = 0;

  static wire_workspace_plan of(std::uint64_t rows, std::size_t scan_bytes) {
    const auto next = [](std::size_t at, std::size_t bytes) {
      return core::align_up<std::size_t>(at + bytes, 256);
    };
    const std::size_t tiles = core::div_ceil<std::uint64_t>(rows, wire_tile_rows);
    wire_workspace_plan p;
    p.totals = next(p.counts, 8 * wire_max_row_bytes * sizeof(unsigned long long));
    p.best = next(p.totals, wire_candidates * sizeof(unsigned long long));
    p.masks = next(p.best, 2 * sizeof(std::uint32_t));
    p.bitvals = next(p.masks, std::size_t{wire_candidates} * wire_max_row_bytes);
    p.sizes = next(p.bitvals, std::size_t{wire_candidates} * wire_max_row_bytes);
    p.intra = next(p.sizes, wire_candidates * rows * sizeof(std::uint16_t));
    p.tile_sums = next(p.intra, rows * sizeof(std::uint16_t));
    p.scan = next(p.tile_sums, (tiles + 1) * sizeof(unsigned long long));
    p.bytes = next(p.scan, scan_bytes);
    return p;
  }
  wire_workspace_ref carve(std::byte* base, std::uint64_t rows) const {
    wire_workspace_ref w;
    w.counts = reinterpret_cast<unsigned long long*>(base + counts);
    w.totals = reinterpret_cast<unsigned long long*>(base + totals);
    w.best = reinterpret_cast<std::uint32_t*>(base + best);
    w.masks = base + masks;
    w.bitvals = base + bitvals;
    w.sizes = reinterpret_cast<std::uint16_t*>(base + sizes);
    w.intra = reinterpret_cast<std::uint16_t*>(base + intra);
    w.tile_sums = reinterpret_cast<unsigned long long*>(base + tile_sums);
    w.scan = base + scan;
    w.stride = rows;
    return w;
  }
};

/// Records a decoder's first fault: (fault << 8) | status, one atomicCAS.
SQUEEZE_DEVICE void report_wire_fault(std::uint32_t* slot, wire_fault f, status st) {
  atomicCAS(slot, 0u, (static_cast<std::uint32_t>(f) << 8) | static_cast<std::uint32_t>(st));
}
SQUEEZE_DEVICE void report_wire_fault(std::uint32_t* slot, wire_fault f) {
  report_wire_fault(slot, f, status_of(f));
}

/// The winning candidate: the smallest total, the first (highest threshold) on ties.
SQUEEZE_DEVICE int wire_best(const unsigned long long* totals) {
  int best = 0;
  for (int k = 1; k < wire_candidates; ++k) {
    if (totals[k] < totals[best]) best = k;
  }
  return best;
}

/// Codebooks of every candidate from the counts: block k, thread b -> byte b.
template <class T>
SQUEEZE_KERNEL(wire_max_row_bytes)
void wire_books_kernel(wire_layout lay, wire_workspace_ref ws) {
  const auto k = static_cast<int>(blockIdx.x);
  const std::uint32_t b = threadIdx.x;
  if (b >= lay.row_bytes) return;
  const std::uint64_t rows = lay.rows_with_byte(b);
  const wire_codebook_byte cb = wire_codebook_bits(ws.counts + 8 * std::size_t{b}, rows,
                                                   wire_threshold(rows, wire_threshold_percent(k)));
  ws.masks[std::size_t{blockIdx.x} * wire_max_row_bytes + b] = std::byte{cb.mask};
  ws.bitvals[std::size_t{blockIdx.x} * wire_max_row_bytes + b] = std::byte{cb.bitval};
}

/// Lane L ends with the warp's sum of v[candidate_of(L)] where candidate_of(L) = 4 bit4(L) +
/// 2 bit3(L) + bit2(L): a transposing reduction, 9 shuffles for the 8 sums (40 one by one).
SQUEEZE_DEVICE std::uint32_t warp_sum_by_candidate(std::uint32_t (&v)[wire_candidates]) {
  static_assert(wire_candidates == 8);
  const unsigned lane = core::arch::lane_id();
#pragma unroll
  for (unsigned half = 4, d = 16; half >= 1; half /= 2, d /= 2) {
    const bool upper = (lane & d) != 0;
#pragma unroll
    for (unsigned i = 0; i < half; ++i) {
      const std::uint32_t keep = upper ? v[i + half] : v[i];
      const std::uint32_t send = upper ? v[i] : v[i + half];
      v[i] = keep + __shfl_xor_sync(full_warp_mask, send, d);
    }
  }
  std::uint32_t sum = v[0];
  sum += __shfl_xor_sync(full_warp_mask, sum, 2);
  sum += __shfl_xor_sync(full_warp_mask, sum, 1);
  return sum;
}
SQUEEZE_HOST_DEVICE constexpr int wire_candidate_of(unsigned lane) noexcept {
  return static_cast<int>(((lane >> 4) & 1u) * 4 + ((lane >> 3) & 1u) * 2 + ((lane >> 2) & 1u));
}
SQUEEZE_HOST_DEVICE constexpr unsigned wire_lane_of(int k) noexcept {
  return 16u * ((static_cast<unsigned>(k) >> 2) & 1u) +
         8u * ((static_cast<unsigned>(k) >> 1) & 1u) + 4u * (static_cast<unsigned>(k) & 1u);
}

/// Each row's stored bytes under every candidate, and each candidate's total (kept by lane
/// wire_lane_of(k) of each warp). A warp per row. Whole rows of wire_max_row_bytes at a
/// 16-byte aligned address (all but a short last row, usually): lane t loads bytes
/// [16t, 16t + 16) once and measures them under the eight codebooks, which the block keeps
/// in shared memory; the warp sums the eight counts in one transposing reduction. Other
/// rows are staged in shared memory and measured codebook by codebook.
template <class T>
SQUEEZE_KERNEL(wire_block_threads)
void wire_measure_kernel(const std::byte* src, wire_layout lay, wire_workspace_ref ws) {
  constexpr unsigned C = sizeof(T);
  constexpr std::size_t stage_bytes = xfer::window_bytes(wire_max_row_bytes) + 16;
  constexpr std::size_t book_vectors = std::size_t{wire_candidates} * wire_max_row_bytes / 16;
  __shared__ alignas(16) std::byte stage[wire_warps][stage_bytes];
  __shared__ uint4 masks[book_vectors];
  __shared__ uint4 bitvals[book_vectors];
  const unsigned warp = threadIdx.x / warp_threads;
  const unsigned lane = core::arch::lane_id();
  const bool vector_rows =
      lay.row_bytes == wire_max_row_bytes && reinterpret_cast<std::uintptr_t>(src) % 16 == 0;
  if (vector_rows) {  // (the codebooks' bytes past a shorter row are never written)
    for (std::size_t i = threadIdx.x; i < book_vectors; i += blockDim.x) {
      masks[i] = reinterpret_cast<const uint4*>(ws.masks)[i];
      bitvals[i] = reinterpret_cast<const uint4*>(ws.bitvals)[i];
    }
  }
  __syncthreads();
  const std::uint64_t whole = lay.last_row_bytes == lay.row_bytes ? lay.rows : lay.rows - 1;
  const xfer::readable_range readable = xfer::readable_range::of(src, lay.data_bytes);
  const std::uint64_t warps = std::uint64_t{gridDim.x} * wire_warps;
  const int mine = wire_candidate_of(lane);
  const bool keeper = lane % 4 == 0;  // lane wire_lane_of(mine)
  unsigned long long acc = 0;
  for (std::uint64_t r = std::uint64_t{blockIdx.x} * wire_warps + warp; r < lay.rows; r += warps) {
    if (vector_rows && r < whole) {
      const uint4 x = __ldcg(reinterpret_cast<const uint4*>(src + r * lay.row_bytes) + lane);
      std::uint32_t bits[wire_candidates];
#pragma unroll
      for (int k = 0; k < wire_candidates; ++k) {
        const std::size_t at = static_cast<std::size_t>(k) * (wire_max_row_bytes / 16) + lane;
        bits[k] = payload_bits16<C>(x, masks[at], bitvals[at]);
      }
      const std::uint32_t total = warp_sum_by_candidate(bits);
      if (keeper) {
        const std::uint32_t s = stored_bytes_for(total + wire_max_row_bytes / C, lay.row_bytes);
        acc += s;
        ws.sizes[static_cast<std::size_t>(mine) * ws.stride + r] = static_cast<std::uint16_t>(s);
      }
      continue;
    }
    const std::uint32_t len = lay.row_length(r);
    const unsigned off =
        xfer::warp_load(stage[warp], src + r * lay.row_bytes, len, readable).offset;
    const std::byte* row = stage[warp] + off;
#pragma unroll 1
    for (int k = 0; k < wire_candidates; ++k) {
      const std::size_t at = static_cast<std::size_t>(k) * wire_max_row_bytes;
      const codebook_ref cb{ws.masks + at, ws.bitvals + at, len, C};
      const std::uint32_t s = warp_stored_bytes<C, true>(row, cb);
      if (lane == wire_lane_of(k)) {
        acc += s;
        ws.sizes[static_cast<std::size_t>(k) * ws.stride + r] = static_cast<std::uint16_t>(s);
      }
    }
    __syncwarp();  // every lane is done with the row before the next one lands
  }
  if (keeper && acc != 0) atomicAdd(ws.totals + mine, acc);
}

/// The winner into the message: its codebook (block 0), each tile's sizes and raw word (a
/// warp per tile), each row's offset in its tile and each tile's sum (workspace), and the
/// sections' padding; and whether the values are sent raw instead (then the encode kernel
/// overwrites the start of all this with them).
template <class T>
SQUEEZE_KERNEL(wire_block_threads)
void wire_tiles_kernel(std::byte* wire, wire_layout lay, wire_workspace_ref ws) {
  const int best = wire_best(ws.totals);
  auto* bases = reinterpret_cast<std::uint64_t*>(wire + lay.bases);
  auto* raw = reinterpret_cast<std::uint32_t*>(wire + lay.raw);
  auto* sizes = reinterpret_cast<std::uint16_t*>(wire + lay.sizes);
  if (blockIdx.x == 0) {
    const std::size_t from = static_cast<std::size_t>(best) * wire_max_row_bytes;
    const std::uint32_t padded = core::align_up<std::uint32_t>(lay.row_bytes, 16);
    for (std::uint32_t b = threadIdx.x; b < padded; b += blockDim.x) {
      wire[lay.mask + b] = b < lay.row_bytes ? ws.masks[from + b] : std::byte{0};
      wire[lay.bitval + b] = b < lay.row_bytes ? ws.bitvals[from + b] : std::byte{0};
    }
    const std::uint64_t raw_words = detail::pad16(4 * lay.tiles) / 4;
    for (std::uint64_t i = lay.tiles + threadIdx.x; i < raw_words; i += blockDim.x) raw[i] = 0;
    if (threadIdx.x == 0) {
      if ((lay.tiles + 1) % 2 != 0) bases[lay.tiles + 1] = 0;  // the bases' padding
      ws.tile_sums[lay.tiles] = 0;
      ws.best[0] = static_cast<std::uint32_t>(best);
      ws.best[1] = wire_sends_raw(lay, ws.totals[best]) ? 1u : 0u;
    }
  }
  const unsigned lane = core::arch::lane_id();
  const std::uint16_t* row_sizes = ws.sizes + static_cast<std::size_t>(best) * ws.stride;
  const std::uint64_t padded_rows = core::align_up<std::uint64_t>(lay.rows, 8);
  const std::uint64_t warps = std::uint64_t{gridDim.x} * wire_warps;
  for (std::uint64_t t = std::uint64_t{blockIdx.x} * wire_warps + threadIdx.x / warp_threads;
       t < lay.tiles; t += warps) {
    const std::uint64_t r = t * wire_tile_rows + lane;
    const std::uint32_t s = r < lay.rows ? row_sizes[r] : 0u;
    if (r < padded_rows) sizes[r] = static_cast<std::uint16_t>(s);
    const unsigned raw_bits = __ballot_sync(full_warp_mask, r < lay.rows && s == lay.row_length(r));
    std::uint32_t sum = 0;
    const std::uint32_t before = warp_exclusive_sum(s, sum);
    if (r < lay.rows) ws.intra[r] = static_cast<std::uint16_t>(before);
    if (lane == 0) {
      raw[t] = raw_bits;
      ws.tile_sums[t] = sum;
    }
  }
}

/// Each row into the payload (a warp per row, ibp's warp encoder through shared memory),
/// or the values after the header when they are sent raw; block 0 writes the header and
/// the size.
template <class T>
SQUEEZE_KERNEL(wire_block_threads)
void wire_encode_kernel(const std::byte* src, std::byte* wire, wire_layout lay,
                        wire_workspace_ref ws, std::uint64_t* size) {
  constexpr unsigned C = sizeof(T);
  __shared__ std::uint32_t stage[wire_warps][wire_max_row_bytes / 4 + 2];
  const std::uint32_t best = ws.best[0];
  if (ws.best[1] != 0) {  // raw
    if (blockIdx.x == 0 && threadIdx.x == 0) {
      const wire_header h = make_raw_wire_header(lay.values, C);
      *reinterpret_cast<wire_header*>(wire) = h;
      *size = h.total_bytes;
    }
    const auto* in = reinterpret_cast<const T*>(src);
    auto* out = reinterpret_cast<T*>(wire + wire_header_bytes);
    const std::uint64_t threads = std::uint64_t{gridDim.x} * blockDim.x;
    for (std::uint64_t i = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < lay.values;
         i += threads) {
      out[i] = in[i];
    }
    return;
  }
  const auto* bases = reinterpret_cast<const std::uint64_t*>(wire + lay.bases);
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    const wire_header h =
        make_wire_header(lay, wire_threshold_percent(static_cast<int>(best)), bases[lay.tiles]);
    *reinterpret_cast<wire_header*>(wire) = h;
    *size = h.total_bytes;
  }
  const unsigned warp = threadIdx.x / warp_threads;
  const std::uint16_t* row_sizes = ws.sizes + std::size_t{best} * ws.stride;
  std::byte* payload = wire + lay.payload;
  const std::uint64_t warps = std::uint64_t{gridDim.x} * wire_warps;
  for (std::uint64_t r = std::uint64_t{blockIdx.x} * wire_warps + warp; r < lay.rows; r += warps) {
    const codebook_ref cb{wire + lay.mask, wire + lay.bitval, lay.row_length(r), C};
    warp_encode<C>(src + r * lay.row_bytes, cb, payload + bases[r / wire_tile_rows] + ws.intra[r],
                   row_sizes[r], stage[warp]);
  }
}

/// The message of no values: a raw header.
template <class T>
SQUEEZE_KERNEL(32)
void wire_empty_kernel(std::byte* wire, std::uint64_t* size) {
  if (threadIdx.x != 0) return;
  const wire_header h = make_raw_wire_header(0, sizeof(T));
  *reinterpret_cast<wire_header*>(wire) = h;
  *size = h.total_bytes;
}

/// Decodes a message of `values` values: a warp per row (see the file comment). Reduce:
/// dst[i] = op(dst[i], value i) instead of dst[i] = value i.
template <class T, bool Reduce>
SQUEEZE_KERNEL(wire_block_threads)
void wire_decode_kernel(const std::byte* wire, std::uint64_t bytes, std::uint64_t values, T* dst,
                        core::reduce_op op, std::uint32_t* fault) {
  constexpr unsigned C = sizeof(T);
  using decoder = warp_decoder<wire_decode_policy, false, C>;
  __shared__ typename decoder::TempStorage storage[wire_warps];
  __shared__ alignas(16)
      std::byte staged[Reduce ? wire_warps : 1][Reduce ? wire_max_row_bytes : 16];
  const unsigned warp = threadIdx.x / warp_threads;
  const unsigned lane = core::arch::lane_id();
  const bool first_thread = blockIdx.x == 0 && threadIdx.x == 0;

  // The header, checked by every thread (one broadcast read per warp).
  if (bytes < wire_header_bytes) {
    if (first_thread) report_wire_fault(fault, wire_fault::short_message);
    return;
  }
  const wire_header h = *reinterpret_cast<const wire_header*>(wire);
  wire_layout lay;
  if (const wire_fault f = check_wire_header(h, bytes, values, C, lay); f != wire_fault::none) {
    if (first_thread) report_wire_fault(fault, f);
    return;
  }
  // From here every read lies inside [wire, wire + total) and total <= bytes.
  if (h.kind == wire_raw) {
    const auto* v = reinterpret_cast<const T*>(wire + wire_header_bytes);
    const std::uint64_t threads = std::uint64_t{gridDim.x} * blockDim.x;
    for (std::uint64_t i = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < values;
         i += threads) {
      if constexpr (Reduce) {
        dst[i] = core::apply(op, dst[i], v[i]);
      } else {
        dst[i] = v[i];
      }
    }
    return;
  }
  const auto* bases = reinterpret_cast<const std::uint64_t*>(wire + lay.bases);
  const auto* raw = reinterpret_cast<const std::uint32_t*>(wire + lay.raw);
  const auto* sizes = reinterpret_cast<const std::uint16_t*>(wire + lay.sizes);
  const std::byte* payload = wire + lay.payload;
  if (first_thread && (bases[0] != 0 || bases[lay.tiles] != h.payload_bytes)) {
    report_wire_fault(fault, wire_fault::bases);
  }
  const xfer::readable_range readable = xfer::readable_range::of(wire, h.total_bytes);
  decoder dec{storage[warp], codebook_ref{wire + lay.mask, wire + lay.bitval, lay.row_bytes, C}};

  const std::uint64_t warps = std::uint64_t{gridDim.x} * wire_warps;
  for (std::uint64_t r = std::uint64_t{blockIdx.x} * wire_warps + warp; r < lay.rows; r += warps) {
    // The row's size and offset from its tile: sizes scanned, checked against the bases.
    const std::uint64_t tile = r / wire_tile_rows;
    const auto me = static_cast<unsigned>(r % wire_tile_rows);
    const std::uint64_t mine = tile * wire_tile_rows + lane;
    const std::uint32_t my_size = mine < lay.rows ? sizes[mine] : 0u;
    std::uint32_t tile_sum = 0;
    const std::uint32_t my_before = warp_exclusive_sum(my_size, tile_sum);
    const std::uint32_t s = __shfl_sync(full_warp_mask, my_size, me);
    const std::uint32_t before = __shfl_sync(full_warp_mask, my_before, me);
    const std::uint64_t lo = bases[tile];
    const std::uint64_t hi = bases[tile + 1];
    const std::uint32_t raw_word = raw[tile];
    const std::uint32_t len = lay.row_length(r);
    wire_fault f = wire_fault::none;  // warp-uniform
    if (lo > hi || hi > h.payload_bytes || hi - lo != tile_sum) {
      f = wire_fault::bases;
    } else if (s == 0 || s > len) {
      f = wire_fault::row_size;
    } else if ((((raw_word >> me) & 1u) != 0) != (s == len) ||
               (r + 1 == lay.rows && me + 1 < wire_tile_rows && (raw_word >> (me + 1)) != 0)) {
      f = wire_fault::raw_flag;
    }
    if (f != wire_fault::none) {
      if (lane == 0) report_wire_fault(fault, f);
      continue;
    }
    __syncwarp();  // every lane is done with the workspace (and staged row) of the last row
    dec.rebind(codebook_ref{wire + lay.mask, wire + lay.bitval, len, C});
    dec.load(payload + lo + before, s, readable);
    std::byte* out = nullptr;
    if constexpr (Reduce) {
      out = staged[warp];
    } else {
      out = reinterpret_cast<std::byte*>(dst) + r * lay.row_bytes;
    }
    const status st = dec.decode_loaded(out);
    if (st != status::ok) {
      if (lane == 0) report_wire_fault(fault, wire_fault::row_stream, st);
      continue;
    }
    if constexpr (Reduce) {
      __syncwarp();
      const auto* v = reinterpret_cast<const T*>(staged[warp]);
      T* d = dst + r * (lay.row_bytes / C);
      for (std::uint32_t i = lane; i < len / C; i += warp_threads)
        d[i] = core::apply(op, d[i], v[i]);
    }
  }
}

/// One device allocation, stream-ordered: it grows with cudaFreeAsync + cudaMallocAsync on
/// the caller's stream (no synchronization), and is freed with cudaFree at destruction.
class wire_memory {
 public:
  wire_memory() = default;
  wire_memory(wire_memory&& other) noexcept
      : data_{std::exchange(other.data_, nullptr)}, bytes_{std::exchange(other.bytes_, 0)} {}
  wire_memory& operator=(wire_memory&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(bytes_, other.bytes_);
    return *this;
  }
  wire_memory(const wire_memory&) = delete;
  wire_memory& operator=(const wire_memory&) = delete;
  ~wire_memory() {
    if (data_ != nullptr) static_cast<void>(cudaFree(data_));
  }

  /// At least `bytes` bytes, usable on `s` (and anything ordered after it); the contents
  /// are lost when it grows. Returns whether it did.
  bool reserve(std::size_t bytes, cudaStream_t s) {
    if (bytes <= bytes_) return false;
    if (data_ != nullptr) {
      SQUEEZE_CUDA_TRY(cudaFreeAsync(data_, s));
      data_ = nullptr;
      bytes_ = 0;
    }
    SQUEEZE_CUDA_TRY(cudaMallocAsync(reinterpret_cast<void**>(&data_), bytes, s));
    bytes_ = bytes;
    return true;
  }
  [[nodiscard]] std::byte* data() const noexcept { return data_; }

 private:
  std::byte* data_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace detail

}  // namespace squeeze::ibp
