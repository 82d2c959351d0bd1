// SPDX-License-Identifier: Apache-2.0
// io/npy.hpp: writes what np.save writes byte for byte, reads what np.save writes (format
// 1.0, 2.0, 3.0, old 16-byte alignment, big-endian data), and refuses every malformed or
// unsupported file with a message that names the file and the cause.
#include <squeeze/io/npy.hpp>

#include <gtest/gtest.h>

#include <stdlib.h>    // mkdtemp
#include <sys/stat.h>  // mkfifo

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <sstream>
#include <streambuf>
#include <string>
#include <thread>
#include <vector>

#include "common/pipe_buffer.hpp"

using squeeze::test::pipe_buffer;

namespace io = squeeze::io;

namespace {

// Bytes of a .npy file as NumPy lays it out: magic, version, little-endian header length,
// `dict` padded with spaces and ended by '\n' so that the prefix is a multiple of `align`.
std::string npy_bytes(int major, const std::string& dict, const std::string& data,
                      std::size_t align = 64) {
  const std::size_t length_bytes = major == 1 ? 2 : 4;
  const std::size_t unpadded = 8 + length_bytes + dict.size() + 1;
  const std::size_t header = dict.size() + 1 + (align - unpadded % align) % align;
  std::string s{"\x93NUMPY", 6};
  s += static_cast<char>(major);
  s += '\0';
  for (std::size_t i = 0; i < length_bytes; ++i) s += static_cast<char>((header >> 8 * i) & 0xff);
  s += dict;
  s.append(header - dict.size() - 1, ' ');
  return s + '\n' + data;
}

std::string dict_for(const std::string& descr, const std::string& shape) {
  return "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
}

std::string f32(float v) {
  std::string s(4, '\0');
  std::memcpy(s.data(), &v, 4);
  return s;
}

// Magic, version 1.0 and a header length of 118 (0x76): NumPy's for a 128-byte prefix.
const std::string v1_magic{"\x93NUMPY\x01\x00\x76\x00", 10};

// 0.0f .. 11.0f, as the data of a (3, 4) '<f4' array.
std::string f32_0_to_11() {
  std::string s;
  for (int i = 0; i < 12; ++i) s += f32(static_cast<float>(i));
  return s;
}

std::vector<float> floats(const io::npy_array& a) {
  std::vector<float> v(a.data.size() / 4);
  std::memcpy(v.data(), a.data.data(), a.data.size());
  return v;
}

// A temporary directory per test, removed with everything in it.
class Npy : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string name = (std::filesystem::temp_directory_path() / "squeeze-npy-XXXXXX").string();
    ASSERT_NE(mkdtemp(name.data()), nullptr);
    dir_ = name;
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  [[nodiscard]] std::string path(const std::string& name) const { return (dir_ / name).string(); }

  std::string write(const std::string& name, const std::string& bytes) const {
    const std::string p = path(name);
    std::ofstream{p, std::ios::binary} << bytes;
    return p;
  }

  [[nodiscard]] static std::string contents(const std::string& p) {
    std::ifstream in{p, std::ios::binary};
    return {std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{}};
  }

  // read_npy must throw E, whose message names the file and contains `needle`.
  template <class E = squeeze::format_error>
  void expect_error(const std::string& bytes, const std::string& needle) {
    const std::string p = write("bad.npy", bytes);
    try {
      io::read_npy(p);
      ADD_FAILURE() << "no exception for: " << needle;
    } catch (const E& e) {
      EXPECT_NE(e.message().find(needle), std::string::npos) << e.what();
      EXPECT_NE(e.message().find(p), std::string::npos) << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "wrong exception type for '" << needle << "': " << e.what();
    }
  }

  std::filesystem::path dir_;
};

}  // namespace

// ---- byte-exact layouts --------------------------------------------------------------

