// SPDX-License-Identifier: Apache-2.0
// bam::array on the GPU against a host copy: every backing read in full and at random
// indices, with caches far smaller than the data (every access pattern forces evictions);
// writes and atomic adds by many warps, flushed back to the host memory and compared with
// the expected values; lanes of a warp on one line and on different lines; the naive
// (uncoalesced) policy; an index past the end and a cache whose only slot is pinned give a
// status, not a hang or a wrong value; hundreds of warps on a cache of a few slots read,
// write and add with no cache_full reported and every value right after the flush. Outputs
// are poisoned with 0xFF bytes first; inputs are random with fixed seeds. Every array is
// built, used and checked on a stream of the test's own (no call may wait for the device);
// check() waits for its stream only, never for another stream's kernel. Backings of the
// test's own (bam::backing): a computed one that counts its reads, and one over the test's
// pinned buffer, read and written with and without the cache against a host reference.
#include <squeeze/bam/array.cuh>
#include <squeeze/bam/io_service.hpp>
#include <squeeze/core/buffer.hpp>
#include <squeeze/core/cuda_error.hpp>
#include <squeeze/core/error.hpp>

#include <gtest/gtest.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/gpu_test.hpp"
#include "common/stream_blocker.cuh"

namespace bam = squeeze::bam;
namespace core = squeeze::core;

namespace bam_array_test {

template <class Ref>
SQUEEZE_KERNEL(256)
void gather_kernel(Ref a, const std::uint64_t* index, std::uint64_t n,
                   typename Ref::value_type* out) {
  for (std::uint64_t t = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; t < n;
       t += std::uint64_t{gridDim.x} * blockDim.x) {
    out[t] = a.read(index[t]);
  }
}

// Thread t owns the elements e with e % threads == t: it writes them (and reads them back at
// once) while everyone else reads and writes their own; every value is known.
template <class Ref>
SQUEEZE_KERNEL(256)
void owner_write_kernel(Ref a, std::uint32_t salt, unsigned* mismatches) {
  const std::uint64_t threads = std::uint64_t{gridDim.x} * blockDim.x;
  const std::uint64_t t = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x;
  for (std::uint64_t e = t; e < a.size(); e += threads) {
    const auto v = static_cast<std::uint32_t>(e * 2654435761u) ^ salt;
    a.write(e, v);
    if (a.read(e) != v) atomicAdd(mismatches, 1u);
  }
}

template <class Ref>
SQUEEZE_KERNEL(256)
void histogram_kernel(Ref a, const std::uint64_t* index, std::uint64_t n) {
  for (std::uint64_t t = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; t < n;
       t += std::uint64_t{gridDim.x} * blockDim.x) {
    a.atomic_add(index[t], 1u);
  }
}

// Each warp pins line w and sums it with plain loads.
template <class Ref>
SQUEEZE_KERNEL(256)
void pin_sum_kernel(Ref a, std::uint64_t lines, std::uint64_t* sums) {
  const std::uint64_t warp = (blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x) / 32;
  const unsigned lane = threadIdx.x % 32;
  for (std::uint64_t w = warp; w < lines; w += std::uint64_t{gridDim.x} * blockDim.x / 32) {
    const auto line = a.warp_pin(w * a.line_elements());
    std::uint64_t sum = 0;
    if (line.data != nullptr) {
      for (std::uint32_t j = lane; j < line.count; j += 32) sum += line[j];
    }
    for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if (lane == 0) sums[w] = sum;
    a.warp_unpin(line);
  }
}

// One warp: pins line 0, then asks for line 1 while the only slot is pinned.
template <class Ref>
SQUEEZE_KERNEL(32)
void pinned_full_kernel(Ref a, std::uint32_t* out) {
  const auto line = a.warp_pin(0);
  out[threadIdx.x] = a.read(a.line_elements() + threadIdx.x);
  a.warp_unpin(line);
}

// The contended test's data: [0, read_words) read only, then the words each thread owns
// (thread t: read_words + t + j * threads), then `counters` words of atomic adds.
struct contended_layout {
  std::uint64_t read_words = 0;
  std::uint64_t threads = 0;
  std::uint32_t owned_per_thread = 0;
  std::uint32_t reads_per_thread = 0;
  std::uint32_t counters = 0;
  std::uint32_t adds_per_thread = 0;

