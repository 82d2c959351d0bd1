// SPDX-License-Identifier: Apache-2.0
// squeeze/roast/lookup.hpp: ROBE embedding lookups, where each value of an embedding table
// lives in the shared parameter array M (host and device), and the host references the
// kernels of lookup.cuh are checked against.
//
// An embedding table W (rows x dim, one row per category; the lookup L of Desai, Zhou and
// Shrivastava, ICML 2023) is never stored. Each row is cut into chunks of Z values (Z =
// `chunk`; the last chunk of a row is short when Z does not divide dim); chunk c of row r is
// a contiguous run of M that starts at a hashed offset, so values that are neighbours in a
// row are neighbours in M (ROBE-Z):
//
//   W[r][j] = scale * g(r, c) * M[h(r, c) + (j mod Z)],   c = j / Z
//     key       = r * chunks_per_row + c,   chunks_per_row = ceil(dim / Z)
//     h(r, c)   = align * floor(((a * key + b) mod P) * slots / 2^61)     (roast::universal_hash)
//                 P = 2^61 - 1, a and b drawn from the seed, every product exact in 64/128-bit
//                 arithmetic; align = 4 values (16 bytes of fp32) when Z % 4 == 0, else 1;
//                 slots = (|M| - Z) / align + 1, so a chunk never runs past the end of M
//                 (their hash range [0, |M| - Z]).
//     g(r, c)   = +1 or -1 from mix64(key ^ sign seed) (only when signs are on)
//     scale     = the table's lambda
//
//   M:  [ ....... | chunk (r, c): Z values | ........ | chunk (r', c'): Z values | ... ]
//                 ^ h(r, c), a multiple of align        chunks may overlap: sharing is the point
//   W row r:  [ chunk 0 | chunk 1 | ... | chunk C-1 (dim - (C-1) Z values) ]
//
// With Z % 4 == 0 and dim % 4 == 0 every run of 4 values of a row that starts at j % 4 == 0
// is one aligned 16-byte float4 of M (given M itself is 16-byte aligned), which is what the
// kernels load. The mapping depends only on rows, dim, Z, |M| and the seed.
//
// Bags (torch.nn.EmbeddingBag with offsets): bag b covers indices[offsets[b] .. offsets[b+1]),
// offsets has bags + 1 entries; out[b] = sum (or mean) of the bag's rows; an empty bag gives
// zeros. Bad input is reported, never followed (status::out_of_bounds):
//   - an index outside [0, rows): contributes zeros (lookup: the output row is zeros),
//     a mean still divides by the bag's full size;
//   - a bag whose offsets decrease or pass `count`: its output row is zeros.
//
// Summation order: a bag's values are added in index order, one fused multiply-add per value
// (acc = fma(factor, M[..], acc) from acc = 0), and a mean divides once at the end; the host
// reference and the kernels do exactly this, so their results agree bit for bit.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "squeeze/core/config.hpp"
#include "squeeze/core/error.hpp"
#include "squeeze/core/status.hpp"
#include "squeeze/roast/mapping.hpp"

namespace squeeze::roast {

/// What a user says about one embedding table.
struct lookup_desc {
  std::uint64_t rows = 0;    ///< categories: rows of W
  std::uint32_t dim = 0;     ///< values per row
  std::uint32_t chunk = 32;  ///< Z: values per hashed chunk (ROBE-Z)
  float scale = 1.0f;        ///< lambda, applied to every value of the table
  std::uint64_t seed = 0;    ///< give each table its own
  bool signs = false;        ///< multiply each chunk by a hashed +-1
};

/// How a bag reduces its rows.
enum class bag_mode {
  sum,   ///< out[b] = sum of the bag's rows
  mean,  ///< out[b] = that sum / bag size (empty bag: zeros)
};

/// One table's view into M: everything a kernel needs to find W's chunks. Trivially
/// copyable; kernels take it by value. Build it with the constructor, which validates.
class lookup_mapping {
 public:
  lookup_mapping() = default;

