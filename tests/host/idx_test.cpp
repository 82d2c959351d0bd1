// io/idx.hpp: reads what it should, refuses what it should, and says why.
#include <squeeze/io/idx.hpp>

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

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
  EXPECT_THROW(squeeze::io::read_idx("/nonexistent/file.idx"), squeeze::io_error);
}
