// SPDX-License-Identifier: Apache-2.0
// io/csr.hpp and io/matrix_market.hpp: CSR construction (sorting, duplicates summed, index
// overflow refused), validate() naming the broken invariant, the reference SpMV, the real
// SuiteSparse files under shared/data/matrices (skipped when absent), write -> read round
// trips, every supported field and symmetry, and every malformed input refused with a
// format_error that names the input, the line and the cause.
#include <squeeze/io/csr.hpp>
#include <squeeze/io/matrix_market.hpp>

#include <gtest/gtest.h>

#include <stdlib.h>  // mkdtemp

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace io = squeeze::io;

namespace {

// The stored value at (row, col), 0-based; NaN when the entry is not stored.
template <class Value, class Index>
double at(const io::csr_matrix<Value, Index>& a, std::int64_t row, std::int64_t col) {
  const auto begin = a.col_idx.begin() + a.row_ptr[static_cast<std::size_t>(row)];
  const auto end = a.col_idx.begin() + a.row_ptr[static_cast<std::size_t>(row) + 1];
  const auto it = std::lower_bound(begin, end, static_cast<Index>(col));
  if (it == end || *it != static_cast<Index>(col)) return std::nan("");
  return static_cast<double>(a.values[static_cast<std::size_t>(it - a.col_idx.begin())]);
}

io::csr_matrix<double> parse(const std::string& text, const std::string& name = "test.mtx") {
  std::istringstream in{text};
  return io::read_matrix_market(in, name);
}

// The what() of the format_error that parsing `text` throws ("" when none is thrown).
std::string format_error_of(const std::string& text) {
  try {
    (void)parse(text, "bad.mtx");
  } catch (const squeeze::format_error& e) {
    return e.what();
  }
  return "";
}

// The directory holding the SuiteSparse test matrices: $SQUEEZE_MATRIX_DIR, else the one the
// build names (the repository's ../shared/data/matrices).
std::filesystem::path matrix_dir() {
  if (const char* dir = std::getenv("SQUEEZE_MATRIX_DIR"); dir != nullptr && *dir != '\0') {
    return dir;
  }
  return SQUEEZE_TEST_MATRIX_DIR;
}

#define SQUEEZE_MATRIX_OR_SKIP(var, file)                                                 \
  const std::filesystem::path var = matrix_dir() / (file);                                \
  if (!std::filesystem::exists(var)) {                                                    \
    GTEST_SKIP() << var << " is absent (set SQUEEZE_MATRIX_DIR to the directory holding " \
                 << (file) << ")";                                                        \
  }

// A temporary directory per test, removed with everything in it.
class MatrixMarketFile : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string name = (std::filesystem::temp_directory_path() / "squeeze-mtx-XXXXXX").string();
    ASSERT_NE(mkdtemp(name.data()), nullptr);
    dir_ = name;
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  std::filesystem::path dir_;
};

template <class Value>
std::vector<io::coordinate_entry<Value>> random_entries(std::int64_t rows, std::int64_t cols,
                                                        std::size_t count, std::mt19937_64& rng) {
  std::uniform_int_distribution<std::int64_t> row(0, rows - 1), col(0, cols - 1);
  std::uniform_real_distribution<double> exponent(-30.0, 30.0);
  std::uniform_real_distribution<double> mantissa(-1.0, 1.0);
  std::vector<io::coordinate_entry<Value>> e(count);
  for (auto& x : e) {
    x = {row(rng), col(rng),
         static_cast<Value>(mantissa(rng) * std::pow(10.0, std::floor(exponent(rng))))};
  }
  return e;
}

// ---- csr.hpp ---------------------------------------------------------------------------