  SQUEEZE_HOST_DEVICE std::uint64_t owned_begin() const { return read_words; }
  SQUEEZE_HOST_DEVICE std::uint64_t counters_begin() const {
    return read_words + threads * owned_per_thread;
  }
  SQUEEZE_HOST_DEVICE std::uint64_t size() const { return counters_begin() + counters; }
  // The k-th read of thread t (splitmix64 of both, so warps scatter over every line).
  SQUEEZE_HOST_DEVICE std::uint64_t read_index(std::uint64_t t, std::uint32_t k) const {
    std::uint64_t z = t * 0x9e3779b97f4a7c15ull + k + 1;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (z ^ (z >> 31)) % read_words;
  }
  SQUEEZE_HOST_DEVICE static std::uint32_t owned_value(std::uint64_t e, std::uint32_t round) {
    return static_cast<std::uint32_t>(e * 2654435761u) ^ (0x3c6ef372u * (round + 1));
  }
  SQUEEZE_HOST_DEVICE std::uint64_t counter_of(std::uint64_t t, std::uint32_t k) const {
    return counters_begin() + (t * 7 + k) % counters;
  }
};

// Every thread interleaves its reads of the read-only part (stored to got[t][k]), two
// rounds of writes to each word it owns (each read back at once) and its atomic adds, so
// that misses, hits, dirty evictions and adds on a few hot lines all race on the slots.
template <class Ref>
SQUEEZE_KERNEL(256)
void contended_kernel(Ref a, contended_layout l, std::uint32_t* got, unsigned* mismatches) {
  const std::uint64_t t = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x;
  if (t >= l.threads) return;
  const std::uint32_t steps =
      max(l.reads_per_thread, max(2 * l.owned_per_thread, l.adds_per_thread));
  for (std::uint32_t k = 0; k < steps; ++k) {
    if (k < l.reads_per_thread) got[t * l.reads_per_thread + k] = a.read(l.read_index(t, k));
    if (k < 2 * l.owned_per_thread) {
      const std::uint64_t e = l.owned_begin() + t + (k / 2) * l.threads;
      const std::uint32_t v = contended_layout::owned_value(e, k % 2);
      a.write(e, v);
      if (a.read(e) != v) atomicAdd(mismatches, 1u);
    }
    if (k < l.adds_per_thread) a.atomic_add(l.counter_of(t, k), 1u);
  }
}

std::vector<std::uint32_t> random_words(std::uint64_t n, std::uint64_t seed) {
  std::mt19937_64 rng{seed};
  std::vector<std::uint32_t> v(n);
  for (auto& x : v) x = static_cast<std::uint32_t>(rng());
  return v;
}

core::device_buffer<std::uint64_t> upload_indices(const std::vector<std::uint64_t>& h,
                                                  cudaStream_t s) {
  core::device_buffer<std::uint64_t> d{h.size()};
  d.copy_from(std::span<const std::uint64_t>{h}, s);
  return d;
}

// The buffer's values, once the work ordered before on `s` is done.
template <class T>
std::vector<T> to_host(const core::device_buffer<T>& d, cudaStream_t s) {
  std::vector<T> h(d.size());
  d.copy_to(std::span<T>{h}, s);
  SQUEEZE_CUDA_TRY(cudaStreamSynchronize(s));
  return h;
}

core::pinned_buffer<std::uint32_t> mapped_copy(const std::vector<std::uint32_t>& h) {
  core::pinned_buffer<std::uint32_t> p{h.size(), core::host_memory::mapped};
  std::memcpy(p.data(), h.data(), h.size() * sizeof(std::uint32_t));
  return p;
}

// Reads of `a` at the indices (a sequential sweep, then random ones) against `expected`.
// Returns the number of reads.
template <class Array>
std::uint64_t check_gather(Array& a, const std::vector<std::uint32_t>& expected, std::uint64_t seed,
                           cudaStream_t s) {
  std::vector<std::uint64_t> index(expected.size());
  for (std::uint64_t i = 0; i < index.size(); ++i) index[i] = i;
  std::mt19937_64 rng{seed};
  for (int i = 0; i < 200000; ++i) index.push_back(rng() % expected.size());
  const auto d_index = upload_indices(index, s);
  core::device_buffer<std::uint32_t> out{index.size()};
  out.fill_bytes(0xFF, s);
  gather_kernel<<<264, 256, 0, s>>>(a.ref(), d_index.data(), index.size(), out.data());
  SQUEEZE_CHECK_LAUNCH();
  a.check(s);
  const std::vector<std::uint32_t> got = to_host(out, s);
  std::uint64_t bad = 0;
  for (std::uint64_t i = 0; i < index.size(); ++i) bad += got[i] != expected[index[i]];
  EXPECT_EQ(bad, 0u) << "of " << index.size() << " reads";
  return index.size();
}

}  // namespace bam_array_test

using namespace bam_array_test;

TEST(BamArray, EveryBackingReadsLikeTheHostCopy) {
  SQUEEZE_REQUIRE_GPU();
  const std::uint64_t n = 3'000'001;  // not a multiple of any line
  const auto host = random_words(n, 1);
  core::stream s;
  core::device_buffer<std::uint32_t> device{n};
  device.copy_from(std::span<const std::uint32_t>{host}, s);
  auto mapped = mapped_copy(host);
  {
    bam::array<std::uint32_t, bam::device_memory> a{device.data(), n, s};
    check_gather(a, host, 2, s);
  }
  {
    bam::array<std::uint32_t, bam::mapped_host_memory> a{mapped, s};
    check_gather(a, host, 3, s);
  }
  for (const std::uint32_t line : {512u, 4096u, 65536u}) {
    SCOPED_TRACE("line " + std::to_string(line));
    // 64 slots: 1-2 % of the data for the small lines.
    bam::array<std::uint32_t, bam::cached_host_memory> a{mapped, {line, 64}, s};
    check_gather(a, host, 4 + line, s);
    bam::array<std::uint32_t, bam::cached_host_memory, bam::uncoalesced_policy> naive{
        mapped, {line, 64}, s};
    check_gather(naive, host, 5 + line, s);
  }
}