// The bytes below are NumPy 2.4's np.save output, spelled out.
TEST_F(Npy, WritesTheBytesNumPyWrites) {
  const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }";
  const std::string expected_prefix = v1_magic + dict + std::string(58, ' ') + "\n";
  ASSERT_EQ(expected_prefix.size(), 128u);
  const std::string data = f32_0_to_11();
  const std::vector<std::size_t> shape{3, 4};
  io::write_npy(path("a.npy"), "<f4", shape, std::as_bytes(std::span{data}));
  EXPECT_EQ(contents(path("a.npy")), expected_prefix + data);

  // 0-d: no growth padding; '|b1' bool; '=' is written as the host's order; '<u1' as '|u1'.
  const std::string i8(8, '\x07');
  io::write_npy(path("s.npy"), "=i8", {}, std::as_bytes(std::span{i8}));
  EXPECT_EQ(contents(path("s.npy")), v1_magic +
                                         "{'descr': '<i8', 'fortran_order': False, 'shape': (), }" +
                                         std::string(62, ' ') + "\n" + i8);
  const std::string b = {1, 0, 1, 1, 0};
  const std::vector<std::size_t> five{5};
  io::write_npy(path("b.npy"), "|b1", five, std::as_bytes(std::span{b}));
  EXPECT_EQ(contents(path("b.npy")),
            v1_magic + "{'descr': '|b1', 'fortran_order': False, 'shape': (5,), }" +
                std::string(60, ' ') + "\n" + b);
  const std::vector<std::size_t> empty{0};
  io::write_npy(path("e.npy"), "<u1", empty, {});
  EXPECT_EQ(contents(path("e.npy")),
            v1_magic + "{'descr': '|u1', 'fortran_order': False, 'shape': (0,), }" +
                std::string(60, ' ') + "\n");
}

// NumPy leaves room for the first dimension to grow to 21 digits; here that room is what
// pushes the prefix from 128 to 192 bytes.
TEST_F(Npy, WritesNumPysGrowthPadding) {
  std::vector<std::size_t> shape(14, 1);
  shape[1] = 100;
  const std::vector<std::byte> data(100, std::byte{3});
  io::write_npy(path("g.npy"), "|u1", shape, data);
  const std::string dict =
      "{'descr': '|u1', 'fortran_order': False, 'shape': (1, 100, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, "
      "1, 1), }";
  const std::string expected =
      std::string{"\x93NUMPY\x01\x00\xb6\x00", 10} + dict + std::string(84, ' ') + "\n";
  ASSERT_EQ(expected.size(), 192u);
  EXPECT_EQ(contents(path("g.npy")), expected + std::string(100, '\x03'));
}

TEST_F(Npy, ReadsVersion1Header) {
  const std::string bytes = v1_magic +
                            "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }" +
                            std::string(58, ' ') + "\n" + f32_0_to_11();
  const io::npy_array a = io::read_npy(write("v1.npy", bytes));
  EXPECT_EQ(a.descr, "<f4");
  EXPECT_EQ(a.kind, 'f');
  EXPECT_EQ(a.item_bytes, 4u);
  EXPECT_EQ(a.shape, (std::vector<std::size_t>{3, 4}));
  EXPECT_EQ(a.elements(), 12u);
  EXPECT_EQ(a.rows(), 3u);
  EXPECT_EQ(a.row_bytes(), 16u);
  const std::vector<float> v = floats(a);
  ASSERT_EQ(v.size(), 12u);
  for (std::size_t i = 0; i < 12; ++i) EXPECT_EQ(v[i], static_cast<float>(i));
}

TEST_F(Npy, ReadsVersion2And3Headers) {
  for (const char major : {'\x02', '\x03'}) {
    const std::string bytes = std::string{"\x93NUMPY", 6} + major +
                              std::string{"\x00\x74\x00\x00\x00", 5} +
                              "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }" +
                              std::string(56, ' ') + "\n" + f32_0_to_11();
    ASSERT_EQ(bytes.size(), 128u + 48u);
    const io::npy_array a = io::read_npy(write("v23.npy", bytes));
    EXPECT_EQ(a.descr, "<f4") << int{major};
    EXPECT_EQ(a.shape, (std::vector<std::size_t>{3, 4})) << int{major};
    EXPECT_EQ(floats(a)[11], 11.0f) << int{major};
  }
}

