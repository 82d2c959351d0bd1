// SPDX-License-Identifier: Apache-2.0
// ibp/cluster.hpp on the host: the packing of cluster ids, k-means on bit similarity,
// clustered compression against one codebook (net of metadata), byte-exact round trips in
// both layouts, degenerate shapes and malformed clustered codebooks.
#include <squeeze/ibp/cluster.hpp>
#include <squeeze/ibp/dataset.hpp>
#include <squeeze/ibp/format.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace ibp = squeeze::ibp;

namespace {

// Rows of `groups` kinds: each group has its own random high nibble per byte, shared by
// all of its rows; the low nibbles are random per row. group_of[r] says which.
struct grouped_data {
  std::vector<std::byte> bytes;
  std::vector<std::uint32_t> group_of;
};

grouped_data make_groups(std::size_t rows, std::size_t l, std::uint32_t groups,
                         std::mt19937_64& rng) {
  std::vector<std::vector<unsigned>> high(groups, std::vector<unsigned>(l));
  for (auto& g : high)
    for (auto& h : g) h = static_cast<unsigned>(rng() & 0xF0u);
  grouped_data d;
  d.bytes.resize(rows * l);
  d.group_of.resize(rows);
  for (std::size_t r = 0; r < rows; ++r) {
    const auto g = static_cast<std::uint32_t>(rng() % groups);
    d.group_of[r] = g;
    for (std::size_t j = 0; j < l; ++j)
      d.bytes[r * l + j] = static_cast<std::byte>(high[g][j] | (rng() & 0x0Fu));
  }
  return d;
}

std::vector<std::byte> random_bytes(std::size_t n, std::mt19937_64& rng) {
  std::vector<std::byte> v(n);
  for (auto& b : v) b = static_cast<std::byte>(rng());
  return v;
}

// A valid random codebook: random mask, bitval inside it.
ibp::codebook random_codebook(std::uint32_t l, std::uint32_t chunk, std::mt19937_64& rng) {
  ibp::codebook cb{random_bytes(l, rng), random_bytes(l, rng), l, chunk};
  for (std::size_t b = 0; b < l; ++b) cb.bitval[b] &= cb.mask[b];
  return cb;
}

// True when the assignment equals the groups up to a relabeling (a bijection).
bool same_partition(const std::vector<std::uint32_t>& a, const std::vector<std::uint32_t>& b) {
  if (a.size() != b.size()) return false;
  std::map<std::uint32_t, std::uint32_t> ab, ba;
  for (std::size_t r = 0; r < a.size(); ++r) {
    const auto [i, fresh] = ab.emplace(a[r], b[r]);
    const auto [j, fresh2] = ba.emplace(b[r], a[r]);
    if (i->second != b[r] || j->second != a[r]) return false;
  }
  return true;
}

std::vector<std::uint32_t> ids_of(const ibp::cluster_set& cs) {
  std::vector<std::uint32_t> ids(cs.rows);
  for (std::uint64_t r = 0; r < cs.rows; ++r) ids[r] = cs.cluster_of(r);
  return ids;
}

// Compresses with cs in both layouts and checks the byte-exact round trip, that raw rows
// are exactly the ones stored in L bytes, and that the savings read from each compressed
// set agree with the ones measured on the data.
void expect_round_trip(const std::vector<std::byte>& data, const ibp::cluster_set& cs,
                       const std::string& what) {
  const std::size_t rows = cs.rows, l = cs.tensor_bytes;
  const ibp::cluster_savings measured = ibp::measure_savings(data, cs);
  for (const ibp::layout kind : {ibp::layout::in_place, ibp::layout::condensed}) {
    const std::string where = what + (kind == ibp::layout::in_place ? " in place" : " condensed");
    const ibp::compressed_set set = ibp::compress(data, rows, cs, kind);
    std::vector<std::byte> back(rows * l, std::byte{0xA5});
    ibp::decompress(set, cs, back);
    ASSERT_EQ(back, data) << where;
    for (std::uint64_t r = 0; r < rows; ++r) {
      const std::uint32_t s = ibp::stored_bytes(data.data() + r * l, cs.book(cs.cluster_of(r)));
      ASSERT_EQ(set.is_raw(r), s == l) << where << " row " << r;
      if (kind == ibp::layout::condensed) {
        ASSERT_EQ(set.offsets[r + 1] - set.offsets[r], s) << where << " row " << r;
      }
    }
    const ibp::cluster_savings read = ibp::measure_savings(set, cs);
    EXPECT_EQ(read.stored_bytes, measured.stored_bytes) << where;
    EXPECT_EQ(read.metadata_bytes(), measured.metadata_bytes()) << where;
  }
}

}  // namespace

