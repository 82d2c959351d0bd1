// SPDX-License-Identifier: Apache-2.0
// io/idx.hpp: reads what it should, refuses what it should, and says why.
#include <squeeze/io/idx.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <streambuf>
#include <string>
#include <utility>
#include <vector>

#include "common/pipe_buffer.hpp"

using squeeze::test::pipe_buffer;

namespace {

std::string write_file(const std::vector<unsigned char>& bytes) {
  char path[] = "/tmp/squeeze-idx-XXXXXX";
  const int fd = mkstemp(path);
  std::FILE* f = fdopen(fd, "wb");
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
  return path;
}

void expect_error(const std::vector<unsigned char>& bytes, const std::string& needle) {
  const std::string path = write_file(bytes);
  try {
    squeeze::io::read_idx(path);
    ADD_FAILURE() << "no exception for: " << needle;
  } catch (const squeeze::error& e) {
    EXPECT_NE(std::string{e.what()}.find(needle), std::string::npos) << e.what();
    EXPECT_NE(std::string{e.what()}.find(path), std::string::npos) << e.what();
  }
  std::remove(path.c_str());
}

// An IDX header: magic, type, then the dimensions big-endian.
std::vector<unsigned char> idx_header(unsigned char type, const std::vector<std::uint32_t>& dims) {
  std::vector<unsigned char> b{0, 0, type, static_cast<unsigned char>(dims.size())};
  for (const std::uint32_t d : dims) {
    for (int shift = 24; shift >= 0; shift -= 8)
      b.push_back(static_cast<unsigned char>(d >> shift));
  }
  return b;
}

}  // namespace

TEST(Idx, ReadsUint8AndFloat32Arrays) {
  // 2 x 3 uint8
  const std::string p8 = write_file({0, 0, 0x08, 2, 0, 0, 0, 2, 0, 0, 0, 3, 1, 2, 3, 4, 5, 6});
  const auto a = squeeze::io::read_idx(p8);
  EXPECT_EQ(a.dims, (std::vector<std::uint32_t>{2, 3}));
  EXPECT_EQ(a.row_elements(), 3u);
  ASSERT_EQ(a.data.size(), 6u);
  EXPECT_EQ(static_cast<int>(a.data[5]), 6);
  std::remove(p8.c_str());
  // 1 float32 (1.5f = 0x3FC00000, stored big-endian)
  const std::string pf = write_file({0, 0, 0x0D, 1, 0, 0, 0, 1, 0x3F, 0xC0, 0x00, 0x00});
  const auto f = squeeze::io::read_idx(pf);
  float v = 0;
  std::memcpy(&v, f.data.data(), 4);
  EXPECT_EQ(v, 1.5f);
  std::remove(pf.c_str());
}

TEST(Idx, MalformedFilesAreRefusedWithTheReason) {
  expect_error({0, 0}, "too short");
  expect_error({0x1f, 0x8b, 8, 0}, "gzip-compressed");
  expect_error({1, 0, 0x08, 1, 0, 0, 0, 1, 7}, "bad magic");
  expect_error({0, 0, 0x07, 1, 0, 0, 0, 1, 7}, "bad magic");
  expect_error({0, 0, 0x08, 2, 0, 0, 0, 1}, "inside its dimensions");
  expect_error({0, 0, 0x08, 1, 0, 0, 0, 5, 1, 2}, "fewer than the 5 elements");
  expect_error({0, 0, 0x08, 1, 0, 0, 0, 2, 1, 2, 3},
               "longer than its header describes: bytes follow the 2 elements of 1 byte");
  EXPECT_THROW(squeeze::io::read_idx("/nonexistent/file.idx"), squeeze::io_error);
}