TEST(BamArray, WritesReachTheHostMemoryAfterFlush) {
  SQUEEZE_REQUIRE_GPU();
  const std::uint64_t n = 1'000'003;
  const auto host = random_words(n, 7);
  auto mapped = mapped_copy(host);
  core::stream s;
  core::device_buffer<unsigned> mismatches{1};
  for (const std::uint64_t slots : {16ul, 1024ul}) {
    SCOPED_TRACE("slots " + std::to_string(slots));
    std::memcpy(mapped.data(), host.data(), n * sizeof(std::uint32_t));
    mismatches.fill_bytes(0, s);
    bam::array<std::uint32_t, bam::cached_host_memory> a{mapped, {1024, slots}, s};
    const std::uint32_t salt = 0x5a5a1234u + static_cast<std::uint32_t>(slots);
    owner_write_kernel<<<132, 256, 0, s>>>(a.ref(), salt, mismatches.data());
    SQUEEZE_CHECK_LAUNCH();
    a.flush(s);
    a.check(s);
    EXPECT_EQ(to_host(mismatches, s)[0], 0u);
    std::uint64_t bad = 0;
    for (std::uint64_t e = 0; e < n; ++e) {
      bad += mapped.data()[e] != (static_cast<std::uint32_t>(e * 2654435761u) ^ salt);
    }
    EXPECT_EQ(bad, 0u) << "elements differ in host memory after the flush";
  }
  // Straight to host memory, no cache.
  bam::array<std::uint32_t, bam::mapped_host_memory> direct{mapped, s};
  owner_write_kernel<<<132, 256, 0, s>>>(direct.ref(), 77u, mismatches.data());
  SQUEEZE_CHECK_LAUNCH();
  direct.check(s);
  EXPECT_EQ(mapped.data()[12345], static_cast<std::uint32_t>(12345 * 2654435761u) ^ 77u);
}

TEST(BamArray, AtomicAddsAreNotLost) {
  SQUEEZE_REQUIRE_GPU();
  const std::uint64_t bins = 200'003;
  std::vector<std::uint32_t> zeros(bins, 0);
  auto mapped = mapped_copy(zeros);
  std::mt19937_64 rng{11};
  std::vector<std::uint64_t> index(2'000'000);
  std::vector<std::uint32_t> expected(bins, 0);
  for (auto& i : index) {
    i = rng() % 997 == 0 ? 5 : rng() % bins;  // one hot bin, the rest spread
    ++expected[i];
  }
  core::stream s;
  const auto d_index = upload_indices(index, s);
  bam::array<std::uint32_t, bam::cached_host_memory> a{mapped, {512, 32}, s};
  histogram_kernel<<<264, 256, 0, s>>>(a.ref(), d_index.data(), index.size());
  SQUEEZE_CHECK_LAUNCH();
  a.flush(s);
  a.check(s);
  std::uint64_t bad = 0;
  for (std::uint64_t b = 0; b < bins; ++b) bad += mapped.data()[b] != expected[b];
  EXPECT_EQ(bad, 0u);

  core::device_buffer<std::uint32_t> device{bins};
  device.fill_bytes(0, s);
  bam::array<std::uint32_t, bam::device_memory> d{device.data(), bins, s};
  histogram_kernel<<<264, 256, 0, s>>>(d.ref(), d_index.data(), index.size());
  SQUEEZE_CHECK_LAUNCH();
  d.check(s);
  EXPECT_EQ(to_host(device, s), expected);
}