TEST(Csr, FromCoordinatesSortsByRowThenColumnAndSumsDuplicates) {
  std::vector<io::coordinate_entry<double>> e = {{2, 1, 5.0}, {0, 3, 1.0}, {2, 0, 4.0},
                                                 {0, 0, 2.0}, {2, 1, 0.5}, {0, 3, -0.25}};
  const io::csr_matrix<double> a = io::csr_from_coordinates(3, 4, e);
  EXPECT_EQ(a.rows, 3);
  EXPECT_EQ(a.cols, 4);
  EXPECT_EQ(a.row_ptr, (std::vector<std::int32_t>{0, 2, 2, 4}));
  EXPECT_EQ(a.col_idx, (std::vector<std::int32_t>{0, 3, 0, 1}));
  EXPECT_EQ(a.values, (std::vector<double>{2.0, 0.75, 4.0, 5.5}));
  EXPECT_EQ(a.nnz(), 4);
  EXPECT_NO_THROW(io::validate(a));

  const auto empty = io::csr_from_coordinates<double>(0, 0, {});
  EXPECT_EQ(empty.row_ptr, (std::vector<std::int32_t>{0}));
  EXPECT_NO_THROW(io::validate(empty));
}

TEST(Csr, FromCoordinatesMatchesASortOnRandomInput) {
  std::mt19937_64 rng{7};
  const auto e = random_entries<double>(50, 40, 3000, rng);  // many duplicates
  std::vector<double> sum(50 * 40, 0.0);
  std::vector<bool> present(50 * 40, false);
  for (const auto& x : e) {
    sum[static_cast<std::size_t>(x.row * 40 + x.col)] += x.value;
    present[static_cast<std::size_t>(x.row * 40 + x.col)] = true;
  }
  const auto a = io::csr_from_coordinates(50, 40, e);
  ASSERT_NO_THROW(io::validate(a));
  std::int64_t distinct = 0;
  for (std::int64_t r = 0; r < 50; ++r) {
    for (std::int64_t c = 0; c < 40; ++c) {
      const auto k = static_cast<std::size_t>(r * 40 + c);
      if (!present[k]) {
        EXPECT_TRUE(std::isnan(at(a, r, c)));
        continue;
      }
      ++distinct;
      EXPECT_EQ(at(a, r, c), sum[k]);  // summed in the order given, as here
    }
  }
  EXPECT_EQ(a.nnz(), distinct);
}

TEST(Csr, FromCoordinatesRefusesWhatDoesNotFit) {
  try {
    (void)io::csr_from_coordinates<double>(3, 3, {{0, 0, 1.0}, {3, 1, 1.0}});
    FAIL() << "an entry outside the matrix was accepted";
  } catch (const squeeze::invalid_argument& e) {
    EXPECT_NE(std::string{e.what()}.find("(3, 1) lies outside the 3 x 3 matrix"), std::string::npos)
        << e.what();
  }
  try {
    (void)io::csr_from_coordinates<double, std::int8_t>(200, 3, {});
    FAIL() << "200 rows were accepted for int8";
  } catch (const squeeze::invalid_argument& e) {
    EXPECT_NE(std::string{e.what()}.find("200 rows do not fit the index type int8"),
              std::string::npos)
        << e.what();
  }
  try {
    (void)io::csr_from_coordinates<double, std::int8_t>(3, 300, {});
    FAIL() << "300 columns were accepted for int8";
  } catch (const squeeze::invalid_argument& e) {
    EXPECT_NE(std::string{e.what()}.find("300 columns do not fit"), std::string::npos) << e.what();
  }
  std::vector<io::coordinate_entry<double>> e;
  for (std::int64_t r = 0; r < 12; ++r) {
    for (std::int64_t c = 0; c < 12; ++c) e.push_back({r, c, 1.0});
  }
  try {
    (void)io::csr_from_coordinates<double, std::int8_t>(12, 12, e);
    FAIL() << "144 entries were accepted for int8";
  } catch (const squeeze::invalid_argument& ex) {
    EXPECT_NE(std::string{ex.what()}.find("(nnz)"), std::string::npos) << ex.what();
  }
  // Duplicates that merge below the limit are fine.
  std::vector<io::coordinate_entry<double>> dup(500, {1, 1, 1.0});
  const auto a = io::csr_from_coordinates<double, std::int8_t>(2, 2, dup);
  EXPECT_EQ(a.nnz(), 1);
  EXPECT_EQ(a.values[0], 500.0);
}