  /// `memory_size`: |M| in elements (fp32). Throws invalid_argument for tables or an M that
  /// cannot work.
  lookup_mapping(const lookup_desc& desc, std::uint64_t memory_size)
      : rows_{desc.rows},
        memory_size_{memory_size},
        dim_{desc.dim},
        chunk_{desc.chunk},
        scale_{desc.scale},
        signs_{desc.signs} {
    SQUEEZE_EXPECTS(desc.rows > 0, "roast::lookup_mapping: the table needs at least one row");
    SQUEEZE_EXPECTS(desc.dim > 0, "roast::lookup_mapping: dim must be positive");
    SQUEEZE_EXPECTS(desc.chunk > 0, "roast::lookup_mapping: chunk (Z) must be positive");
    SQUEEZE_EXPECTS(std::isfinite(desc.scale), "roast::lookup_mapping: scale must be finite");
    SQUEEZE_EXPECTS(memory_size >= desc.chunk,
                    "roast::lookup_mapping: M holds " + std::to_string(memory_size) +
                        " values, fewer than one chunk of " + std::to_string(desc.chunk));
    SQUEEZE_EXPECTS(
        desc.rows <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()),
        "roast::lookup_mapping: rows must fit a signed 64-bit index");
    chunks_per_row_ = (desc.dim + desc.chunk - 1) / desc.chunk;
    // Hash keys r * chunks_per_row + c must stay below P = 2^61 - 1.
    SQUEEZE_EXPECTS(desc.rows <= (detail::mersenne61 - 1) / chunks_per_row_,
                    "roast::lookup_mapping: rows x chunks per row (" + std::to_string(desc.rows) +
                        " x " + std::to_string(chunks_per_row_) + ") must stay below 2^61");
    align_ = desc.chunk % 4 == 0 ? 4u : 1u;
    hash_ = universal_hash::from_seed(desc.seed, (memory_size - desc.chunk) / align_ + 1);
    sign_seed_ = detail::mix64(desc.seed ^ 0x165667b19e3779f9ull);
  }

  /// Rows of the table (categories).
  SQUEEZE_HOST_DEVICE std::uint64_t rows() const { return rows_; }
  /// Values a row has.
  SQUEEZE_HOST_DEVICE std::uint32_t dim() const { return dim_; }
  /// Z: values a hashed chunk holds.
  SQUEEZE_HOST_DEVICE std::uint32_t chunk() const { return chunk_; }
  /// |M|: values of the shared array.
  SQUEEZE_HOST_DEVICE std::uint64_t memory_size() const { return memory_size_; }
  /// lambda, the table's scale.
  SQUEEZE_HOST_DEVICE float scale() const { return scale_; }
  /// Whether the sign hash g is on.
  SQUEEZE_HOST_DEVICE bool signs() const { return signs_; }
  /// ceil(dim / Z).
  SQUEEZE_HOST_DEVICE std::uint32_t chunks_per_row() const { return chunks_per_row_; }
  /// Values a chunk start is a multiple of: 4 (16 bytes of fp32) when Z % 4 == 0, else 1.
  SQUEEZE_HOST_DEVICE std::uint32_t alignment() const { return align_; }
  /// Distinct chunk starts: (|M| - Z) / alignment + 1.
  SQUEEZE_HOST_DEVICE std::uint64_t slots() const { return hash_.range; }
  /// True when `index` names a row of the table.
  SQUEEZE_HOST_DEVICE bool has_row(std::int64_t index) const {
    return index >= 0 && static_cast<std::uint64_t>(index) < rows_;
  }

  /// h(row, c): where chunk c of `row` starts in M, in elements (row < rows, c < chunks).
  SQUEEZE_HOST_DEVICE std::uint64_t chunk_offset(std::uint64_t row, std::uint32_t c) const {
    return hash_(row * chunks_per_row_ + c) * align_;
  }
  /// g(row, c): +1 or -1 (always +1 when signs are off).
  SQUEEZE_HOST_DEVICE float chunk_sign(std::uint64_t row, std::uint32_t c) const {
    if (!signs_) return 1.0f;
    return (detail::mix64((row * chunks_per_row_ + c) ^ sign_seed_) >> 63) ? -1.0f : 1.0f;
  }
  /// Where W[row][j] lives in M (j < dim).
  SQUEEZE_HOST_DEVICE std::uint64_t element_offset(std::uint64_t row, std::uint32_t j) const {
    return chunk_offset(row, j / chunk_) + j % chunk_;
  }
  /// scale * g for W[row][j].
  SQUEEZE_HOST_DEVICE float element_factor(std::uint64_t row, std::uint32_t j) const {
    return scale_ * chunk_sign(row, j / chunk_);
  }

 private:
  std::uint64_t rows_ = 0;
  std::uint64_t memory_size_ = 0;
  std::uint32_t dim_ = 0;
  std::uint32_t chunk_ = 1;
  std::uint32_t chunks_per_row_ = 0;
  std::uint32_t align_ = 1;
  float scale_ = 1.0f;
  bool signs_ = false;
  universal_hash hash_{};
  std::uint64_t sign_seed_ = 0;
};

static_assert(std::is_trivially_copyable_v<lookup_mapping>,
              "kernels take a lookup_mapping by value");

namespace detail {

/// Bag b's index range [first, last) from `offsets` (bags + 1 entries), checked against
/// `count`; false (and an empty range) when the offsets decrease or pass count.
SQUEEZE_HOST_DEVICE bool bag_range(const std::int64_t* offsets, std::uint64_t b,
                                   std::uint64_t count, std::uint64_t& first, std::uint64_t& last) {
  const std::int64_t lo = offsets[b];
  const std::int64_t hi = offsets[b + 1];
  first = 0;
  last = 0;
  if (lo < 0 || hi < lo || static_cast<std::uint64_t>(hi) > count) return false;
  first = static_cast<std::uint64_t>(lo);
  last = static_cast<std::uint64_t>(hi);
  return true;
}

}  // namespace detail

