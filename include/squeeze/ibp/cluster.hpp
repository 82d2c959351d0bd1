// SPDX-License-Identifier: Apache-2.0
// squeeze/ibp/cluster.hpp: clustered compression on the host (Kamath et al., EuroSys
// 2026 (IBP), §6.5).
//
// One codebook for a whole data set keeps only the bits that are invariant across all of
// it. Rows with local trends compress better when the data set is cut into k clusters,
// each with its own Mask and Bitval (ibp/format.hpp); a row is compressed with its
// cluster's codebook and the decoder looks the codebook up from the row's cluster id.
//
//   1. k-means on bit similarity (kmeans_bits). A row is its 8·L bits x_b; a centroid is,
//      per bit position, the fraction p_b of its members with the bit set; the distance
//      of a row to a centroid is the expected number of mismatching bits,
//        d(x, p) = sum_b |x_b - p_b| = sum_b p_b + sum_{b: x_b = 1} (1 - 2·p_b),
//      so a row costs one add per set bit (or per clear bit, whichever is fewer). Lloyd
//      iterations run on a sample of rows from a (greedy) k-means++ or random start; a
//      cluster left empty takes the sample row farthest from its centroid. Then every
//      row goes to its nearest centroid. Deterministic for a seed.
//   2. Per cluster, bit counters over its rows and the threshold sweep of ibp/dataset.hpp
//      (T from 0.70·N_c to N_c) choose its codebook; an empty cluster gets Mask = 0.
//   3. Final reassignment: each row takes the cluster whose codebook stores it in the
//      fewest bytes (ties: the lower id). Never worse than the nearest centroid.
//
// Cluster ids are packed LSB-first into 32-bit words, id_bits = ceil(log2 k) bits per row
// (none when k = 1); row r's id is bits [r·id_bits, (r+1)·id_bits) of the word array,
// straddling two words when it must (cluster_ref::cluster_of reads them):
//
//   k = 5, id_bits = 3:  word 0 = id0 | id1 << 3 | ... | id9 << 27 | (id10 & 0b11) << 30
//                        word 1 = id10 >> 2 | id11 << 1 | ...
//
// The net saving (cluster_savings) charges the metadata the decoder needs against the
// bytes saved: k codebooks (2·k·L bytes), the packed ids and the raw-row bitmask.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <cstring>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "squeeze/core/bits.hpp"
#include "squeeze/core/checked.hpp"
#include "squeeze/core/error.hpp"
#include "squeeze/ibp/dataset.hpp"
#include "squeeze/ibp/format.hpp"

namespace squeeze::ibp {

/// Bits per packed cluster id: ceil(log2 k), 0 for k <= 1.
constexpr std::uint32_t cluster_id_bits(std::uint64_t clusters) noexcept {
  std::uint32_t bits = 0;
  while (bits < 64 && (std::uint64_t{1} << bits) < clusters) ++bits;
  return bits;
}

/// 32-bit words that hold `rows` ids of `id_bits` (at most 32) bits each:
/// ceil(rows · id_bits / 32), computed without forming rows · id_bits, so it never wraps
/// (it is at most rows).
constexpr std::uint64_t cluster_id_words(std::uint64_t rows, std::uint32_t id_bits) noexcept {
  return rows / 32 * id_bits + ((rows % 32) * id_bits + 31) / 32;
}

/// Packs one id per row, id_bits each, LSB-first (the layout cluster_ref::cluster_of reads):
/// [cluster_id_words(ids.size(), id_bits)] words. Throws invalid_argument for an id that
/// does not fit in id_bits.
inline std::vector<std::uint32_t> pack_cluster_ids(std::span<const std::uint32_t> ids,
                                                   std::uint32_t id_bits) {
  SQUEEZE_EXPECTS(id_bits <= 32, "ibp::pack_cluster_ids: id_bits must be at most 32");
  std::vector<std::uint32_t> words(cluster_id_words(ids.size(), id_bits), 0);
  for (std::size_t r = 0; r < ids.size(); ++r) {
    if (id_bits < 32 && (ids[r] >> id_bits) != 0) {
      throw invalid_argument{"ibp::pack_cluster_ids: row " + std::to_string(r) + "'s id " +
                             std::to_string(ids[r]) + " does not fit in " +
                             std::to_string(id_bits) + " bits"};
    }
    core::deposit_bits(words.data(), std::uint64_t{r} * id_bits, id_bits, ids[r]);
  }
  return words;
}

/// An owning clustered codebook: the host form of cluster_ref (ibp/format.hpp).
struct cluster_set {
  std::uint32_t tensor_bytes = 0;  ///< L
  std::uint32_t chunk_bytes = 4;   ///< C
  std::uint32_t clusters = 0;      ///< k
  std::uint32_t id_bits = 0;       ///< cluster_id_bits(clusters)
  std::uint64_t rows = 0;          ///< rows the ids describe
  std::vector<std::byte> masks;    ///< [clusters, tensor_bytes]
  std::vector<std::byte> bitvals;  ///< [clusters, tensor_bytes]
  std::vector<std::uint32_t> ids;  ///< [cluster_id_words(rows, id_bits)], LSB-first

