// SPDX-License-Identifier: Apache-2.0
// bench/bam/uvm_study.cuh: what squeeze_bench_uvm needs besides the bam traversals: managed
// memory (an owner, the memory guard, cold and warm placement, the advice of each UVM variant)
// and the random-read kernels with their host checksums.
//
// Managed memory here is cudaMallocManaged only (no HMM / system-allocated memory), first
// touched on the host. The guard: a managed allocation is made only when it, plus a margin for
// the allocations that come after it, fits the GPU's free memory (cudaMemGetInfo) at that
// moment. Oversubscribed managed memory (more than the GPU has free) can hang these GPUs, so
// the bench refuses it instead of measuring it.
#pragma once

#include <squeeze/bam/array.cuh>
#include <squeeze/core/buffer.hpp>
#include <squeeze/core/config.hpp>
#include <squeeze/core/cuda_error.hpp>

#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace bam_uvm {

namespace core = squeeze::core;

// ---- host threads ---------------------------------------------------------------------------

/// Runs work(begin, end) over [0, count) cut into one range per hardware thread.
template <class Work>
void parallel_for(std::uint64_t count, const Work& work) {
  const std::uint64_t threads =
      std::clamp<std::uint64_t>(std::thread::hardware_concurrency(), 1, 64);
  std::vector<std::jthread> pool;
  for (std::uint64_t t = 1; t < threads; ++t) {
    pool.emplace_back([&, t] { work(count * t / threads, count * (t + 1) / threads); });
  }
  work(0, count / threads);
}

// ---- managed memory -------------------------------------------------------------------------

/// `count` elements of T in managed memory (cudaMallocManaged, cudaMemAttachGlobal). Make it
/// only after check_managed_fits said yes. Move-only.
template <class T>
class managed_buffer {
 public:
  explicit managed_buffer(std::size_t count) : size_{count} {
    SQUEEZE_CUDA_TRY(
        cudaMallocManaged(reinterpret_cast<void**>(&data_), bytes(), cudaMemAttachGlobal));
  }
  managed_buffer(managed_buffer&& other) noexcept
      : data_{std::exchange(other.data_, nullptr)}, size_{std::exchange(other.size_, 0)} {}
  managed_buffer& operator=(managed_buffer&&) = delete;
  managed_buffer(const managed_buffer&) = delete;
  managed_buffer& operator=(const managed_buffer&) = delete;
  ~managed_buffer() {
    if (data_ != nullptr) static_cast<void>(cudaFree(data_));
  }
  [[nodiscard]] T* data() const noexcept { return data_; }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] std::size_t bytes() const noexcept { return size_ * sizeof(T); }

 private:
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

/// The answer of the memory guard.
struct memory_check {
  bool fits = false;
  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
  std::string message;  ///< why not (empty when it fits)
};

/// Whether `managed_bytes` of managed memory may be allocated now: it must fit the GPU's free
/// memory less `margin_bytes` (kept for what is allocated after it: traversal temporaries,
/// the context's own growth). Call it after every other GPU allocation of the case is made.
inline memory_check check_managed_fits(std::size_t managed_bytes, std::size_t margin_bytes) {
  memory_check c;
  SQUEEZE_CUDA_TRY(cudaMemGetInfo(&c.free_bytes, &c.total_bytes));
  c.fits = managed_bytes + margin_bytes <= c.free_bytes;
  if (!c.fits) {
    char text[512];
    std::snprintf(text, sizeof text,
                  "refused: %.2f GiB of managed memory + a %.2f GiB margin exceed the GPU's "
                  "free %.2f GiB (of %.2f GiB); oversubscribed managed memory can hang these "
                  "GPUs, so the UVM variants of this case are not run",
                  static_cast<double>(managed_bytes) / (1u << 30),
                  static_cast<double>(margin_bytes) / (1u << 30),
                  static_cast<double>(c.free_bytes) / (1u << 30),
                  static_cast<double>(c.total_bytes) / (1u << 30));
    c.message = text;
  }
  return c;
}