// Far more warps than slots (528 warps on 4 and on 32 slots of 512 B): no warp may be told
// cache_full (no slot is pinned for long: every access holds its line for a few loads), every
// read returns the host's value, and after the flush the host memory holds every write and
// every add.
TEST(BamArray, ManyMoreWarpsThanSlotsLoseNothing) {
  SQUEEZE_REQUIRE_GPU();
  contended_layout l;
  l.read_words = 128 * 1024;  // 1024 lines of 512 B
  l.threads = 66 * 256;
  l.owned_per_thread = 3;
  l.reads_per_thread = 8;
  l.counters = 192;  // hot words: a line and a half
  l.adds_per_thread = 4;
  const auto host = random_words(l.size(), 51);
  std::vector<std::uint32_t> want_got(l.threads * l.reads_per_thread);
  for (std::uint64_t t = 0; t < l.threads; ++t) {
    for (std::uint32_t k = 0; k < l.reads_per_thread; ++k) {
      want_got[t * l.reads_per_thread + k] = host[l.read_index(t, k)];
    }
  }
  std::vector<std::uint32_t> want = host;
  for (std::uint64_t e = l.owned_begin(); e < l.counters_begin(); ++e) {
    want[e] = contended_layout::owned_value(e, 1);
  }
  for (std::uint64_t t = 0; t < l.threads; ++t) {
    for (std::uint32_t k = 0; k < l.adds_per_thread; ++k) ++want[l.counter_of(t, k)];
  }

  auto mapped = mapped_copy(host);
  core::stream s;
  core::device_buffer<std::uint32_t> got{want_got.size()};
  core::device_buffer<unsigned> mismatches{1};
  for (const std::uint64_t slots : {4ul, 32ul}) {
    SCOPED_TRACE("slots " + std::to_string(slots));
    std::memcpy(mapped.data(), host.data(), host.size() * sizeof(std::uint32_t));
    got.fill_bytes(0xFF, s);
    mismatches.fill_bytes(0, s);
    bam::array<std::uint32_t, bam::cached_host_memory> a{mapped, {512, slots}, s};
    ASSERT_EQ(a.size(), l.size());
    contended_kernel<<<static_cast<unsigned>((l.threads + 255) / 256), 256, 0, s>>>(
        a.ref(), l, got.data(), mismatches.data());
    SQUEEZE_CHECK_LAUNCH();
    a.flush(s);
    EXPECT_NO_THROW(a.check(s)) << "a status (cache_full?) with " << slots << " slots";
    EXPECT_EQ(to_host(mismatches, s)[0], 0u) << "writes not read back at once";
    const std::vector<std::uint32_t> got_host = to_host(got, s);
    std::uint64_t bad = 0;
    for (std::uint64_t i = 0; i < want_got.size(); ++i) bad += got_host[i] != want_got[i];
    EXPECT_EQ(bad, 0u) << "of " << want_got.size() << " reads";
    std::uint64_t bad_read_only = 0, bad_owned = 0, bad_counters = 0;
    for (std::uint64_t e = 0; e < l.size(); ++e) {
      const bool differs = mapped.data()[e] != want[e];
      if (e < l.owned_begin()) {
        bad_read_only += differs;
      } else if (e < l.counters_begin()) {
        bad_owned += differs;
      } else {
        bad_counters += differs;
      }
    }
    EXPECT_EQ(bad_read_only, 0u) << "read-only words changed in host memory";
    EXPECT_EQ(bad_owned, 0u) << "writes missing in host memory after the flush";
    EXPECT_EQ(bad_counters, 0u) << "atomic adds missing in host memory after the flush";
  }
}

TEST(BamArray, PinnedLinesSumLikeTheHost) {
  SQUEEZE_REQUIRE_GPU();
  const std::uint64_t n = 777'777;
  const auto host = random_words(n, 21);
  auto mapped = mapped_copy(host);
  core::stream s;
  bam::array<std::uint32_t, bam::cached_host_memory> a{mapped, {2048, 48}, s};
  const std::uint64_t per_line = a.ref().line_elements();
  const std::uint64_t lines = (n + per_line - 1) / per_line;
  core::device_buffer<std::uint64_t> sums{lines};
  sums.fill_bytes(0xFF, s);
  pin_sum_kernel<<<66, 256, 0, s>>>(a.ref(), lines, sums.data());
  SQUEEZE_CHECK_LAUNCH();
  a.check(s);
  const std::vector<std::uint64_t> got = to_host(sums, s);
  for (std::uint64_t l = 0; l < lines; ++l) {
    std::uint64_t want = 0;
    for (std::uint64_t e = l * per_line; e < std::min(n, (l + 1) * per_line); ++e) want += host[e];
    ASSERT_EQ(got[l], want) << "line " << l;
  }
}

TEST(BamArray, BadAccessesGiveAStatus) {
  SQUEEZE_REQUIRE_GPU();
  const std::uint64_t n = 10'000;
  const auto host = random_words(n, 31);
  auto mapped = mapped_copy(host);
  core::stream s;
  // An index past the end: T{} and invalid_argument from check(), other reads intact.
  bam::array<std::uint32_t, bam::cached_host_memory> a{mapped, {512, 8}, s};
  const std::vector<std::uint64_t> index{3, n, 9999, n + 12345};
  const auto d_index = upload_indices(index, s);
  core::device_buffer<std::uint32_t> out{index.size()};
  out.fill_bytes(0xFF, s);
  gather_kernel<<<1, 32, 0, s>>>(a.ref(), d_index.data(), index.size(), out.data());
  SQUEEZE_CHECK_LAUNCH();
  EXPECT_EQ(a.peek(s), squeeze::status::out_of_bounds);
  EXPECT_THROW(a.check(s), squeeze::invalid_argument);
  const std::vector<std::uint32_t> got = to_host(out, s);
  EXPECT_EQ(got[0], host[3]);
  EXPECT_EQ(got[1], 0u);
  EXPECT_EQ(got[2], host[9999]);
  EXPECT_EQ(got[3], 0u);
  EXPECT_EQ(a.peek(s), squeeze::status::ok);
  EXPECT_NO_THROW(a.check(s));  // check() clears the status

  // One slot, pinned by the warp that then needs another line: cache_full, no hang.
  bam::array<std::uint32_t, bam::cached_host_memory> tiny{mapped, {512, 1}, s};
  core::device_buffer<std::uint32_t> out32{32};
  out32.fill_bytes(0xFF, s);
  pinned_full_kernel<<<1, 32, 0, s>>>(tiny.ref(), out32.data());
  SQUEEZE_CHECK_LAUNCH();
  try {
    tiny.check(s);
    ADD_FAILURE() << "no status for a read with every slot pinned";
  } catch (const squeeze::error& e) {
    EXPECT_NE(std::string{e.what()}.find("cache full"), std::string::npos) << e.what();
  }
  for (const auto v : to_host(out32, s)) EXPECT_EQ(v, 0u);
  // The cache still works afterwards.
  check_gather(tiny, host, 33, s);
}