TEST(Csr, ValidateNamesTheFirstBrokenInvariant) {
  const io::csr_matrix<double> good = io::csr_from_coordinates<double>(
      3, 4, {{0, 0, 1.0}, {0, 2, 2.0}, {1, 1, 3.0}, {2, 0, 4.0}, {2, 3, 5.0}});
  ASSERT_NO_THROW(io::validate(good));
  const auto expect = [](const io::csr_matrix<double>& a, const std::string& words) {
    try {
      io::validate(a);
      ADD_FAILURE() << "validate accepted a matrix with: " << words;
    } catch (const squeeze::format_error& e) {
      EXPECT_NE(std::string{e.what()}.find(words), std::string::npos) << e.what();
    }
  };
  auto a = good;
  a.row_ptr.pop_back();
  expect(a, "row_ptr has 3 elements; rows + 1 = 4 expected");
  a = good;
  a.row_ptr[0] = 1;
  expect(a, "row_ptr[0] is 1, not 0");
  a = good;
  a.row_ptr[2] = 1;
  expect(a, "row_ptr is not monotone: row_ptr[2] = 1 < row_ptr[1] = 2");
  a = good;
  a.values.pop_back();
  expect(a, "col_idx has 5 elements but values has 4");
  a = good;
  a.row_ptr[3] = 4;
  expect(a, "row_ptr[rows] = 4 but col_idx and values hold 5 entries");
  a = good;
  a.col_idx[4] = 4;
  expect(a, "row 2: col_idx[4] = 4 is out of range [0, 4)");
  a = good;
  a.col_idx[1] = -1;
  expect(a, "row 0: col_idx[1] = -1 is out of range");
  a = good;
  a.col_idx[1] = 0;
  expect(a, "row 0 is not sorted: col_idx[1] = 0 does not exceed col_idx[0] = 0");
  a = good;
  std::swap(a.col_idx[3], a.col_idx[4]);
  expect(a, "row 2 is not sorted");
}

TEST(Csr, SpmvReferenceMatchesADenseProduct) {
  std::mt19937_64 rng{11};
  const auto a = io::csr_from_coordinates(30, 20, random_entries<double>(30, 20, 200, rng));
  std::vector<double> x(20), y(30, std::nan(""));
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (double& v : x) v = u(rng);
  io::spmv_reference(a, x, y);
  for (std::int64_t r = 0; r < 30; ++r) {
    double expected = 0.0;
    for (std::int64_t c = 0; c < 20; ++c) {
      const double v = at(a, r, c);
      if (!std::isnan(v)) expected += v * x[static_cast<std::size_t>(c)];
    }
    EXPECT_NEAR(y[static_cast<std::size_t>(r)], expected, 1e-12 * (1.0 + std::abs(expected)))
        << "row " << r;
  }
  std::vector<double> short_x(19);
  EXPECT_THROW(io::spmv_reference(a, short_x, y), squeeze::invalid_argument);
}

// ---- the real SuiteSparse files ----------------------------------------------------------

TEST(MatrixMarketFiles, Bus1138IsSymmetricAndMirrored) {
  SQUEEZE_MATRIX_OR_SKIP(path, "1138_bus.mtx");
  const auto a = io::read_matrix_market(path);
  ASSERT_NO_THROW(io::validate(a));
  EXPECT_EQ(a.rows, 1138);
  EXPECT_EQ(a.cols, 1138);
  // 2596 stored entries, all 1138 diagonal ones among them: 2 * 2596 - 1138 after mirroring.
  EXPECT_EQ(a.nnz(), 2 * 2596 - 1138);
  EXPECT_EQ(at(a, 0, 0), 1474.779);       // "1 1 1474.779"
  EXPECT_EQ(at(a, 4, 0), -9.017133);      // "5 1 -9.017133"
  EXPECT_EQ(at(a, 0, 4), -9.017133);      // ... mirrored
  EXPECT_EQ(at(a, 26, 3), -.4755112);     // "27 4 -.4755112"
  EXPECT_EQ(at(a, 3, 26), -.4755112);     // ... mirrored
  EXPECT_EQ(at(a, 1137, 804), -117.647);  // "1138 805 -117.647"
  EXPECT_EQ(at(a, 804, 1137), -117.647);
  EXPECT_EQ(at(a, 1137, 1137), 117.647);  // the last line
  EXPECT_TRUE(std::isnan(at(a, 1, 0)));   // not stored
  for (std::int64_t r = 0; r < a.rows; ++r) {
    for (auto k = a.row_ptr[static_cast<std::size_t>(r)];
         k < a.row_ptr[static_cast<std::size_t>(r) + 1]; ++k) {
      const std::int64_t c = a.col_idx[static_cast<std::size_t>(k)];
      ASSERT_EQ(at(a, c, r), a.values[static_cast<std::size_t>(k)]) << r << ", " << c;
    }
  }
}