TEST_F(Npy, WritesVersion2WhenTheHeaderNeedsIt) {
  // 22000 dimensions of 1 need a header of 66000+ bytes: more than a 1.0 header can say.
  const std::vector<std::size_t> shape(22000, 1);
  const std::byte one{42};
  io::write_npy(path("big.npy"), "|u1", shape, std::span{&one, 1});
  const std::string bytes = contents(path("big.npy"));
  ASSERT_GT(bytes.size(), 66000u);
  EXPECT_EQ(bytes.substr(0, 8), (std::string{"\x93NUMPY\x02\x00", 8}));
  const std::size_t header = static_cast<unsigned char>(bytes[8]) |
                             static_cast<std::size_t>(static_cast<unsigned char>(bytes[9])) << 8 |
                             static_cast<std::size_t>(static_cast<unsigned char>(bytes[10])) << 16;
  EXPECT_EQ((12 + header) % 64, 0u);
  EXPECT_EQ(bytes.size(), 12 + header + 1);
  EXPECT_EQ(bytes[12 + header - 1], '\n');
  const io::npy_array a = io::read_npy(path("big.npy"));
  EXPECT_EQ(a.shape.size(), 22000u);
  ASSERT_EQ(a.data.size(), 1u);
  EXPECT_EQ(a.data[0], std::byte{42});
}

// NumPy before 1.14 padded the prefix to a multiple of 16 only.
TEST_F(Npy, ReadsOldSixteenByteAlignedHeader) {
  const std::string bytes = npy_bytes(1, dict_for("<u2", "(2,)"), "\x01\x02\x03\x04", 16);
  ASSERT_NE((bytes.size() - 4) % 64, 0u);
  const io::npy_array a = io::read_npy(write("old.npy", bytes));
  EXPECT_EQ(a.descr, "<u2");
  EXPECT_EQ(a.shape, (std::vector<std::size_t>{2}));
  std::uint16_t v[2];
  std::memcpy(v, a.data.data(), 4);
  EXPECT_EQ(v[0], 0x0201);
  EXPECT_EQ(v[1], 0x0403);
}

TEST_F(Npy, ParsesEverySpellingOfTheDict) {
  struct spelling {
    std::string dict;
    std::vector<std::size_t> shape;
  };
  const std::vector<spelling> spellings = {
      {"{'descr': '|u1', 'fortran_order': False, 'shape': (), }", {}},
      {"{'descr': '|u1', 'fortran_order': False, 'shape': (5,), }", {5}},
      {"{'descr': '|u1', 'fortran_order': False, 'shape': (3, 4), }", {3, 4}},
      {"{'descr': '|u1', 'fortran_order': False, 'shape': (3,4,), }", {3, 4}},
      {"{'descr': '|u1', 'fortran_order': False, 'shape': (2, 1, 3)}", {2, 1, 3}},
      {"{'shape': (3, 4), 'descr': '|u1', 'fortran_order': False}", {3, 4}},
      {"{'fortran_order':False,'shape':(3,4),'descr':'|u1'}", {3, 4}},
      {"  {\n 'descr' : \"|u1\" ,\t'fortran_order' :  False ,  'shape' : ( 3 , 4 , ) , }  ",
       {3, 4}},
      {"{\"descr\": '|u1', \"fortran_order\": False, \"shape\": (3L, 4L), }", {3, 4}},
      {"{'descr': '|u1', 'fortran_order': False, 'shape': (0, 7), }", {0, 7}},
  };
  for (const spelling& s : spellings) {
    std::size_t n = 1;
    for (const std::size_t d : s.shape) n *= d;
    const std::string data(n, '\x5a');
    const io::npy_array a = io::read_npy(write("s.npy", npy_bytes(1, s.dict, data)));
    EXPECT_EQ(a.shape, s.shape) << s.dict;
    EXPECT_EQ(a.data.size(), n) << s.dict;
    EXPECT_EQ(a.rows() * a.row_bytes(), n) << s.dict;
  }
}

// ---- round trips ---------------------------------------------------------------------