TEST(IbpCluster, IdBitsAndPackingRoundTripAcrossWordBoundaries) {
  std::mt19937_64 rng{0xC1D5};
  const std::uint32_t ks[] = {1, 2, 3, 5, 16, 1000};
  const std::uint32_t bits[] = {0, 1, 2, 3, 4, 10};
  for (std::size_t t = 0; t < std::size(ks); ++t) {
    const std::uint32_t k = ks[t];
    EXPECT_EQ(ibp::cluster_id_bits(k), bits[t]) << "k=" << k;
    const std::size_t rows = 1003;  // for k > 1, 1003 · id_bits leaves the last word partial
    std::vector<std::uint32_t> ids(rows);
    for (auto& id : ids) id = static_cast<std::uint32_t>(rng() % k);
    ids.back() = k - 1;  // the largest id, in the last (partial) word
    std::vector<ibp::codebook> books;
    for (std::uint32_t c = 0; c < k; ++c) books.push_back(random_codebook(3, 2, rng));
    const ibp::cluster_set cs = ibp::make_cluster_set(books, ids);
    ibp::validate(cs);
    EXPECT_EQ(cs.clusters, k);
    EXPECT_EQ(cs.id_bits, bits[t]);
    EXPECT_EQ(cs.ids.size(), (rows * bits[t] + 31) / 32) << "k=" << k;
    const ibp::cluster_ref ref = cs.ref();
    for (std::size_t r = 0; r < rows; ++r) {
      ASSERT_EQ(cs.cluster_of(r), ids[r]) << "k=" << k << " row " << r;
      ASSERT_EQ(ref.unchecked_cluster_of(r), ids[r]) << "k=" << k << " row " << r;
      // The layout itself: bit i of row r's id is bit r·id_bits + i of the word array.
      for (std::uint32_t i = 0; i < bits[t]; ++i) {
        const std::uint64_t at = r * bits[t] + i;
        ASSERT_EQ((cs.ids[at / 32] >> (at % 32)) & 1u, (ids[r] >> i) & 1u) << "k=" << k;
      }
    }
    // Codebook c is the c-th one given.
    for (std::uint32_t c = 0; c < k; c += 1 + k / 7) {
      const ibp::codebook_ref b = cs.book(c);
      EXPECT_EQ(std::vector<std::byte>(b.mask, b.mask + 3), books[c].mask);
      EXPECT_EQ(std::vector<std::byte>(b.bitval, b.bitval + 3), books[c].bitval);
    }
  }
  // k = 5 by hand: ids 4, 1, 3 -> 0b011'001'100.
  const std::vector<std::uint32_t> few{4, 1, 3};
  EXPECT_EQ(ibp::pack_cluster_ids(few, 3), std::vector<std::uint32_t>{0b011'001'100u});
  EXPECT_THROW(ibp::pack_cluster_ids(few, 2), squeeze::invalid_argument);  // 4 needs 3 bits
}