TEST(BamArray, BadConfigurationsThrow) {
  SQUEEZE_REQUIRE_GPU();
  const std::vector<std::uint32_t> host(1000, 1);
  auto mapped = mapped_copy(host);
  core::stream s;
  using cached = bam::array<std::uint32_t, bam::cached_host_memory>;
  EXPECT_THROW((cached{mapped, {1000, 8}, s}), squeeze::invalid_argument);    // not a power of 2
  EXPECT_THROW((cached{mapped, {256, 8}, s}), squeeze::invalid_argument);     // below 512 B
  EXPECT_THROW((cached{mapped, {131072, 8}, s}), squeeze::invalid_argument);  // above 64 KiB
  EXPECT_THROW((cached{mapped, {4096, 0}, s}), squeeze::invalid_argument);    // no slot
  core::pinned_buffer<std::uint32_t> unmapped{16, core::host_memory::pinned};
  EXPECT_THROW((bam::array<std::uint32_t, bam::mapped_host_memory>{unmapped, s}),
               squeeze::invalid_argument);
  EXPECT_THROW((bam::array<std::uint32_t, bam::device_memory>{nullptr, 5, s}),
               squeeze::invalid_argument);
}

namespace bam_array_test {

// A temporary file holding `header` bytes, then the words, then 100 more bytes.
struct temp_file {
  std::string path;
  temp_file(std::uint64_t header, const std::vector<std::uint32_t>& words) {
    char name[] = "/tmp/squeeze_bam_XXXXXX";
    const int fd = mkstemp(name);
    if (fd < 0) throw std::runtime_error{"mkstemp failed"};
    close(fd);
    path = name;
    std::ofstream out{path, std::ios::binary};
    const std::vector<char> pad(header, 'h');
    out.write(pad.data(), static_cast<std::streamsize>(pad.size()));
    out.write(reinterpret_cast<const char*>(words.data()),
              static_cast<std::streamsize>(words.size() * sizeof(std::uint32_t)));
    out.write(pad.data(), 100);
  }
  ~temp_file() { std::remove(path.c_str()); }
  std::vector<std::uint32_t> read_words(std::uint64_t header, std::uint64_t n) const {
    std::ifstream in{path, std::ios::binary};
    in.seekg(static_cast<std::streamoff>(header));
    std::vector<std::uint32_t> w(n);
    in.read(reinterpret_cast<char*>(w.data()),
            static_cast<std::streamsize>(n * sizeof(std::uint32_t)));
    return w;
  }
};

}  // namespace bam_array_test