TEST_F(Npy, RoundTripsEveryDtypeAndShape) {
  struct dtype {
    const char* descr;
    char kind;
    std::size_t bytes;
  };
  const dtype dtypes[] = {{"<f2", 'f', 2}, {"<f4", 'f', 4}, {"<f8", 'f', 8}, {"|i1", 'i', 1},
                          {"<i2", 'i', 2}, {"<i4", 'i', 4}, {"<i8", 'i', 8}, {"|u1", 'u', 1},
                          {"<u2", 'u', 2}, {"<u4", 'u', 4}, {"<u8", 'u', 8}, {"|b1", 'b', 1}};
  const std::vector<std::vector<std::size_t>> shapes = {
      {}, {0}, {1}, {7}, {0, 3}, {3, 0}, {2, 3}, {2, 3, 4}, {1, 1, 1, 5}};
  for (const dtype& t : dtypes) {
    for (const std::vector<std::size_t>& shape : shapes) {
      std::size_t n = t.bytes;
      for (const std::size_t d : shape) n *= d;
      std::vector<std::byte> data(n);
      for (std::size_t i = 0; i < n; ++i) {
        data[i] = t.kind == 'b' ? std::byte(i % 3 == 0) : std::byte(i * 37 + 11);
      }
      const std::string p = path("r.npy");
      io::write_npy(p, t.descr, shape, data);
      EXPECT_EQ(std::filesystem::file_size(p), 128 + n) << t.descr;
      const io::npy_array a = io::read_npy(p);
      const std::string what = std::string{t.descr} + " " + io::detail::npy_shape_text(shape);
      EXPECT_EQ(a.descr, t.descr) << what;
      EXPECT_EQ(a.kind, t.kind) << what;
      EXPECT_EQ(a.item_bytes, t.bytes) << what;
      EXPECT_EQ(a.shape, shape) << what;
      EXPECT_EQ(a.data, data) << what;
      EXPECT_EQ(a.elements() * a.item_bytes, n) << what;
      EXPECT_EQ(a.rows() * a.row_bytes(), n) << what;
      // And again through the npy_array overload.
      io::write_npy(path("r2.npy"), a);
      EXPECT_EQ(contents(path("r2.npy")), contents(p)) << what;
    }
  }
}

TEST_F(Npy, ZeroDimensionalAndEmptyArraysHaveConsistentRows) {
  io::npy_array scalar;
  scalar.item_bytes = 8;
  EXPECT_EQ(scalar.elements(), 1u);
  EXPECT_EQ(scalar.rows(), 1u);
  EXPECT_EQ(scalar.row_bytes(), 8u);
  io::npy_array empty;
  empty.item_bytes = 4;
  empty.shape = {0, 5};
  EXPECT_EQ(empty.elements(), 0u);
  EXPECT_EQ(empty.rows(), 0u);
  EXPECT_EQ(empty.row_bytes(), 20u);
  io::npy_array vec;
  vec.item_bytes = 2;
  vec.shape = {9};
  EXPECT_EQ(vec.rows(), 9u);
  EXPECT_EQ(vec.row_bytes(), 2u);
}

TEST_F(Npy, TypedReadAndWrite) {
  const std::vector<double> values{1.5, -2.25, 1e300, 0.0, 3.0, -0.5};
  const std::vector<std::size_t> shape{2, 3};
  io::write_npy<double>(path("d.npy"), values, shape);
  std::vector<std::size_t> read_shape;
  EXPECT_EQ(io::read_npy_as<double>(path("d.npy"), &read_shape), values);
  EXPECT_EQ(read_shape, shape);
  EXPECT_EQ(io::read_npy(path("d.npy")).descr, "<f8");

  const bool flags[] = {true, false, true};
  const std::vector<std::size_t> three{3};
  io::write_npy<bool>(path("b.npy"), flags, three);
  EXPECT_EQ(io::read_npy_as<bool>(path("b.npy")), (std::vector<bool>{true, false, true}));

  const std::int16_t shorts[] = {-1, 300};
  const std::vector<std::size_t> two{2};
  io::write_npy<std::int16_t>(path("h.npy"), shorts, two);
  EXPECT_EQ(io::read_npy_as<std::int16_t>(path("h.npy")), (std::vector<std::int16_t>{-1, 300}));

  EXPECT_EQ(io::npy_descr_of<float>(), "<f4");
  EXPECT_EQ(io::npy_descr_of<std::uint8_t>(), "|u1");
  EXPECT_EQ(io::npy_descr_of<std::int64_t>(), "<i8");
  try {
    io::read_npy_as<float>(path("d.npy"));
    ADD_FAILURE() << "read <f8 as float";
  } catch (const squeeze::format_error& e) {
    EXPECT_NE(e.message().find("holds dtype <f8, not the <f4"), std::string::npos) << e.what();
  }
}

// ---- byte order ----------------------------------------------------------------------