TEST(IbpCluster, FastSizingMatchesTheReferenceEncoder) {
  // detail::chunk_books sizes rows eight bytes at a time; it must agree with
  // ibp::stored_bytes for every chunk size, odd lengths and rows that half participate.
  std::mt19937_64 rng{0x512E};
  for (const std::uint32_t chunk : {1u, 2u, 4u, 8u}) {
    for (const std::uint32_t l : {1u, 3u, 7u, 8u, 9u, 13u, 64u, 100u}) {
      std::vector<ibp::codebook> books;
      for (int c = 0; c < 3; ++c) {
        ibp::codebook cb = random_codebook(l, chunk, rng);
        for (auto& m : cb.mask) m |= static_cast<std::byte>(rng() & 0xF0u);  // denser masks
        for (std::size_t b = 0; b < l; ++b) cb.bitval[b] &= cb.mask[b];
        books.push_back(std::move(cb));
      }
      const ibp::cluster_set cs = ibp::make_cluster_set(books, std::vector<std::uint32_t>{});
      const ibp::detail::chunk_books fast{cs.masks.data(), cs.bitvals.data(), 3, l, chunk};
      std::vector<std::uint64_t> x;
      for (int t = 0; t < 200; ++t) {
        // Book 0's bitval with random free bits, then a few random bytes.
        std::vector<std::byte> row = random_bytes(l, rng);
        for (std::size_t b = 0; b < l; ++b)
          row[b] = (row[b] & ~books[0].mask[b]) | books[0].bitval[b];
        for (int flips = static_cast<int>(rng() % 3); flips > 0; --flips)
          row[rng() % l] = static_cast<std::byte>(rng());
        fast.load(row.data(), x);
        for (std::uint32_t c = 0; c < 3; ++c) {
          ASSERT_EQ(fast.stored(c, x), ibp::stored_bytes(row.data(), cs.book(c)))
              << "C=" << chunk << " L=" << l << " book " << c;
        }
      }
    }
  }
}

TEST(IbpCluster, KmeansSeparatesGroupsWithDifferentInvariantBits) {
  std::mt19937_64 rng{0x4E4};
  const std::size_t rows = 3000, l = 64;
  const grouped_data d = make_groups(rows, l, 4, rng);
  for (const std::uint64_t seed : {1u, 2u, 3u, 4u, 5u}) {
    ibp::cluster_options opt;
    opt.clusters = 4;
    opt.seed = seed;
    const auto assign = ibp::kmeans_bits(d.bytes, rows, l, opt);
    ASSERT_EQ(assign.size(), rows);
    EXPECT_TRUE(same_partition(assign, d.group_of)) << "seed " << seed;
    // The same from a sample of 400 rows (all rows still assigned).
    opt.sample_rows = 400;
    EXPECT_TRUE(same_partition(ibp::kmeans_bits(d.bytes, rows, l, opt), d.group_of))
        << "sampled, seed " << seed;
    // Deterministic for a seed, with either start.
    for (const ibp::kmeans_init init :
         {ibp::kmeans_init::plus_plus, ibp::kmeans_init::random_rows}) {
      opt.init = init;
      EXPECT_EQ(ibp::kmeans_bits(d.bytes, rows, l, opt), ibp::kmeans_bits(d.bytes, rows, l, opt));
    }
  }
  // k = 1 puts everything in cluster 0.
  ibp::cluster_options one;
  one.clusters = 1;
  EXPECT_EQ(ibp::kmeans_bits(d.bytes, rows, l, one), std::vector<std::uint32_t>(rows, 0));
}