/// The rows `rows` of W (rows.size() x dim, row-major) from M (map.memory_size() values) on
/// the host. Throws invalid_argument for a row outside the table.
inline std::vector<float> materialize_rows(const lookup_mapping& map, const float* memory,
                                           std::span<const std::int64_t> rows) {
  SQUEEZE_EXPECTS(map.rows() > 0, "roast::materialize_rows: the mapping is empty");
  SQUEEZE_EXPECTS(memory != nullptr || rows.empty(), "roast::materialize_rows: M is null");
  const std::uint32_t dim = map.dim();
  std::vector<float> w(rows.size() * dim);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    SQUEEZE_EXPECTS(map.has_row(rows[i]), "roast::materialize_rows: row " +
                                              std::to_string(rows[i]) + " is outside [0, " +
                                              std::to_string(map.rows()) + ")");
    const auto r = static_cast<std::uint64_t>(rows[i]);
    for (std::uint32_t j = 0; j < dim; ++j) {
      w[i * dim + j] = map.element_factor(r, j) * memory[map.element_offset(r, j)];
    }
  }
  return w;
}

/// Host reference of lookup_forward: out[i] = W[indices[i]] (count x dim); an index outside
/// the table gives a row of zeros and status::out_of_bounds.
inline status reference_lookup(const lookup_mapping& map, const float* memory,
                               const std::int64_t* indices, std::uint64_t count, float* out) {
  status st = status::ok;
  const std::uint32_t dim = map.dim();
  for (std::uint64_t i = 0; i < count; ++i) {
    float* o = out + i * dim;
    if (!map.has_row(indices[i])) {
      st = status::out_of_bounds;
      for (std::uint32_t j = 0; j < dim; ++j) o[j] = 0.0f;
      continue;
    }
    const auto r = static_cast<std::uint64_t>(indices[i]);
    for (std::uint32_t j = 0; j < dim; ++j) {
      o[j] = map.element_factor(r, j) * memory[map.element_offset(r, j)];
    }
  }
  return st;
}

/// Host reference of bag_forward (bags x dim), in the kernels' order (see the header
/// comment), so the GPU must match it bit for bit. Returns the first error, or ok.
inline status reference_bag_forward(const lookup_mapping& map, const float* memory,
                                    const std::int64_t* indices, std::uint64_t count,
                                    const std::int64_t* offsets, std::uint64_t bags, bag_mode mode,
                                    float* out) {
  status st = status::ok;
  const std::uint32_t dim = map.dim();
  for (std::uint64_t b = 0; b < bags; ++b) {
    float* o = out + b * dim;
    for (std::uint32_t j = 0; j < dim; ++j) o[j] = 0.0f;
    std::uint64_t first = 0;
    std::uint64_t last = 0;
    if (!detail::bag_range(offsets, b, count, first, last)) {
      st = status::out_of_bounds;
      continue;
    }
    for (std::uint64_t k = first; k < last; ++k) {
      if (!map.has_row(indices[k])) {
        st = status::out_of_bounds;
        continue;
      }
      const auto r = static_cast<std::uint64_t>(indices[k]);
      for (std::uint32_t j = 0; j < dim; ++j) {
        o[j] = std::fma(map.element_factor(r, j), memory[map.element_offset(r, j)], o[j]);
      }
    }
    if (mode == bag_mode::mean && last > first) {
      const auto n = static_cast<float>(last - first);
      for (std::uint32_t j = 0; j < dim; ++j) o[j] = o[j] / n;
    }
  }
  return st;
}

/// Host reference of bag_backward in double: dM[h + o] += factor * grad_out[b][j] (divided by
/// the bag's size for a mean) for every valid index of every bag. Accumulates into `dmemory`
/// (map.memory_size() values). Returns the first error, or ok.
inline status reference_bag_backward(const lookup_mapping& map, const std::int64_t* indices,
                                     std::uint64_t count, const std::int64_t* offsets,
                                     std::uint64_t bags, bag_mode mode, const float* grad_out,
                                     double* dmemory) {
  status st = status::ok;
  const std::uint32_t dim = map.dim();
  for (std::uint64_t b = 0; b < bags; ++b) {
    std::uint64_t first = 0;
    std::uint64_t last = 0;
    if (!detail::bag_range(offsets, b, count, first, last)) {
      st = status::out_of_bounds;
      continue;
    }
    const double divisor =
        mode == bag_mode::mean && last > first ? static_cast<double>(last - first) : 1.0;
    for (std::uint64_t k = first; k < last; ++k) {
      if (!map.has_row(indices[k])) {
        st = status::out_of_bounds;
        continue;
      }
      const auto r = static_cast<std::uint64_t>(indices[k]);
      for (std::uint32_t j = 0; j < dim; ++j) {
        dmemory[map.element_offset(r, j)] +=
            static_cast<double>(map.element_factor(r, j)) * grad_out[b * dim + j] / divisor;
      }
    }
  }
  return st;
}

}  // namespace squeeze::roast