  /// The device view (pass by value to kernels once the arrays are on the device).
  [[nodiscard]] cluster_ref ref() const noexcept {
    return {masks.data(), bitvals.data(), ids.data(), clusters, id_bits, tensor_bytes, chunk_bytes};
  }
  /// Codebook c. Throws invalid_argument unless c < clusters, format_error unless masks
  /// and bitvals hold codebook c.
  [[nodiscard]] codebook_ref book(std::uint32_t c) const;
  /// Row r's cluster id as stored (validate() checks every id against clusters). Throws
  /// invalid_argument unless r < rows, format_error unless id_bits is at most 32 and the
  /// id words hold row r's id.
  [[nodiscard]] std::uint32_t cluster_of(std::uint64_t r) const;
  /// book and cluster_of without the checks, for loops over a validated set.
  [[nodiscard]] codebook_ref unchecked_book(std::uint32_t c) const noexcept {
    return ref().unchecked_book(c);
  }
  [[nodiscard]] std::uint32_t unchecked_cluster_of(std::uint64_t r) const noexcept {
    return ref().unchecked_cluster_of(r);
  }
};

inline codebook_ref cluster_set::book(std::uint32_t c) const {
  if (c >= clusters) {
    throw invalid_argument{"ibp::cluster_set::book: codebook " + std::to_string(c) +
                           " of a set of " + std::to_string(clusters) + " clusters"};
  }
  const std::uint64_t end = (std::uint64_t{c} + 1) * tensor_bytes;  // < 2^64: both < 2^32
  if (masks.size() < end || bitvals.size() < end) {
    throw format_error{"ibp cluster set: masks and bitvals (" + std::to_string(masks.size()) +
                       " and " + std::to_string(bitvals.size()) + " bytes) end before codebook " +
                       std::to_string(c) + " of " + std::to_string(tensor_bytes) + " bytes"};
  }
  return unchecked_book(c);
}

inline std::uint32_t cluster_set::cluster_of(std::uint64_t r) const {
  if (r >= rows) {
    throw invalid_argument{"ibp::cluster_set::cluster_of: row " + std::to_string(r) +
                           " of a set of " + std::to_string(rows) + " rows"};
  }
  if (id_bits > 32) {
    throw format_error{"ibp cluster set: id_bits is " + std::to_string(id_bits) + ", more than 32"};
  }
  // Row r's id ends in word (r + 1) · id_bits / 32 rounded up, fewer than the ids of all rows.
  if (ids.size() < cluster_id_words(r + 1, id_bits)) {
    throw format_error{"ibp cluster set: " + std::to_string(ids.size()) +
                       " id words end before row " + std::to_string(r) + "'s " +
                       std::to_string(id_bits) + "-bit id"};
  }
  return unchecked_cluster_of(r);
}

namespace detail {

/// Throws squeeze::invalid_argument / format_error unless the clustered codebook's fields
/// and array sizes agree (tensor_bytes, chunk_bytes, k, id width, masks, bitvals and id
/// words; no size computed from them wraps). O(1): what the checked accessors rely on.
inline void check_cluster_shape(const cluster_set& cs) {
  SQUEEZE_EXPECTS(cs.tensor_bytes > 0, "ibp cluster set: tensor_bytes must be positive");
  SQUEEZE_EXPECTS(
      valid_chunk_bytes(cs.chunk_bytes),
      "ibp cluster set: chunk_bytes must be 1, 2, 4 or 8, got " + std::to_string(cs.chunk_bytes));
  SQUEEZE_EXPECTS(cs.clusters > 0, "ibp cluster set: needs at least one cluster (k = 0)");
  const std::uint32_t bits = cluster_id_bits(cs.clusters);
  if (cs.id_bits != bits) {
    throw format_error{"ibp cluster set: id_bits is " + std::to_string(cs.id_bits) + ", but " +
                       std::to_string(cs.clusters) + " clusters need " + std::to_string(bits)};
  }
  const std::uint64_t book_bytes = std::uint64_t{cs.clusters} * cs.tensor_bytes;  // < 2^64
  if (cs.masks.size() != book_bytes || cs.bitvals.size() != book_bytes) {
    throw format_error{"ibp cluster set: masks and bitvals must hold clusters x tensor_bytes = " +
                       std::to_string(book_bytes) + " bytes each, got " +
                       std::to_string(cs.masks.size()) + " and " +
                       std::to_string(cs.bitvals.size())};
  }
  // rows · id_bits, the bits of the ids, must fit in 64 bits: cluster_of's bit positions
  // r · id_bits (r < rows) then never wrap.
  if (!core::checked_mul<std::uint64_t>(cs.rows, cs.id_bits)) {
    throw format_error{"ibp cluster set: " + std::to_string(cs.rows) + " rows of " +
                       std::to_string(cs.id_bits) + "-bit ids need more than 2^64 bits"};
  }
  const std::uint64_t words = cluster_id_words(cs.rows, cs.id_bits);
  if (cs.ids.size() != words) {
    throw format_error{"ibp cluster set: " + std::to_string(cs.rows) + " rows of " +
                       std::to_string(cs.id_bits) + "-bit ids need " + std::to_string(words) +
                       " id words, got " + std::to_string(cs.ids.size())};
  }
}

/// Throws format_error unless codebook c of a set whose shape was checked has no bitval bit
/// outside its mask.
inline void check_cluster_book(const cluster_set& cs, std::uint32_t c) {
  const std::uint64_t at = std::uint64_t{c} * cs.tensor_bytes;
  for (std::uint64_t b = at; b < at + cs.tensor_bytes; ++b) {
    if ((cs.bitvals[b] & ~cs.masks[b]) != std::byte{0}) {
      throw format_error{"ibp cluster set: cluster " + std::to_string(c) +
                         "'s bitval has bits outside the mask at byte " + std::to_string(b - at)};
    }
  }
}

/// Throws format_error unless row r's id (r < rows of a set whose shape was checked) names
/// a cluster.
inline std::uint32_t checked_cluster_id(const cluster_set& cs, std::uint64_t r) {
  const std::uint32_t id = cs.unchecked_cluster_of(r);
  if (id >= cs.clusters) {
    throw format_error{"ibp cluster set: row " + std::to_string(r) + " has cluster id " +
                       std::to_string(id) + ", but there are only " + std::to_string(cs.clusters) +
                       " clusters"};
  }
  return id;
}

}  // namespace detail

/// Throws squeeze::invalid_argument / format_error unless the clustered codebook is well
/// formed: sizes, id width, every row's id below k, no bitval bit outside its mask.
inline void validate(const cluster_set& cs) {
  detail::check_cluster_shape(cs);
  for (std::uint32_t c = 0; c < cs.clusters; ++c) detail::check_cluster_book(cs, c);
  if ((std::uint64_t{1} << cs.id_bits) != cs.clusters) {  // ids can name missing clusters
    for (std::uint64_t r = 0; r < cs.rows; ++r) (void)detail::checked_cluster_id(cs, r);
  }
}

/// A cluster_set from k codebooks (same tensor_bytes and chunk_bytes) and one id per row.
/// Throws invalid_argument on mismatched codebooks or an id >= k.
inline cluster_set make_cluster_set(std::span<const codebook> books,
                                    std::span<const std::uint32_t> ids) {
  SQUEEZE_EXPECTS(!books.empty(), "ibp::make_cluster_set: needs at least one codebook");
  SQUEEZE_EXPECTS(books.size() <= std::numeric_limits<std::uint32_t>::max(),
                  "ibp::make_cluster_set: too many codebooks");
  cluster_set cs;
  cs.tensor_bytes = books[0].tensor_bytes;
  cs.chunk_bytes = books[0].chunk_bytes;
  cs.clusters = static_cast<std::uint32_t>(books.size());
  cs.id_bits = cluster_id_bits(cs.clusters);
  cs.rows = ids.size();
  for (std::size_t c = 0; c < books.size(); ++c) {
    validate(books[c]);
    SQUEEZE_EXPECTS(
        books[c].tensor_bytes == cs.tensor_bytes && books[c].chunk_bytes == cs.chunk_bytes,
        "ibp::make_cluster_set: codebook " + std::to_string(c) +
            " differs from codebook 0 in tensor_bytes or chunk_bytes");
    cs.masks.insert(cs.masks.end(), books[c].mask.begin(), books[c].mask.end());
    cs.bitvals.insert(cs.bitvals.end(), books[c].bitval.begin(), books[c].bitval.end());
  }
  for (std::size_t r = 0; r < ids.size(); ++r) {
    if (ids[r] >= cs.clusters) {
      throw invalid_argument{"ibp::make_cluster_set: row " + std::to_string(r) +
                             " has cluster id " + std::to_string(ids[r]) + ", but there are only " +
                             std::to_string(cs.clusters) + " codebooks"};
    }
  }
  cs.ids = pack_cluster_ids(ids, cs.id_bits);
  return cs;
}

// ---- k-means on bit similarity ------------------------------------------------------

/// How the k-means centroids start.
enum class kmeans_init {
  plus_plus,   ///< greedy k-means++ on Hamming distance (2 + ln k candidates per pick)
  random_rows  ///< k distinct sample rows drawn at random
};

/// Parameters of make_clusters and kmeans_bits.
struct cluster_options {
  std::uint32_t clusters = 16;      ///< k
  std::size_t sample_rows = 20000;  ///< rows the Lloyd iterations see: min(this, rows)
  int max_iterations = 10;          ///< Lloyd iterations (stops early once stable)
  std::uint64_t seed = 0x1B9C1u;    ///< the sample and the start depend only on this
  kmeans_init init = kmeans_init::plus_plus;
  int sweep_steps = 16;  ///< thresholds per cluster codebook, as in sweep_threshold
};

namespace detail {

/// Uniform double in [0, 1) from 53 random bits (the same on every standard library).
inline double unit_draw(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * 0x1.0p-53;
}

/// Sorted sample of `n` distinct indices of [0, rows) (Knuth's selection sampling).
inline std::vector<std::size_t> sample_indices(std::size_t rows, std::size_t n,
                                               std::mt19937_64& rng) {
  std::vector<std::size_t> out;
  if (n >= rows) {
    out.resize(rows);
    for (std::size_t r = 0; r < rows; ++r) out[r] = r;
    return out;
  }
  out.reserve(n);
  for (std::size_t r = 0; r < rows && out.size() < n; ++r) {
    const auto left = static_cast<double>(rows - r);
    if (unit_draw(rng) * left < static_cast<double>(n - out.size())) out.push_back(r);
  }
  return out;
}

/// Set bits of a 64-bit word. Without a popcount instruction in the target (the host
/// compiler's default), __builtin_popcountll is a library call; SWAR is faster then.
constexpr std::uint64_t bit_count64(std::uint64_t x) noexcept {
#if defined(__POPCNT__)
  return static_cast<std::uint64_t>(std::popcount(x));
#else
  x -= (x >> 1) & 0x5555555555555555u;
  x = (x & 0x3333333333333333u) + ((x >> 2) & 0x3333333333333333u);
  x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0Fu;
  return (x * 0x0101010101010101u) >> 56;
#endif
}

/// Number of differing bits of two rows of `bytes` bytes; with b == nullptr, the number
/// of set bits of a.
inline std::uint64_t hamming(const std::byte* a, const std::byte* b, std::size_t bytes) {
  std::uint64_t d = 0;
  std::size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    std::uint64_t x = 0, y = 0;
    std::memcpy(&x, a + i, 8);
    if (b != nullptr) std::memcpy(&y, b + i, 8);
    d += bit_count64(x ^ y);
  }
  for (; i < bytes; ++i) {
    const auto x = static_cast<unsigned>(a[i]) ^ (b != nullptr ? static_cast<unsigned>(b[i]) : 0u);
    d += bit_count64(x);
  }
  return d;
}

/// out[0, n) = stride · b for the n bit positions b (0 .. 8·bytes) set in row ^ flip
/// (flip: 0 or 0xFF), in increasing order; returns n. Walks 64-bit words, skipping zero
/// ones. out needs room for 8·bytes entries.
inline std::size_t bit_positions(const std::byte* row, std::size_t bytes, unsigned flip,
                                 std::size_t stride, std::size_t* out) {
  const std::uint64_t flip64 = flip != 0 ? ~std::uint64_t{0} : 0;
  std::size_t n = 0;
  for (std::size_t j = 0; j < bytes; j += 8) {
    const std::size_t len = std::min<std::size_t>(8, bytes - j);
    std::uint64_t w = 0;
    if constexpr (std::endian::native == std::endian::little) {
      std::memcpy(&w, row + j, len);
    } else {
      w = load_chunk(row + j, static_cast<unsigned>(len));
    }
    w = (w ^ flip64) & core::low_mask<std::uint64_t>(8 * static_cast<unsigned>(len));
    for (; w != 0; w &= w - 1)
      out[n++] = (8 * j + static_cast<std::size_t>(std::countr_zero(w))) * stride;
  }
  return n;
}

/// Per-bit set counts of the rows added, kept as eight 8-bit counters per byte position
/// (one table lookup and one add per byte of a row) and folded into 64-bit counts every
/// 255 rows.
class bit_counter {
 public:
  explicit bit_counter(std::size_t bytes) : lanes_(bytes, 0), counts_(8 * bytes, 0) {}