/// The three ways a UVM variant uses its managed memory.
enum class uvm_mode {
  demand,    ///< plain demand migration: pages move to the GPU on its faults
  advise,    ///< PreferredLocation = host + AccessedBy = this GPU: the GPU reads host pages
             ///< through its page tables, without faulting and without migrating them
  prefetch,  ///< cudaMemPrefetchAsync of the whole range to the GPU before the kernels
             ///< (inside the timed region): the best case when everything will be read
};

inline const char* to_string(uvm_mode m) {
  switch (m) {
    case uvm_mode::demand: return "uvm-demand";
    case uvm_mode::advise: return "uvm-advise";
    case uvm_mode::prefetch: return "uvm-prefetch";
  }
  return "?";
}

inline cudaMemLocation host_location() {
  cudaMemLocation l{};
  l.type = cudaMemLocationTypeHost;  // id ignored
  l.id = 0;
  return l;
}

inline cudaMemLocation device_location(int device) {
  cudaMemLocation l{};
  l.type = cudaMemLocationTypeDevice;
  l.id = device;
  return l;
}

/// Sets (advise) or clears (the other modes) PreferredLocation = host and AccessedBy = the
/// GPU on the range (CUDA 13: cudaMemAdvise takes a cudaMemLocation).
inline void apply_advice(const void* data, std::size_t bytes, uvm_mode mode, int device) {
  if (mode == uvm_mode::advise) {
    SQUEEZE_CUDA_TRY(
        cudaMemAdvise(data, bytes, cudaMemAdviseSetPreferredLocation, host_location()));
    SQUEEZE_CUDA_TRY(
        cudaMemAdvise(data, bytes, cudaMemAdviseSetAccessedBy, device_location(device)));
  } else {
    SQUEEZE_CUDA_TRY(
        cudaMemAdvise(data, bytes, cudaMemAdviseUnsetPreferredLocation, host_location()));
    SQUEEZE_CUDA_TRY(
        cudaMemAdvise(data, bytes, cudaMemAdviseUnsetAccessedBy, device_location(device)));
  }
}

/// How a cold run's managed data is put back on the host.
enum class cold_method {
  prefetch,  ///< cudaMemPrefetchAsync to the host, then wait
  touch,     ///< the host reads and rewrites one word of every page (CPU faults migrate them)
};

/// Moves every page of the range to host memory and waits: the GPU starts the next run with
/// none of it resident (nor mapped, unless AccessedBy keeps a mapping to the host pages).
inline void move_to_host(void* data, std::size_t bytes, cold_method how) {
  SQUEEZE_CUDA_TRY(cudaDeviceSynchronize());
  if (how == cold_method::prefetch) {
    SQUEEZE_CUDA_TRY(cudaMemPrefetchAsync(data, bytes, host_location(), 0, nullptr));
    SQUEEZE_CUDA_TRY(cudaDeviceSynchronize());
    return;
  }
  const auto page = static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
  auto* base = static_cast<unsigned char*>(data);
  parallel_for((bytes + page - 1) / page, [&](std::uint64_t begin, std::uint64_t end) {
    for (std::uint64_t p = begin; p < end; ++p) {
      volatile unsigned char* b = base + p * page;
      *b = *b;
    }
  });
}

/// Enqueues the prefetch of the whole range to the GPU on the default stream.
inline void prefetch_to_gpu(const void* data, std::size_t bytes, int device) {
  SQUEEZE_CUDA_TRY(cudaMemPrefetchAsync(data, bytes, device_location(device), 0, nullptr));
}

// ---- random reads ---------------------------------------------------------------------------

