// SPDX-License-Identifier: Apache-2.0
// squeeze/roast/mapping.hpp: where each weight of a ROAST module lives in the shared
// parameter array M (host and device), and the host reference that materializes W.
//
// A module's weight matrix W (rows K = fan-in, cols N = fan-out; Y = X . W) is never
// stored. It is cut into tiles of Z1 x Z2 (tile.k x tile.n); tile (kb, nb) is a contiguous
// run of Z1*Z2 elements of M that starts at a hashed, aligned offset:
//
//   W[k][n] = scale * g(kb, nb) * M[h(kb, nb) + o(k mod Z1, n mod Z2)]
//     kb = k / Z1, nb = n / Z2
//     h(kb, nb)  = align * floor(((a * key + b) mod P) * slots / 2^61),  key = kb * tiles_n + nb
//                  P = 2^61 - 1, a and b drawn from the module's seed, every product exact
//                  in 64/128-bit arithmetic; slots = (|M| - Z1*Z2) / align + 1, so a tile
//                  never runs past the end of M; align = 128 bytes of elements.
//     g(kb, nb)  = +1 or -1 from a second hash of the key (only when signs are on)
//     scale      = the module's lambda (global memory sharing: lambda = C / sqrt(fan_in)
//                  when M is drawn from U(-1/C, 1/C); see `gms_scale`)
//
// The hash chooses only where a tile starts. The order of a tile's elements, o(i, j), is
// ours, and it is the order a Hopper tensor core reads the B operand from shared memory
// (K-major, 128-byte swizzle), so a GEMM copies a hashed tile to shared memory unchanged:
//
//   tile = [Z1 / A column blocks][Z2 / 8 row groups] atoms, A = 128 / element_bytes
//   atom = 8 rows (n) x 128 bytes (A values along k) = 1024 bytes
//
//     atom (ka, g) holds k in [ka*A, ka*A + A), n in [g*8, g*8 + 8)
//       offset of the atom in the tile: (ka * (Z2 / 8) + g) * (1024 / element_bytes)
//     inside the atom, row r = n mod 8 is 128 bytes = 8 chunks of 16 bytes; the value at
//     column c = k mod A sits in chunk (c*element_bytes/16) XOR r:
//
//        chunk:   0    1    2    3    4    5    6    7
//       row 0  | 0  | 1  | 2  | 3  | 4  | 5  | 6  | 7  |    (k chunk stored in each slot)
//       row 1  | 1  | 0  | 3  | 2  | 5  | 4  | 7  | 6  |
//       row 2  | 2  | 3  | 0  | 1  | 6  | 7  | 4  | 5  |
//       ...
//       row 7  | 7  | 6  | 5  | 4  | 3  | 2  | 1  | 0  |
//
// So the layout depends on the element size of the GEMM operand (4 bytes: fp32/TF32,
// 2 bytes: bf16/fp16), which is why a mapping records it. Mirrors of M in another type (an
// fp32 master copy, the fp32 gradient dM) use the same element indices. The mapping depends
// only on the tile shape, the element size, |M| and the seed: never on how a GEMM is tuned.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "squeeze/core/config.hpp"
#include "squeeze/core/error.hpp"