  void add(const std::byte* row) {
    for (std::size_t j = 0; j < lanes_.size(); ++j)
      lanes_[j] += spread[static_cast<unsigned>(row[j])];
    if (++pending_ == 255) fold();
  }
  /// Per bit position b (0 .. 8·bytes), how many of the added rows have it set.
  [[nodiscard]] const std::vector<std::uint64_t>& counts() {
    fold();
    return counts_;
  }
  void clear() {
    std::fill(lanes_.begin(), lanes_.end(), std::uint64_t{0});
    std::fill(counts_.begin(), counts_.end(), std::uint64_t{0});
    pending_ = 0;
  }

 private:
  // spread[v]: bit b of v moved to bit 8·b.
  static constexpr auto spread = [] {
    std::array<std::uint64_t, 256> t{};
    for (unsigned v = 0; v < 256; ++v)
      for (unsigned b = 0; b < 8; ++b) t[v] |= std::uint64_t{(v >> b) & 1u} << (8 * b);
    return t;
  }();

  void fold() {
    if (pending_ == 0) return;
    for (std::size_t j = 0; j < lanes_.size(); ++j) {
      for (unsigned b = 0; b < 8; ++b) counts_[8 * j + b] += (lanes_[j] >> (8 * b)) & 0xFFu;
      lanes_[j] = 0;
    }
    pending_ = 0;
  }

