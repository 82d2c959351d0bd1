// bam::array on the GPU against a host copy: every backing read in full and at random
// indices, with caches far smaller than the data (every access pattern forces evictions);
// writes and atomic adds by many warps, flushed back to the host memory and compared with
// the expected values; lanes of a warp on one line and on different lines; the naive
// (uncoalesced) policy; an index past the end and a cache whose only slot is pinned give a
// status, not a hang or a wrong value; hundreds of warps on a cache of a few slots read,
// write and add with no cache_full reported and every value right after the flush. Outputs
// are poisoned with 0xFF bytes first; inputs are random with fixed seeds.
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

core::device_buffer<std::uint64_t> upload_indices(const std::vector<std::uint64_t>& h) {
  core::device_buffer<std::uint64_t> d{h.size()};
  d.copy_from(std::span<const std::uint64_t>{h}, nullptr);
  return d;
}

core::pinned_buffer<std::uint32_t> mapped_copy(const std::vector<std::uint32_t>& h) {
  core::pinned_buffer<std::uint32_t> p{h.size(), core::host_memory::mapped};
  std::memcpy(p.data(), h.data(), h.size() * sizeof(std::uint32_t));
  return p;
}

// Reads of `a` at the indices (a sequential sweep, then random ones) against `expected`.
template <class Array>
void check_gather(Array& a, const std::vector<std::uint32_t>& expected, std::uint64_t seed) {
  std::vector<std::uint64_t> index(expected.size());
  for (std::uint64_t i = 0; i < index.size(); ++i) index[i] = i;
  std::mt19937_64 rng{seed};
  for (int i = 0; i < 200000; ++i) index.push_back(rng() % expected.size());
  const auto d_index = upload_indices(index);
  core::device_buffer<std::uint32_t> out{index.size()};
  out.fill_bytes(0xFF, nullptr);
  gather_kernel<<<264, 256>>>(a.ref(), d_index.data(), index.size(), out.data());
  SQUEEZE_CHECK_LAUNCH();
  a.check();
  std::vector<std::uint32_t> got(index.size());
  out.copy_to(std::span<std::uint32_t>{got}, nullptr);
  SQUEEZE_CUDA_TRY(cudaDeviceSynchronize());
  std::uint64_t bad = 0;
  for (std::uint64_t i = 0; i < index.size(); ++i) bad += got[i] != expected[index[i]];
  EXPECT_EQ(bad, 0u) << "of " << index.size() << " reads";
}

}  // namespace bam_array_test

using namespace bam_array_test;

TEST(BamArray, EveryBackingReadsLikeTheHostCopy) {
  SQUEEZE_REQUIRE_GPU();
  const std::uint64_t n = 3'000'001;  // not a multiple of any line
  const auto host = random_words(n, 1);
  core::device_buffer<std::uint32_t> device{n};
  device.copy_from(std::span<const std::uint32_t>{host}, nullptr);
  auto mapped = mapped_copy(host);
  {
    bam::array<std::uint32_t, bam::device_memory> a{device.data(), n};
    check_gather(a, host, 2);
  }
  {
    bam::array<std::uint32_t, bam::mapped_host_memory> a{mapped};
    check_gather(a, host, 3);
  }
  for (const std::uint32_t line : {512u, 4096u, 65536u}) {
    SCOPED_TRACE("line " + std::to_string(line));
    // 64 slots: 1-2 % of the data for the small lines.
    bam::array<std::uint32_t, bam::cached_host_memory> a{mapped, {line, 64}};
    check_gather(a, host, 4 + line);
    bam::array<std::uint32_t, bam::cached_host_memory, bam::uncoalesced_policy> naive{mapped,
                                                                                      {line, 64}};
    check_gather(naive, host, 5 + line);
  }
}