TEST(BamArray, FileBackingReadsWritesAndReportsErrors) {
  SQUEEZE_REQUIRE_GPU();
  const std::uint64_t n = 300'007;
  const std::uint64_t header = 4096 + 64;  // not line-aligned in the file
  const auto host = random_words(n, 41);
  const temp_file file{header, host};
  bam::io_service_config config;
  config.queues = 16;
  config.depth = 32;
  config.line_bytes = 1024;
  config.access = bam::file_access::read_write;
  core::stream s;
  {
    bam::io_service service{file.path, config, s};
    bam::array<std::uint32_t, bam::cached_file> a{service, header, n, {1024, 64}, s};
    check_gather(a, host, 42, s);
    service.check();
    // Writes through the cache reach the file after a flush.
    core::device_buffer<unsigned> mismatches{1};
    mismatches.fill_bytes(0, s);
    owner_write_kernel<<<66, 256, 0, s>>>(a.ref(), 99u, mismatches.data());
    SQUEEZE_CHECK_LAUNCH();
    a.flush(s);
    a.check(s);
    service.check();
    EXPECT_EQ(to_host(mismatches, s)[0], 0u);
    const auto written = file.read_words(header, n);
    std::uint64_t bad = 0;
    for (std::uint64_t e = 0; e < n; ++e) {
      bad += written[e] != (static_cast<std::uint32_t>(e * 2654435761u) ^ 99u);
    }
    EXPECT_EQ(bad, 0u) << "words differ in the file after the flush";
    // Bad configurations.
    using file_array = bam::array<std::uint32_t, bam::cached_file>;
    EXPECT_THROW((file_array{service, header, n, {4096, 64}, s}), squeeze::invalid_argument);
    EXPECT_THROW((file_array{service, header + 8, n + 100, {1024, 64}, s}),
                 squeeze::invalid_argument);
  }
  // An I/O error on one line's read reaches the kernel's caller and the host; the other
  // reads still come back right.
  config.access = bam::file_access::read_only;
  const std::uint64_t bad_offset = header + 5 * 1024;
  config.fault = [bad_offset](const bam::io_request& r) {
    return r.offset == bad_offset ? EIO : 0;
  };
  bam::io_service failing{file.path, config, s};
  bam::array<std::uint32_t, bam::cached_file> a{failing, header, n, {1024, 64}, s};
  const std::vector<std::uint64_t> index{0, 5 * 256 + 3, 6 * 256, n - 1};
  const auto d_index = upload_indices(index, s);
  core::device_buffer<std::uint32_t> out{index.size()};
  out.fill_bytes(0xFF, s);
  gather_kernel<<<1, 32, 0, s>>>(a.ref(), d_index.data(), index.size(), out.data());
  SQUEEZE_CHECK_LAUNCH();
  EXPECT_THROW(a.check(s), squeeze::io_error);
  EXPECT_GT(failing.errors(), 0u);
  EXPECT_THROW(failing.check(), squeeze::io_error);
  const std::vector<std::uint32_t> got = to_host(out, s);
  const auto first = file.read_words(header, n);
  EXPECT_EQ(got[0], first[0]);
  EXPECT_EQ(got[1], 0u);  // the failed line
  EXPECT_EQ(got[2], first[6 * 256]);
  EXPECT_EQ(got[3], first[n - 1]);
}

namespace bam_array_test {

// A backing of the test's own with no memory behind it: element i is value(i). It counts its
// reads, fails (status::corrupt) for the elements in [bad_begin, bad_end), and counts any
// index at or past size() it is asked for (the array must never ask).
struct computed_backing {
  std::uint64_t count = 0;
  unsigned long long* reads = nullptr;     // device counter
  unsigned long long* past_end = nullptr;  // device counter
  std::uint64_t bad_begin = 0;
  std::uint64_t bad_end = 0;

  SQUEEZE_HOST_DEVICE static std::uint32_t value(std::uint64_t i) {
    std::uint64_t z = i * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull;
    z = (z ^ (z >> 31)) * 0xbf58476d1ce4e5b9ull;
    return static_cast<std::uint32_t>(z >> 29);
  }
  std::uint64_t size() const { return count; }  // host only, as the concept asks
  SQUEEZE_DEVICE squeeze::status read(std::uint64_t i, std::uint32_t& out) const {
    if (i >= count) {
      atomicAdd(past_end, 1ull);
      return squeeze::status::invalid_argument;
    }
    atomicAdd(reads, 1ull);
    if (i >= bad_begin && i < bad_end) return squeeze::status::corrupt;
    out = value(i);
    return squeeze::status::ok;
  }
};

// A backing of the test's own over the test's pinned, mapped buffer: elements read and
// written one at a time (no line access, no atomic_add).
struct pinned_words {
  std::uint32_t* data = nullptr;  // the mapping's device pointer
  std::uint64_t count = 0;

  SQUEEZE_HOST_DEVICE std::uint64_t size() const { return count; }
  SQUEEZE_DEVICE squeeze::status read(std::uint64_t i, std::uint32_t& out) const {
    out = data[i];
    return squeeze::status::ok;
  }
  SQUEEZE_DEVICE squeeze::status write(std::uint64_t i, const std::uint32_t& v) const {
    data[i] = v;
    return squeeze::status::ok;
  }
};

// What each backing is, and what an array over it offers.
static_assert(bam::backing<computed_backing, std::uint32_t>);
static_assert(bam::element_backing<computed_backing, std::uint32_t>);
static_assert(!bam::line_backing<computed_backing>);
static_assert(bam::backing<pinned_words, std::uint32_t>);
static_assert(bam::backing<bam::file_backing<std::uint32_t>, std::uint32_t>);
static_assert(!bam::element_backing<bam::file_backing<std::uint32_t>, std::uint32_t>);
static_assert(bam::array_backing<computed_backing, std::uint32_t>);
static_assert(bam::array_backing<bam::cached<computed_backing>, std::uint32_t>);
// A file has line access only: it needs the cache in front.
static_assert(!bam::array_backing<bam::file_backing<std::uint32_t>, std::uint32_t>);
static_assert(bam::array_backing<bam::cached<bam::file_backing<std::uint32_t>>, std::uint32_t>);
// Not trivially copyable: not a backing.
static_assert(!bam::backing<std::vector<std::uint32_t>, std::uint32_t>);
using computed_array = bam::array<std::uint32_t, computed_backing>;
using computed_cached = bam::array<std::uint32_t, bam::cached<computed_backing>>;
using words_array = bam::array<std::uint32_t, pinned_words>;
using words_cached = bam::array<std::uint32_t, bam::cached<pinned_words>>;
static_assert(!computed_array::ref_type::writable && !computed_array::ref_type::atomic);
static_assert(!computed_cached::ref_type::writable && !computed_cached::ref_type::atomic);
static_assert(words_array::ref_type::writable && !words_array::ref_type::atomic);
static_assert(words_cached::ref_type::writable && words_cached::ref_type::atomic);
static_assert(std::is_trivially_copyable_v<computed_cached::ref_type>);

}  // namespace bam_array_test