  std::vector<std::uint64_t> lanes_;   // [bytes]
  std::vector<std::uint64_t> counts_;  // [8·bytes]
  unsigned pending_ = 0;
};

/// k centroids over rows of `bytes` bytes: per bit position, p = P(bit set), stored as
/// w = 1 - 2p, [8·bytes, k rounded up to 8], and sum_b p per centroid. The distance
/// d(x, c) = sum_b p_cb + sum_{b: x_b = 1} w_cb costs one k-wide add per set bit; a row
/// with more set than clear bits uses d = sum_b (1 - p_cb) - sum_{b: x_b = 0} w_cb.
class bit_centroids {
 public:
  static constexpr std::size_t lanes = 8;

  bit_centroids(std::uint32_t k, std::size_t bytes)
      : k_{k},
        kp_{(k + lanes - 1) / lanes * lanes},
        bytes_{bytes},
        w_(8 * bytes * kp_, 0.0f),
        ones_(kp_, 0.0f) {}

  /// Centroid c becomes the row itself (p = its bits).
  void set_row(std::uint32_t c, const std::byte* row) {
    float ones = 0.0f;
    for (std::size_t b = 0; b < 8 * bytes_; ++b) {
      const bool set = ((static_cast<unsigned>(row[b / 8]) >> (b % 8)) & 1u) != 0;
      w_[b * kp_ + c] = set ? -1.0f : 1.0f;
      ones += set ? 1.0f : 0.0f;
    }
    ones_[c] = ones;
  }

  /// Centroid c becomes the mean of n rows whose per-bit set counts are counts[b].
  void set_mean(std::uint32_t c, const std::vector<std::uint64_t>& counts, std::uint64_t n) {
    double ones = 0.0;
    for (std::size_t b = 0; b < 8 * bytes_; ++b) {
      const double p = static_cast<double>(counts[b]) / static_cast<double>(n);
      w_[b * kp_ + c] = static_cast<float>(1.0 - 2.0 * p);
      ones += p;
    }
    ones_[c] = static_cast<float>(ones);
  }

  /// Scratch space of nearest(), reused from row to row.
  struct scratch {
    std::vector<std::size_t> at;  // offsets into w of the row's set (or clear) bits
    std::vector<float> acc;       // [kp]
  };

  /// The nearest centroid to row (ties: the lower id); *distance gets its distance.
  std::uint32_t nearest(const std::byte* row, scratch& s, float* distance) const {
    const std::size_t bits = 8 * bytes_;
    const bool dense = 2 * hamming(row, nullptr, bytes_) > bits;
    s.at.resize(bits);
    const std::size_t count = bit_positions(row, bytes_, dense ? 0xFFu : 0u, kp_, s.at.data());
    s.acc.resize(kp_);
    const float* w = w_.data();
    // Centroids in blocks of `lanes`, each block's sums in registers.
    for (std::size_t c0 = 0; c0 < kp_; c0 += lanes) {
      float sum[lanes], odd[lanes];  // two chains of adds, to hide the add latency
      for (std::size_t i = 0; i < lanes; ++i) {
        sum[i] = ones_[c0 + i];
        odd[i] = 0.0f;
      }
      const std::size_t* at = s.at.data();
      std::size_t j = 0;
      for (; j + 2 <= count; j += 2) {
        const float* w0 = w + at[j] + c0;
        const float* w1 = w + at[j + 1] + c0;
        for (std::size_t i = 0; i < lanes; ++i) sum[i] += w0[i];
        for (std::size_t i = 0; i < lanes; ++i) odd[i] += w1[i];
      }
      if (j < count)
        for (std::size_t i = 0; i < lanes; ++i) sum[i] += w[at[j] + c0 + i];
      for (std::size_t i = 0; i < lanes; ++i) {
        sum[i] += odd[i];
        s.acc[c0 + i] = dense ? static_cast<float>(bits) - sum[i] : sum[i];
      }
    }
    std::uint32_t best = 0;
    for (std::uint32_t c = 1; c < k_; ++c)
      if (s.acc[c] < s.acc[best]) best = c;
    *distance = s.acc[best];
    return best;
  }