namespace squeeze::roast {

/// The hash tile: `k` rows of W (along the reduction) by `n` columns.
struct tile_shape {
  std::uint32_t k = 64;  ///< rows of W a tile spans (along the reduction)
  std::uint32_t n = 64;  ///< columns of W a tile spans
};

/// What a user says about one module (one weight matrix).
struct module_desc {
  std::uint64_t rows = 0;  ///< K: the fan-in, rows of W
  std::uint64_t cols = 0;  ///< N: the fan-out, columns of W
  tile_shape tile{};       ///< the hash tile's shape
  float scale = 1.0f;      ///< lambda, applied to every weight of the module
  std::uint64_t seed = 0;  ///< give each module its own
  bool signs = false;      ///< multiply each tile by a hashed +-1
};

/// lambda for global memory sharing: M ~ U(-1/C, 1/C) and a module of fan-in `fan_in`
/// wants weights at the scale 1/sqrt(fan_in), so lambda = C / sqrt(fan_in).
inline float gms_scale(double c, std::uint64_t fan_in) {
  SQUEEZE_EXPECTS(fan_in > 0 && c > 0, "roast::gms_scale needs a positive C and fan-in");
  return static_cast<float>(c / std::sqrt(static_cast<double>(fan_in)));
}

namespace detail {

inline constexpr std::uint64_t mersenne61 = (std::uint64_t{1} << 61) - 1;

/// The high 64 bits of the 128-bit product x * y.
SQUEEZE_HOST_DEVICE std::uint64_t mul_high(std::uint64_t x, std::uint64_t y) {
#if SQUEEZE_DEVICE_PASS
  return __umul64hi(x, y);
#else
  __extension__ using u128 = unsigned __int128;  // GCC and Clang; __extension__: -Wpedantic
  return static_cast<std::uint64_t>((static_cast<u128>(x) * y) >> 64);
#endif
}

/// (x * y) mod 2^61-1 for x, y < 2^61, exact.
SQUEEZE_HOST_DEVICE std::uint64_t mul_mod_mersenne61(std::uint64_t x, std::uint64_t y) {
  const std::uint64_t hi = mul_high(x, y);
  const std::uint64_t lo = x * y;
  // hi:lo = hi * 2^64 + lo and 2^64 = 8 (mod P); hi < 2^58, so nothing overflows.
  std::uint64_t r = (lo & mersenne61) + (lo >> 61) + (hi << 3);
  r = (r & mersenne61) + (r >> 61);
  return r >= mersenne61 ? r - mersenne61 : r;
}

/// splitmix64's finalizer: seeds to well-spread 64-bit values.
SQUEEZE_HOST_DEVICE std::uint64_t mix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace detail

/// The universal hash ((a*key + b) mod P) mod range, P = 2^61 - 1, drawn from a seed.
struct universal_hash {
  std::uint64_t a = 1;      ///< the multiplier, in [1, P)
  std::uint64_t b = 0;      ///< the offset, in [0, P)
  std::uint64_t range = 1;  ///< values the hash takes: [0, range)

  friend bool operator==(const universal_hash&, const universal_hash&) = default;

  /// The hash drawn from `seed` (a and b from a 64-bit mix of it) onto [0, range).
  static universal_hash from_seed(std::uint64_t seed, std::uint64_t range) {
    universal_hash h;
    h.a = 1 + detail::mix64(seed) % (detail::mersenne61 - 1);
    h.b = detail::mix64(seed ^ 0x5bd1e9955bd1e995ull) % detail::mersenne61;
    h.range = range;
    return h;
  }
  /// key < 2^61. The residue r in [0, P) is brought to [0, range) by floor(r * range / 2^61)
  /// (a multiply-high instead of a 64-bit modulo, which GPUs emulate slowly).
  SQUEEZE_HOST_DEVICE std::uint64_t operator()(std::uint64_t key) const {
    std::uint64_t r = detail::mul_mod_mersenne61(a, key) + b;
    r = r >= detail::mersenne61 ? r - detail::mersenne61 : r;
    return detail::mul_high(r << 3, range);
  }
};

/// The in-tile order o(i, j) described above, for one element size.
struct tile_layout {
  std::uint32_t tile_k = 64;        ///< the tile's rows (k)
  std::uint32_t tile_n = 64;        ///< the tile's columns (n)
  std::uint32_t element_bytes = 4;  ///< bytes of one value of M (4, or 2 for bf16 and fp16)

  friend bool operator==(const tile_layout&, const tile_layout&) = default;

  /// Values along k in one 128-byte atom row.
  SQUEEZE_HOST_DEVICE std::uint32_t atom_k() const { return 128u / element_bytes; }
  /// Values in one 1024-byte atom.
  SQUEEZE_HOST_DEVICE std::uint32_t atom_values() const { return 1024u / element_bytes; }
  /// Offset of element (i along k, j along n) from the tile's start, in elements.
  SQUEEZE_HOST_DEVICE std::uint32_t offset(std::uint32_t i, std::uint32_t j) const {
    const std::uint32_t ak = atom_k();
    const std::uint32_t per_chunk = 16u / element_bytes;
    const std::uint32_t atom = (i / ak) * (tile_n / 8) + j / 8;
    const std::uint32_t r = j % 8;
    const std::uint32_t c = i % ak;
    const std::uint32_t chunk = (c / per_chunk) ^ r;
    return atom * atom_values() + r * ak + chunk * per_chunk + c % per_chunk;
  }
  /// The inverse of `offset`: the (i along k, j along n) stored at offset o of a tile.
  SQUEEZE_HOST_DEVICE void position(std::uint32_t o, std::uint32_t& i, std::uint32_t& j) const {
    const std::uint32_t ak = atom_k();
    const std::uint32_t per_chunk = 16u / element_bytes;
    const std::uint32_t atom = o / atom_values();
    const std::uint32_t r = (o % atom_values()) / ak;
    const std::uint32_t chunk = ((o % ak) / per_chunk) ^ r;
    i = (atom / (tile_n / 8)) * ak + chunk * per_chunk + o % per_chunk;
    j = (atom % (tile_n / 8)) * 8 + r;
  }
};

/// One module's view into M: everything a kernel needs to find W's tiles. Trivially
/// copyable; kernels take it by value. Build it with the constructor, which validates.
class mapping {
 public:
  mapping() = default;

