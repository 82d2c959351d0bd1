// SPDX-License-Identifier: Apache-2.0
// Shared pieces of the ibp GPU tests: rows that compress by different amounts, a codebook
// in device memory, and a compressed set placed where a gather reads it.
#pragma once

#include <squeeze/core/buffer.hpp>
#include <squeeze/core/cuda_error.hpp>
#include <squeeze/ibp/cluster.hpp>
#include <squeeze/ibp/compress.cuh>
#include <squeeze/ibp/dataset.hpp>
#include <squeeze/ibp/gather.cuh>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "common/gpu_test.hpp"

namespace squeeze::test {

// float32 N(0,1) features with every 7th row replaced by noise (stored raw), so one set
// holds both kinds. Row lengths need not be a multiple of 4.
inline std::vector<std::byte> mixed_rows(std::size_t rows, std::size_t row_bytes,
                                         std::uint64_t seed) {
  std::mt19937_64 rng{seed};
  std::normal_distribution<float> normal{0.0f, 1.0f};
  std::vector<std::byte> v(rows * row_bytes);
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t b = 0; b < row_bytes; b += 4) {
      const float f = normal(rng);
      std::uint32_t bits = 0;
      std::memcpy(&bits, &f, 4);
      if (r % 7 == 3) bits = static_cast<std::uint32_t>(rng());
      std::memcpy(v.data() + r * row_bytes + b, &bits, std::min<std::size_t>(4, row_bytes - b));
    }
  }
  return v;
}

// The codebook the host threshold sweep (4 steps) keeps for the rows.
inline ibp::codebook best_codebook(const std::vector<std::byte>& data, std::size_t rows,
                                   std::size_t row_bytes, std::uint32_t chunk) {
  const auto l = static_cast<std::uint32_t>(row_bytes);
  return ibp::sweep_threshold(data, rows, ibp::count_set_bits(data, rows, l), chunk, 4).best;
}

// A clustered codebook in device memory; ids may be replaced (tampered) before upload.
struct device_clusters {
  core::device_buffer<std::byte> masks;
  core::device_buffer<std::byte> bitvals;
  core::device_buffer<std::uint32_t> ids;
  ibp::cluster_ref ref;

  explicit device_clusters(const ibp::cluster_set& c) : device_clusters{c, c.ids} {}
  device_clusters(const ibp::cluster_set& c, const std::vector<std::uint32_t>& packed_ids)
      : masks{c.masks.size()}, bitvals{c.bitvals.size()}, ids{packed_ids.size()} {
    SQUEEZE_CUDA_TRY(
        cudaMemcpy(masks.data(), c.masks.data(), masks.bytes(), cudaMemcpyHostToDevice));
    SQUEEZE_CUDA_TRY(
        cudaMemcpy(bitvals.data(), c.bitvals.data(), bitvals.bytes(), cudaMemcpyHostToDevice));
    if (!ids.empty()) {
      SQUEEZE_CUDA_TRY(
          cudaMemcpy(ids.data(), packed_ids.data(), ids.bytes(), cudaMemcpyHostToDevice));
    }
    SQUEEZE_CUDA_TRY(cudaDeviceSynchronize());  // see source_bytes (gpu_test.hpp)
    ref = c.ref();
    ref.masks = masks.data();
    ref.bitvals = bitvals.data();
    ref.ids = ids.data();
  }
};

// Rows in `groups` groups, each with its own random high nibbles (locally invariant bits
// that clustering finds) and random low nibbles; every 9th row is noise (raw).
inline std::vector<std::byte> grouped_rows(std::size_t rows, std::size_t row_bytes,
                                           std::size_t groups, std::uint64_t seed) {
  std::mt19937_64 rng{seed};
  std::vector<std::byte> highs(groups * row_bytes);
  for (auto& b : highs) b = static_cast<std::byte>(rng() & 0xF0);
  std::vector<std::byte> v(rows * row_bytes);
  for (std::size_t r = 0; r < rows; ++r) {
    const std::size_t g = r % groups;
    for (std::size_t b = 0; b < row_bytes; ++b) {
      const auto noise = static_cast<std::byte>(rng());
      v[r * row_bytes + b] =
          r % 9 == 4 ? noise : (highs[g * row_bytes + b] | (noise & std::byte{0x0F}));
    }
  }
  return v;
}

// A host compressed set placed for a gather: its stored bytes in device or mapped memory
// (their own exact-size allocation, so memcheck sees any overrun), offsets or the raw
// bitmask in device memory. args() fills the set's fields of a gather_args.
class placed_set {
 public:
  placed_set(source_kind kind, const ibp::compressed_set& set,
             const std::vector<std::uint64_t>& offsets)
      : set_{set},
        bytes_{kind, set.data},
        offsets_{set.kind == ibp::layout::condensed ? offsets.size() : 0},
        raw_{set.raw.size()} {
    if (!offsets_.empty()) {
      SQUEEZE_CUDA_TRY(
          cudaMemcpy(offsets_.data(), offsets.data(), offsets_.bytes(), cudaMemcpyHostToDevice));
    }
    SQUEEZE_CUDA_TRY(cudaMemcpy(raw_.data(), set.raw.data(), raw_.bytes(), cudaMemcpyHostToDevice));
    SQUEEZE_CUDA_TRY(cudaDeviceSynchronize());  // see source_bytes (gpu_test.hpp)
  }
  explicit placed_set(source_kind kind, const ibp::compressed_set& set)
      : placed_set{kind, set, set.offsets} {}

  template <class Index>
  ibp::gather_args<Index> args(const ibp::codebook_ref& cb) const {
    ibp::gather_args<Index> a;
    a.kind = set_.kind;
    a.data = bytes_.data();
    a.data_bytes = set_.data.size();
    a.offsets = offsets_.empty() ? nullptr : offsets_.data();
    a.raw = set_.kind == ibp::layout::in_place ? raw_.data() : nullptr;
    a.rows = set_.rows;
    a.codebook = cb;
    return a;
  }

 private:
  const ibp::compressed_set& set_;
  source_bytes bytes_;
  core::device_buffer<std::uint64_t> offsets_;
  core::device_buffer<std::uint32_t> raw_;
};

// The expected output of a gather: poison, with row i = data row indices[i] where good(i).
template <class Index, class Good>
std::vector<std::byte> expected_rows(const std::vector<std::byte>& data, std::size_t row_bytes,
                                     const std::vector<Index>& indices, std::size_t dst_stride,
                                     Good&& good) {
  std::vector<std::byte> want(indices.size() * dst_stride, poison);
  for (std::size_t i = 0; i < indices.size(); ++i) {
    if (!good(i)) continue;
    std::copy_n(data.begin() + static_cast<std::ptrdiff_t>(indices[i] * row_bytes), row_bytes,
                want.begin() + static_cast<std::ptrdiff_t>(i * dst_stride));
  }
  return want;
}

}  // namespace squeeze::test