TEST(Idx, DimensionsWhoseProductOverflowsAreRefused) {
  // 2^31 x 2^31 x 4 bytes = 2^64: once wrapped to 0 and read "successfully" as empty data.
  std::vector<unsigned char> b = idx_header(0x08, {0x80000000u, 0x80000000u, 4});
  expect_error(b, "declares 2147483648 x 2147483648 x 4 elements of 1 byte, a size that overflows");
  // Even with a zero among them (row_elements() would wrap).
  expect_error(idx_header(0x0E, {0, 0xffffffffu, 0xffffffffu}), "overflows 64 bits");
  // A zero with a product that fits is an empty array.
  const std::string p = write_file(idx_header(0x0D, {0, 28, 28}));
  const auto a = squeeze::io::read_idx(p);
  EXPECT_TRUE(a.data.empty());
  EXPECT_EQ(a.row_elements(), 784u);
  std::remove(p.c_str());
}

TEST(Idx, DimensionsBeyondTheFileAreRefusedBeforeAllocating) {
  // 2^32-1 x 2^32-1 bytes declared, 3 held: refused from the file's size, at once.
  std::vector<unsigned char> b = idx_header(0x08, {0xffffffffu, 0xffffffffu});
  b.insert(b.end(), {1, 2, 3});
  const auto start = std::chrono::steady_clock::now();
  expect_error(b, "fewer than the 18446744065119617025 elements its header declares");
  expect_error(b, "only 3 bytes follow the header");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 1.0);
}

TEST(Idx, ReadsStreamsOfUnknownSizeInSteps) {
  std::vector<unsigned char> good = idx_header(0x0B, {3});
  good.insert(good.end(), {0x00, 0x01, 0xff, 0xfe, 0x01, 0x2c});
  pipe_buffer pipe{good};
  std::istream in{&pipe};
  const auto a = squeeze::io::read_idx(in, "pipe.idx");
  ASSERT_EQ(a.data.size(), 6u);
  std::int16_t v[3];
  std::memcpy(v, a.data.data(), 6);
  EXPECT_EQ(v[0], 1);
  EXPECT_EQ(v[1], -2);
  EXPECT_EQ(v[2], 300);
  // 4 GB declared, 3 bytes sent: the buffer grows as bytes arrive and the read ends with them.
  std::vector<unsigned char> b = idx_header(0x0C, {1000000000});
  b.insert(b.end(), {1, 2, 3});
  pipe_buffer short_pipe{b};
  std::istream short_in{&short_pipe};
  try {
    (void)squeeze::io::read_idx(short_in, "short.idx");
    ADD_FAILURE() << "no exception";
  } catch (const squeeze::format_error& e) {
    EXPECT_NE(e.message().find("'short.idx' holds fewer than the 1000000000 elements"),
              std::string::npos)
        << e.what();
  }
}

TEST(Idx, AStreamMayHoldMoreThanOneArray) {
  std::vector<unsigned char> two = idx_header(0x08, {2});
  two.insert(two.end(), {7, 8});
  const std::vector<unsigned char> second = idx_header(0x08, {1});
  two.insert(two.end(), second.begin(), second.end());
  two.push_back(9);
  std::istringstream in{std::string{two.begin(), two.end()}};
  const auto a = squeeze::io::read_idx(in, "two.idx");
  const auto b = squeeze::io::read_idx(in, "two.idx");
  ASSERT_EQ(a.data.size(), 2u);
  EXPECT_EQ(static_cast<int>(a.data[1]), 8);
  ASSERT_EQ(b.data.size(), 1u);
  EXPECT_EQ(static_cast<int>(b.data[0]), 9);
}

// Whatever exceptions() the caller set on its stream, bad input gives a squeeze::error (not
// std::ios_base::failure), and the caller's mask is put back.
TEST(Idx, StreamsThatThrowGiveTheLibrarysErrors) {
  const auto all = std::ios::failbit | std::ios::badbit | std::ios::eofbit;
  std::vector<unsigned char> b = idx_header(0x08, {5});
  b.insert(b.end(), {1, 2});
  std::istringstream cut{std::string{b.begin(), b.end()}};
  cut.exceptions(all);
  EXPECT_THROW((void)squeeze::io::read_idx(cut, "cut.idx"), squeeze::format_error);
  EXPECT_EQ(cut.exceptions(), all);
  b.insert(b.end(), {3, 4, 5});
  std::istringstream whole{std::string{b.begin(), b.end()}};
  whole.exceptions(all);
  EXPECT_EQ(squeeze::io::read_idx(whole, "whole.idx").data.size(), 5u);
}