TEST(MatrixMarketFiles, Ani4IsGeneral) {
  SQUEEZE_MATRIX_OR_SKIP(path, "ani4.mtx");
  const auto a = io::read_matrix_market(path);
  ASSERT_NO_THROW(io::validate(a));
  EXPECT_EQ(a.rows, 3081);
  EXPECT_EQ(a.cols, 3081);
  EXPECT_EQ(a.nnz(), 20971);
  EXPECT_EQ(at(a, 0, 0), 1.0);
  EXPECT_EQ(at(a, 1, 0), -0.0004995004995004994);
  EXPECT_EQ(at(a, 0, 2), -0.4995004995004995);
  EXPECT_EQ(at(a, 3079, 3080), -0.4995004995004995);
  EXPECT_EQ(at(a, 3080, 3080), 1.0);
  // float values and 64-bit indices read the same file.
  const auto f = io::read_matrix_market<float, std::int64_t>(path);
  EXPECT_EQ(f.nnz(), 20971);
  EXPECT_EQ(at(f, 1, 0), static_cast<double>(-0.0004995004995004994f));
}

TEST(MatrixMarketFiles, Ani1NonsymmIsGeneral) {
  SQUEEZE_MATRIX_OR_SKIP(path, "ani1_nonsymm.mtx");
  const auto a = io::read_matrix_market(path);
  ASSERT_NO_THROW(io::validate(a));
  EXPECT_EQ(a.rows, 36);
  EXPECT_EQ(a.cols, 36);
  EXPECT_EQ(a.nnz(), 238);
  EXPECT_EQ(at(a, 0, 0), 1.0);
  EXPECT_EQ(at(a, 6, 0), 0.9999999999999999);
  EXPECT_EQ(at(a, 7, 0), 0.1540022127474488);
  EXPECT_EQ(at(a, 6, 1), -0.4376456351621489);
}

// ---- round trips and supported variants ---------------------------------------------------

TEST_F(MatrixMarketFile, RoundTripIsBitExact) {
  std::mt19937_64 rng{2024};
  for (int trial = 0; trial < 5; ++trial) {
    const std::int64_t rows = 1 + trial * 37, cols = 1 + trial * 23;
    auto e = random_entries<double>(rows, cols, static_cast<std::size_t>(trial * 300 + 1), rng);
    if (trial == 4) {
      e.push_back({0, 0, std::numeric_limits<double>::denorm_min()});
      e.push_back({1, 1, -std::numeric_limits<double>::max()});
      e.push_back({2, 2, std::numeric_limits<double>::infinity()});
    }
    const auto a = io::csr_from_coordinates(rows, cols, e);
    const std::filesystem::path path = dir_ / ("m" + std::to_string(trial) + ".mtx");
    io::write_matrix_market(path, a);
    const auto b = io::read_matrix_market(path);
    EXPECT_EQ(b.rows, a.rows);
    EXPECT_EQ(b.cols, a.cols);
    EXPECT_EQ(b.row_ptr, a.row_ptr);
    EXPECT_EQ(b.col_idx, a.col_idx);
    EXPECT_EQ(b.values, a.values);  // bit for bit (no NaN in the input)
  }
  // float keeps its own precision (max_digits10 = 9).
  const auto f = io::csr_from_coordinates<float>(2, 2, {{0, 1, 0.1f}, {1, 0, 1.0f / 3.0f}});
  io::write_matrix_market(dir_ / "f.mtx", f);
  EXPECT_EQ((io::read_matrix_market<float>(dir_ / "f.mtx").values), f.values);
}

TEST_F(MatrixMarketFile, MissingFileIsAnIoError) {
  try {
    (void)io::read_matrix_market(dir_ / "absent.mtx");
    FAIL() << "no exception";
  } catch (const squeeze::io_error& e) {
    EXPECT_NE(std::string{e.what()}.find("absent.mtx"), std::string::npos) << e.what();
  }
  io::csr_matrix<double> empty;
  empty.row_ptr = {0};
  EXPECT_THROW(io::write_matrix_market(dir_ / "no" / "dir.mtx", empty), squeeze::io_error);
}