TEST(IbpCluster, ClusteredCompressionBeatsOneCodebookAndRoundTrips) {
  std::mt19937_64 rng{0xC0DE};
  const std::size_t rows = 800;
  for (const std::size_t l : {1u, 3u, 13u, 100u}) {
    const grouped_data d = make_groups(rows, l, 4, rng);
    const auto lu = static_cast<std::uint32_t>(l);
    for (const std::uint32_t chunk : {1u, 2u, 4u, 8u}) {
      const std::string what = "L=" + std::to_string(l) + " C=" + std::to_string(chunk);
      ibp::cluster_options opt;
      opt.clusters = 4;
      const ibp::cluster_set four = ibp::make_clusters(d.bytes, rows, lu, chunk, opt);
      opt.clusters = 1;
      const ibp::cluster_set one = ibp::make_clusters(d.bytes, rows, lu, chunk, opt);
      ibp::validate(four);
      EXPECT_EQ(four.clusters, 4u);
      EXPECT_EQ(four.id_bits, 2u);
      EXPECT_EQ(one.id_bits, 0u);
      EXPECT_TRUE(one.ids.empty());
      expect_round_trip(d.bytes, four, what + " k=4");
      expect_round_trip(d.bytes, one, what + " k=1");

      // Every row sits with the codebook that stores it smallest (ties: the lower id).
      for (std::size_t r = 0; r < rows; ++r) {
        const std::byte* row = d.bytes.data() + r * l;
        const std::uint32_t id = four.cluster_of(r);
        for (std::uint32_t c = 0; c < four.clusters; ++c) {
          const std::uint32_t mine = ibp::stored_bytes(row, four.book(id));
          const std::uint32_t other = ibp::stored_bytes(row, four.book(c));
          ASSERT_TRUE(mine < other || (mine == other && id <= c)) << what << " row " << r;
        }
      }

      // k = 1 is the single codebook of the threshold sweep over all rows.
      const auto counts = ibp::count_set_bits(d.bytes, rows, lu);
      const ibp::sweep_result swept = ibp::sweep_threshold(d.bytes, rows, counts, chunk);
      EXPECT_EQ(one.masks, swept.best.mask) << what;
      EXPECT_EQ(one.bitvals, swept.best.bitval) << what;
      const ibp::cluster_savings base = ibp::measure_savings(d.bytes, rows, swept.best);
      const ibp::cluster_savings s1 = ibp::measure_savings(d.bytes, one);
      const ibp::cluster_savings s4 = ibp::measure_savings(d.bytes, four);
      EXPECT_EQ(s1.stored_bytes, swept.stored_bytes) << what;
      EXPECT_EQ(s1.stored_bytes, base.stored_bytes) << what;
      EXPECT_EQ(s1.net_saving(), base.net_saving()) << what;

      // The metadata, counted as documented.
      EXPECT_EQ(s4.original_bytes, rows * l);
      EXPECT_EQ(s4.codebook_bytes, 2 * 4 * l);
      EXPECT_EQ(s4.id_bytes, 4 * ((rows * 2 + 31) / 32));
      EXPECT_EQ(s4.raw_bitmask_bytes, 4 * ((rows + 31) / 32));
      EXPECT_EQ(s1.codebook_bytes, 2 * l);
      EXPECT_EQ(s1.id_bytes, 0u);
      EXPECT_DOUBLE_EQ(s4.net_saving(),
                       1.0 - static_cast<double>(s4.stored_bytes + s4.codebook_bytes + s4.id_bytes +
                                                 s4.raw_bitmask_bytes) /
                                 static_cast<double>(rows * l));
      EXPECT_LT(s4.net_saving(), s4.saving());

      const std::uint64_t chunks = (l + chunk - 1) / chunk;
      if (l > 1) {
        // Each cluster is one group: exactly its high nibbles are invariant, and every row
        // keeps its participation bits and low nibbles.
        EXPECT_EQ(s4.stored_bytes, rows * ((chunks + 4 * l + 7) / 8)) << what;
      }
      if (l == 1) {
        // 4 free bits + 1 participation bit round up to the whole byte: all rows raw.
        EXPECT_EQ(s4.stored_bytes, rows * l) << what;
        EXPECT_EQ(s1.stored_bytes, rows * l) << what;
      } else if (l >= 13) {
        // Per cluster every high nibble is invariant: about half of every row goes.
        EXPECT_GT(s4.saving(), 0.25) << what;
        EXPECT_GT(s4.net_saving(), s1.net_saving() + 0.15) << what;
      } else {
        EXPECT_GT(s4.net_saving(), s1.net_saving()) << what;
      }
    }
  }
}

TEST(IbpCluster, MoreClustersThanRows) {
  std::mt19937_64 rng{0x5};
  const std::size_t rows = 5;
  const std::uint32_t l = 13;
  const auto data = random_bytes(rows * l, rng);
  for (const std::uint32_t chunk : {1u, 2u, 4u, 8u}) {
    ibp::cluster_options opt;
    opt.clusters = 8;
    const ibp::cluster_set cs = ibp::make_clusters(data, rows, l, chunk, opt);
    EXPECT_EQ(cs.clusters, 8u);
    EXPECT_EQ(cs.id_bits, 3u);
    EXPECT_EQ(cs.ids.size(), 1u);  // 5 · 3 bits
    // Each row is its own one-row cluster: every bit invariant, the row shrinks to its
    // participation bits. The three clusters left over stay empty with Mask = 0.
    const auto ids = ids_of(cs);
    EXPECT_EQ(std::set<std::uint32_t>(ids.begin(), ids.end()).size(), rows);
    const std::uint32_t k_chunks = (13 + chunk - 1) / chunk;
    for (std::size_t r = 0; r < rows; ++r)
      EXPECT_EQ(ibp::stored_bytes(data.data() + r * l, cs.book(ids[r])), (k_chunks + 7) / 8);
    std::size_t empty = 0;
    for (std::uint32_t c = 0; c < cs.clusters; ++c) {
      if (std::find(ids.begin(), ids.end(), c) != ids.end()) continue;
      ++empty;
      const ibp::codebook_ref b = cs.book(c);
      EXPECT_EQ(std::vector<std::byte>(b.mask, b.mask + l), std::vector<std::byte>(l));
    }
    EXPECT_EQ(empty, 3u);
    expect_round_trip(data, cs, "k=8 > 5 rows C=" + std::to_string(chunk));
  }
}

