// SPDX-License-Identifier: Apache-2.0
// tests/fuzz/fuzz_support.hpp: what the fuzz targets share: a broken invariant traps (a
// finding, SQUEEZE_FUZZ_ASSERT_TRUE), fields taken from the input, the input read as a pipe and as
// a sized stream, the input as a regular file in memory, and the seeds a target writes for its
// corpus.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <istream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "common/pipe_buffer.hpp"

namespace squeeze::fuzz {

/// A finding unless `ok`: the failed condition and its place go to stderr, then a trap,
/// which libFuzzer reports with the input that caused it and which fails the ctest replay.
inline void assert_true(bool ok, const char* condition, const char* file, int line) {
  if (ok) return;
  std::fprintf(stderr, "%s:%d: fuzz assertion failed: %s\n", file, line, condition);
  __builtin_trap();
}

}  // namespace squeeze::fuzz

/// SQUEEZE_FUZZ_ASSERT_TRUE(cond): a finding unless cond holds (squeeze::fuzz::assert_true).
#define SQUEEZE_FUZZ_ASSERT_TRUE(cond) \
  ::squeeze::fuzz::assert_true(static_cast<bool>(cond), #cond, __FILE__, __LINE__)

namespace squeeze::fuzz {

/// The next sizeof(T) bytes as a T (zeros once the input runs out).
template <class T>
T take(const std::uint8_t*& data, std::size_t& size) {
  T v{};
  const std::size_t n = size < sizeof(T) ? size : sizeof(T);
  if (n > 0) std::memcpy(&v, data, n);
  data += n;
  size -= n;
  return v;
}

/// The input read twice by `read` (std::istream& -> std::optional<...>): through a pipe,
/// whose size the reader cannot know, and through a stream of known size. Both must accept
/// it or both refuse it; returns {piped, sized} for the caller's comparison.
template <class Read>
auto read_piped_and_sized(const std::uint8_t* data, std::size_t size, Read&& read) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  test::pipe_buffer pipe{bytes};
  std::istream piped{&pipe};
  std::istringstream sized{bytes};
  auto a = read(piped);
  auto b = read(sized);
  SQUEEZE_FUZZ_ASSERT_TRUE(a.has_value() == b.has_value());
  return std::pair{std::move(a), std::move(b)};
}

/// The bytes as a regular file in memory (memfd, Linux >= 3.17), so that the readers' path
/// overloads run without touching a disk. path() names it; closed on destruction.
class memory_file {
 public:
  memory_file(const char* name, const void* bytes, std::size_t size) : fd_{memfd_create(name, 0)} {
    SQUEEZE_FUZZ_ASSERT_TRUE(fd_ >= 0);
    const auto* p = static_cast<const char*>(bytes);
    for (std::size_t done = 0; done < size;) {
      const ssize_t n = write(fd_, p + done, size - done);
      SQUEEZE_FUZZ_ASSERT_TRUE(n > 0);
      done += static_cast<std::size_t>(n);
    }
  }
  memory_file(const memory_file&) = delete;
  memory_file& operator=(const memory_file&) = delete;
  ~memory_file() { close(fd_); }
  [[nodiscard]] std::string path() const { return "/proc/self/fd/" + std::to_string(fd_); }

 private:
  int fd_;
};

/// Writes one seed of a target's corpus to dir/name; false when the file cannot be written.
inline bool write_seed(const char* dir, const std::string& name,
                       const std::vector<std::uint8_t>& bytes) {
  const std::string path = std::string{dir} + "/" + name;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return false;
  const bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  return std::fclose(f) == 0 && ok;
}

}  // namespace squeeze::fuzz