TEST(MatrixMarket, PatternFieldGivesOnes) {
  const auto a = parse(
      "%%MatrixMarket matrix coordinate pattern general\n"
      "2 3 3\n"
      "1 3\n"
      "2 1\n"
      "1 1\n");
  EXPECT_EQ(a.row_ptr, (std::vector<std::int32_t>{0, 2, 3}));
  EXPECT_EQ(a.col_idx, (std::vector<std::int32_t>{0, 2, 0}));
  EXPECT_EQ(a.values, (std::vector<double>{1.0, 1.0, 1.0}));
}

TEST(MatrixMarket, PatternSymmetricMirrors) {
  const auto a = parse("%%MatrixMarket matrix coordinate pattern symmetric\n3 3 2\n2 1\n3 3\n");
  EXPECT_EQ(a.nnz(), 3);
  EXPECT_EQ(at(a, 0, 1), 1.0);
  EXPECT_EQ(at(a, 1, 0), 1.0);
  EXPECT_EQ(at(a, 2, 2), 1.0);
}

TEST(MatrixMarket, IntegerField) {
  const auto a = parse(
      "%%MatrixMarket matrix coordinate integer general\n2 2 3\n1 1 -7\n2 2 +12\n1 2 "
      "9007199254740993\n");
  EXPECT_EQ(at(a, 0, 0), -7.0);
  EXPECT_EQ(at(a, 1, 1), 12.0);
  EXPECT_EQ(at(a, 0, 1), 9007199254740992.0);  // rounded to double
}

TEST(MatrixMarket, SkewSymmetricMirrorsWithNegation) {
  const auto a =
      parse("%%MatrixMarket matrix coordinate real skew-symmetric\n3 3 2\n2 1 1.5\n3 2 -2\n");
  EXPECT_EQ(a.nnz(), 4);
  EXPECT_EQ(at(a, 1, 0), 1.5);
  EXPECT_EQ(at(a, 0, 1), -1.5);
  EXPECT_EQ(at(a, 2, 1), -2.0);
  EXPECT_EQ(at(a, 1, 2), 2.0);
}

TEST(MatrixMarket, SymmetricMirrorsOffDiagonalOnly) {
  const auto a = parse("%%MatrixMarket matrix coordinate real symmetric\n2 2 2\n1 1 4\n2 1 3\n");
  EXPECT_EQ(a.nnz(), 3);
  EXPECT_EQ(at(a, 0, 0), 4.0);
  EXPECT_EQ(at(a, 0, 1), 3.0);
  EXPECT_EQ(at(a, 1, 0), 3.0);
}

TEST(MatrixMarket, DuplicatesAreSummed) {
  const auto a = parse(
      "%%MatrixMarket matrix coordinate real general\n2 2 4\n1 1 1\n2 2 5\n1 1 2.5\n2 2 -5\n");
  EXPECT_EQ(a.nnz(), 2);
  EXPECT_EQ(at(a, 0, 0), 3.5);
  EXPECT_EQ(at(a, 1, 1), 0.0);  // kept as an explicit zero
}

TEST(MatrixMarket, CommentsBlankLinesCrLfAndCaseAreAccepted) {
  const auto a = parse(
      "%%MatrixMarket Matrix Coordinate REAL General\r\n"
      "% a comment\r\n"
      "\r\n"
      "   \t\r\n"
      "  % an indented comment\n"
      "3 3 2\r\n"
      "% between entries\n"
      "\n"
      "  1\t1   1e-3  \r\n"
      "3 2 -.5");  // no final newline
  EXPECT_EQ(a.nnz(), 2);
  EXPECT_EQ(at(a, 0, 0), 1e-3);
  EXPECT_EQ(at(a, 2, 1), -0.5);
}

