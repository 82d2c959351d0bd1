// SPDX-License-Identifier: Apache-2.0
// io/graph.hpp: the graph invariants and validate() naming each broken one; the generators
// (clean-up invariants checked independently of validate, determinism per seed and across
// thread counts, pinned outputs, kron's skewed against urand's flat degrees, bad options);
// the edge-list, Matrix Market and binary readers and writers (comments, 1-based ids,
// directed input, every malformed line, missing files, round trips, corrupted and truncated
// binary files); BFS and CC references against hand-made graphs and brute-force properties;
// the ODT FirstVertexList on hand-made cases and against its definition.
#include <squeeze/io/graph.hpp>

#include <gtest/gtest.h>

#include <stdlib.h>  // mkdtemp

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <sstream>
#include <streambuf>
#include <string>
#include <utility>
#include <vector>

#include "common/pipe_buffer.hpp"

using squeeze::test::pipe_buffer;

namespace io = squeeze::io;

namespace {

constexpr std::uint32_t U = io::unreached;

io::graph make(std::uint64_t n, const std::vector<io::graph_edge>& edges, bool directed = false) {
  return io::graph_from_edges(n, edges, directed);
}

// The what() of the exception E that f() throws ("" when it throws none).
template <class E, class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "";
}

// FNV-1a over the graph's arrays: pins generator output.
std::uint64_t fingerprint(const io::graph& g) {
  std::uint64_t h = 0xcbf29ce484222325u;
  const auto add = [&](std::uint64_t x) {
    for (int i = 0; i < 8; ++i) {
      h ^= (x >> (8 * i)) & 0xff;
      h *= 0x100000001b3u;
    }
  };
  for (const std::uint64_t x : g.row_offsets) add(x);
  for (const std::uint32_t x : g.neighbors) add(x);
  return h;
}

// Checks, without validate(), that every list is in range, strictly increasing (sorted, no
// duplicates) and free of self-loops, and that the edge set equals its reverse.
void expect_clean_undirected(const io::graph& g) {
  const std::uint64_t n = g.num_vertices();
  ASSERT_EQ(g.row_offsets.size(), n + 1);
  ASSERT_EQ(g.row_offsets.front(), 0u);
  ASSERT_EQ(g.row_offsets.back(), g.neighbors.size());
  EXPECT_FALSE(g.directed);
  std::vector<std::uint64_t> pairs, reversed;  // u << 32 | v
  pairs.reserve(g.neighbors.size());
  for (std::uint64_t u = 0; u < n; ++u) {
    ASSERT_LE(g.row_offsets[u], g.row_offsets[u + 1]);
    for (std::uint64_t k = g.row_offsets[u]; k < g.row_offsets[u + 1]; ++k) {
      const std::uint64_t v = g.neighbors[k];
      ASSERT_LT(v, n);
      ASSERT_NE(v, u) << "self-loop at " << u;
      if (k > g.row_offsets[u]) {
        ASSERT_LT(g.neighbors[k - 1], v) << "vertex " << u;
      }
      pairs.push_back(u << 32 | v);
      reversed.push_back(v << 32 | u);
    }
  }
  std::sort(reversed.begin(), reversed.end());
  EXPECT_TRUE(pairs == reversed) << "the edge set is not symmetric";
}

std::vector<std::uint64_t> degrees(const io::graph& g) {
  std::vector<std::uint64_t> d(g.num_vertices());
  for (std::uint32_t v = 0; v < d.size(); ++v) d[v] = g.degree(v);
  return d;
}

struct degree_summary {
  double max_over_mean = 0;
  double top_percent_share = 0;  // entries held by the 1 % highest-degree vertices
  double isolated = 0;           // fraction of vertices without neighbors
};

degree_summary summarize(const io::graph& g) {
  std::vector<std::uint64_t> d = degrees(g);
  std::sort(d.rbegin(), d.rend());
  const double mean = static_cast<double>(g.num_edges()) / static_cast<double>(d.size());
  std::uint64_t top = 0;
  for (std::size_t i = 0; i < d.size() / 100; ++i) top += d[i];
  const auto isolated = static_cast<double>(std::count(d.begin(), d.end(), 0u));
  return {static_cast<double>(d[0]) / mean,
          static_cast<double>(top) / static_cast<double>(g.num_edges()),
          isolated / static_cast<double>(d.size())};
}

// A temporary directory per test, removed with everything in it.
class GraphFile : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string name = (std::filesystem::temp_directory_path() / "squeeze-graph-XXXXXX").string();
    ASSERT_NE(mkdtemp(name.data()), nullptr);
    dir_ = name;
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  std::filesystem::path write_text(const std::string& file, const std::string& text) {
    const std::filesystem::path path = dir_ / file;
    std::ofstream{path, std::ios::binary} << text;
    return path;
  }
  std::vector<unsigned char> read_bytes(const std::filesystem::path& path) {
    std::ifstream in{path, std::ios::binary};
    return {std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{}};
  }
  void write_bytes(const std::filesystem::path& path, const std::vector<unsigned char>& bytes) {
    std::ofstream out{path, std::ios::binary | std::ios::trunc};
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
  }
  std::filesystem::path dir_;
};

// 0-1, 0-2, 1-3, 2-3, 3-4 | 5-6 | 7 isolated
io::graph small_graph() {
  return make(8, {{0, 1}, {0, 2}, {1, 3}, {2, 3}, {3, 4}, {5, 6}});
}

// ---- the graph type and validate ---------------------------------------------------------

TEST(Graph, DefaultIsTheValidEmptyGraph) {
  const io::graph g;
  EXPECT_EQ(g.num_vertices(), 0u);
  EXPECT_EQ(g.num_edges(), 0u);
  EXPECT_NO_THROW(io::validate(g));
}

TEST(Graph, FromEdgesSymmetrizesSortsAndDropsSelfLoopsAndDuplicates) {
  const io::graph g = make(5, {{3, 1}, {1, 3}, {0, 4}, {2, 2}, {4, 0}, {3, 0}, {1, 3}});
  EXPECT_EQ(g.row_offsets, (std::vector<std::uint64_t>{0, 2, 3, 3, 5, 6}));
  EXPECT_EQ(g.neighbors, (std::vector<std::uint32_t>{3, 4, 3, 0, 1, 0}));
  EXPECT_EQ(g.num_vertices(), 5u);
  EXPECT_EQ(g.num_edges(), 6u);
  EXPECT_EQ(g.degree(3), 2u);
  EXPECT_EQ(std::vector<std::uint32_t>(g.neighbors_of(3).begin(), g.neighbors_of(3).end()),
            (std::vector<std::uint32_t>{0, 1}));
  EXPECT_NO_THROW(io::validate(g));
  expect_clean_undirected(g);

  const io::graph d = make(3, {{2, 0}, {0, 2}, {0, 1}, {0, 2}, {1, 1}}, true);
  EXPECT_TRUE(d.directed);
  EXPECT_EQ(d.row_offsets, (std::vector<std::uint64_t>{0, 2, 2, 3}));
  EXPECT_EQ(d.neighbors, (std::vector<std::uint32_t>{1, 2, 0}));
  EXPECT_NO_THROW(io::validate(d));
}