  /// `memory_size`: |M| in elements; `element_bytes`: 2 (bf16/fp16 GEMM operands) or 4
  /// (fp32/TF32). Throws invalid_argument for shapes, tiles or M that cannot work.
  mapping(const module_desc& desc, std::uint64_t memory_size, std::uint32_t element_bytes)
      : rows_{desc.rows},
        cols_{desc.cols},
        memory_size_{memory_size},
        layout_{desc.tile.k, desc.tile.n, element_bytes},
        scale_{desc.scale},
        signs_{desc.signs} {
    SQUEEZE_EXPECTS(element_bytes == 2 || element_bytes == 4,
                    "roast::mapping: element_bytes must be 2 (bf16/fp16) or 4 (fp32)");
    SQUEEZE_EXPECTS(desc.rows > 0 && desc.cols > 0,
                    "roast::mapping: the weight matrix needs at least one row and column");
    SQUEEZE_EXPECTS(desc.tile.k > 0 && desc.tile.k % layout_.atom_k() == 0,
                    "roast::mapping: tile.k must be a positive multiple of " +
                        std::to_string(layout_.atom_k()) + " for " + std::to_string(element_bytes) +
                        "-byte elements (one 128-byte row)");
    SQUEEZE_EXPECTS(desc.tile.n > 0 && desc.tile.n % 8 == 0,
                    "roast::mapping: tile.n must be a positive multiple of 8");
    SQUEEZE_EXPECTS(std::uint64_t{desc.tile.k} * desc.tile.n <= (std::uint64_t{1} << 24),
                    "roast::mapping: a tile may hold at most 2^24 values");
    SQUEEZE_EXPECTS(std::isfinite(desc.scale), "roast::mapping: scale must be finite");
    const std::uint64_t tile_values = std::uint64_t{desc.tile.k} * desc.tile.n;
    SQUEEZE_EXPECTS(memory_size >= tile_values,
                    "roast::mapping: M holds " + std::to_string(memory_size) +
                        " values, fewer than one " + std::to_string(desc.tile.k) + "x" +
                        std::to_string(desc.tile.n) + " tile");
    tiles_k_ = (desc.rows + desc.tile.k - 1) / desc.tile.k;
    tiles_n_ = (desc.cols + desc.tile.n - 1) / desc.tile.n;
    SQUEEZE_EXPECTS(tiles_k_ < (std::uint64_t{1} << 30) && tiles_n_ < (std::uint64_t{1} << 30),
                    "roast::mapping: more than 2^30 tiles along one dimension");
    const std::uint64_t align = layout_.atom_k();
    hash_ = universal_hash::from_seed(desc.seed, (memory_size - tile_values) / align + 1);
    sign_seed_ = detail::mix64(desc.seed ^ 0x27d4eb2f165667c5ull);
  }

  /// The same module over the same M: every weight at the same place with the same factor.
  friend bool operator==(const mapping&, const mapping&) = default;

  /// K: rows of W.
  SQUEEZE_HOST_DEVICE std::uint64_t rows() const { return rows_; }
  /// N: columns of W.
  SQUEEZE_HOST_DEVICE std::uint64_t cols() const { return cols_; }
  /// |M|: values of the shared array the tiles are hashed into.
  SQUEEZE_HOST_DEVICE std::uint64_t memory_size() const { return memory_size_; }
  /// The hash tile's shape.
  SQUEEZE_HOST_DEVICE tile_shape tile() const { return {layout_.tile_k, layout_.tile_n}; }
  /// The in-tile order of the values.
  SQUEEZE_HOST_DEVICE const tile_layout& layout() const { return layout_; }
  /// Bytes of one value of M.
  SQUEEZE_HOST_DEVICE std::uint32_t element_bytes() const { return layout_.element_bytes; }
  /// lambda, the module's scale.
  SQUEEZE_HOST_DEVICE float scale() const { return scale_; }
  /// Whether the sign hash g is on.
  SQUEEZE_HOST_DEVICE bool signs() const { return signs_; }
  /// Tiles along K: ceil(K / tile().k).
  SQUEEZE_HOST_DEVICE std::uint64_t tiles_k() const { return tiles_k_; }
  /// Tiles along N: ceil(N / tile().n).
  SQUEEZE_HOST_DEVICE std::uint64_t tiles_n() const { return tiles_n_; }
  /// Distinct tile starts: |M| - Z1*Z2 rounded down to the alignment, over the alignment, + 1.
  SQUEEZE_HOST_DEVICE std::uint64_t slots() const { return hash_.range; }