TEST(MatrixMarket, NanInfAndExtremeValuesAreAccepted) {
  const auto a = parse(
      "%%MatrixMarket matrix coordinate real general\n"
      "3 3 6\n1 1 nan\n1 2 inf\n1 3 -Infinity\n2 1 1e-400\n2 2 +2.5E+3\n3 3 4.9e-324\n");
  EXPECT_TRUE(std::isnan(at(a, 0, 0)));
  EXPECT_EQ(at(a, 0, 1), std::numeric_limits<double>::infinity());
  EXPECT_EQ(at(a, 0, 2), -std::numeric_limits<double>::infinity());
  EXPECT_EQ(at(a, 1, 0), 0.0);  // underflow rounds to zero, as strtod does
  EXPECT_EQ(at(a, 1, 1), 2500.0);
  EXPECT_EQ(at(a, 2, 2), std::numeric_limits<double>::denorm_min());
}

TEST(MatrixMarket, IndexTypeTooNarrowIsAnInvalidArgument) {
  std::istringstream in{"%%MatrixMarket matrix coordinate real general\n40000 2 0\n"};
  try {
    (void)io::read_matrix_market<double, std::int16_t>(in, "wide.mtx");
    FAIL() << "no exception";
  } catch (const squeeze::invalid_argument& e) {
    EXPECT_NE(std::string{e.what()}.find("'wide.mtx' line 2"), std::string::npos) << e.what();
    EXPECT_NE(std::string{e.what()}.find("does not fit the index type int16"), std::string::npos)
        << e.what();
  }
  // Mirroring can push nnz past the index type.
  std::string text = "%%MatrixMarket matrix coordinate pattern symmetric\n20 20 100\n";
  int written = 0;
  for (int i = 2; i <= 20 && written < 100; ++i) {  // 100 strictly lower entries -> 200
    for (int j = 1; j < i && written < 100; ++j, ++written) {
      text += std::to_string(i) + " " + std::to_string(j) + "\n";
    }
  }
  std::istringstream in2{text};
  try {
    (void)io::read_matrix_market<double, std::int8_t>(in2, "nnz.mtx");
    FAIL() << "no exception";
  } catch (const squeeze::invalid_argument& e) {
    EXPECT_NE(std::string{e.what()}.find("'nnz.mtx'"), std::string::npos) << e.what();
    EXPECT_NE(std::string{e.what()}.find("(nnz)"), std::string::npos) << e.what();
  }
}

// ---- malformed input --------------------------------------------------------------------

struct bad_case {
  const char* what;
  std::string text;
  std::vector<std::string> words;  // substrings the message must hold, the line among them
};