TEST(Graph, FromEdgesRefusesIdsOutsideTheGraph) {
  const std::string what = error_of<squeeze::invalid_argument>([] {
    (void)make(3, {{0, 1}, {1, 3}});
  });
  EXPECT_NE(what.find("edge 1 (1, 3)"), std::string::npos) << what;
  EXPECT_THROW((void)io::graph_from_edges(std::uint64_t{1} << 32, {}), squeeze::invalid_argument);
}

TEST(Graph, ValidateNamesEachBrokenInvariant) {
  const io::graph good = make(4, {{0, 1}, {0, 2}, {1, 2}, {2, 3}});
  ASSERT_NO_THROW(io::validate(good));
  const auto broken = [&](auto change, const char* expected) {
    io::graph g = good;
    change(g);
    const std::string what = error_of<squeeze::format_error>([&] { io::validate(g); });
    EXPECT_NE(what.find(expected), std::string::npos)
        << "expected '" << expected << "' in '" << what << "'";
  };
  broken([](io::graph& g) { g.row_offsets.clear(); }, "row_offsets is empty");
  broken([](io::graph& g) { g.row_offsets[0] = 1; }, "row_offsets[0] is 1");
  broken([](io::graph& g) { std::swap(g.row_offsets[1], g.row_offsets[2]); }, "not monotone");
  broken([](io::graph& g) { g.neighbors.push_back(0); }, "neighbors holds 9 entries");
  broken([](io::graph& g) { g.neighbors[0] = 7; }, "7 is out of range [0, 4)");
  broken([](io::graph& g) { g.neighbors[0] = 0; }, "self-loop");
  broken([](io::graph& g) { std::swap(g.neighbors[0], g.neighbors[1]); }, "strictly increase");
  broken([](io::graph& g) { g.neighbors[1] = 1; }, "strictly increase");  // duplicate
  // 0's list {1, 2} -> {1, 3}: 0 -> 3 has no 3 -> 0, and 2 -> 0 has no 0 -> 2.
  broken([](io::graph& g) { g.neighbors[1] = 3; }, "has no reverse");
  broken(
      [](io::graph& g) {
        g.row_offsets = {0, 1, 1};  // 0 -> 1 only
        g.neighbors = {1};
      },
      "edge 0 -> 1 has no reverse 1 -> 0");
  broken(
      [](io::graph& g) {
        g.row_offsets = {0, 0, 1};  // 1 -> 0 only
        g.neighbors = {0};
      },
      "edge 1 -> 0 has no reverse 0 -> 1");
  io::graph directed = good;
  directed.row_offsets = {0, 1, 1};
  directed.neighbors = {1};
  directed.directed = true;
  EXPECT_NO_THROW(io::validate(directed));
}

TEST(Graph, ValidateOnSeveralThreadsFindsWhatTheSerialPassFinds) {
  // 426 K entries: enough for 4 threads to split the lists and the symmetry check.
  const io::graph good = io::generate_kron({.scale = 14, .seed = 5});
  ASSERT_NO_THROW(io::validate(good, 4));
  const auto message = [](const io::graph& g, unsigned threads) {
    return error_of<squeeze::format_error>([&] { io::validate(g, threads); });
  };
  // Late in the list, where only the last thread looks: a neighbor moved up by one (still
  // sorted), so two edges lose their reverses.
  io::graph asym = good;
  std::uint32_t u = static_cast<std::uint32_t>(good.num_vertices()) - 1;
  std::uint64_t k = 0;
  for (;; --u) {
    const std::uint64_t begin = good.row_offsets[u], end = good.row_offsets[u + 1];
    for (k = begin; k + 1 < end; ++k) {
      if (good.neighbors[k] + 1 < good.neighbors[k + 1] && good.neighbors[k] + 1 != u) break;
    }
    if (k + 1 < end) break;
  }
  ++asym.neighbors[k];
  const std::string serial = message(asym, 1);
  EXPECT_NE(serial.find("has no reverse"), std::string::npos) << serial;
  EXPECT_EQ(message(asym, 4), serial);
  EXPECT_EQ(message(asym, 3), serial);

  io::graph range = good;
  range.neighbors[range.neighbors.size() / 2] = 1u << 20;
  EXPECT_NE(message(range, 4).find("out of range"), std::string::npos);
  io::graph order = good;
  std::swap(order.neighbors[order.neighbors.size() - 2], order.neighbors.back());
  EXPECT_EQ(message(order, 4), message(order, 1));
  EXPECT_NE(message(order, 4), "");
}

// ---- generators --------------------------------------------------------------------------

TEST(Generators, KronIsCleanUndirectedAndSized) {
  const io::graph g = io::generate_kron({.scale = 12, .seed = 3});
  EXPECT_EQ(g.num_vertices(), 4096u);
  expect_clean_undirected(g);
  EXPECT_NO_THROW(io::validate(g));
  // At most 2 * 16 * 4096 entries; duplicates and self-loops remove a part, not most.
  EXPECT_LE(g.num_edges(), 2u * 16 * 4096);
  EXPECT_GE(g.num_edges(), 2u * 16 * 4096 / 2);
  EXPECT_EQ(g.num_edges() % 2, 0u);

  const io::graph small = io::generate_kron({.scale = 6, .edge_factor = 4});
  EXPECT_EQ(small.num_vertices(), 64u);
  expect_clean_undirected(small);
  const io::graph one = io::generate_kron({.scale = 0});  // one vertex: every edge a self-loop
  EXPECT_EQ(one.num_vertices(), 1u);
  EXPECT_EQ(one.num_edges(), 0u);
}

TEST(Generators, UrandIsCleanUndirectedAndSized) {
  const io::graph g = io::generate_urand({.num_vertices = 10007, .edge_factor = 8, .seed = 5});
  EXPECT_EQ(g.num_vertices(), 10007u);
  expect_clean_undirected(g);
  EXPECT_NO_THROW(io::validate(g));
  EXPECT_LE(g.num_edges(), 2u * 8 * 10007);
  EXPECT_GE(g.num_edges(), 2u * 8 * 10007 * 99 / 100);  // few collisions among 10^8 pairs
  EXPECT_EQ(io::generate_urand({.num_vertices = 0}).num_vertices(), 0u);
  EXPECT_EQ(io::generate_urand({.num_vertices = 1}).num_edges(), 0u);
}