TEST(IbpCluster, RowsThatFitNoClusterStayRaw) {
  std::mt19937_64 rng{0x4A3};
  const std::size_t rows = 1000;
  const std::uint32_t l = 64;
  grouped_data d = make_groups(rows, l, 4, rng);
  std::vector<bool> noise(rows, false);
  for (std::size_t r = 3; r < rows; r += 10) {  // one row in ten is uniform noise
    noise[r] = true;
    for (std::size_t j = 0; j < l; ++j) d.bytes[r * l + j] = static_cast<std::byte>(rng());
  }
  for (const std::uint32_t chunk : {1u, 4u}) {
    ibp::cluster_options opt;
    opt.clusters = 4;
    const ibp::cluster_set cs = ibp::make_clusters(d.bytes, rows, l, chunk, opt);
    const ibp::compressed_set set = ibp::compress(d.bytes, rows, cs, ibp::layout::condensed);
    for (std::size_t r = 0; r < rows; ++r) EXPECT_EQ(set.is_raw(r), noise[r]) << "row " << r;
    // The grouped rows still cluster by group.
    std::vector<std::uint32_t> got, want;
    for (std::size_t r = 0; r < rows; ++r) {
      if (noise[r]) continue;
      got.push_back(cs.cluster_of(r));
      want.push_back(d.group_of[r]);
    }
    EXPECT_TRUE(same_partition(got, want));
    expect_round_trip(d.bytes, cs, "noise rows C=" + std::to_string(chunk));
  }
}