 private:
  std::uint32_t k_;
  std::size_t kp_;
  std::size_t bytes_;
  std::vector<float> w_;     // [8·bytes, kp]
  std::vector<float> ones_;  // [kp]: sum_b p_cb
};

/// Row `i` of the sample as a pointer.
struct sampled_rows {
  const std::byte* data;
  const std::size_t* index;
  std::size_t bytes;
  const std::byte* operator[](std::size_t i) const { return data + index[i] * bytes; }
};

/// Greedy k-means++ on Hamming distance: each pick draws 8 + ln k candidates with
/// probability proportional to the squared distance to the nearest centre so far, and
/// keeps the one that lowers the potential (sum of those squared distances) most,
/// measured on up to 2048 of the sample rows. Returns the sample positions chosen.
///
/// (sklearn draws 2 + ln k candidates and measures on every row. On 4 equal groups whose
/// rows differ among themselves in half as many bits as from other groups' rows, that
/// left a group without a centre after the Lloyd iterations in 2 to 3 of 100 seeds;
/// 8 + ln k, measured on 2048 rows, in none of 1000, and the start costs less.)
inline std::vector<std::size_t> plus_plus_start(const sampled_rows& rows, std::size_t n,
                                                std::uint32_t k, std::mt19937_64& rng) {
  std::vector<std::size_t> chosen;
  chosen.reserve(k);
  std::vector<std::uint64_t> closest(n, std::numeric_limits<std::uint64_t>::max());
  const auto update = [&](std::size_t centre) {
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint64_t d = hamming(rows[i], rows[centre], rows.bytes);
      closest[i] = std::min(closest[i], d * d);
    }
  };
  chosen.push_back(static_cast<std::size_t>(rng() % n));
  update(chosen[0]);
  const std::size_t probes = std::min<std::size_t>(n, 2048);  // every (n / probes)-th row
  const auto candidates = static_cast<int>(8 + std::log(static_cast<double>(k)));
  while (chosen.size() < k) {
    std::uint64_t total = 0;
    for (std::size_t i = 0; i < n; ++i) total += closest[i];
    if (total == 0) {  // every sample row is a centre already: duplicates stay empty
      chosen.push_back(static_cast<std::size_t>(rng() % n));
      continue;
    }
    std::uint64_t best_potential = std::numeric_limits<std::uint64_t>::max();
    std::size_t best = 0;
    for (int t = 0; t < candidates; ++t) {
      std::uint64_t target = rng() % total;
      std::size_t cand = 0;
      while (target >= closest[cand]) target -= closest[cand++];
      std::uint64_t potential = 0;
      for (std::size_t j = 0; j < probes; ++j) {
        const std::size_t i = j * n / probes;
        const std::uint64_t d = hamming(rows[i], rows[cand], rows.bytes);
        potential += std::min(closest[i], d * d);
      }
      if (potential < best_potential) {
        best_potential = potential;
        best = cand;
      }
    }
    chosen.push_back(best);
    update(best);
  }
  return chosen;
}

/// k distinct sample positions at random (all of them, then repeats, when n < k).
inline std::vector<std::size_t> random_start(std::size_t n, std::uint32_t k, std::mt19937_64& rng) {
  std::vector<std::size_t> order(n);
  for (std::size_t i = 0; i < n; ++i) order[i] = i;
  std::vector<std::size_t> chosen;
  for (std::size_t i = 0; i < k; ++i) {
    if (i < n) {
      std::swap(order[i], order[i + static_cast<std::size_t>(rng() % (n - i))]);
      chosen.push_back(order[i]);
    } else {
      chosen.push_back(static_cast<std::size_t>(rng() % n));
    }
  }
  return chosen;
}

inline void check_data_set(std::span<const std::byte> data, std::size_t rows,
                           std::uint32_t tensor_bytes, const cluster_options& opt,
                           const char* who) {
  const std::string name{who};
  SQUEEZE_EXPECTS(opt.clusters >= 1, name + ": needs k >= 1 clusters, got k = 0");
  SQUEEZE_EXPECTS(rows > 0, name + ": needs at least one row");
  SQUEEZE_EXPECTS(tensor_bytes > 0, name + ": tensor_bytes must be positive");
  const auto need = core::checked_mul<std::uint64_t>(rows, tensor_bytes);
  SQUEEZE_EXPECTS(need && data.size() >= *need,
                  name + ": data holds fewer than rows x tensor_bytes bytes");
  SQUEEZE_EXPECTS(opt.sample_rows > 0, name + ": sample_rows must be positive");
  SQUEEZE_EXPECTS(opt.max_iterations >= 0, name + ": max_iterations must not be negative");
}

}  // namespace detail

/// k-means on bit similarity (see the top of this file): the cluster of every row, in
/// [0, opt.clusters). Lloyd iterations run on min(opt.sample_rows, rows) rows drawn with
/// opt.seed; then all rows go to the nearest centroid (ties: the lower id). Clusters may
/// stay empty when the sample has fewer distinct rows than k.
inline std::vector<std::uint32_t> kmeans_bits(std::span<const std::byte> data, std::size_t rows,
                                              std::uint32_t tensor_bytes,
                                              const cluster_options& opt) {
  detail::check_data_set(data, rows, tensor_bytes, opt, "ibp::kmeans_bits");
  const std::uint32_t k = opt.clusters;
  const std::size_t l = tensor_bytes;
  std::vector<std::uint32_t> result(rows, 0);
  if (k == 1) return result;
  std::mt19937_64 rng{opt.seed};
  const std::vector<std::size_t> index =
      detail::sample_indices(rows, std::min(opt.sample_rows, rows), rng);
  const std::size_t n = index.size();
  const detail::sampled_rows sample{data.data(), index.data(), l};

  detail::bit_centroids centroids{k, l};
  const std::vector<std::size_t> start = opt.init == kmeans_init::plus_plus
                                             ? detail::plus_plus_start(sample, n, k, rng)
                                             : detail::random_start(n, k, rng);
  for (std::uint32_t c = 0; c < k; ++c) centroids.set_row(c, sample[start[c]]);

  constexpr std::uint32_t unassigned = std::numeric_limits<std::uint32_t>::max();
  std::vector<std::uint32_t> assign(n, unassigned), members(k);
  std::vector<float> dist(n);
  detail::bit_centroids::scratch scratch;
  detail::bit_counter counter{l};
  std::vector<std::size_t> begin(std::size_t{k} + 1), fill(k), order(n);
  for (int it = 0; it < opt.max_iterations; ++it) {
    std::size_t changed = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint32_t c = centroids.nearest(sample[i], scratch, &dist[i]);
      changed += c != assign[i] ? 1 : 0;
      assign[i] = c;
    }
    if (changed == 0) break;
    std::fill(members.begin(), members.end(), 0u);
    for (std::size_t i = 0; i < n; ++i) ++members[assign[i]];
    // An empty cluster takes the row farthest from its centroid (from a cluster that
    // keeps at least one row); none left at a positive distance: it stays empty.
    for (std::uint32_t c = 0; c < k; ++c) {
      if (members[c] != 0) continue;
      std::size_t far = n;
      for (std::size_t i = 0; i < n; ++i) {
        if (members[assign[i]] > 1 && dist[i] > 0.0f && (far == n || dist[i] > dist[far])) far = i;
      }
      if (far == n) continue;
      --members[assign[far]];
      assign[far] = c;
      members[c] = 1;
      dist[far] = 0.0f;
    }
    // New centroids: the sample grouped by cluster, one cluster's bits counted at a time.
    begin[0] = 0;
    for (std::uint32_t c = 0; c < k; ++c) begin[c + 1] = begin[c] + members[c];
    std::copy(begin.begin(), begin.end() - 1, fill.begin());
    for (std::size_t i = 0; i < n; ++i) order[fill[assign[i]]++] = i;
    for (std::uint32_t c = 0; c < k; ++c) {
      if (members[c] == 0) continue;  // keeps its centroid
      counter.clear();
      for (std::size_t m = begin[c]; m < begin[c + 1]; ++m) counter.add(sample[order[m]]);
      centroids.set_mean(c, counter.counts(), members[c]);
    }
  }
  float d = 0.0f;
  for (std::size_t r = 0; r < rows; ++r)
    result[r] = centroids.nearest(data.data() + r * l, scratch, &d);
  return result;
}