TEST(MatrixMarket, MalformedInputNamesTheLineAndTheCause) {
  const std::string general = "%%MatrixMarket matrix coordinate real general\n";
  const std::string symmetric = "%%MatrixMarket matrix coordinate real symmetric\n";
  const std::vector<bad_case> cases = {
      {"empty", "", {"'bad.mtx' line 1", "empty", "banner"}},
      {"no banner", "3 3 1\n1 1 1\n", {"line 1", "missing Matrix Market banner"}},
      {"banner typo",
       "%MatrixMarket matrix coordinate real general\n1 1 0\n",
       {"line 1", "missing Matrix Market banner"}},
      {"short banner",
       "%%MatrixMarket matrix coordinate real\n1 1 0\n",
       {"line 1", "invalid banner"}},
      {"long banner",
       "%%MatrixMarket matrix coordinate real general extra\n1 1 0\n",
       {"line 1", "invalid banner"}},
      {"vector",
       "%%MatrixMarket vector coordinate real general\n1 1 0\n",
       {"line 1", "object 'vector' is not supported"}},
      {"array",
       "%%MatrixMarket matrix array real general\n2 2\n1\n2\n3\n4\n",
       {"line 1", "format 'array'", "not supported"}},
      {"format",
       "%%MatrixMarket matrix sparse real general\n1 1 0\n",
       {"line 1", "format 'sparse' is not supported"}},
      {"complex",
       "%%MatrixMarket matrix coordinate complex general\n1 1 1\n1 1 1 2\n",
       {"line 1", "field 'complex' is not supported"}},
      {"hermitian",
       "%%MatrixMarket matrix coordinate real hermitian\n1 1 0\n",
       {"line 1", "symmetry 'hermitian' is not supported"}},
      {"no size line", general + "% only a comment\n\n", {"line 3", "before the size line"}},
      {"size line short", general + "% c\n3 3\n", {"line 3", "bad size line"}},
      {"size line long", general + "3 3 1 1\n1 1 1\n", {"line 2", "bad size line"}},
      {"size line word", general + "3 x 1\n1 1 1\n", {"line 2", "bad size line"}},
      {"size line negative", general + "3 -3 1\n1 1 1\n", {"line 2", "bad size line"}},
      {"size line real", general + "3 3.0 1\n1 1 1\n", {"line 2", "bad size line"}},
      {"symmetric non-square",
       symmetric + "3 4 1\n1 1 1\n",
       {"line 2", "symmetric matrix must be square", "3 x 4"}},
      {"too few",
       general + "3 3 3\n1 1 1\n2 2 2\n",
       {"line 4", "too few entries", "ends after 2 entries", "declares 3"}},
      {"too many", general + "3 3 1\n1 1 1\n2 2 2\n", {"line 4", "too many entries", "declares 1"}},
      {"row zero", general + "3 3 1\n0 1 1\n", {"line 3", "row index 0 is out of range 1..3"}},
      {"row too big", general + "3 3 1\n4 1 1\n", {"line 3", "row index 4 is out of range"}},
      {"col too big",
       general + "3 5 2\n1 1 1\n\n1 6 1\n",
       {"line 5", "column index 6 is out of range 1..5", "1-based"}},
      {"row not integer",
       general + "3 3 1\n1.0 1 1\n",
       {"line 3", "cannot parse the row index '1.0'"}},
      {"col not integer",
       general + "3 3 1\n1 x 1\n",
       {"line 3", "cannot parse the column index 'x'"}},
      {"value garbage",
       general + "3 3 1\n1 1 1.5x\n",
       {"line 3", "cannot parse the value '1.5x' as a real number"}},
      {"value too large", general + "3 3 1\n1 1 1e400\n", {"line 3", "'1e400' is out of range"}},
      {"value missing", general + "3 3 1\n1 1\n", {"line 3", "bad entry", "<value>"}},
      {"extra word", general + "3 3 1\n1 1 1 1\n", {"line 3", "bad entry"}},
      {"pattern with value",
       "%%MatrixMarket matrix coordinate pattern general\n3 3 1\n1 1 1\n",
       {"line 3", "bad entry", "'<row> <col>'"}},
      {"integer with real",
       "%%MatrixMarket matrix coordinate integer general\n3 3 1\n1 1 1.5\n",
       {"line 3", "'1.5' as an integer"}},
      {"symmetric upper",
       symmetric + "3 3 2\n1 1 1\n1 2 1\n",
       {"line 4", "entry (1, 2) lies above the diagonal", "lower triangle"}},
      {"skew diagonal",
       "%%MatrixMarket matrix coordinate real skew-symmetric\n3 3 1\n% c\n2 2 1\n",
       {"line 4", "entry (2, 2) lies on the diagonal", "strictly lower"}},
  };
  for (const bad_case& c : cases) {
    const std::string message = format_error_of(c.text);
    ASSERT_FALSE(message.empty()) << c.what << ": no format_error";
    EXPECT_NE(message.find("'bad.mtx'"), std::string::npos) << c.what << ": " << message;
    for (const std::string& w : c.words) {
      EXPECT_NE(message.find(w), std::string::npos)
          << c.what << ": '" << w << "' is not in: " << message;
    }
  }
}

// ---- sizes the input declares (read_limits) ------------------------------------------------