TEST_F(Npy, BigEndianDataIsSwappedToHostOrder) {
  const std::string i4 = std::string{"\x00\x00\x00\x01\x01\x02\x03\x04\xff\xff\xff\xfe", 12};
  const io::npy_array a = io::read_npy(write("be.npy", npy_bytes(1, dict_for(">i4", "(3,)"), i4)));
  EXPECT_EQ(a.descr, "<i4");
  EXPECT_EQ(a.kind, 'i');
  ASSERT_EQ(a.data.size(), 12u);
  std::int32_t v[3];
  std::memcpy(v, a.data.data(), 12);
  EXPECT_EQ(v[0], 1);
  EXPECT_EQ(v[1], 0x01020304);
  EXPECT_EQ(v[2], -2);

  // 1.5 = 0x3FF8000000000000 as big-endian float64; 0xABCD as big-endian uint16.
  const io::npy_array d = io::read_npy(
      write("bd.npy", npy_bytes(1, dict_for(">f8", "()"), std::string{"\x3f\xf8\0\0\0\0\0\0", 8})));
  EXPECT_EQ(d.descr, "<f8");
  double x = 0;
  std::memcpy(&x, d.data.data(), 8);
  EXPECT_EQ(x, 1.5);
  EXPECT_EQ(io::read_npy_as<std::uint16_t>(
                write("bu.npy", npy_bytes(1, dict_for(">u2", "(1,)"), "\xab\xcd"))),
            (std::vector<std::uint16_t>{0xabcd}));

  // '=' (native) and '|' on a one-byte type are read as is.
  EXPECT_EQ(io::read_npy_as<std::uint16_t>(
                write("nu.npy", npy_bytes(1, dict_for("=u2", "(1,)"), "\xcd\xab"))),
            (std::vector<std::uint16_t>{0xabcd}));
  EXPECT_EQ(io::read_npy(write("b1.npy", npy_bytes(1, dict_for(">i1", "(1,)"), "\x80"))).descr,
            "|i1");

  // Written as '>i4', the file keeps those bytes and reads back in host order.
  const std::vector<std::size_t> three{3};
  io::write_npy(path("w.npy"), ">i4", three, std::as_bytes(std::span{i4}));
  EXPECT_NE(contents(path("w.npy")).find("'descr': '>i4'"), std::string::npos);
  EXPECT_EQ(io::read_npy_as<std::int32_t>(path("w.npy")),
            (std::vector<std::int32_t>{1, 0x01020304, -2}));
}

// ---- malformed and unsupported files -------------------------------------------------

TEST_F(Npy, UnreadableFileIsAnIoError) {
  const std::string missing = path("missing.npy");
  try {
    io::read_npy(missing);
    ADD_FAILURE() << "no exception";
  } catch (const squeeze::io_error& e) {
    EXPECT_NE(e.message().find(missing), std::string::npos) << e.what();
    EXPECT_NE(e.message().find(std::strerror(ENOENT)), std::string::npos) << e.what();
  }
  // A directory opens on Linux but cannot be read.
  try {
    io::read_npy(dir_.string());
    ADD_FAILURE() << "no exception";
  } catch (const squeeze::io_error& e) {
    EXPECT_NE(e.message().find(std::strerror(EISDIR)), std::string::npos) << e.what();
  }
}

TEST_F(Npy, BadMagicAndVersionsAreRefused) {
  const std::string good = npy_bytes(1, dict_for("<f4", "(1,)"), f32(1.0f));
  expect_error("\x93NUM", "too short");
  expect_error("", "too short");
  std::string bad = good;
  bad[1] = 'n';
  expect_error(bad, "bad magic");
  expect_error("PK\x03\x04 this is a zip (.npz) archive", "bad magic");
  bad = good;
  bad[6] = 4;
  expect_error(bad, "version 4.0");
  bad = good;
  bad[7] = 1;
  expect_error(bad, "version 1.1");
  bad = good;
  bad[6] = 0;
  expect_error(bad, "version 0.0");
  expect_error(std::string{"\x93NUMPY\x02\x00\x10\x00", 8},
               "truncated inside its .npy header length");
}