// ---- per-cluster codebooks ----------------------------------------------------------

namespace detail {

/// Codebooks laid out for sizing many rows under many codebooks fast. A row's stored
/// bits are K + 8·L minus the mask bits of its participating chunks. Rows and codebooks
/// are read as 64-bit little-endian words, each holding 8 / C whole chunks (C-byte lanes;
/// the word past the row's end is zero-padded, which the zero mask there ignores):
///
///   d      = (x & mask) ^ bitval          lane zero <=> the chunk participates
///   zero   = top bit of each lane whose lane of d is zero (a SWAR test, no branch)
///   saved += sum of the bytes of (mask_popcounts & lanes of zero)
///
/// where mask_popcounts holds popcount(mask byte) in each byte. Cost: L / 8 words per
/// row and codebook, whatever C.
class chunk_books {
 public:
  /// `count` codebooks of rows of tensor_bytes, back to back at masks / bitvals.
  chunk_books(const std::byte* masks, const std::byte* bitvals, std::size_t count,
              std::uint32_t tensor_bytes, std::uint32_t chunk_bytes)
      : tensor_bytes_{tensor_bytes},
        chunks_{(tensor_bytes + chunk_bytes - 1) / chunk_bytes},
        words_{(tensor_bytes + 7) / 8},
        lane_bits_{8 * chunk_bytes},
        entries_(count * words_) {
    const std::uint64_t lane = core::low_mask<std::uint64_t>(lane_bits_);
    for (unsigned at = 0; at < 64; at += lane_bits_) {
      top_ |= std::uint64_t{1} << (at + lane_bits_ - 1);
      low_ |= (lane >> 1) << at;
    }
    fill_ = lane;
    for (std::size_t c = 0; c < count; ++c) {
      for (std::uint32_t w = 0; w < words_; ++w) {
        const std::size_t at = c * tensor_bytes + 8 * std::size_t{w};
        const auto len = static_cast<unsigned>(std::min<std::size_t>(8, tensor_bytes - 8 * w));
        entry& e = entries_[c * words_ + w];
        e.mask = load_chunk(masks + at, len);
        e.bitval = load_chunk(bitvals + at, len);
        for (unsigned b = 0; b < len; ++b) {
          const auto pc =
              static_cast<std::uint64_t>(core::popcount(static_cast<unsigned>(masks[at + b])));
          e.popcounts |= pc << (8 * b);
        }
      }
    }
  }

  /// The row as little-endian words, the last one zero-padded: x[w] for w < L / 8 rounded up.
  void load(const std::byte* row, std::vector<std::uint64_t>& x) const {
    x.resize(words_);
    const std::uint32_t full = tensor_bytes_ / 8;
    for (std::uint32_t w = 0; w < full; ++w) {
      if constexpr (std::endian::native == std::endian::little) {
        std::memcpy(&x[w], row + 8 * std::size_t{w}, 8);
      } else {
        x[w] = load_chunk(row + 8 * std::size_t{w}, 8);
      }
    }
    if (full < words_) x[full] = load_chunk(row + 8 * std::size_t{full}, tensor_bytes_ % 8);
  }

  /// stored_bytes(row, codebook c) for a row loaded with load().
  [[nodiscard]] std::uint32_t stored(std::size_t c, const std::vector<std::uint64_t>& x) const {
    const entry* e = entries_.data() + c * words_;
    const std::uint64_t* v = x.data();
    std::uint64_t saved = 0;
    for (std::uint32_t w = 0; w < words_; ++w) {
      const std::uint64_t d = (v[w] & e[w].mask) ^ e[w].bitval;
      const std::uint64_t nonzero = ((d & low_) + low_) | d;  // lane's top bit: lane != 0
      const std::uint64_t zero = ~nonzero & top_;
      const std::uint64_t lanes = (zero >> (lane_bits_ - 1)) * fill_;
      saved += ((e[w].popcounts & lanes) * 0x0101010101010101u) >> 56;
    }
    return stored_bytes_for(chunks_ + 8 * std::uint64_t{tensor_bytes_} - saved, tensor_bytes_);
  }

 private:
  struct entry {
    std::uint64_t mask = 0, bitval = 0, popcounts = 0;
  };
  std::uint32_t tensor_bytes_;
  std::uint32_t chunks_;        // K
  std::uint32_t words_;         // ceil(L / 8)
  unsigned lane_bits_;          // 8·C
  std::uint64_t top_ = 0;       // the top bit of every lane
  std::uint64_t low_ = 0;       // every bit of every lane but the top one
  std::uint64_t fill_ = 0;      // one lane of ones
  std::vector<entry> entries_;  // [count, words]
};

}  // namespace detail