TEST(IbpCluster, MalformedInputThrowsWithTheReason) {
  std::mt19937_64 rng{0xBAD5};
  const std::size_t rows = 40;
  const std::uint32_t l = 24;
  const grouped_data d = make_groups(rows, l, 3, rng);
  ibp::cluster_options opt;
  opt.clusters = 3;
  const ibp::cluster_set good = ibp::make_clusters(d.bytes, rows, l, 4, opt);
  ibp::validate(good);
  const ibp::compressed_set set = ibp::compress(d.bytes, rows, good, ibp::layout::condensed);
  std::vector<std::byte> out(rows * l);

  const auto expect_error = [&](const ibp::cluster_set& cs, const std::string& needle) {
    try {
      ibp::validate(cs);
      FAIL() << "no exception, expected: " << needle;
    } catch (const squeeze::format_error& e) {
      EXPECT_NE(std::string{e.what()}.find(needle), std::string::npos) << e.what();
    }
    // decompress and compress refuse it too.
    EXPECT_THROW(ibp::decompress(set, cs, out), squeeze::format_error) << needle;
    EXPECT_THROW(ibp::compress(d.bytes, rows, cs, ibp::layout::in_place), squeeze::format_error)
        << needle;
  };
  auto bad = good;  // k = 3 takes 2-bit ids: id 3 names no cluster
  squeeze::core::deposit_bits(bad.ids.data(), 7 * 2, 2, 3u);
  expect_error(bad, "row 7 has cluster id 3, but there are only 3 clusters");
  bad = good;
  bad.masks.pop_back();
  expect_error(bad, "masks and bitvals must hold clusters x tensor_bytes = 72 bytes");
  bad = good;
  bad.bitvals.push_back(std::byte{0});
  expect_error(bad, "got 72 and 73");
  bad = good;
  bad.ids.push_back(0);
  expect_error(bad, "40 rows of 2-bit ids need 3 id words, got 4");
  bad = good;
  bad.id_bits = 3;
  expect_error(bad, "id_bits is 3, but 3 clusters need 2");
  bad = good;
  bad.masks[l + 5] = std::byte{0x0F};
  bad.bitvals[l + 5] = std::byte{0x10};
  expect_error(bad, "cluster 1's bitval has bits outside the mask at byte 5");
  bad = good;
  bad.chunk_bytes = 3;
  EXPECT_THROW(ibp::validate(bad), squeeze::invalid_argument);
  bad = good;
  bad.clusters = 0;
  bad.id_bits = 0;
  try {
    ibp::validate(bad);
    FAIL() << "k = 0 accepted";
  } catch (const squeeze::invalid_argument& e) {
    EXPECT_NE(std::string{e.what()}.find("k = 0"), std::string::npos) << e.what();
  }

  // Rows of the set and of the ids disagree.
  auto fewer =
      ibp::compress(d.bytes, rows - 1,
                    ibp::make_cluster_set(std::vector<ibp::codebook>{random_codebook(l, 4, rng)},
                                          std::vector<std::uint32_t>(rows - 1, 0)),
                    ibp::layout::condensed);
  try {
    ibp::decompress(fewer, good, out);
    FAIL() << "row count mismatch accepted";
  } catch (const squeeze::format_error& e) {
    EXPECT_NE(std::string{e.what()}.find("39 rows with cluster ids for 40"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(ibp::compress(d.bytes, rows - 1, good, ibp::layout::condensed),
               squeeze::invalid_argument);
  // A malformed compressed set is still reported by row.
  auto cut = set;
  cut.offsets[4] = cut.data.size() + 1;
  EXPECT_THROW(ibp::decompress(cut, good, out), squeeze::format_error);

  // Bad arguments to the preprocessing.
  const auto expect_invalid = [&](const ibp::cluster_options& o, std::uint32_t chunk, std::size_t n,
                                  const std::string& needle) {
    try {
      ibp::make_clusters(d.bytes, n, l, chunk, o);
      FAIL() << "no exception, expected: " << needle;
    } catch (const squeeze::invalid_argument& e) {
      EXPECT_NE(std::string{e.what()}.find(needle), std::string::npos) << e.what();
    }
  };
  ibp::cluster_options zero = opt;
  zero.clusters = 0;
  expect_invalid(zero, 4, rows, "needs k >= 1 clusters, got k = 0");
  EXPECT_THROW(ibp::kmeans_bits(d.bytes, rows, l, zero), squeeze::invalid_argument);
  expect_invalid(opt, 3, rows, "chunk_bytes must be 1, 2, 4 or 8, got 3");
  expect_invalid(opt, 4, rows + 1, "data holds fewer than rows x tensor_bytes bytes");
  expect_invalid(opt, 4, 0, "needs at least one row");
  ibp::cluster_options no_sweep = opt;
  no_sweep.sweep_steps = 0;
  expect_invalid(no_sweep, 4, rows, "sweep_steps must be positive");

  // make_cluster_set: ids beyond the codebooks, codebooks of different shapes.
  const std::vector<ibp::codebook> two{random_codebook(l, 4, rng), random_codebook(l, 4, rng)};
  EXPECT_THROW(ibp::make_cluster_set(two, std::vector<std::uint32_t>{0, 1, 2}),
               squeeze::invalid_argument);
  std::vector<ibp::codebook> mixed = two;
  mixed[1].chunk_bytes = 8;
  EXPECT_THROW(ibp::make_cluster_set(mixed, std::vector<std::uint32_t>{0, 1}),
               squeeze::invalid_argument);
  EXPECT_THROW(ibp::make_cluster_set(std::vector<ibp::codebook>{}, std::vector<std::uint32_t>{}),
               squeeze::invalid_argument);
}

// ---- robustness: sizes from a cluster set's fields never wrap; accessors check ----------

// ceil(rows · id_bits / 32) without forming rows · id_bits.
static_assert(ibp::cluster_id_words(std::uint64_t{1} << 63, 2) == std::uint64_t{1} << 59);
static_assert(ibp::cluster_id_words(~std::uint64_t{0}, 32) == ~std::uint64_t{0});
static_assert(ibp::cluster_id_words(1003, 10) == (1003 * 10 + 31) / 32);

TEST(IbpCluster, RowsTimesIdBitsThatWrapAreRefused) {
  // k = 3: 2-bit ids, and not a power of two, so validate reads every row's id. With
  // rows = 2^63, rows x id_bits = 2^64 wrapped to 0 id words: the empty id array "matched"
  // and validate read ids[0] of it.
  std::mt19937_64 rng{0x3A9};
  const std::vector<ibp::codebook> books{random_codebook(8, 4, rng), random_codebook(8, 4, rng),
                                         random_codebook(8, 4, rng)};
  ibp::cluster_set cs = ibp::make_cluster_set(books, std::vector<std::uint32_t>{});
  ASSERT_EQ(cs.id_bits, 2u);
  for (const std::uint64_t rows : {std::uint64_t{1} << 63, (std::uint64_t{1} << 63) + 16,
                                   ~std::uint64_t{0}, std::uint64_t{1} << 62}) {
    cs.rows = rows;
    EXPECT_THROW(ibp::validate(cs), squeeze::format_error) << rows;
    EXPECT_THROW((void)cs.cluster_of(0), squeeze::format_error) << rows;
  }
  // And a compressed set of one row with such ids is refused, not read.
  ibp::compressed_set set;
  set.rows = 1;
  set.offsets = {0, 8};
  set.data.resize(8);
  set.raw = {1};
  cs.rows = std::uint64_t{1} << 63;
  std::vector<std::byte> out(8);
  EXPECT_THROW(ibp::decompress(set, cs, out), squeeze::format_error);
  EXPECT_THROW((void)ibp::measure_savings(set, cs), squeeze::format_error);
}

TEST(IbpCluster, AccessorsCheckTheRowAndTheCluster) {
  std::mt19937_64 rng{0xACC5};
  const std::size_t rows = 70;
  std::vector<std::uint32_t> ids(rows);
  for (auto& id : ids) id = static_cast<std::uint32_t>(rng() % 5);
  std::vector<ibp::codebook> books;
  for (int c = 0; c < 5; ++c) books.push_back(random_codebook(6, 2, rng));
  const ibp::cluster_set good = ibp::make_cluster_set(books, ids);
  EXPECT_EQ(good.cluster_of(rows - 1), ids.back());
  EXPECT_EQ(good.book(4).mask, good.masks.data() + 4 * 6);
  EXPECT_THROW((void)good.cluster_of(rows), squeeze::invalid_argument);
  EXPECT_THROW((void)good.cluster_of(~std::uint64_t{0}), squeeze::invalid_argument);
  EXPECT_THROW((void)good.book(5), squeeze::invalid_argument);
  EXPECT_THROW((void)good.book(~0u), squeeze::invalid_argument);
  auto bad = good;
  bad.ids.pop_back();  // the last rows' ids are gone
  EXPECT_THROW((void)bad.cluster_of(rows - 1), squeeze::format_error);
  EXPECT_EQ(bad.cluster_of(0), ids[0]);  // the ids still there read as before
  bad = good;
  bad.masks.resize(4 * 6);  // codebook 4 is gone
  EXPECT_THROW((void)bad.book(4), squeeze::format_error);
  EXPECT_NO_THROW((void)bad.book(3));
  bad = good;
  bad.id_bits = 40;
  EXPECT_THROW((void)bad.cluster_of(0), squeeze::format_error);
}

TEST(IbpCluster, ValidateAndDecompressRowAgreeWithDecompress) {
  std::mt19937_64 rng{0xD15};
  const std::size_t rows = 60;
  const std::uint32_t l = 20;
  const grouped_data d = make_groups(rows, l, 3, rng);
  ibp::cluster_options opt;
  opt.clusters = 3;
  const ibp::cluster_set cs = ibp::make_clusters(d.bytes, rows, l, 4, opt);
  for (const ibp::layout kind : {ibp::layout::in_place, ibp::layout::condensed}) {
    const auto set = ibp::compress(d.bytes, rows, cs, kind);
    ibp::validate(set, cs);
    std::vector<std::byte> row(l);
    for (std::uint64_t r = 0; r < rows; ++r) {
      ibp::decompress_row(set, cs, r, row);
      ASSERT_TRUE(
          std::equal(row.begin(), row.end(), d.bytes.begin() + static_cast<std::ptrdiff_t>(r * l)))
          << "row " << r;
    }
    EXPECT_THROW(ibp::decompress_row(set, cs, rows, row), squeeze::invalid_argument);
    auto cut = set;
    cut.rows = rows - 1;
    EXPECT_THROW(ibp::validate(cut, cs), squeeze::format_error);
  }
}