TEST(Generators, SameSeedSameGraphOtherSeedOtherGraph) {
  const io::kron_options k{.scale = 11, .seed = 42};
  const io::graph a = io::generate_kron(k);
  const io::graph b = io::generate_kron(k);
  EXPECT_EQ(a.row_offsets, b.row_offsets);
  EXPECT_EQ(a.neighbors, b.neighbors);
  const io::graph c = io::generate_kron({.scale = 11, .seed = 43});
  EXPECT_NE(a.neighbors, c.neighbors);

  const io::urand_options u{.num_vertices = 3000, .seed = 42};
  EXPECT_EQ(io::generate_urand(u).neighbors, io::generate_urand(u).neighbors);
  EXPECT_NE(io::generate_urand(u).neighbors,
            io::generate_urand({.num_vertices = 3000, .seed = 43}).neighbors);
}

TEST(Generators, OutputDoesNotDependOnTheThreadCount) {
  // 2^18 edges: 4 chunks, and enough for the builder to use several threads.
  const io::graph one = io::generate_kron({.scale = 14, .threads = 1});
  for (const unsigned threads : {2u, 3u, 0u}) {
    const io::graph many = io::generate_kron({.scale = 14, .threads = threads});
    EXPECT_EQ(one.row_offsets, many.row_offsets) << threads << " threads";
    EXPECT_EQ(one.neighbors, many.neighbors) << threads << " threads";
  }
  const io::graph u1 = io::generate_urand({.num_vertices = 20000, .threads = 1});
  const io::graph u3 = io::generate_urand({.num_vertices = 20000, .threads = 3});
  EXPECT_EQ(u1.neighbors, u3.neighbors);
}

TEST(Generators, OutputIsPinned) {
  // The promise that a seed gives the same graph everywhere, kept by fixed values: a change
  // here changes every graph generated before it (update only on purpose, and say so). Both
  // graphs span several 2^16-edge chunks, so the per-chunk streams are pinned too.
  const io::graph k = io::generate_kron({.scale = 13, .seed = 1});
  EXPECT_EQ(k.num_edges(), 204156u);
  EXPECT_EQ(fingerprint(k), 0x6cea2c8ee145f0bbu) << std::hex << fingerprint(k);
  const io::graph u = io::generate_urand({.num_vertices = 10000, .seed = 7});
  EXPECT_EQ(u.num_edges(), 319426u);
  EXPECT_EQ(fingerprint(u), 0x80caa95c434a2287u) << std::hex << fingerprint(u);
}