// Seconds f() takes; what refusing a huge declared size may take is far below what building
// it would (a 51 GB row array).
template <class F>
double seconds_of(F&& f) {
  const auto start = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

TEST(MatrixMarket, HugeSizeLineIsRefusedBeforeAllocating) {
  // 62 bytes that declared 2^31 - 1 rows: 51 GB of row arrays (24 bytes a row) before the fix.
  const std::string text = "%%MatrixMarket matrix coordinate real general\n2147483647 1 0\n";
  std::string message;
  const double took = seconds_of([&] { message = format_error_of(text); });
  ASSERT_FALSE(message.empty()) << "no format_error";
  for (const char* words : {"'bad.mtx' line 2", "2147483647 rows of 20 bytes",
                            "read_limits::max_bytes = 268435456", "raise max_bytes"}) {
    EXPECT_NE(message.find(words), std::string::npos) << words << " is not in: " << message;
  }
  EXPECT_LT(took, 1.0);
  // INT64_MAX rows with 64-bit indices: a format_error too, not std::length_error.
  std::istringstream in{
      "%%MatrixMarket matrix coordinate pattern general\n9223372036854775807 1 0\n"};
  EXPECT_THROW((void)(io::read_matrix_market<double, std::int64_t>(in, "wide.mtx")),
               squeeze::format_error);
}

TEST_F(MatrixMarketFile, HugeSizeLineInAFileNamesTheFile) {
  const std::filesystem::path path = dir_ / "huge.mtx";
  std::ofstream{path} << "%%MatrixMarket matrix coordinate real general\n2147483647 2147483647 0\n";
  try {
    (void)io::read_matrix_market(path);
    FAIL() << "no exception";
  } catch (const squeeze::format_error& e) {
    EXPECT_NE(e.message().find("'" + path.string() + "' line 2"), std::string::npos) << e.what();
  }
}

TEST(MatrixMarket, ReadLimitsBoundRowsTheInputDoesNotPayFor) {
  // 1 M empty rows: 20 MB, within the default's 256 MiB; refused with no allowance at all.
  const std::string empty_rows = "%%MatrixMarket matrix coordinate real general\n1000000 1 0\n";
  EXPECT_EQ(parse(empty_rows).rows, 1000000);
  std::istringstream in{empty_rows};
  EXPECT_THROW((void)io::read_matrix_market(in, "strict.mtx", {.max_bytes = 0}),
               squeeze::format_error);
  // Rows that hold entries pay for themselves: 16 bytes per input byte covers them.
  std::string diagonal = "%%MatrixMarket matrix coordinate pattern general\n1000 1000 1000\n";
  for (int i = 1; i <= 1000; ++i) diagonal += std::to_string(i) + " " + std::to_string(i) + "\n";
  std::istringstream in2{diagonal};
  EXPECT_EQ(io::read_matrix_market(in2, "diagonal.mtx", {.max_bytes = 0}).nnz(), 1000);
}

TEST(MatrixMarket, HugeDeclaredEntryCountReservesNothingUpFront) {
  // The declared count once reserved up to 2^26 entries (2^27 mirrored: 3 GB) for any input.
  for (const std::string text :
       {"%%MatrixMarket matrix coordinate real general\n3 3 9223372036854775807\n1 1 1\n",
        "%%MatrixMarket matrix coordinate real symmetric\n5 5 4611686018427387904\n2 1 1\n"}) {
    std::string message;
    const double took = seconds_of([&] { message = format_error_of(text); });
    EXPECT_NE(message.find("too few entries: the input ends after 1 entries"), std::string::npos)
        << message;
    EXPECT_LT(took, 0.5);
  }
}

TEST(Csr, ValidateReportsRowsAtTheLimitWithoutOverflow) {
  io::csr_matrix<double, std::int64_t> a;
  a.rows = std::numeric_limits<std::int64_t>::max();
  a.row_ptr = {0};
  try {
    io::validate(a);
    FAIL() << "no exception";
  } catch (const squeeze::format_error& e) {
    EXPECT_NE(std::string{e.what()}.find("rows + 1 = 9223372036854775808 expected"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace

// Whatever exceptions() the caller set on its stream, bad input gives a squeeze::error (not
// std::ios_base::failure), good input reads, and the caller's mask is put back.
TEST(MatrixMarket, StreamsThatThrowGiveTheLibrarysErrors) {
  const auto all = std::ios::failbit | std::ios::badbit | std::ios::eofbit;
  std::istringstream good{"%%MatrixMarket matrix coordinate real general\n2 2 1\n1 2 3.5\n"};
  good.exceptions(all);
  const auto a = io::read_matrix_market(good, "good.mtx");
  EXPECT_EQ(a.nnz(), 1);
  EXPECT_EQ(good.exceptions(), all);
  std::istringstream cut{"%%MatrixMarket matrix coordinate real general\n2 2 3\n1 2 3.5\n"};
  cut.exceptions(all);
  EXPECT_THROW((void)io::read_matrix_market(cut, "cut.mtx"), squeeze::format_error);
  EXPECT_EQ(cut.exceptions(), all);
}