/// Clustered compression's preprocessing (see the top of this file): k-means on bit
/// similarity, one swept codebook per cluster, then each row to the codebook that stores
/// it in the fewest bytes. k = 1 gives the single codebook of sweep_threshold over all rows.
inline cluster_set make_clusters(std::span<const std::byte> data, std::size_t rows,
                                 std::uint32_t tensor_bytes, std::uint32_t chunk_bytes,
                                 const cluster_options& opt = {}) {
  detail::check_data_set(data, rows, tensor_bytes, opt, "ibp::make_clusters");
  SQUEEZE_EXPECTS(
      valid_chunk_bytes(chunk_bytes),
      "ibp::make_clusters: chunk_bytes must be 1, 2, 4 or 8, got " + std::to_string(chunk_bytes));
  SQUEEZE_EXPECTS(opt.sweep_steps >= 1, "ibp::make_clusters: sweep_steps must be positive");
  const std::uint32_t k = opt.clusters;
  const std::size_t l = tensor_bytes;
  const std::vector<std::uint32_t> first = kmeans_bits(data, rows, tensor_bytes, opt);

  // Rows grouped by cluster: members[begin[c], begin[c + 1]).
  std::vector<std::size_t> begin(std::size_t{k} + 1, 0), members(rows);
  for (const std::uint32_t c : first) ++begin[c + 1];
  for (std::uint32_t c = 0; c < k; ++c) begin[c + 1] += begin[c];
  {
    std::vector<std::size_t> at(begin.begin(), begin.end() - 1);
    for (std::size_t r = 0; r < rows; ++r) members[at[first[r]]++] = r;
  }

  cluster_set cs;
  cs.tensor_bytes = tensor_bytes;
  cs.chunk_bytes = chunk_bytes;
  cs.clusters = k;
  cs.id_bits = cluster_id_bits(k);
  cs.rows = rows;
  cs.masks.assign(k * l, std::byte{0});
  cs.bitvals.assign(k * l, std::byte{0});
  std::vector<std::uint64_t> x;
  detail::bit_counter counter{l};
  for (std::uint32_t c = 0; c < k; ++c) {
    const std::size_t n = begin[c + 1] - begin[c];
    if (n == 0) continue;  // Mask = 0: every row it might get is stored raw
    counter.clear();
    for (std::size_t m = begin[c]; m < begin[c + 1]; ++m) counter.add(data.data() + members[m] * l);
    const std::vector<std::uint64_t>& counts = counter.counts();
    const sweep_result swept =
        sweep_thresholds(counts, n, chunk_bytes, opt.sweep_steps, [&](const codebook& cb) {
          const detail::chunk_books book{cb.mask.data(), cb.bitval.data(), 1, tensor_bytes,
                                         chunk_bytes};
          std::uint64_t total = 0;
          for (std::size_t m = begin[c]; m < begin[c + 1]; ++m) {
            book.load(data.data() + members[m] * l, x);
            total += book.stored(0, x);
          }
          return total;
        });
    std::copy(swept.best.mask.begin(), swept.best.mask.end(), cs.masks.begin() + c * l);
    std::copy(swept.best.bitval.begin(), swept.best.bitval.end(), cs.bitvals.begin() + c * l);
  }

  // Final reassignment: the codebook that stores the row in the fewest bytes.
  std::vector<std::uint32_t> ids(rows, 0);
  if (k > 1) {
    const detail::chunk_books books{cs.masks.data(), cs.bitvals.data(), k, tensor_bytes,
                                    chunk_bytes};
    const std::uint32_t fewest = (cs.unchecked_book(0).chunks() + 7) / 8;  // participation bits
    for (std::size_t r = 0; r < rows; ++r) {
      books.load(data.data() + r * l, x);
      std::uint32_t best = 0, best_bytes = books.stored(0, x);
      for (std::uint32_t c = 1; c < k && best_bytes > fewest; ++c) {
        const std::uint32_t s = books.stored(c, x);
        if (s < best_bytes) {
          best = c;
          best_bytes = s;
        }
      }
      ids[r] = best;
    }
  }
  cs.ids = pack_cluster_ids(ids, cs.id_bits);
  return cs;
}

// ---- compression with a clustered codebook ------------------------------------------

/// Compresses `rows` rows (cs.rows of them), row r with codebook cs.cluster_of(r), into
/// the same compressed_set a single codebook gives (ibp/dataset.hpp).
inline compressed_set compress(std::span<const std::byte> data, std::size_t rows,
                               const cluster_set& cs, layout kind) {
  validate(cs);
  SQUEEZE_EXPECTS(rows == cs.rows, "ibp::compress: the cluster set has ids for " +
                                       std::to_string(cs.rows) + " rows, asked to compress " +
                                       std::to_string(rows));
  const cluster_ref ref = cs.ref();
  return detail::compress_rows(data, rows, cs.tensor_bytes, kind, [ref](std::uint64_t r) {
    return ref.unchecked_book(ref.unchecked_cluster_of(r));
  });
}

/// Decompresses the whole set into out ([rows, tensor_bytes]), row r with codebook
/// cs.cluster_of(r). Throws format_error, naming the row, on anything malformed.
inline void decompress(const compressed_set& set, const cluster_set& cs, std::span<std::byte> out) {
  validate(cs);
  if (set.rows != cs.rows) {
    throw format_error{"ibp: a compressed set of " + std::to_string(set.rows) +
                       " rows with cluster ids for " + std::to_string(cs.rows) + " rows"};
  }
  const cluster_ref ref = cs.ref();
  detail::decompress_rows(set, cs.tensor_bytes, out, [ref](std::uint64_t r) {
    return ref.unchecked_book(ref.unchecked_cluster_of(r));
  });
}

/// Throws format_error (naming the row) unless the set is well formed for the clustered
/// codebook (validate(cs), the same row count, and what validate(set, codebook) checks,
/// row r with codebook cs.cluster_of(r)). Accepts exactly the sets decompress accepts.
inline void validate(const compressed_set& set, const cluster_set& cs) {
  validate(cs);
  if (set.rows != cs.rows) {
    throw format_error{"ibp: a compressed set of " + std::to_string(set.rows) +
                       " rows with cluster ids for " + std::to_string(cs.rows) + " rows"};
  }
  const cluster_ref ref = cs.ref();
  detail::validate_rows(set, cs.tensor_bytes, [ref](std::uint64_t r) {
    return ref.unchecked_book(ref.unchecked_cluster_of(r));
  });
}