TEST(Generators, RandomNumbersAreTheStandardOnesAndUnbiased) {
  // splitmix64 as in Vigna's reference (seed 1234567).
  io::detail::splitmix64 reference{1234567};
  EXPECT_EQ(reference.next(), 6457827717110365317u);
  EXPECT_EQ(reference.next(), 3203168211198807973u);
  EXPECT_EQ(reference.next(), 9817491932198370423u);
  // bounded(): in range, and unbiased where a plain multiply-shift is not: with bound
  // 3 * 2^30 every third value would get two of the 2^32 draws (y % 3 == 0 half the time).
  io::detail::splitmix64 rng{99};
  for (const std::uint32_t bound : {1u, 2u, 3u, 1000u, 0x8000'0001u, 0xffff'ffffu}) {
    for (int i = 0; i < 1000; ++i) ASSERT_LT(io::detail::bounded(rng, bound), bound) << bound;
  }
  int multiples = 0;
  const int draws = 30000;
  for (int i = 0; i < draws; ++i) multiples += io::detail::bounded(rng, 0xc000'0000u) % 3 == 0;
  EXPECT_NEAR(multiples / double{draws}, 1.0 / 3, 0.02);  // biased: 0.5; 7 sd is 0.019
}

TEST(Generators, KronDegreesAreSkewedUrandDegreesAreFlat) {
  for (const std::uint64_t seed : {1u, 2u, 3u}) {
    const degree_summary kron = summarize(io::generate_kron({.scale = 14, .seed = seed}));
    const degree_summary urand =
        summarize(io::generate_urand({.num_vertices = 1u << 14, .seed = seed}));
    // Measured at scale 14: kron max/mean ~140, top 1 % hold ~27 %, ~24 % isolated; urand
    // (Poisson, mean 32) max/mean ~1.8, top 1 % hold ~1.5 %, none isolated.
    EXPECT_GT(kron.max_over_mean, 50) << "seed " << seed;
    EXPECT_GT(kron.top_percent_share, 0.15) << "seed " << seed;
    EXPECT_GT(kron.isolated, 0.10) << "seed " << seed;
    EXPECT_LT(urand.max_over_mean, 2.5) << "seed " << seed;
    EXPECT_LT(urand.top_percent_share, 0.03) << "seed " << seed;
    EXPECT_EQ(urand.isolated, 0.0) << "seed " << seed;
  }
}

TEST(Generators, KronLabelsArePermutedFromTheSameGraph) {
  const io::graph plain = io::generate_kron({.scale = 12, .permute_labels = false});
  const io::graph permuted = io::generate_kron({.scale = 12});
  // Unpermuted R-MAT with a > b, c > d puts the most edges on vertex 0.
  const std::vector<std::uint64_t> d = degrees(plain);
  EXPECT_EQ(std::max_element(d.begin(), d.end()) - d.begin(), 0);
  // Relabeling keeps the degree multiset but moves the hub.
  std::vector<std::uint64_t> dp = degrees(permuted);
  EXPECT_NE(std::max_element(dp.begin(), dp.end()) - dp.begin(), 0);
  std::vector<std::uint64_t> ds = d;
  std::sort(ds.begin(), ds.end());
  std::sort(dp.begin(), dp.end());
  EXPECT_EQ(ds, dp);
  EXPECT_EQ(plain.num_edges(), permuted.num_edges());
  EXPECT_EQ(io::count_components(plain), io::count_components(permuted));
}

TEST(Generators, RefuseBadOptions) {
  EXPECT_THROW((void)io::generate_kron({.scale = 32}), squeeze::invalid_argument);
  EXPECT_THROW((void)io::generate_kron({.scale = -1}), squeeze::invalid_argument);
  EXPECT_THROW((void)io::generate_kron({.scale = 4, .a = 0.6, .b = 0.3, .c = 0.2}),
               squeeze::invalid_argument);
  EXPECT_THROW((void)io::generate_kron({.scale = 4, .a = -0.1}), squeeze::invalid_argument);
  EXPECT_THROW((void)io::generate_kron({.scale = 30, .edge_factor = 4096}),
               squeeze::invalid_argument);
  EXPECT_THROW((void)io::generate_urand({.num_vertices = std::uint64_t{1} << 32}),
               squeeze::invalid_argument);
}

// ---- edge-list text ----------------------------------------------------------------------

io::graph parse_edges(const std::string& text, const io::edge_list_options& options = {}) {
  std::istringstream in{text};
  return io::read_edge_list(in, "test.el", options);
}

std::string edge_list_error(const std::string& text, const io::edge_list_options& options = {}) {
  return error_of<squeeze::format_error>([&] {
    std::istringstream in{text};
    (void)io::read_edge_list(in, "bad.el", options);
  });
}

TEST(EdgeList, ReadsCommentsBlankLinesTabsAndCrlf) {
  const io::graph g = parse_edges(
      "# a comment\n% another\n\n0 1\n1\t2\r\n   2 0  \n3 3\n1 0\n  # indented comment\n");
  // 3 3 is a self-loop (dropped), 1 0 repeats 0 1; vertex 3 stays, isolated.
  EXPECT_EQ(g.num_vertices(), 4u);
  EXPECT_EQ(g.row_offsets, (std::vector<std::uint64_t>{0, 2, 4, 6, 6}));
  EXPECT_EQ(g.neighbors, (std::vector<std::uint32_t>{1, 2, 0, 2, 0, 1}));
  EXPECT_FALSE(g.directed);
  EXPECT_EQ(parse_edges("").num_vertices(), 0u);
  EXPECT_EQ(parse_edges("# nothing\n").num_vertices(), 0u);
}

TEST(EdgeList, OptionsOneBasedDirectedVerticesAndExtraColumns) {
  const io::graph one = parse_edges("1 2\n2 3\n", {.one_based = true});
  EXPECT_EQ(one.num_vertices(), 3u);
  EXPECT_EQ(one.neighbors, (std::vector<std::uint32_t>{1, 0, 2, 1}));

  const io::graph d = parse_edges("0 1\n1 2\n2 1\n", {.directed = true});
  EXPECT_TRUE(d.directed);
  EXPECT_EQ(d.row_offsets, (std::vector<std::uint64_t>{0, 1, 2, 3}));
  EXPECT_EQ(d.neighbors, (std::vector<std::uint32_t>{1, 2, 1}));

  const io::graph wide = parse_edges("0 1\n", {.num_vertices = 5});
  EXPECT_EQ(wide.num_vertices(), 5u);
  EXPECT_EQ(wide.num_edges(), 2u);

  const io::graph weighted = parse_edges("0 1 0.5\n1 2 7 extra\n", {.allow_extra_columns = true});
  EXPECT_EQ(weighted.num_edges(), 4u);
}

TEST(EdgeList, MalformedLinesNameTheInputAndLine) {
  const auto expect = [](const std::string& what, const char* line, const char* cause) {
    EXPECT_NE(what.find(std::string{"'bad.el' line "} + line + ":"), std::string::npos) << what;
    EXPECT_NE(what.find(cause), std::string::npos) << what;
  };
  expect(edge_list_error("0 1\n# c\n2\n"), "3", "expected two vertex ids");
  expect(edge_list_error("0 x\n"), "1", "cannot parse the target vertex 'x'");
  expect(edge_list_error("1.5 2\n"), "1", "cannot parse the source vertex '1.5'");
  expect(edge_list_error("0 1\n-1 2\n"), "2", "source vertex -1 is negative");
  expect(edge_list_error("0 1 2\n"), "1", "allow_extra_columns");
  expect(edge_list_error("1 2\n0 1\n", {.one_based = true}), "2", "ids are 1-based");
  expect(edge_list_error("0 4294967295\n"), "1", "does not fit 32-bit vertex ids");
  expect(edge_list_error("4294967296 1\n", {.one_based = true}), "1",
         "source vertex 4294967296 does not fit 32-bit vertex ids (at most 4294967295)");
  expect(edge_list_error("99999999999999999999 1\n"), "1", "cannot parse the source vertex");
  expect(edge_list_error("0 1\n0 5\n", {.num_vertices = 5}), "2", "out of range for the 5");
}

TEST_F(GraphFile, EdgeListFilesRoundTripAndMissingFilesSayWhy) {
  const io::graph k = io::generate_kron({.scale = 8});
  const std::filesystem::path path = dir_ / "kron.el";
  io::write_edge_list(path, k);
  const io::graph back = io::read_edge_list(path, {.num_vertices = k.num_vertices()});
  EXPECT_EQ(back.row_offsets, k.row_offsets);
  EXPECT_EQ(back.neighbors, k.neighbors);

  const io::graph d = make(4, {{0, 3}, {3, 0}, {2, 1}}, true);
  io::write_edge_list(dir_ / "d.el", d);
  const io::graph dback = io::read_edge_list(dir_ / "d.el", {.directed = true, .num_vertices = 4});
  EXPECT_EQ(dback.row_offsets, d.row_offsets);
  EXPECT_EQ(dback.neighbors, d.neighbors);

  const io::graph one =
      io::read_edge_list(write_text("one.el", "% 1-based\n1 2\n"), {.one_based = true});
  EXPECT_EQ(one.num_edges(), 2u);
  const std::string malformed = error_of<squeeze::format_error>(
      [&] { (void)io::read_edge_list(write_text("m.el", "0 1\n0 one\n")); });
  EXPECT_NE(malformed.find("m.el' line 2"), std::string::npos) << malformed;

  const std::filesystem::path missing = dir_ / "missing.el";
  const std::string what = error_of<squeeze::io_error>([&] { (void)io::read_edge_list(missing); });
  EXPECT_NE(what.find(missing.string()), std::string::npos) << what;
  EXPECT_NE(what.find(std::strerror(ENOENT)), std::string::npos) << what;
  const std::string unwritable =
      error_of<squeeze::io_error>([&] { io::write_edge_list(dir_ / "no" / "x.el", k); });
  EXPECT_NE(unwritable.find("x.el"), std::string::npos) << unwritable;
}

// ---- Matrix Market -----------------------------------------------------------------------

io::graph parse_mm(const std::string& text, bool directed = false) {
  std::istringstream in{text};
  return io::read_matrix_market_graph(in, "test.mtx", directed);
}

TEST(MatrixMarketGraph, PatternSymmetricGeneralAndDirected) {
  const io::graph s =
      parse_mm("%%MatrixMarket matrix coordinate pattern symmetric\n% c\n4 4 3\n2 1\n3 2\n4 4\n");
  EXPECT_EQ(s.row_offsets, (std::vector<std::uint64_t>{0, 1, 3, 4, 4}));  // 4-4 dropped
  EXPECT_EQ(s.neighbors, (std::vector<std::uint32_t>{1, 0, 2, 1}));

  const std::string general =
      "%%MatrixMarket matrix coordinate real general\n3 3 4\n1 2 0.5\n2 3 0\n3 1 -1\n1 2 -0.5\n";
  const io::graph u = parse_mm(general);  // explicit zeros and cancelled sums stay edges
  EXPECT_FALSE(u.directed);
  EXPECT_EQ(u.neighbors, (std::vector<std::uint32_t>{1, 2, 0, 2, 0, 1}));
  const io::graph d = parse_mm(general, true);
  EXPECT_TRUE(d.directed);
  EXPECT_EQ(d.row_offsets, (std::vector<std::uint64_t>{0, 1, 2, 3}));
  EXPECT_EQ(d.neighbors, (std::vector<std::uint32_t>{1, 2, 0}));

  const io::graph i = parse_mm("%%MatrixMarket matrix coordinate integer general\n2 2 1\n2 1 9\n");
  EXPECT_EQ(i.neighbors, (std::vector<std::uint32_t>{1, 0}));
}

TEST_F(GraphFile, MatrixMarketGraphErrors) {
  const std::string rect = error_of<squeeze::format_error>(
      [] { (void)parse_mm("%%MatrixMarket matrix coordinate pattern general\n3 4 1\n1 4\n"); });
  EXPECT_NE(rect.find("square"), std::string::npos) << rect;
  EXPECT_NE(rect.find("3 x 4"), std::string::npos) << rect;
  const std::string bad = error_of<squeeze::format_error>([] {
    (void)parse_mm("%%MatrixMarket matrix coordinate pattern general\n3 3 2\n1 2\n1 9\n");
  });
  EXPECT_NE(bad.find("'test.mtx' line 4"), std::string::npos) << bad;

  const io::graph f = io::read_matrix_market_graph(
      write_text("g.mtx", "%%MatrixMarket matrix coordinate pattern general\n3 3 1\n1 3\n"));
  EXPECT_EQ(f.neighbors, (std::vector<std::uint32_t>{2, 0}));
  const std::filesystem::path missing = dir_ / "missing.mtx";
  const std::string what =
      error_of<squeeze::io_error>([&] { (void)io::read_matrix_market_graph(missing); });
  EXPECT_NE(what.find(missing.string()), std::string::npos) << what;
  EXPECT_NE(what.find(std::strerror(ENOENT)), std::string::npos) << what;
}

// ---- binary graph file -------------------------------------------------------------------

TEST(GraphBinary, NeighborsOffsetIsAlignedAfterTheOffsets) {
  EXPECT_EQ(io::neighbors_offset_bytes(0), 4096u);
  EXPECT_EQ(io::neighbors_offset_bytes(503), 4096u);  // 64 + 8 * 504 = 4096 exactly
  EXPECT_EQ(io::neighbors_offset_bytes(504), 8192u);
  EXPECT_EQ(io::neighbors_offset_bytes(std::uint64_t{1} << 20), 8392704u);
  EXPECT_EQ(io::neighbors_offset_bytes(std::uint64_t{1} << 20) % 4096, 0u);
  EXPECT_EQ(io::neighbors_offset_bytes(small_graph()), 4096u);
}

TEST_F(GraphFile, BinaryRoundTripsAndPlacesTheEdgeListAtItsOffset) {
  const io::graph k = io::generate_kron({.scale = 10});
  const std::filesystem::path path = dir_ / "kron.sqzg";
  io::write_graph_binary(path, k);
  const io::graph back = io::read_graph_binary(path);
  EXPECT_EQ(back.row_offsets, k.row_offsets);
  EXPECT_EQ(back.neighbors, k.neighbors);
  EXPECT_FALSE(back.directed);

  const io::graph_file_header h = io::read_graph_binary_header(path);
  EXPECT_EQ(h.version, 1u);
  EXPECT_FALSE(h.directed);
  EXPECT_EQ(h.num_vertices, 1024u);
  EXPECT_EQ(h.num_edges, k.num_edges());
  EXPECT_EQ(h.offsets_at, 64u);
  EXPECT_EQ(h.neighbors_at, io::neighbors_offset_bytes(k));
  EXPECT_EQ(h.neighbors_at, 12288u);  // 64 + 8 * 1025 = 8264, rounded up
  EXPECT_EQ(h.file_bytes % 4096, 0u);
  EXPECT_GE(h.file_bytes, h.neighbors_at + 4 * h.num_edges);
  EXPECT_LT(h.file_bytes, h.neighbors_at + 4 * h.num_edges + 4096);
  EXPECT_EQ(std::filesystem::file_size(path), h.file_bytes);

  // A GPU reading the file at neighbors_at sees the edge list, little-endian.
  const std::vector<unsigned char> bytes = read_bytes(path);
  ASSERT_EQ(bytes.size(), h.file_bytes);
  EXPECT_EQ(std::string(bytes.begin(), bytes.begin() + 8), "SQZGRAPH");
  for (std::size_t k2 = 0; k2 < k.neighbors.size(); k2 += 97) {
    const unsigned char* p = bytes.data() + h.neighbors_at + 4 * k2;
    const std::uint32_t x = p[0] | p[1] << 8 | p[2] << 16 | static_cast<std::uint32_t>(p[3]) << 24;
    ASSERT_EQ(x, k.neighbors[k2]) << "element " << k2;
  }
  for (std::size_t b = h.neighbors_at + 4 * k.num_edges(); b < bytes.size(); ++b) {
    ASSERT_EQ(bytes[b], 0) << "padding byte " << b;
  }

  for (const io::graph& g : {io::graph{}, make(6, {{4, 1}}, true), make(9, {{0, 8}, {2, 3}})}) {
    io::write_graph_binary(dir_ / "g.sqzg", g);
    const io::graph r = io::read_graph_binary(dir_ / "g.sqzg");
    EXPECT_EQ(r.row_offsets, g.row_offsets);
    EXPECT_EQ(r.neighbors, g.neighbors);
    EXPECT_EQ(r.directed, g.directed);
  }
}

TEST_F(GraphFile, BinaryRefusesCorruptTruncatedAndMissingFiles) {
  const io::graph g = io::generate_kron({.scale = 9});
  const std::filesystem::path good = dir_ / "good.sqzg";
  io::write_graph_binary(good, g);
  const std::vector<unsigned char> original = read_bytes(good);
  const std::filesystem::path path = dir_ / "bad.sqzg";
  const auto put64 = [](std::vector<unsigned char>& b, std::size_t at, std::uint64_t x) {
    for (int i = 0; i < 8; ++i) b[at + i] = static_cast<unsigned char>(x >> (8 * i));
  };
  const auto refused = [&](auto change, const char* expected) {
    std::vector<unsigned char> bytes = original;
    change(bytes);
    write_bytes(path, bytes);
    const std::string what =
        error_of<squeeze::format_error>([&] { (void)io::read_graph_binary(path); });
    EXPECT_NE(what.find(path.string()), std::string::npos) << what;
    EXPECT_NE(what.find(expected), std::string::npos)
        << "expected '" << expected << "' in '" << what << "'";
  };
  refused([](auto& b) { b[0] = 'X'; }, "bad magic");
  refused([](auto& b) { b[8] = 2; }, "version 2");
  refused([](auto& b) { b[12] = 6; }, "unknown flags 6");
  refused([&](auto& b) { put64(b, 56, 1); }, "reserved");
  refused([&](auto& b) { put64(b, 16, std::uint64_t{1} << 32); }, "at most 4294967295");
  refused([&](auto& b) { put64(b, 16, 2000); }, "neighbors at byte 8192 but 2000 vertices");
  refused([&](auto& b) { put64(b, 32, 128); }, "row_offsets at byte 128");
  refused([&](auto& b) { put64(b, 24, std::uint64_t{1} << 62); }, "cannot be right");
  refused([&](auto& b) { put64(b, 24, g.num_edges() + 5000); }, "file length");
  refused([&](auto& b) { put64(b, 48, b.size() + 4096); }, "file length");
  refused([](auto& b) { b.resize(b.size() - 4096); }, "truncated");
  refused([](auto& b) { b.resize(40); }, "fewer than the 64-byte header");
  refused([](auto& b) { b.clear(); }, "has 0 bytes");
  refused([](auto& b) { b.push_back(0); }, "more than the");
  // The body is validated: a neighbor out of range, offsets out of order.
  refused([&](auto& b) { put64(b, 64 + 8 * 512, g.num_edges() + 1); },
          "row_offsets[num_vertices] = ");
  refused([&](auto& b) { put64(b, 64 + 8 * 3, 1u << 20); }, "not monotone");
  refused(
      [&](auto& b) {
        const std::size_t at = 8192 + 4 * 10;
        b[at + 3] = 0x7f;
      },
      "out of range");
  EXPECT_NO_THROW((void)io::read_graph_binary(good));

  const std::filesystem::path missing = dir_ / "missing.sqzg";
  const std::string what =
      error_of<squeeze::io_error>([&] { (void)io::read_graph_binary(missing); });
  EXPECT_NE(what.find(missing.string()), std::string::npos) << what;
  EXPECT_NE(what.find(std::strerror(ENOENT)), std::string::npos) << what;
  EXPECT_THROW((void)io::read_graph_binary_header(missing), squeeze::io_error);
  const std::string unwritable =
      error_of<squeeze::io_error>([&] { io::write_graph_binary(dir_ / "no" / "x.sqzg", g); });
  EXPECT_NE(unwritable.find("x.sqzg"), std::string::npos) << unwritable;
  EXPECT_NE(unwritable.find(std::strerror(ENOENT)), std::string::npos) << unwritable;
  io::graph invalid = g;
  invalid.neighbors[0] = invalid.neighbors[1];
  EXPECT_THROW(io::write_graph_binary(dir_ / "invalid.sqzg", invalid), squeeze::format_error);
}

// ---- BFS ---------------------------------------------------------------------------------

TEST(Bfs, HandMadeGraphs) {
  const io::graph g = small_graph();
  EXPECT_EQ(io::bfs_reference(g, 0), (std::vector<std::uint32_t>{0, 1, 1, 2, 3, U, U, U}));
  EXPECT_EQ(io::bfs_reference(g, 4), (std::vector<std::uint32_t>{3, 2, 2, 1, 0, U, U, U}));
  EXPECT_EQ(io::bfs_reference(g, 6), (std::vector<std::uint32_t>{U, U, U, U, U, 1, 0, U}));
  EXPECT_EQ(io::bfs_reference(g, 7), (std::vector<std::uint32_t>{U, U, U, U, U, U, U, 0}));
  // Directed: 0 -> 1 -> 2 -> 0, 3 -> 2; edges are followed forward only.
  const io::graph d = make(4, {{0, 1}, {1, 2}, {2, 0}, {3, 2}}, true);
  EXPECT_EQ(io::bfs_reference(d, 0), (std::vector<std::uint32_t>{0, 1, 2, U}));
  EXPECT_EQ(io::bfs_reference(d, 3), (std::vector<std::uint32_t>{2, 3, 1, 0}));
  EXPECT_THROW((void)io::bfs_reference(g, 8), squeeze::invalid_argument);
  io::graph broken = g;
  broken.neighbors[0] = 9;
  EXPECT_THROW((void)io::bfs_reference(broken, 0), squeeze::format_error);
}

// depth[source] = 0; every other reached vertex is one more than its nearest in-neighbor;
// unreached vertices have no reached in-neighbor. This characterizes BFS depths exactly.
void expect_bfs_depths(const io::graph& g, std::uint32_t source) {
  const std::vector<std::uint32_t> depth = io::bfs_reference(g, source);
  ASSERT_EQ(depth.size(), g.num_vertices());
  ASSERT_EQ(depth[source], 0u);
  std::vector<std::uint32_t> best(depth.size(), U);  // min depth over in-neighbors
  for (std::uint32_t u = 0; u < g.num_vertices(); ++u) {
    for (const std::uint32_t v : g.neighbors_of(u)) {
      if (depth[u] != U) {
        best[v] = std::min(best[v], depth[u]);
        ASSERT_NE(depth[v], U) << u << " -> " << v;
        ASSERT_LE(depth[v], depth[u] + 1) << u << " -> " << v;
        if (!g.directed) {
          ASSERT_LE(depth[u], depth[v] + 1) << u << " - " << v;
        }
      }
    }
  }
  std::uint64_t reached = 0;
  for (std::uint32_t v = 0; v < depth.size(); ++v) {
    if (v == source) continue;
    if (depth[v] == U) {
      ASSERT_EQ(best[v], U) << v;
    } else {
      ++reached;
      ASSERT_EQ(depth[v], best[v] + 1) << v;
    }
  }
  if (g.degree(source) > 0) {
    EXPECT_GT(reached, 0u);
  }
}

TEST(Bfs, DepthsSatisfyTheBfsPropertiesOnGeneratedGraphs) {
  const io::graph k = io::generate_kron({.scale = 12, .seed = 9});
  const io::graph u = io::generate_urand({.num_vertices = 5000, .edge_factor = 2, .seed = 9});
  for (const std::uint32_t source : {0u, 1u, 77u, 4095u}) {
    expect_bfs_depths(k, source);
    expect_bfs_depths(u, source);
  }
  // The hub reaches its whole component; an isolated vertex reaches nothing.
  const std::vector<std::uint64_t> d = degrees(k);
  const auto hub = static_cast<std::uint32_t>(std::max_element(d.begin(), d.end()) - d.begin());
  expect_bfs_depths(k, hub);
  const auto isolated = static_cast<std::uint32_t>(std::find(d.begin(), d.end(), 0u) - d.begin());
  ASSERT_LT(isolated, d.size());
  const std::vector<std::uint32_t> alone = io::bfs_reference(k, isolated);
  EXPECT_EQ(std::count(alone.begin(), alone.end(), U), static_cast<std::ptrdiff_t>(d.size() - 1));
  // Directed: a random orientation of the urand graph.
  std::vector<io::graph_edge> edges;
  for (std::uint32_t a = 0; a < u.num_vertices(); ++a) {
    for (const std::uint32_t b : u.neighbors_of(a)) {
      if ((a * 2654435761u ^ b) % 3 == 0) edges.push_back({a, b});
    }
  }
  const io::graph directed = make(u.num_vertices(), edges, true);
  for (const std::uint32_t source : {0u, 3u, 4999u}) expect_bfs_depths(directed, source);
}

// ---- connected components ----------------------------------------------------------------

TEST(Cc, HandMadeGraphsLabelByTheSmallestVertex) {
  const io::graph g = small_graph();
  EXPECT_EQ(io::cc_reference(g), (std::vector<std::uint32_t>{0, 0, 0, 0, 0, 5, 5, 7}));
  EXPECT_EQ(io::count_components(g), 3u);
  // Components {3, 6, 9}, {2, 5, 8} and four isolated vertices; the smallest id is never the
  // first one listed.
  const io::graph h = make(10, {{9, 3}, {6, 9}, {8, 2}, {5, 8}});
  const std::vector<std::uint32_t> labels = io::cc_reference(h);
  EXPECT_EQ(labels, (std::vector<std::uint32_t>{0, 1, 2, 3, 4, 2, 3, 7, 2, 3}));
  EXPECT_EQ(io::count_components(h), 6u);
  EXPECT_EQ(io::count_components(labels), 6u);
  EXPECT_EQ(io::count_components(std::vector<std::uint32_t>{4, 4, 9, 4, 1}), 3u);
  EXPECT_EQ(io::count_components(io::graph{}), 0u);
  EXPECT_THROW((void)io::cc_reference(make(3, {{0, 1}}, true)), squeeze::invalid_argument);
}

TEST(Cc, LabelsAgreeWithBfsOnAKronGraph) {
  const io::graph k = io::generate_kron({.scale = 11, .edge_factor = 2, .seed = 4});
  const std::vector<std::uint32_t> labels = io::cc_reference(k);
  for (std::uint32_t u = 0; u < k.num_vertices(); ++u) {
    ASSERT_LE(labels[u], u);
    ASSERT_EQ(labels[labels[u]], labels[u]);
    for (const std::uint32_t v : k.neighbors_of(u)) ASSERT_EQ(labels[u], labels[v]);
  }
  // Each component is what BFS from its label reaches, for a sample of components.
  std::uint64_t roots = 0;
  for (std::uint32_t r = 0; r < k.num_vertices(); r += 37) {
    if (labels[r] != r) continue;
    ++roots;
    const std::vector<std::uint32_t> depth = io::bfs_reference(k, r);
    for (std::uint32_t v = 0; v < k.num_vertices(); ++v) {
      ASSERT_EQ(depth[v] != U, labels[v] == r) << "root " << r << " vertex " << v;
    }
  }
  EXPECT_GT(roots, 1u);
  const std::uint64_t count = io::count_components(k);
  EXPECT_GT(count, 1u);  // isolated vertices at least
  EXPECT_EQ(count, io::count_components(labels));
}

// ---- FirstVertexList ---------------------------------------------------------------------

// Element e of the edge list belongs to the vertex v with row_offsets[v] <= e < row_offsets[v+1].
std::vector<std::uint32_t> owners(const io::graph& g) {
  std::vector<std::uint32_t> owner(g.num_edges());
  for (std::uint32_t v = 0; v < g.num_vertices(); ++v) {
    for (std::uint64_t k = g.row_offsets[v]; k < g.row_offsets[v + 1]; ++k) owner[k] = v;
  }
  return owner;
}

// A directed graph with the given degrees (neighbors 0, 1, 2, ... skipping the vertex).
io::graph with_degrees(const std::vector<std::uint32_t>& degree) {
  std::vector<io::graph_edge> edges;
  const auto n = static_cast<std::uint32_t>(
      std::max<std::size_t>(degree.size(), *std::max_element(degree.begin(), degree.end()) + 1));
  for (std::uint32_t v = 0; v < degree.size(); ++v) {
    for (std::uint32_t w = 0, added = 0; added < degree[v]; ++w) {
      if (w != v) {
        edges.push_back({v, w});
        ++added;
      }
    }
  }
  io::graph g = make(n, edges, true);
  return g;
}

TEST(FirstVertexList, TheDocumentedExample) {
  const io::graph g = with_degrees({3, 0, 2, 7, 0, 1});
  ASSERT_EQ(g.num_vertices(), 8u);  // two more, empty, at the end
  ASSERT_EQ(std::vector<std::uint64_t>(g.row_offsets.begin(), g.row_offsets.begin() + 7),
            (std::vector<std::uint64_t>{0, 3, 3, 5, 12, 12, 13}));
  EXPECT_EQ(io::first_vertex_list(g, 4), (std::vector<std::uint32_t>{0, 2, 3, 5}));
}

TEST(FirstVertexList, HandMadeCases) {
  // One element per line: the owner of every element.
  const io::graph g = with_degrees({3, 0, 2, 7, 0, 1});
  EXPECT_EQ(io::first_vertex_list(g, 1), owners(g));
  // One line holds everything: its first element's owner.
  EXPECT_EQ(io::first_vertex_list(g, 13), (std::vector<std::uint32_t>{0}));
  EXPECT_EQ(io::first_vertex_list(g, 1000), (std::vector<std::uint32_t>{0}));
  EXPECT_EQ(io::first_vertex_list(g, 12), (std::vector<std::uint32_t>{0, 5}));
  // Leading empty vertices are skipped; a vertex spanning several lines owns each of them.
  const io::graph lead = with_degrees({0, 0, 9, 1});
  EXPECT_EQ(io::first_vertex_list(lead, 2), (std::vector<std::uint32_t>{2, 2, 2, 2, 2}));
  EXPECT_EQ(io::first_vertex_list(lead, 3), (std::vector<std::uint32_t>{2, 2, 2, 3}));
  EXPECT_EQ(io::first_vertex_list(lead, 9), (std::vector<std::uint32_t>{2, 3}));
  // Lines that start exactly where a list starts, and empty vertices in between.
  const io::graph exact = with_degrees({2, 0, 0, 2, 0, 2});
  EXPECT_EQ(io::first_vertex_list(exact, 2), (std::vector<std::uint32_t>{0, 3, 5}));
  EXPECT_EQ(io::first_vertex_list(exact, 4), (std::vector<std::uint32_t>{0, 5}));
  // No edges, no lines; no vertices either.
  EXPECT_TRUE(io::first_vertex_list(make(5, {}), 4).empty());
  EXPECT_TRUE(io::first_vertex_list(io::graph{}, 4).empty());
  EXPECT_THROW((void)io::first_vertex_list(g, 0), squeeze::invalid_argument);
}

TEST(FirstVertexList, MatchesTheDefinitionAndDrivesAnOdtWalk) {
  const io::graph k = io::generate_kron({.scale = 12, .seed = 2});
  const std::vector<std::uint32_t> owner = owners(k);
  for (const std::uint64_t per_line : {1u, 3u, 16u, 1024u, 100000u}) {
    const std::vector<std::uint32_t> fvl = io::first_vertex_list(k, per_line);
    ASSERT_EQ(fvl.size(), (k.num_edges() + per_line - 1) / per_line) << per_line;
    std::vector<std::uint32_t> seen(k.num_edges(), U);
    for (std::uint64_t l = 0; l < fvl.size(); ++l) {
      const std::uint64_t first = l * per_line;
      const std::uint64_t end = std::min(first + per_line, k.num_edges());
      ASSERT_EQ(fvl[l], owner[first]) << "line " << l << ", " << per_line << " per line";
      // The warp's walk (thesis Listing 6.5): from fvl[l] upward until the line ends.
      std::uint32_t v = fvl[l];
      std::uint64_t at = first;
      while (at < end) {
        const std::uint64_t stop = std::min(end, k.row_offsets[v + 1]);
        for (; at < stop; ++at) {
          ASSERT_EQ(seen[at], U);
          seen[at] = v;
        }
        ++v;
      }
    }
    ASSERT_TRUE(seen == owner) << per_line;
  }
}

// ---- sizes the input declares (read_limits) and streams --------------------------------

template <class F>
double seconds_of(F&& f) {
  const auto start = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

TEST(EdgeList, HugeVertexIdIsRefusedUnlessAllowed) {
  // 12 bytes that once built a graph of 400 M vertices (4.8 GB, seconds).
  std::string what;
  const double took = seconds_of([&] { what = edge_list_error("400000000 1\n"); });
  for (const char* words : {"'bad.el' line 1", "the largest vertex id, 400000000",
                            "400000001 vertices of 12 bytes", "read_limits::max_bytes",
                            "give num_vertices"}) {
    EXPECT_NE(what.find(words), std::string::npos) << words << " is not in: " << what;
  }
  EXPECT_LT(took, 1.0);
  // The id as written in a 1-based list; the line of the largest id.
  what = edge_list_error("1 2\n% c\n300000000 5\n2 3\n", {.one_based = true});
  EXPECT_NE(what.find("line 3: the largest vertex id, 300000000, makes 300000000 vertices"),
            std::string::npos)
      << what;
  // Within the limits: the default allows 22 M vertices no edge pays for; max_bytes = 0 none.
  EXPECT_EQ(parse_edges("100000 1\n").num_vertices(), 100001u);
  EXPECT_FALSE(edge_list_error("100000 1\n", {.limits = {.max_bytes = 0}}).empty());
  // Vertices that edges name pay for themselves.
  std::string path;
  for (int v = 0; v < 2000; ++v) path += std::to_string(v) + " " + std::to_string(v + 1) + "\n";
  EXPECT_EQ(parse_edges(path, {.limits = {.max_bytes = 0}}).num_vertices(), 2001u);
  // An explicit num_vertices is the caller's to allow.
  EXPECT_EQ(parse_edges("0 1\n", {.num_vertices = 1000000, .limits = {.max_bytes = 0}})
                .num_vertices(),
            1000000u);
}

TEST(MatrixMarketGraph, VertexCountsAreCheckedAtTheSizeLineAndAgainstTheLimits) {
  // Past 32-bit ids: refused at the size line (once only after building the whole matrix).
  const std::string wide = error_of<squeeze::format_error>([] {
    (void)parse_mm("%%MatrixMarket matrix coordinate pattern general\n4294967296 4294967296 0\n");
  });
  EXPECT_NE(wide.find("'test.mtx' line 2: 4294967296 vertices; at most 4294967295"),
            std::string::npos)
      << wide;
  const std::string square = error_of<squeeze::format_error>([] {
    (void)parse_mm("%%MatrixMarket matrix coordinate pattern general\n3 4 9\n");
  });
  EXPECT_NE(square.find("line 2: a graph needs a square matrix"), std::string::npos) << square;
  // 100 M vertices (1.2 GB) from 86 bytes: refused by the default limits, quickly.
  std::string big;
  const double took = seconds_of([&] {
    big = error_of<squeeze::format_error>([] {
      (void)parse_mm(
          "%%MatrixMarket matrix coordinate pattern symmetric\n100000000 100000000 1\n"
          "100000000 1\n");
    });
  });
  EXPECT_NE(big.find("100000000 vertices of 12 bytes"), std::string::npos) << big;
  EXPECT_LT(took, 1.0);
  std::istringstream in{"%%MatrixMarket matrix coordinate pattern general\n100000 100000 1\n1 2\n"};
  EXPECT_THROW((void)io::read_matrix_market_graph(in, "strict.mtx", false, {.max_bytes = 0}),
               squeeze::format_error);
}

TEST_F(GraphFile, BinaryGraphsReadFromStreamsOfKnownAndUnknownSize) {
  const io::graph g = io::generate_kron({.scale = 9});
  const io::graph d = make(6, {{4, 1}, {0, 5}}, true);
  io::write_graph_binary(dir_ / "g.sqzg", g);
  io::write_graph_binary(dir_ / "d.sqzg", d);
  const std::vector<unsigned char> gb = read_bytes(dir_ / "g.sqzg"), db = read_bytes(dir_ / "d.sqzg");
  const std::string both = std::string(gb.begin(), gb.end()) + std::string(db.begin(), db.end());
  const auto same = [](const io::graph& a, const io::graph& b) {
    EXPECT_EQ(a.directed, b.directed);
    EXPECT_EQ(a.row_offsets, b.row_offsets);
    EXPECT_EQ(a.neighbors, b.neighbors);
  };
  // One graph after another, from a seekable stream and from a pipe-like one.
  std::istringstream sized{both};
  same(io::read_graph_binary(sized, "sized"), g);
  same(io::read_graph_binary(sized, "sized"), d);
  pipe_buffer pipe{both};
  std::istream piped{&pipe};
  same(io::read_graph_binary(piped, "piped"), g);
  same(io::read_graph_binary(piped, "piped"), d);

  // A header declaring 2^32 - 1 vertices (34 GB of offsets) over 4 KiB: refused from the
  // size where it is known, and after the bytes that came where it is not.
  std::string huge = std::string(db.begin(), db.end());
  const auto put64 = [&](std::size_t at, std::uint64_t x) {
    for (int i = 0; i < 8; ++i) huge[at + i] = static_cast<char>(x >> (8 * i));
  };
  const std::uint64_t n = io::graph_max_vertices;
  put64(16, n);
  put64(24, 0);
  put64(40, io::neighbors_offset_bytes(n));
  put64(48, io::neighbors_offset_bytes(n));
  std::istringstream huge_sized{huge};
  const std::string known = error_of<squeeze::format_error>(
      [&] { (void)io::read_graph_binary(huge_sized, "huge.sqzg"); });
  EXPECT_NE(known.find("truncated: it has 8192 bytes, its header describes 34359742464"),
            std::string::npos)
      << known;
  pipe_buffer huge_pipe{huge};
  std::istream huge_in{&huge_pipe};
  std::string unknown;
  const double took = seconds_of([&] {
    unknown = error_of<squeeze::format_error>(
        [&] { (void)io::read_graph_binary(huge_in, "huge.sqzg"); });
  });
  EXPECT_NE(unknown.find("'huge.sqzg' is not a valid squeeze graph file: the file is truncated: "
                         "it ends inside its row_offsets"),
            std::string::npos)
      << unknown;
  EXPECT_LT(took, 1.0);
}

}  // namespace