TEST_F(Npy, MalformedHeadersAreRefused) {
  const std::string f = f32(1.0f);
  expect_error(npy_bytes(1, "['descr', '<f4']", f), "not a Python dict");
  expect_error(npy_bytes(1, "", f), "not a Python dict");
  expect_error(npy_bytes(1, "{'descr': '<f4', 'fortran_order': False}", f), "no 'shape' key");
  expect_error(npy_bytes(1, "{'shape': (1,), 'fortran_order': False}", f), "no 'descr' key");
  expect_error(npy_bytes(1, "{'descr': '<f4', 'shape': (1,)}", f), "no 'fortran_order' key");
  expect_error(npy_bytes(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,)", f),
               "ends before the dict's closing '}'");
  expect_error(npy_bytes(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,)} x", f),
               "text after");
  expect_error(npy_bytes(1, "{'descr': '<f4' 'fortran_order': False, 'shape': (1,)}", f),
               "no ',' or '}'");
  expect_error(npy_bytes(1, "{'descr' '<f4', 'fortran_order': False, 'shape': (1,)}", f), "no ':'");
  expect_error(npy_bytes(1, "{'descr: '<f4', 'fortran_order': False, 'shape': (1,)}", f), "no ':'");
  expect_error(npy_bytes(1, "{'descr': '<f4', 'fortran_order': false, 'shape': (1,)}", f),
               "neither True nor False");
  expect_error(npy_bytes(1, "{'descr': '<f4', 'fortran_order': 0, 'shape': (1,)}", f),
               "neither True nor False");
  expect_error(npy_bytes(1,
                         "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, "
                         "'shape': (1,)}",
                         f),
               "'descr' twice");
  expect_error(npy_bytes(1,
                         "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), "
                         "'extra': 1}",
                         f),
               "unexpected key 'extra'");
  expect_error(npy_bytes(1, "{'descr': '<f4", f), "a string with an escape or newline");
  expect_error(std::string{"\x93NUMPY\x01\x00\x0e\x00", 10} + "{'descr': '<f4",
               "ends inside a string");
  expect_error(npy_bytes(1, "{descr: '<f4', 'fortran_order': False, 'shape': (1,)}", f),
               "no quoted string");
  expect_error(npy_bytes(1, dict_for(std::string{"<f4"} + '\0', "(1,)"), f), "dtype '<f4");
  // Bad shapes.
  for (const char* shape : {"(3, -4)", "(5)", "(3 4)", "(,)", "(1.5,)", "[3, 4]", "(3, 4",
                            "(18446744073709551616,)", "5"}) {
    expect_error(npy_bytes(1, dict_for("<f4", shape), f), "shape");
  }
  expect_error(npy_bytes(1, dict_for("<f4", "(18446744073709551616,)"), f), "overflows");
  expect_error(npy_bytes(1, dict_for("<f4", "(5)"), f), "not a tuple");
  // A product of dimensions that overflows, with the item size or without.
  expect_error(npy_bytes(1, dict_for("<f4", "(4294967296, 4294967296)"), f), "overflows");
  expect_error(npy_bytes(1, dict_for("<f4", "(4611686018427387904,)"), f), "overflows");
  expect_error(npy_bytes(1, dict_for("|u1", "(4294967296, 4294967296, 2)"), f), "overflows");
}

TEST_F(Npy, UnsupportedDtypesAndFortranOrderAreRefused) {
  const std::string f = f32(1.0f);
  for (const char* descr : {"<U10", "|O", "<c8", "<c16", "|V8", "|S4", "<M8[ns]", "<f16", "<i3",
                            "<b2", "|f1", "f4", "!f4", "<f4 "}) {
    expect_error(npy_bytes(1, dict_for(descr, "(1,)"), f), "dtype '" + std::string{descr} + "'");
  }
  const std::string structured = "[('x', '<i4'), ('y', '<f8')]";
  expect_error(
      npy_bytes(1, "{'descr': " + structured + ", 'fortran_order': False, 'shape': (1,), }", f),
      "dtype " + structured + ", which is not supported");
  expect_error(npy_bytes(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (1,), }", f),
               "fortran_order arrays are not supported; save with np.ascontiguousarray");
}