// A computed backing read through bam::array, without and behind the cache (lines of 512 B
// and 4 KiB, far fewer slots than lines): every value is the host's, the backing is read once
// per read without a cache and at least once per element behind it, never past its end;
// reads past the end are out_of_bounds (invalid_argument) without reaching the backing, and
// the backing's own status (corrupt) reaches check() as format_error, other values intact.
TEST(BamArray, UserBackingReadsLikeTheHost) {
  SQUEEZE_REQUIRE_GPU();
  const std::uint64_t n = 100'003;  // not a multiple of any line
  std::vector<std::uint32_t> host(n);
  for (std::uint64_t i = 0; i < n; ++i) host[i] = computed_backing::value(i);
  core::stream s;
  core::device_buffer<unsigned long long> counters{2};  // reads, past_end
  counters.fill_bytes(0, s);
  const computed_backing backing{n, counters.data(), counters.data() + 1};
  {
    computed_array a{backing, s};
    EXPECT_EQ(a.size(), n);
    const std::uint64_t reads = check_gather(a, host, 61, s);
    EXPECT_EQ(to_host(counters, s)[0], reads) << "reads of the backing without a cache";
  }
  for (const std::uint32_t line : {512u, 4096u}) {
    SCOPED_TRACE("line " + std::to_string(line));
    counters.fill_bytes(0, s);
    computed_cached a{backing, {line, 8}, s};
    check_gather(a, host, 62 + line, s);
    EXPECT_GE(to_host(counters, s)[0], n) << "every element is read into the cache at least once";
    computed_cached naive_lines{backing, {line, 2}, s};  // two slots: a fill per line change
    check_gather(naive_lines, host, 64 + line, s);
  }
  EXPECT_EQ(to_host(counters, s)[1], 0u) << "the backing was asked for an index past its end";

  // Past the end: out_of_bounds, T{}, never the backing; then the backing's own status.
  const std::vector<std::uint64_t> index{0, n, n - 1, n + 1000, 50'000};
  const auto d_index = upload_indices(index, s);
  core::device_buffer<std::uint32_t> out{index.size()};
  computed_backing failing = backing;
  failing.bad_begin = 50'000;  // far from the other indices' lines
  failing.bad_end = 50'001;
  const auto read_index_and_check = [&](auto& a, const char* what) {
    SCOPED_TRACE(what);
    out.fill_bytes(0xFF, s);
    gather_kernel<<<1, 32, 0, s>>>(a.ref(), d_index.data(), 4, out.data());  // no bad element
    SQUEEZE_CHECK_LAUNCH();
    EXPECT_THROW(a.check(s), squeeze::invalid_argument);
    auto got = to_host(out, s);
    EXPECT_EQ(got[0], host[0]);
    EXPECT_EQ(got[1], 0u);
    EXPECT_EQ(got[2], host[n - 1]);
    EXPECT_EQ(got[3], 0u);
    EXPECT_EQ(a.peek(s), squeeze::status::ok);
    // n - 1, past the end, the bad element
    gather_kernel<<<1, 32, 0, s>>>(a.ref(), d_index.data() + 2, 3, out.data());
    SQUEEZE_CHECK_LAUNCH();
    // Past the end (invalid_argument) and the bad element (format_error) race in one warp:
    // one of them is reported.
    EXPECT_THROW(a.check(s), squeeze::error);
    got = to_host(out, s);
    EXPECT_EQ(got[0], host[n - 1]);
    EXPECT_EQ(got[2], 0u);
    // the bad element alone
    gather_kernel<<<1, 32, 0, s>>>(a.ref(), d_index.data() + 4, 1, out.data());
    SQUEEZE_CHECK_LAUNCH();
    EXPECT_THROW(a.check(s), squeeze::format_error);
    EXPECT_EQ(to_host(out, s)[0], 0u);
  };
  {
    computed_array a{failing, s};
    read_index_and_check(a, "no cache");
  }
  {
    computed_cached a{failing, {512, 4}, s};
    read_index_and_check(a, "behind the cache");
  }
  EXPECT_EQ(to_host(counters, s)[1], 0u) << "the backing was asked for an index past its end";
}

// A backing over the test's own pinned buffer, with element writes only: written in place
// without a cache; behind the cache written back a line at a time through its element
// writes on flush and eviction, atomic adds included.
TEST(BamArray, UserBackingWritesReachItsMemory) {
  SQUEEZE_REQUIRE_GPU();
  const std::uint64_t n = 200'003;
  const auto host = random_words(n, 71);
  auto mapped = mapped_copy(host);
  const pinned_words backing{mapped.device_data(), n};
  core::stream s;
  core::device_buffer<unsigned> mismatches{1};
  const auto expect_written = [&](std::uint32_t salt) {
    EXPECT_EQ(to_host(mismatches, s)[0], 0u) << "writes not read back at once";
    std::uint64_t bad = 0;
    for (std::uint64_t e = 0; e < n; ++e) {
      bad += mapped.data()[e] != (static_cast<std::uint32_t>(e * 2654435761u) ^ salt);
    }
    EXPECT_EQ(bad, 0u) << "elements differ in the backing's memory";
  };
  {
    words_array a{backing, s};
    mismatches.fill_bytes(0, s);
    owner_write_kernel<<<66, 256, 0, s>>>(a.ref(), 5u, mismatches.data());
    SQUEEZE_CHECK_LAUNCH();
    a.check(s);
    expect_written(5u);
    check_gather(a, std::vector<std::uint32_t>(mapped.data(), mapped.data() + n), 72, s);
  }
  for (const std::uint64_t slots : {8ul, 1024ul}) {
    SCOPED_TRACE("slots " + std::to_string(slots));
    words_cached a{backing, {1024, slots}, s};
    mismatches.fill_bytes(0, s);
    const auto salt = static_cast<std::uint32_t>(slots * 31);
    owner_write_kernel<<<66, 256, 0, s>>>(a.ref(), salt, mismatches.data());
    SQUEEZE_CHECK_LAUNCH();
    a.flush(s);
    a.check(s);
    expect_written(salt);
  }
  // Atomic adds in the cache, written back through the backing's element writes.
  std::memset(mapped.data(), 0, n * sizeof(std::uint32_t));
  std::mt19937_64 rng{73};
  std::vector<std::uint64_t> index(500'000);
  std::vector<std::uint32_t> expected(n, 0);
  for (auto& i : index) {
    i = rng() % 101 == 0 ? 17 : rng() % n;
    ++expected[i];
  }
  const auto d_index = upload_indices(index, s);
  words_cached a{backing, {512, 16}, s};
  histogram_kernel<<<132, 256, 0, s>>>(a.ref(), d_index.data(), index.size());
  SQUEEZE_CHECK_LAUNCH();
  a.flush(s);
  a.check(s);
  std::uint64_t bad = 0;
  for (std::uint64_t b = 0; b < n; ++b) bad += mapped.data()[b] != expected[b];
  EXPECT_EQ(bad, 0u);
}

// check() synchronizes its own stream only: a kernel held on another stream is still
// running when it returns (reading through the cache and checking do not wait for it).
TEST(BamArray, CheckWaitsForItsOwnStreamOnly) {
  SQUEEZE_REQUIRE_GPU();
  if (squeeze::test::under_sanitizer()) {
    GTEST_SKIP() << "a compute sanitizer serializes kernels: the blocker would hold every stream";
  }
  const std::uint64_t n = 50'000;
  const auto host = random_words(n, 81);
  auto mapped = mapped_copy(host);
  core::stream s;
  bam::array<std::uint32_t, bam::cached_host_memory> a{mapped, {512, 16}, s};
  std::vector<std::uint64_t> index(n);
  for (std::uint64_t i = 0; i < n; ++i) index[i] = (i * 7919) % n;
  const auto d_index = upload_indices(index, s);
  core::device_buffer<std::uint32_t> out{n};
  core::pinned_buffer<std::uint32_t> got{n};
  // One gather first, so that the kernel's code is loaded before the blocker runs (see
  // stream_blocker.cuh); its output is poisoned again below.
  gather_kernel<<<66, 256, 0, s>>>(a.ref(), d_index.data(), n, out.data());
  SQUEEZE_CHECK_LAUNCH();
  a.check(s);
  out.fill_bytes(0xFF, s);
  SQUEEZE_CUDA_TRY(cudaStreamSynchronize(s));
  {
    // (Everything is allocated first: allocations may wait for running kernels.)
    squeeze::test::stream_blocker blocker{squeeze::test::hang_limit(std::chrono::seconds{20})};
    gather_kernel<<<66, 256, 0, s>>>(a.ref(), d_index.data(), n, out.data());
    SQUEEZE_CHECK_LAUNCH();
    a.check(s);
    out.copy_to(got.span(), s);
    SQUEEZE_CUDA_TRY(cudaStreamSynchronize(s));
    EXPECT_TRUE(blocker.still_blocking()) << "check waited for another stream's kernel";
    blocker.release();
  }
  std::uint64_t bad = 0;
  for (std::uint64_t i = 0; i < n; ++i) bad += got[i] != host[index[i]];
  EXPECT_EQ(bad, 0u);
}