/// Decompresses row r alone into out[0, tensor_bytes) with codebook cs.cluster_of(r).
/// Checks what it reads, in O(tensor_bytes): the shapes of cs and the set, r
/// (invalid_argument unless r < rows), row r's id and its codebook; throws format_error,
/// naming the row, when they or the row are malformed; writes out only on success.
inline void decompress_row(const compressed_set& set, const cluster_set& cs, std::uint64_t r,
                           std::span<std::byte> out) {
  detail::check_cluster_shape(cs);
  if (set.rows != cs.rows) {
    throw format_error{"ibp: a compressed set of " + std::to_string(set.rows) +
                       " rows with cluster ids for " + std::to_string(cs.rows) + " rows"};
  }
  SQUEEZE_EXPECTS(out.size() >= cs.tensor_bytes,
                  "ibp::decompress_row: output holds fewer than tensor_bytes bytes");
  (void)cs.cluster_of(r);  // r < rows: invalid_argument otherwise
  const std::uint32_t id = detail::checked_cluster_id(cs, r);
  detail::check_cluster_book(cs, id);
  detail::decode_stored_row(set, r, cs.unchecked_book(id), out.data());
}

// ---- net savings --------------------------------------------------------------------

/// Space saved by (clustered) compression, with the metadata the decoder needs charged.
struct cluster_savings {
  std::uint64_t original_bytes = 0;     ///< N·L
  std::uint64_t stored_bytes = 0;       ///< sum of the rows' stored sizes (raw rows: L)
  std::uint64_t codebook_bytes = 0;     ///< Mask and Bitval of every cluster: 2·k·L
  std::uint64_t id_bytes = 0;           ///< packed cluster ids: 4·ceil(N·id_bits / 32)
  std::uint64_t raw_bitmask_bytes = 0;  ///< one bit per row: 4·ceil(N / 32)

  /// Codebooks, ids and raw-row bitmask together.
  [[nodiscard]] std::uint64_t metadata_bytes() const noexcept {
    return codebook_bytes + id_bytes + raw_bitmask_bytes;
  }
  /// 1 - stored / original: the compression alone.
  [[nodiscard]] double saving() const noexcept {
    if (original_bytes == 0) return 0.0;
    return 1.0 - static_cast<double>(stored_bytes) / static_cast<double>(original_bytes);
  }
  /// 1 - (stored + metadata) / original: what Figure 14 of Kamath et al. plots.
  [[nodiscard]] double net_saving() const noexcept {
    if (original_bytes == 0) return 0.0;
    return 1.0 - static_cast<double>(stored_bytes + metadata_bytes()) /
                     static_cast<double>(original_bytes);
  }
};

namespace detail {

inline cluster_savings savings_shape(std::uint64_t rows, std::uint64_t tensor_bytes,
                                     std::uint64_t clusters, std::uint64_t id_words) {
  const auto original = core::checked_mul<std::uint64_t>(rows, tensor_bytes);
  const auto book = core::checked_mul<std::uint64_t>(clusters, tensor_bytes);
  const auto books = book ? core::checked_mul<std::uint64_t>(2, *book) : std::nullopt;
  const auto ids = core::checked_mul<std::uint64_t>(4, id_words);
  const auto raws = core::checked_mul<std::uint64_t>(4, raw_words(rows));
  if (!original || !books || !ids || !raws) {
    throw format_error{"ibp: the savings of " + std::to_string(rows) + " rows of " +
                       std::to_string(tensor_bytes) + " B do not fit in 64-bit byte counts"};
  }
  cluster_savings s;
  s.original_bytes = *original;
  s.codebook_bytes = *books;
  s.id_bytes = *ids;
  s.raw_bitmask_bytes = *raws;
  return s;
}

}  // namespace detail

/// The savings of compressing cs.rows rows of `data` with the clustered codebook cs.
inline cluster_savings measure_savings(std::span<const std::byte> data, const cluster_set& cs) {
  validate(cs);
  const std::size_t l = cs.tensor_bytes;
  const auto need = core::checked_mul<std::uint64_t>(cs.rows, l);
  SQUEEZE_EXPECTS(need && data.size() >= *need,
                  "ibp::measure_savings: data holds fewer than rows x tensor_bytes bytes");
  cluster_savings s = detail::savings_shape(cs.rows, l, cs.clusters, cs.ids.size());
  for (std::uint64_t r = 0; r < cs.rows; ++r)
    s.stored_bytes +=
        stored_bytes(data.data() + r * l, cs.unchecked_book(cs.unchecked_cluster_of(r)));
  return s;
}

/// The savings of compressing `rows` rows of `data` with one codebook (k = 1, no ids):
/// the baseline clustered compression is compared with.
inline cluster_savings measure_savings(std::span<const std::byte> data, std::size_t rows,
                                       const codebook& cb) {
  validate(cb);
  const auto need = core::checked_mul<std::uint64_t>(rows, cb.tensor_bytes);
  SQUEEZE_EXPECTS(need && data.size() >= *need,
                  "ibp::measure_savings: data holds fewer than rows x tensor_bytes bytes");
  cluster_savings s = detail::savings_shape(rows, cb.tensor_bytes, 1, 0);
  s.stored_bytes = stored_total(data, rows, cb);
  return s;
}

/// The savings of a set compressed with cs, read from the set itself: a condensed row's
/// size from its offsets, an in-place row's from its participation bits.
inline cluster_savings measure_savings(const compressed_set& set, const cluster_set& cs) {
  validate(cs);
  if (set.rows != cs.rows) {
    throw format_error{"ibp: a compressed set of " + std::to_string(set.rows) +
                       " rows with cluster ids for " + std::to_string(cs.rows) + " rows"};
  }
  const std::uint32_t l = cs.tensor_bytes;
  cluster_savings s = detail::savings_shape(cs.rows, l, cs.clusters, cs.ids.size());
  detail::check_set_shape(set, l);
  for (std::uint64_t r = 0; r < set.rows; ++r) {
    const std::span<const std::byte> in = detail::stored_row(set, l, r);
    const bool raw = set.unchecked_is_raw(r);  // the shape was checked
    if (set.kind == layout::condensed || raw) {
      s.stored_bytes += raw ? l : in.size();
      continue;
    }
    const codebook_ref cb = cs.unchecked_book(cs.unchecked_cluster_of(r));
    std::uint64_t bits = cb.chunks();
    for (std::uint32_t i = 0; i < cb.chunks(); ++i)
      bits += core::read_bits(in.data(), i, 1) != 0 ? cb.free_bits(i) : 8 * cb.chunk_len(i);
    s.stored_bytes += (bits + 7) / 8;
  }
  return s;
}

}  // namespace squeeze::ibp