TEST_F(Npy, TruncatedAndOverlongFilesAreRefused) {
  const std::string good = npy_bytes(1, dict_for("<f4", "(3, 4)"), f32_0_to_11());
  expect_error(good.substr(0, good.size() - 1), "truncated");
  expect_error(good.substr(0, 128), "truncated: its header describes 48 bytes of data");
  expect_error(good.substr(0, 100), "truncated");
  expect_error(good + "x", "longer than its header describes: 1 bytes follow");
  expect_error(good + std::string(64, '\0'), "longer");
  // Every proper prefix of a file is refused (and nothing reads past what the file holds).
  for (std::size_t n = 0; n < good.size(); ++n) {
    EXPECT_THROW(io::read_npy(write("cut.npy", good.substr(0, n))), squeeze::format_error) << n;
  }
  // A v2 header length far beyond the file's end.
  expect_error(std::string{"\x93NUMPY\x02\x00\xff\xff\xff\xff{}", 14}, "truncated");
}

TEST_F(Npy, WriteRefusesBadArguments) {
  const std::vector<std::size_t> shape{3, 4};
  const std::vector<std::byte> data(47);
  try {
    io::write_npy(path("w.npy"), "<f4", shape, data);
    ADD_FAILURE() << "no exception";
  } catch (const squeeze::invalid_argument& e) {
    EXPECT_NE(e.message().find("needs 48 bytes of data, but 47 were given"), std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(path("w.npy")));
  const std::vector<std::size_t> huge{std::size_t{1} << 62, 8};
  EXPECT_THROW(io::write_npy(path("w.npy"), "<f4", huge, data), squeeze::invalid_argument);
  try {
    io::write_npy(path("w.npy"), "<U4", shape, data);
    ADD_FAILURE() << "no exception";
  } catch (const squeeze::invalid_argument& e) {
    EXPECT_NE(e.message().find("dtype '<U4' is not supported"), std::string::npos) << e.what();
  }
  const std::string unwritable = path("no/such/dir/w.npy");
  try {
    io::write_npy(unwritable, "|u1", std::vector<std::size_t>{1}, std::vector<std::byte>(1));
    ADD_FAILURE() << "no exception";
  } catch (const squeeze::io_error& e) {
    EXPECT_NE(e.message().find(unwritable), std::string::npos) << e.what();
    EXPECT_NE(e.message().find(std::strerror(ENOENT)), std::string::npos) << e.what();
  }
}

// A pipe has no size to check in advance: the reader finds short and long data as it reads.
TEST_F(Npy, ReadsFromAPipe) {
  const std::string good = npy_bytes(1, dict_for("<f4", "(3, 4)"), f32_0_to_11());
  const std::string fifo = path("fifo.npy");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  const auto read_through_pipe = [&](const std::string& bytes) {
    std::thread writer{[&] {
      std::ofstream out{fifo, std::ios::binary};
      out << bytes;
    }};
    struct joiner {
      std::thread& t;
      ~joiner() { t.join(); }
    } join{writer};
    return io::read_npy(fifo);
  };
  EXPECT_EQ(floats(read_through_pipe(good))[7], 7.0f);
  for (const auto& [bytes, needle] :
       {std::pair{good.substr(0, good.size() - 3), std::string{"truncated"}},
        std::pair{good.substr(0, 60), std::string{"truncated inside its .npy header"}},
        std::pair{good + "xyz", std::string{"longer than its header describes"}}}) {
    try {
      read_through_pipe(bytes);
      ADD_FAILURE() << "no exception for: " << needle;
    } catch (const squeeze::format_error& e) {
      EXPECT_NE(e.message().find(needle), std::string::npos) << e.what();
    }
  }
}

// ---- sizes the header declares, and streams --------------------------------------------

namespace {

// The message of the format_error that read_npy(stream) throws ("" when none).
std::string stream_error(const std::string& bytes) {
  pipe_buffer pipe{bytes};
  std::istream in{&pipe};
  try {
    (void)io::read_npy(in, "pipe.npy");
  } catch (const squeeze::format_error& e) {
    return e.message();
  }
  return "";
}

template <class F>
double seconds_of(F&& f) {
  const auto start = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

TEST_F(Npy, HugeDeclaredSizesAreRefusedBeforeAllocating) {
  // 1 TiB of data declared, 3 bytes held: refused from the file's size, before allocating.
  const std::string tib = npy_bytes(1, dict_for("|u1", "(1099511627776,)"), "abc");
  const double file_took = seconds_of([&] {
    expect_error(tib, "truncated: its header describes 1099511627776 bytes of data");
  });
  EXPECT_LT(file_took, 1.0);
  // From a stream of unknown size the data grows in steps as it arrives, and ends at 3 bytes.
  std::string message;
  const double stream_took = seconds_of([&] { message = stream_error(tib); });
  EXPECT_NE(message.find("'pipe.npy' is truncated: its header describes 1099511627776 bytes"),
            std::string::npos)
      << message;
  EXPECT_LT(stream_took, 1.0);
  // A 4 GiB header declared, 2 bytes sent: the header is not allocated up front either.
  const std::string header = std::string{"\x93NUMPY\x02\x00\xff\xff\xff\xff{}", 14};
  EXPECT_NE(stream_error(header).find("truncated inside its .npy header (4294967295 bytes"),
            std::string::npos)
      << stream_error(header);
  expect_error(header, "its .npy header is 4294967295 bytes long but only 2 bytes follow");
}

TEST_F(Npy, ShapesWhoseProductOverflowsAreRefusedEvenWhenEmpty) {
  // As NumPy does: elements() and row_bytes() could not be computed without wrapping.
  expect_error(npy_bytes(1, dict_for("<f4", "(0, 4294967296, 4294967296)"), ""), "overflows");
  expect_error(npy_bytes(1, dict_for("|u1", "(4294967296, 0, 4294967296)"), ""), "overflows");
  const io::npy_array empty =
      io::read_npy(write("e.npy", npy_bytes(1, dict_for("<f8", "(0, 4294967296)"), "")));
  EXPECT_EQ(empty.data.size(), 0u);
  EXPECT_EQ(empty.row_bytes(), std::size_t{8} << 32);
}

// A pipe that declares more than it sends ends the read as soon as it ends.
TEST_F(Npy, APipeThatDeclaresMoreThanItHoldsIsTruncated) {
  const std::string fifo = path("fifo.npy");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  const std::string bytes = npy_bytes(1, dict_for("<f8", "(1000000000000,)"), f32(1.0f));
  std::thread writer{[&] { std::ofstream{fifo, std::ios::binary} << bytes; }};
  std::string message;
  const double took = seconds_of([&] {
    try {
      (void)io::read_npy(fifo);
    } catch (const squeeze::format_error& e) {
      message = e.message();
    }
  });
  writer.join();
  EXPECT_NE(message.find("truncated: its header describes 8000000000000 bytes"), std::string::npos)
      << message;
  EXPECT_LT(took, 1.0);
}

// From a FILE or a stream, read_npy reads one array and stops after it, as np.load does.
TEST_F(Npy, ReadsArraysOneByOneFromAFileOrAStream) {
  const std::string first = npy_bytes(1, dict_for("<f4", "(3, 4)"), f32_0_to_11());
  const std::string second = npy_bytes(2, dict_for("|u1", "(2,)"), "xy");
  const std::string both = first + second;
  const auto check = [](const io::npy_array& a, const io::npy_array& b) {
    EXPECT_EQ(floats(a)[11], 11.0f);
    EXPECT_EQ(b.shape, (std::vector<std::size_t>{2}));
    EXPECT_EQ(static_cast<char>(b.data[1]), 'y');
  };
  const std::unique_ptr<std::FILE, int (*)(std::FILE*)> f{
      std::fopen(write("two.npy", both).c_str(), "rb"), &std::fclose};
  ASSERT_TRUE(f);
  const io::npy_array a = io::read_npy(f.get(), "two.npy");
  const io::npy_array b = io::read_npy(f.get(), "two.npy");
  check(a, b);
  EXPECT_EQ(std::fgetc(f.get()), EOF);
  EXPECT_THROW((void)io::read_npy(f.get(), "two.npy"), squeeze::format_error);

  std::istringstream sized{both};
  const io::npy_array c = io::read_npy(sized, "sized");
  check(c, io::read_npy(sized, "sized"));
  pipe_buffer pipe{both};
  std::istream piped{&pipe};
  const io::npy_array d = io::read_npy(piped, "piped");
  check(d, io::read_npy(piped, "piped"));
  // By path the array must end the file.
  expect_error(both, "longer than its header describes");
}