  /// h(kb, nb): where tile (kb, nb) starts in M, in elements; a multiple of 128 bytes.
  SQUEEZE_HOST_DEVICE std::uint64_t tile_offset(std::uint64_t kb, std::uint64_t nb) const {
    return hash_(kb * tiles_n_ + nb) * layout_.atom_k();
  }
  /// g(kb, nb): +1 or -1 (always +1 when signs are off).
  SQUEEZE_HOST_DEVICE float tile_sign(std::uint64_t kb, std::uint64_t nb) const {
    if (!signs_) return 1.0f;
    return (detail::mix64((kb * tiles_n_ + nb) ^ sign_seed_) >> 63) ? -1.0f : 1.0f;
  }
  /// Where W[k][n] lives in M.
  SQUEEZE_HOST_DEVICE std::uint64_t element_offset(std::uint64_t k, std::uint64_t n) const {
    return tile_offset(k / layout_.tile_k, n / layout_.tile_n) +
           layout_.offset(static_cast<std::uint32_t>(k % layout_.tile_k),
                          static_cast<std::uint32_t>(n % layout_.tile_n));
  }
  /// Where W[k][n] goes in a workspace of whole tiles in tile order, each in the in-tile
  /// order: tile (kb, nb) at (kb * tiles_n + nb) * Z1 * Z2 (the deterministic gradient fold).
  SQUEEZE_HOST_DEVICE std::uint64_t workspace_offset(std::uint64_t k, std::uint64_t n) const {
    const std::uint64_t tile = (k / layout_.tile_k) * tiles_n_ + n / layout_.tile_n;
    return tile * layout_.tile_k * layout_.tile_n +
           layout_.offset(static_cast<std::uint32_t>(k % layout_.tile_k),
                          static_cast<std::uint32_t>(n % layout_.tile_n));
  }
  /// scale * g for W[k][n].
  SQUEEZE_HOST_DEVICE float element_factor(std::uint64_t k, std::uint64_t n) const {
    return scale_ * tile_sign(k / layout_.tile_k, n / layout_.tile_n);
  }

 private:
  std::uint64_t rows_ = 0;
  std::uint64_t cols_ = 0;
  std::uint64_t memory_size_ = 0;
  tile_layout layout_{};
  float scale_ = 1.0f;
  bool signs_ = false;
  std::uint64_t tiles_k_ = 0;
  std::uint64_t tiles_n_ = 0;
  universal_hash hash_{};
  std::uint64_t sign_seed_ = 0;
};

/// W (rows x cols, row-major, as float) from M on the host: the reference every kernel is
/// checked against. `to_float` converts one element of M.
template <class T, class ToFloat>
std::vector<float> materialize(const mapping& map, const T* memory, ToFloat to_float) {
  std::vector<float> w(map.rows() * map.cols());
  for (std::uint64_t k = 0; k < map.rows(); ++k) {
    for (std::uint64_t n = 0; n < map.cols(); ++n) {
      w[k * map.cols() + n] = map.element_factor(k, n) * to_float(memory[map.element_offset(k, n)]);
    }
  }
  return w;
}

/// The gradient of M from the gradient of W (rows x cols, row-major): dM[e] += sum over
/// the weights w that live at e of scale * g * dW[w]. Accumulates into `dmemory`.
inline void fold_gradient(const mapping& map, const float* dw, double* dmemory) {
  for (std::uint64_t k = 0; k < map.rows(); ++k) {
    for (std::uint64_t n = 0; n < map.cols(); ++n) {
      dmemory[map.element_offset(k, n)] +=
          static_cast<double>(map.element_factor(k, n)) * dw[k * map.cols() + n];
    }
  }
}

}  // namespace squeeze::roast