/// splitmix64's finalizer.
SQUEEZE_HOST_DEVICE std::uint64_t mix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/// The k-th index of a pass in [0, n): a hash of (seed, k), scaled by multiply-shift. The
/// GPU and the host checksum draw the same indices.
SQUEEZE_HOST_DEVICE std::uint64_t random_index(std::uint64_t seed, std::uint64_t k,
                                               std::uint64_t n) {
  const std::uint64_t h = mix64(seed ^ mix64(k));
#ifdef __CUDA_ARCH__
  return __umul64hi(h, n);
#else
  return static_cast<std::uint64_t>((static_cast<unsigned __int128>(h) * n) >> 64);
#endif
}

/// The word at index i of the random-read data (the same bytes in pinned and managed memory).
inline std::uint32_t data_word(std::uint64_t i) {
  return static_cast<std::uint32_t>(mix64(i ^ 0x5eed));
}

/// Words per row of the row kernel: 512 bytes, 32 lanes x 16 bytes.
inline constexpr std::uint64_t row_words = 128;

/// Random 4-byte reads, a thread per read (grid-stride over `reads`): each thread sums the
/// words it reads; one 64-bit atomic per warp. Ref: a bam array_ref of std::uint32_t.
template <class Ref>
SQUEEZE_KERNEL(256)
void random_word_kernel(Ref a, std::uint64_t reads, std::uint64_t seed, unsigned long long* sum) {
  const std::uint64_t n = a.size();
  unsigned long long s = 0;
  for (std::uint64_t k = blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x; k < reads;
       k += std::uint64_t{gridDim.x} * blockDim.x) {
    s += a.read(random_index(seed, k, n));
  }
  for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
  if (threadIdx.x % 32 == 0) atomicAdd(sum, s);
}

/// Random reads of 512-byte rows, a warp per read: lane j reads the row's 16-byte element j
/// (one coalesced 512-byte access; through a cache of 512-byte lines, one probe per row).
/// Ref: a bam array_ref of uint4, 32 elements per row.
template <class Ref>
SQUEEZE_KERNEL(256)
void random_row_kernel(Ref a, std::uint64_t reads, std::uint64_t seed, unsigned long long* sum) {
  const std::uint64_t rows = a.size() / 32;
  const unsigned lane = threadIdx.x % 32;
  unsigned long long s = 0;
  for (std::uint64_t k = (blockIdx.x * std::uint64_t{blockDim.x} + threadIdx.x) / 32; k < reads;
       k += std::uint64_t{gridDim.x} * blockDim.x / 32) {  // warp-uniform
    const uint4 q = a.read(random_index(seed, k, rows) * 32 + lane);
    s +=
        (static_cast<unsigned long long>(q.x) + q.y) + (static_cast<unsigned long long>(q.z) + q.w);
  }
  for (int o = 16; o > 0; o /= 2) s += __shfl_xor_sync(0xffffffffu, s, o);
  if (lane == 0) atomicAdd(sum, s);
}

/// What random_word_kernel sums over `words` words (host, every hardware thread).
inline std::uint64_t host_word_sum(const std::uint32_t* data, std::uint64_t words,
                                   std::uint64_t reads, std::uint64_t seed) {
  std::atomic<std::uint64_t> total{0};
  parallel_for(reads, [&](std::uint64_t begin, std::uint64_t end) {
    std::uint64_t s = 0;
    for (std::uint64_t k = begin; k < end; ++k) s += data[random_index(seed, k, words)];
    total += s;
  });
  return total.load();
}

/// What random_row_kernel sums over `rows` rows of row_words words (host).
inline std::uint64_t host_row_sum(const std::uint32_t* data, std::uint64_t rows,
                                  std::uint64_t reads, std::uint64_t seed) {
  std::atomic<std::uint64_t> total{0};
  parallel_for(reads, [&](std::uint64_t begin, std::uint64_t end) {
    std::uint64_t s = 0;
    for (std::uint64_t k = begin; k < end; ++k) {
      const std::uint32_t* row = data + random_index(seed, k, rows) * row_words;
      for (std::uint64_t j = 0; j < row_words; ++j) s += row[j];
    }
    total += s;
  });
  return total.load();
}

}  // namespace bam_uvm