TEST(BamArray, WritesReachTheHostMemoryAfterFlush) {
  SQUEEZE_REQUIRE_GPU();
  const std::uint64_t n = 1'000'003;
  const auto host = random_words(n, 7);
  auto mapped = mapped_copy(host);
  core::device_buffer<unsigned> mismatches{1};
  for (const std::uint64_t slots : {16ul, 1024ul}) {
    SCOPED_TRACE("slots " + std::to_string(slots));
    std::memcpy(mapped.data(), host.data(), n * sizeof(std::uint32_t));
    mismatches.fill_bytes(0, nullptr);
    bam::array<std::uint32_t, bam::cached_host_memory> a{mapped, {1024, slots}};
    const std::uint32_t salt = 0x5a5a1234u + static_cast<std::uint32_t>(slots);
    owner_write_kernel<<<132, 256>>>(a.ref(), salt, mismatches.data());
    SQUEEZE_CHECK_LAUNCH();
    a.flush(nullptr);
    a.check();
    unsigned bad_reads = 1;
    SQUEEZE_CUDA_TRY(
        cudaMemcpy(&bad_reads, mismatches.data(), sizeof(unsigned), cudaMemcpyDeviceToHost));
    EXPECT_EQ(bad_reads, 0u);
    std::uint64_t bad = 0;
    for (std::uint64_t e = 0; e < n; ++e) {
      bad += mapped.data()[e] != (static_cast<std::uint32_t>(e * 2654435761u) ^ salt);
    }
    EXPECT_EQ(bad, 0u) << "elements differ in host memory after the flush";
  }
  // Straight to host memory, no cache.
  bam::array<std::uint32_t, bam::mapped_host_memory> direct{mapped};
  owner_write_kernel<<<132, 256>>>(direct.ref(), 77u, mismatches.data());
  SQUEEZE_CHECK_LAUNCH();
  direct.check();
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
  const auto d_index = upload_indices(index);
  bam::array<std::uint32_t, bam::cached_host_memory> a{mapped, {512, 32}};
  histogram_kernel<<<264, 256>>>(a.ref(), d_index.data(), index.size());
  SQUEEZE_CHECK_LAUNCH();
  a.flush(nullptr);
  a.check();
  std::uint64_t bad = 0;
  for (std::uint64_t b = 0; b < bins; ++b) bad += mapped.data()[b] != expected[b];
  EXPECT_EQ(bad, 0u);

  core::device_buffer<std::uint32_t> device{bins};
  device.fill_bytes(0, nullptr);
  bam::array<std::uint32_t, bam::device_memory> d{device.data(), bins};
  histogram_kernel<<<264, 256>>>(d.ref(), d_index.data(), index.size());
  SQUEEZE_CHECK_LAUNCH();
  d.check();
  std::vector<std::uint32_t> got(bins);
  device.copy_to(std::span<std::uint32_t>{got}, nullptr);
  SQUEEZE_CUDA_TRY(cudaDeviceSynchronize());
  EXPECT_EQ(got, expected);
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
  core::device_buffer<std::uint32_t> got{want_got.size()};
  core::device_buffer<unsigned> mismatches{1};
  for (const std::uint64_t slots : {4ul, 32ul}) {
    SCOPED_TRACE("slots " + std::to_string(slots));
    std::memcpy(mapped.data(), host.data(), host.size() * sizeof(std::uint32_t));
    got.fill_bytes(0xFF, nullptr);
    mismatches.fill_bytes(0, nullptr);
    bam::array<std::uint32_t, bam::cached_host_memory> a{mapped, {512, slots}};
    ASSERT_EQ(a.size(), l.size());
    contended_kernel<<<static_cast<unsigned>((l.threads + 255) / 256), 256>>>(
        a.ref(), l, got.data(), mismatches.data());
    SQUEEZE_CHECK_LAUNCH();
    a.flush(nullptr);
    EXPECT_NO_THROW(a.check()) << "a status (cache_full?) with " << slots << " slots";
    unsigned bad_readbacks = 1;
    SQUEEZE_CUDA_TRY(
        cudaMemcpy(&bad_readbacks, mismatches.data(), sizeof(unsigned), cudaMemcpyDeviceToHost));
    EXPECT_EQ(bad_readbacks, 0u) << "writes not read back at once";
    std::vector<std::uint32_t> got_host(want_got.size());
    got.copy_to(std::span<std::uint32_t>{got_host}, nullptr);
    SQUEEZE_CUDA_TRY(cudaDeviceSynchronize());
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
  bam::array<std::uint32_t, bam::cached_host_memory> a{mapped, {2048, 48}};
  const std::uint64_t per_line = a.ref().line_elements();
  const std::uint64_t lines = (n + per_line - 1) / per_line;
  core::device_buffer<std::uint64_t> sums{lines};
  sums.fill_bytes(0xFF, nullptr);
  pin_sum_kernel<<<66, 256>>>(a.ref(), lines, sums.data());
  SQUEEZE_CHECK_LAUNCH();
  a.check();
  std::vector<std::uint64_t> got(lines);
  sums.copy_to(std::span<std::uint64_t>{got}, nullptr);
  SQUEEZE_CUDA_TRY(cudaDeviceSynchronize());
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
  // An index past the end: T{} and invalid_argument from check(), other reads intact.
  bam::array<std::uint32_t, bam::cached_host_memory> a{mapped, {512, 8}};
  const std::vector<std::uint64_t> index{3, n, 9999, n + 12345};
  const auto d_index = upload_indices(index);
  core::device_buffer<std::uint32_t> out{index.size()};
  out.fill_bytes(0xFF, nullptr);
  gather_kernel<<<1, 32>>>(a.ref(), d_index.data(), index.size(), out.data());
  SQUEEZE_CHECK_LAUNCH();
  EXPECT_THROW(a.check(), squeeze::invalid_argument);
  std::vector<std::uint32_t> got(index.size());
  out.copy_to(std::span<std::uint32_t>{got}, nullptr);
  SQUEEZE_CUDA_TRY(cudaDeviceSynchronize());
  EXPECT_EQ(got[0], host[3]);
  EXPECT_EQ(got[1], 0u);
  EXPECT_EQ(got[2], host[9999]);
  EXPECT_EQ(got[3], 0u);
  EXPECT_NO_THROW(a.check());  // check() clears the status

  // One slot, pinned by the warp that then needs another line: cache_full, no hang.
  bam::array<std::uint32_t, bam::cached_host_memory> tiny{mapped, {512, 1}};
  core::device_buffer<std::uint32_t> out32{32};
  out32.fill_bytes(0xFF, nullptr);
  pinned_full_kernel<<<1, 32>>>(tiny.ref(), out32.data());
  SQUEEZE_CHECK_LAUNCH();
  try {
    tiny.check();
    ADD_FAILURE() << "no status for a read with every slot pinned";
  } catch (const squeeze::error& e) {
    EXPECT_NE(std::string{e.what()}.find("cache full"), std::string::npos) << e.what();
  }
  std::vector<std::uint32_t> got32(32);
  out32.copy_to(std::span<std::uint32_t>{got32}, nullptr);
  SQUEEZE_CUDA_TRY(cudaDeviceSynchronize());
  for (const auto v : got32) EXPECT_EQ(v, 0u);
  // The cache still works afterwards.
  check_gather(tiny, host, 33);
}

TEST(BamArray, BadConfigurationsThrow) {
  SQUEEZE_REQUIRE_GPU();
  const std::vector<std::uint32_t> host(1000, 1);
  auto mapped = mapped_copy(host);
  using cached = bam::array<std::uint32_t, bam::cached_host_memory>;
  EXPECT_THROW((cached{mapped, {1000, 8}}), squeeze::invalid_argument);    // not a power of 2
  EXPECT_THROW((cached{mapped, {256, 8}}), squeeze::invalid_argument);     // below 512 B
  EXPECT_THROW((cached{mapped, {131072, 8}}), squeeze::invalid_argument);  // above 64 KiB
  EXPECT_THROW((cached{mapped, {4096, 0}}), squeeze::invalid_argument);    // no slot
  core::pinned_buffer<std::uint32_t> unmapped{16, core::host_memory::pinned};
  EXPECT_THROW((bam::array<std::uint32_t, bam::mapped_host_memory>{unmapped}),
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
  {
    bam::io_service service{file.path, config};
    bam::array<std::uint32_t, bam::cached_file> a{service, header, n, {1024, 64}};
    check_gather(a, host, 42);
    service.check();
    // Writes through the cache reach the file after a flush.
    core::device_buffer<unsigned> mismatches{1};
    mismatches.fill_bytes(0, nullptr);
    owner_write_kernel<<<66, 256>>>(a.ref(), 99u, mismatches.data());
    SQUEEZE_CHECK_LAUNCH();
    a.flush(nullptr);
    a.check();
    service.check();
    unsigned bad_reads = 1;
    SQUEEZE_CUDA_TRY(
        cudaMemcpy(&bad_reads, mismatches.data(), sizeof(unsigned), cudaMemcpyDeviceToHost));
    EXPECT_EQ(bad_reads, 0u);
    const auto written = file.read_words(header, n);
    std::uint64_t bad = 0;
    for (std::uint64_t e = 0; e < n; ++e) {
      bad += written[e] != (static_cast<std::uint32_t>(e * 2654435761u) ^ 99u);
    }
    EXPECT_EQ(bad, 0u) << "words differ in the file after the flush";
    // Bad configurations.
    using file_array = bam::array<std::uint32_t, bam::cached_file>;
    EXPECT_THROW((file_array{service, header, n, {4096, 64}}), squeeze::invalid_argument);
    EXPECT_THROW((file_array{service, header + 8, n + 100, {1024, 64}}), squeeze::invalid_argument);
  }
  // An I/O error on one line's read reaches the kernel's caller and the host; the other
  // reads still come back right.
  config.access = bam::file_access::read_only;
  const std::uint64_t bad_offset = header + 5 * 1024;
  config.fault = [bad_offset](const bam::io_request& r) {
    return r.offset == bad_offset ? EIO : 0;
  };
  bam::io_service failing{file.path, config};
  bam::array<std::uint32_t, bam::cached_file> a{failing, header, n, {1024, 64}};
  const std::vector<std::uint64_t> index{0, 5 * 256 + 3, 6 * 256, n - 1};
  const auto d_index = upload_indices(index);
  core::device_buffer<std::uint32_t> out{index.size()};
  out.fill_bytes(0xFF, nullptr);
  gather_kernel<<<1, 32>>>(a.ref(), d_index.data(), index.size(), out.data());
  SQUEEZE_CHECK_LAUNCH();
  EXPECT_THROW(a.check(), squeeze::io_error);
  EXPECT_GT(failing.errors(), 0u);
  EXPECT_THROW(failing.check(), squeeze::io_error);
  std::vector<std::uint32_t> got(index.size());
  out.copy_to(std::span<std::uint32_t>{got}, nullptr);
  SQUEEZE_CUDA_TRY(cudaDeviceSynchronize());
  const auto first = file.read_words(header, n);
  EXPECT_EQ(got[0], first[0]);
  EXPECT_EQ(got[1], 0u);  // the failed line
  EXPECT_EQ(got[2], first[6 * 256]);
  EXPECT_EQ(got[3], first[n - 1]);
}
