// SPDX-License-Identifier: Apache-2.0
// bench/xfer/xfer_study.cuh: the transfer study of Kamath et al., EuroSys 2026 (IBP, §4.4,
// Figure 5), as functions shared by the Google Benchmark program (xfer_bench.cu) and the
// tour.
//
// The question: how fast can `items` scattered items of S bytes each, lying in pinned
// host memory, be brought into one packed device buffer?
//
//   pool (pinned, mapped host memory; random bytes)      [slot_count = 2 x items slots]
//     |slot 0      |slot 1      |slot 2      | ...        each slot `stride` bytes
//     item i lies at slot slots[i] (distinct, random order), `offset` bytes into the slot
//   dst (device memory)                                  [items, S] packed, item i at i*S
//
// Item placement, i.e. where an item starts relative to a 128-byte segment:
//   aligned     stride = round_up(S, 128) + 128, offset 0: every item on a segment boundary
//   misaligned  same stride, offset 4: every item 4 B past a boundary (Figure 5's
//               "misaligned by 4 B"); aligned and misaligned differ in nothing else
//   random      stride = round_up(S, 128) + 1 (odd), offset 0: slot k starts k mod 128
//               bytes past a boundary, so the random slots give random offsets 0..127
// Every method copies exactly the same bytes for a given (S, placement).
//
// Methods (each verified once against a host-side gather before it is timed):
//   per_item_memcpy      one cudaMemcpyAsync per item, pinned host -> device, one stream
//   cpu_gather_bulk      CPU threads memcpy the items into a pinned staging buffer, then
//                        one cudaMemcpyAsync. Timed by the host clock around the gather,
//                        the copy and a stream synchronization (the real latency of it).
//   naive_zero_copy      a kernel, one warp per item, each lane loading 4-byte words from
//                        the mapped pool: the plain zero-copy. Needs 4-byte aligned starts,
//                        so not applicable to random placement.
//   squeeze_gather       squeeze::xfer::gather_rows: indices = slots, src_stride = stride
//   bulk_memcpy_ceiling  one cudaMemcpyAsync of items x S packed bytes from pinned memory:
//                        the link's ceiling, the baseline of the ratios
// Device methods are timed with CUDA events around the work only. Before every run (timed
// or warm-up) the L2 is flushed by writing twice its size: the 64 B study's 6.4 MB of
// source would otherwise fit the L2 and could be served from it instead of the link.
// Reported: GB/s = items x S bytes / median time, and the ratio to the bulk ceiling.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <numeric>
#include <optional>
#include <random>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "common/in_turns.hpp"
#include "common/l2_flush.hpp"
#include "common/report.hpp"
#include "squeeze/core.hpp"
#include "squeeze/xfer/gather.cuh"
#include "squeeze/xfer/mapped_memory.hpp"

namespace squeeze::bench::xfer_study {

// ---- what is measured -----------------------------------------------------------------

enum class method {
  per_item_memcpy,
  cpu_gather_bulk,
  naive_zero_copy,
  squeeze_gather,
  bulk_memcpy_ceiling,
};
inline constexpr std::array all_methods{method::per_item_memcpy, method::cpu_gather_bulk,
                                        method::naive_zero_copy, method::squeeze_gather,
                                        method::bulk_memcpy_ceiling};

/// The identifier used in benchmark names.
constexpr const char* name(method m) {
  switch (m) {
    case method::per_item_memcpy: return "per_item_memcpy";
    case method::cpu_gather_bulk: return "cpu_gather_bulk";
    case method::naive_zero_copy: return "naive_zero_copy";
    case method::squeeze_gather: return "squeeze_gather";
    case method::bulk_memcpy_ceiling: return "bulk_memcpy_ceiling";
  }
  return "unknown";
}

/// Words for tables.
constexpr const char* describe(method m) {
  switch (m) {
    case method::per_item_memcpy: return "cudaMemcpyAsync per item";
    case method::cpu_gather_bulk: return "CPU gather + one cudaMemcpy";
    case method::naive_zero_copy: return "naive zero-copy (4 B per lane)";
    case method::squeeze_gather: return "squeeze gather_rows";
    case method::bulk_memcpy_ceiling: return "bulk cudaMemcpy";
  }
  return "unknown";
}

enum class placement { aligned, misaligned, random };
inline constexpr std::array all_placements{placement::aligned, placement::misaligned,
                                           placement::random};

constexpr const char* name(placement p) {
  switch (p) {
    case placement::aligned: return "aligned";
    case placement::misaligned: return "misaligned";
    case placement::random: return "random";
  }
  return "unknown";
}

/// Item sizes of their Figure 5, bytes.
inline constexpr std::array<std::size_t, 5> item_sizes{64, 256, 1024, 4096, 16384};

/// Whether `m` can copy items placed as `p` (the naive kernel loads aligned 4-byte words).
constexpr bool applicable(method m, placement p) {
  return !(m == method::naive_zero_copy && p == placement::random);
}

// ---- the project's targets for this study ------------------------------------------------

/// squeeze_gather / bulk ceiling for items of at least large_item_bytes.
inline constexpr double target_large_vs_bulk = 0.90;
inline constexpr std::size_t large_item_bytes = 1024;
/// squeeze_gather / bulk ceiling for 256-byte items.
inline constexpr double target_256_vs_bulk = 0.75;
/// squeeze_gather misaligned / squeeze_gather aligned, any size.
inline constexpr double target_misaligned_vs_aligned = 0.95;
/// squeeze_gather / the fastest other gathering method: squeeze is the fastest.
inline constexpr double target_vs_other_methods = 1.0;

/// The target on squeeze_gather / bulk ceiling for items of S bytes, if any.
constexpr std::optional<double> target_vs_bulk(std::size_t item_bytes) {
  if (item_bytes >= large_item_bytes) return target_large_vs_bulk;
  if (item_bytes == 256) return target_256_vs_bulk;
  return std::nullopt;
}

// ---- settings ---------------------------------------------------------------------------

struct study_config {
  std::size_t items = 100'000;
  std::uint64_t seed = 0x5eed'c0de'2024;
  core::timing_options timing{.warmup = 2, .repeats = 10};
  /// per_item_memcpy issues `items` API calls per run (~0.3 s at 100k): fewer repeats.
  core::timing_options per_item_timing{.warmup = 2, .repeats = 3};

  [[nodiscard]] core::timing_options timing_for(method m) const {
    return m == method::per_item_memcpy ? per_item_timing : timing;
  }
};

/// Threads of the CPU gather: min(8, hardware threads).
inline unsigned default_gather_threads() {
  return std::clamp(std::thread::hardware_concurrency(), 1u, 8u);
}

/// GB/s (1e9 bytes per second) of moving `bytes` in `ms` milliseconds.
inline double gbps(std::size_t bytes, double ms) {
  return static_cast<double>(bytes) / (ms * 1e6);
}

// ---- host threads -----------------------------------------------------------------------

/// A fixed set of host threads that run one job together: run(job) calls job(w, n) on
/// every worker w in [0, n) (the caller is worker 0) and returns when all have returned.
/// Kept alive across runs, so a timed CPU gather does not pay for starting threads.
class worker_pool {
 public:
  using job_type = std::function<void(unsigned worker, unsigned workers)>;

  explicit worker_pool(unsigned threads) {
    try {
      for (unsigned w = 1; w < std::max(threads, 1u); ++w) {
        threads_.emplace_back([this, w] { serve(w); });
      }
    } catch (...) {
      stop();
      throw;
    }
  }
  worker_pool(const worker_pool&) = delete;
  worker_pool& operator=(const worker_pool&) = delete;
  ~worker_pool() { stop(); }

  [[nodiscard]] unsigned size() const noexcept {
    return static_cast<unsigned>(threads_.size()) + 1;
  }

  /// Runs `job` on every worker. The job must not throw on workers other than 0.
  void run(const job_type& job) {
    {
      const std::lock_guard lock{mutex_};
      job_ = &job;
      pending_ = threads_.size();
      ++generation_;
    }
    wake_.notify_all();
    std::exception_ptr failure;
    try {
      job(0, size());
    } catch (...) {
      failure = std::current_exception();
    }
    std::unique_lock lock{mutex_};
    done_.wait(lock, [this] { return pending_ == 0; });
    job_ = nullptr;
    if (failure) std::rethrow_exception(failure);
  }

  /// [first, last) of worker w's share of n items, in contiguous pieces.
  [[nodiscard]] static std::pair<std::size_t, std::size_t> share(std::size_t n, unsigned w,
                                                                 unsigned workers) {
    return {n * w / workers, n * (w + 1) / workers};
  }

 private:
  void serve(unsigned w) {
    std::uint64_t seen = 0;
    for (;;) {
      const job_type* job = nullptr;
      {
        std::unique_lock lock{mutex_};
        wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
        if (stopping_) return;
        seen = generation_;
        job = job_;
      }
      (*job)(w, size());
      const std::lock_guard lock{mutex_};
      if (--pending_ == 0) done_.notify_one();
    }
  }
  void stop() noexcept {
    {
      const std::lock_guard lock{mutex_};
      stopping_ = true;
    }
    wake_.notify_all();
    for (std::thread& t : threads_) t.join();
    threads_.clear();
  }

  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  const job_type* job_ = nullptr;
  std::size_t pending_ = 0;
  std::uint64_t generation_ = 0;
  bool stopping_ = false;
};

// ---- the layout of the items --------------------------------------------------------------

/// How a placement lays the items out in the pool (see the top of this file).
struct item_layout {
  std::size_t item_bytes;  ///< S
  std::size_t stride;      ///< bytes between slot starts
  std::size_t offset;      ///< bytes from a slot's start to its item's start

  /// Byte position of the item in `slot`, from the pool's start (pools are page aligned,
  /// so this is also the item's alignment).
  SQUEEZE_HOST_DEVICE constexpr std::size_t start(std::uint32_t slot) const {
    return slot * stride + offset;
  }
};

inline constexpr std::size_t segment_bytes = xfer::segment_bytes;  // 128
inline constexpr std::size_t misaligned_offset = 4;

constexpr item_layout layout_for(std::size_t item_bytes, placement p) {
  const std::size_t rounded = core::align_up(item_bytes, segment_bytes);
  switch (p) {
    case placement::aligned: return {item_bytes, rounded + segment_bytes, 0};
    case placement::misaligned: return {item_bytes, rounded + segment_bytes, misaligned_offset};
    case placement::random: return {item_bytes, rounded + 1, 0};
  }
  return {item_bytes, rounded + segment_bytes, 0};
}

/// Which slot each item occupies; the same for every placement of one size.
struct item_set {
  std::size_t item_bytes = 0;
  std::size_t slot_count = 0;        ///< slots in the pool: 2 x items
  std::vector<std::uint32_t> slots;  ///< [items] slot of item i: distinct, random order

  [[nodiscard]] std::size_t items() const noexcept { return slots.size(); }
  /// Bytes of the packed result: items x S.
  [[nodiscard]] std::size_t gathered_bytes() const noexcept { return items() * item_bytes; }
  /// Bytes of a pool that holds every placement's layout (aligned has the widest stride).
  [[nodiscard]] std::size_t pool_bytes() const noexcept {
    return slot_count * layout_for(item_bytes, placement::aligned).stride;
  }
};

inline item_set make_item_set(std::size_t items, std::size_t item_bytes, std::uint64_t seed) {
  SQUEEZE_EXPECTS(items > 0 && item_bytes > 0, "xfer study: items and item size must be positive");
  SQUEEZE_EXPECTS(2 * items <= std::numeric_limits<std::uint32_t>::max(),
                  "xfer study: slot numbers must fit 32 bits");
  item_set set;
  set.item_bytes = item_bytes;
  set.slot_count = 2 * items;
  std::vector<std::uint32_t> all(set.slot_count);
  std::iota(all.begin(), all.end(), 0u);
  std::mt19937_64 rng{seed};
  std::shuffle(all.begin(), all.end(), rng);
  all.resize(items);
  set.slots = std::move(all);
  return set;
}

/// Fills `bytes` with pseudo-random bytes (SplitMix64 per 1 MiB block: the same bytes
/// whatever the number of workers).
inline void fill_random(std::span<std::byte> bytes, std::uint64_t seed, worker_pool& workers) {
  constexpr std::size_t block = std::size_t{1} << 20;
  const std::size_t blocks = core::div_ceil(bytes.size(), block);
  workers.run([&](unsigned w, unsigned n) {
    for (std::size_t b = w; b < blocks; b += n) {
      std::uint64_t state = seed ^ (0x9e37'79b9'7f4a'7c15ull * (b + 1));
      const std::size_t end = std::min(bytes.size(), (b + 1) * block);
      for (std::size_t i = b * block; i < end; i += 8) {
        std::uint64_t z = (state += 0x9e37'79b9'7f4a'7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58'476d'1ce4'e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d0'49bb'1331'11ebull;
        z ^= z >> 31;
        std::memcpy(bytes.data() + i, &z, std::min<std::size_t>(8, end - i));
      }
    }
  });
}

// ---- host-side gather: the reference, and method cpu_gather_bulk's first half --------------

/// out[i, :] = item i of the pool under placement p.   out: [items, S] packed
inline void host_gather(const std::byte* pool, const item_set& set, placement p, std::byte* out,
                        worker_pool& workers) {
  const item_layout layout = layout_for(set.item_bytes, p);
  workers.run([&](unsigned w, unsigned n) {
    const auto [first, last] = worker_pool::share(set.items(), w, n);
    for (std::size_t i = first; i < last; ++i) {
      std::memcpy(out + i * layout.item_bytes, pool + layout.start(set.slots[i]),
                  layout.item_bytes);
    }
  });
}

/// Copies `bytes` contiguous bytes with every worker (the host's own ceiling).
inline void host_copy(std::byte* dst, const std::byte* src, std::size_t bytes,
                      worker_pool& workers) {
  workers.run([&](unsigned w, unsigned n) {
    const auto [first, last] = worker_pool::share(bytes, w, n);
    std::memcpy(dst + first, src + first, last - first);
  });
}

/// Poison written to outputs before a verification run.
inline constexpr int poison_byte = 0xA5;

/// Compares `got` ([items, S] packed) with the items in the pool; throws
/// verification_error naming the first wrong item and how many are wrong.
inline void check_gathered(const std::string& what, std::span<const std::byte> got,
                           const std::byte* pool, const item_set& set, placement p,
                           worker_pool& workers) {
  if (got.size() < set.gathered_bytes()) {
    throw verification_error{what + ": result has " + std::to_string(got.size()) +
                             " bytes, expected " + std::to_string(set.gathered_bytes())};
  }
  const item_layout layout = layout_for(set.item_bytes, p);
  constexpr std::size_t none = std::numeric_limits<std::size_t>::max();
  std::vector<std::size_t> first_bad(workers.size(), none);
  std::vector<std::size_t> bad_count(workers.size(), 0);
  workers.run([&](unsigned w, unsigned n) {
    const auto [first, last] = worker_pool::share(set.items(), w, n);
    for (std::size_t i = first; i < last; ++i) {
      if (std::memcmp(got.data() + i * layout.item_bytes, pool + layout.start(set.slots[i]),
                      layout.item_bytes) != 0) {
        if (bad_count[w]++ == 0) first_bad[w] = i;
      }
    }
  });
  const std::size_t item = *std::min_element(first_bad.begin(), first_bad.end());
  if (item == none) return;
  const std::size_t wrong = std::accumulate(bad_count.begin(), bad_count.end(), std::size_t{0});
  const std::byte* g = got.data() + item * layout.item_bytes;
  const std::byte* e = pool + layout.start(set.slots[item]);
  std::size_t at = 0;
  while (at < layout.item_bytes && g[at] == e[at]) ++at;
  char detail[256];
  std::snprintf(detail, sizeof detail,
                ": %zu of %zu items wrong; first: item %zu (slot %u, start %zu mod 128) at byte "
                "%zu: got 0x%02x, expected 0x%02x%s",
                wrong, set.items(), item, set.slots[item],
                layout.start(set.slots[item]) % segment_bytes, at, static_cast<unsigned>(g[at]),
                static_cast<unsigned>(e[at]),
                static_cast<int>(g[at]) == poison_byte ? " (poison: never written)" : "");
  throw verification_error{what + detail};
}

// ---- the naive zero-copy kernel -------------------------------------------------------------

inline constexpr int naive_block_threads = 256;

namespace detail {

/// The plain zero-copy gather: one warp per item, lane l copying 4-byte words l, l + 32,
/// ... of it straight from the mapped pool. No realignment, one load in flight per lane.
/// Item starts and S must be multiples of 4.
///   dst: [count, S] packed; item i at pool + layout.start(slots[i])
template <int BlockThreads>
SQUEEZE_KERNEL(BlockThreads)
void naive_zero_copy_kernel(std::byte* dst, const std::byte* pool, item_layout layout,
                            const std::uint32_t* slots, std::size_t count) {
  constexpr int warps_per_block = BlockThreads / warp_threads;
  const std::size_t warp = std::size_t{blockIdx.x} * warps_per_block + threadIdx.x / warp_threads;
  const std::size_t warps = std::size_t{gridDim.x} * warps_per_block;
  const unsigned lane = threadIdx.x % warp_threads;
  const std::size_t words = layout.item_bytes / sizeof(std::uint32_t);
  for (std::size_t i = warp; i < count; i += warps) {
    const auto* src = reinterpret_cast<const std::uint32_t*>(pool + layout.start(slots[i]));
    auto* out = reinterpret_cast<std::uint32_t*>(dst + i * layout.item_bytes);
    for (std::size_t w = lane; w < words; w += warp_threads) out[w] = src[w];
  }
}

}  // namespace detail

// ---- the study on a GPU, for one item size ------------------------------------------------

/// Everything one item size needs on the GPU: the pool, the staging buffer, the device
/// result; runs, verifies and times the methods at any placement.
///
/// Memory at items = 100k, S = 16 KiB: pool 3.3 GB pinned mapped, staging 1.6 GB pinned,
/// dst 1.6 GB device, readback 1.6 GB pageable (allocated at the first verification).
class gpu_study {
 public:
  gpu_study(const study_config& config, std::size_t item_bytes, worker_pool& workers)
      : config_{config},
        workers_{&workers},
        device_{core::query_device()},
        set_{make_item_set(config.items, item_bytes, config.seed ^ item_bytes)},
        timer_{stream_.get()} {
    SQUEEZE_EXPECTS(device_.can_map_host_memory,
                    "xfer study: " + device_.name + " cannot map host memory");
    SQUEEZE_EXPECTS(
        item_bytes % sizeof(std::uint32_t) == 0,
        "xfer study: item sizes must be multiples of 4 (the naive kernel copies words)");
    pool_ = xfer::allocate_mapped<std::byte>(set_.pool_bytes());
    staging_ = core::pinned_buffer<std::byte>{set_.gathered_bytes(), core::host_memory::pinned};
    dst_ = core::device_buffer<std::byte>{set_.gathered_bytes()};
    slots_ = core::device_buffer<std::uint32_t>{set_.items()};
    status_ = core::device_buffer<status>{1};
    fill_random(pool_.span(), config.seed + item_bytes, workers);
    slots_.copy_from(set_.slots, stream_);
    stream_.synchronize();
  }

  [[nodiscard]] std::size_t item_bytes() const noexcept { return set_.item_bytes; }
  [[nodiscard]] std::size_t items() const noexcept { return set_.items(); }
  /// Bytes each run moves: items x S.
  [[nodiscard]] std::size_t bytes() const noexcept { return set_.gathered_bytes(); }
  [[nodiscard]] const core::device_info& device() const noexcept { return device_; }
  [[nodiscard]] unsigned gather_threads() const noexcept { return workers_->size(); }

  /// Runs `m` once into poisoned output and compares with the host gather; throws
  /// verification_error on a difference. Each (method, placement) is checked once.
  void verify(method m, placement p) {
    if (verified_.contains({m, p})) return;
    const std::string what =
        std::string{"xfer "} + name(m) + ' ' + format_bytes(item_bytes()) + ' ' + name(p);
    // The ceiling copies the staging buffer: give it the items, gathered.
    if (m == method::bulk_memcpy_ceiling) {
      host_gather(pool_.data(), set_, p, staging_.data(), *workers_);
    }
    dst_.fill_bytes(poison_byte, stream_);
    status_.fill_bytes(0, stream_);  // status::ok
    run(m, p);
    readback_.resize(bytes());
    dst_.copy_to(std::span<std::byte>{readback_}, stream_);
    status reported = status::ok;
    SQUEEZE_CUDA_TRY(cudaMemcpyAsync(&reported, status_.data(), sizeof reported,
                                     cudaMemcpyDeviceToHost, stream_));
    stream_.synchronize();
    if (reported != status::ok) {
      throw verification_error{what + ": the kernel reported '" + to_string(reported) + "'"};
    }
    check_gathered(what, readback_, pool_.data(), set_, p, *workers_);
    verified_.insert({m, p});
  }

  /// One timed run of `m`, in ms: CUDA events around the work, or for cpu_gather_bulk the
  /// host clock around gather + copy + stream synchronization. The L2 is flushed first.
  double time_once(method m, placement p) {
    l2_.flush(stream_);
    if (m == method::cpu_gather_bulk) {
      stream_.synchronize();
      return core::host_ms([&] {
        run(m, p);
        stream_.synchronize();
      });
    }
    timer_.start();
    run(m, p);
    timer_.stop();
    return timer_.elapsed_ms();
  }

  /// verify, then config.timing_for(m) warm-up and timed runs of time_once.
  core::timing_summary measure(method m, placement p) {
    verify(m, p);
    return core::collect(config_.timing_for(m), [&] { return time_once(m, p); });
  }

 private:
  /// Issues method m once on stream_ (cpu_gather_bulk does its gather before returning).
  void run(method m, placement p) {
    SQUEEZE_EXPECTS(applicable(m, p),
                    std::string{"xfer study: "} + name(m) + " cannot copy items placed " + name(p));
    const item_layout layout = layout_for(item_bytes(), p);
    const std::size_t n = items();
    const std::size_t s = item_bytes();
    switch (m) {
      case method::per_item_memcpy:
        for (std::size_t i = 0; i < n; ++i) {
          SQUEEZE_CUDA_TRY(cudaMemcpyAsync(dst_.data() + i * s,
                                           pool_.data() + layout.start(set_.slots[i]), s,
                                           cudaMemcpyHostToDevice, stream_));
        }
        break;
      case method::cpu_gather_bulk:
        host_gather(pool_.data(), set_, p, staging_.data(), *workers_);
        SQUEEZE_CUDA_TRY(cudaMemcpyAsync(dst_.data(), staging_.data(), bytes(),
                                         cudaMemcpyHostToDevice, stream_));
        break;
      case method::naive_zero_copy: {
        constexpr std::size_t warps_per_block = naive_block_threads / warp_threads;
        const auto blocks = static_cast<unsigned>(
            std::min<std::size_t>(core::div_ceil(n, warps_per_block), std::size_t{1} << 30));
        detail::naive_zero_copy_kernel<naive_block_threads>
            <<<blocks, naive_block_threads, 0, stream_>>>(dst_.data(), pool_.device_data(), layout,
                                                          slots_.data(), n);
        SQUEEZE_CHECK_LAUNCH();
        break;
      }
      case method::squeeze_gather:
        // Rows of the source are the pool's slots, shifted by the placement's offset.
        xfer::gather_rows(
            xfer::gather_args<std::uint32_t>{.dst = dst_.data(),
                                             .dst_stride = s,
                                             .src = pool_.device_data() + layout.offset,
                                             .src_stride = layout.stride,
                                             .src_rows = set_.slot_count,
                                             .row_bytes = s,
                                             .indices = slots_.data(),
                                             .count = n,
                                             .status_out = status_.data()},
            stream_);
        break;
      case method::bulk_memcpy_ceiling:
        SQUEEZE_CUDA_TRY(cudaMemcpyAsync(dst_.data(), staging_.data(), bytes(),
                                         cudaMemcpyHostToDevice, stream_));
        break;
    }
  }

  study_config config_;
  worker_pool* workers_;
  core::device_info device_;
  item_set set_;
  core::stream stream_;
  core::event_timer timer_;
  core::pinned_buffer<std::byte> pool_;       // [slot_count x stride] random, mapped
  core::pinned_buffer<std::byte> staging_;    // [items, S] packed, pinned (cpu gather, ceiling)
  core::device_buffer<std::byte> dst_;        // [items, S] packed
  core::device_buffer<std::uint32_t> slots_;  // [items] item i's slot
  core::device_buffer<status> status_;        // [1] gather_rows' report
  l2_flusher l2_;                             // written before every run
  std::vector<std::byte> readback_;           // [items, S] dst copied back for verification
  std::set<std::pair<method, placement>> verified_;
};

// ---- results and targets --------------------------------------------------------------------

/// GB/s per (method, S, placement) of one run. The ceiling does not depend on placement:
/// it is kept under placement::aligned whatever placement is given.
class study_results {
 public:
  void record(method m, std::size_t item_bytes, placement p, double gbps) {
    gbps_[key(m, item_bytes, p)] = gbps;
  }
  [[nodiscard]] std::optional<double> gbps(method m, std::size_t item_bytes, placement p) const {
    const auto it = gbps_.find(key(m, item_bytes, p));
    if (it == gbps_.end()) return std::nullopt;
    return it->second;
  }
  /// The item sizes with any result, ascending.
  [[nodiscard]] std::vector<std::size_t> item_sizes() const {
    std::set<std::size_t> sizes;
    for (const auto& [k, v] : gbps_) sizes.insert(std::get<1>(k));
    return {sizes.begin(), sizes.end()};
  }

 private:
  using key_type = std::tuple<method, std::size_t, placement>;
  static key_type key(method m, std::size_t item_bytes, placement p) {
    return {m, item_bytes, m == method::bulk_memcpy_ceiling ? placement::aligned : p};
  }
  std::map<key_type, double> gbps_;
};

/// The target checks of one item size that `results` has the numbers for:
///   gather vs bulk ceiling (per placement), misaligned vs aligned gather, and gather vs
///   the fastest other gathering method measured (per placement).
inline std::vector<comparison> compare_to_targets(const study_results& results,
                                                  std::size_t item_bytes) {
  std::vector<comparison> out;
  const std::string size = format_bytes(item_bytes);
  const auto gather = [&](placement p) {
    return results.gbps(method::squeeze_gather, item_bytes, p);
  };
  const auto ceiling = results.gbps(method::bulk_memcpy_ceiling, item_bytes, placement::aligned);
  for (const placement p : all_placements) {
    if (const auto g = gather(p)) {
      out.push_back(
          {"xfer",
           "gather " + size + ' ' + name(p) + " vs " + describe(method::bulk_memcpy_ceiling), *g,
           ceiling, "GB/s", target_vs_bulk(item_bytes)});
    }
  }
  if (const auto mis = gather(placement::misaligned), al = gather(placement::aligned); mis && al) {
    out.push_back({"xfer", "gather " + size + " misaligned (+4 B) vs aligned", *mis, *al, "GB/s",
                   target_misaligned_vs_aligned});
  }
  for (const placement p : all_placements) {
    const auto g = gather(p);
    if (!g) continue;
    std::optional<std::pair<double, method>> best;
    for (const method m :
         {method::per_item_memcpy, method::cpu_gather_bulk, method::naive_zero_copy}) {
      const auto other = results.gbps(m, item_bytes, p);
      if (other && (!best || *other > best->first)) best = std::pair{*other, m};
    }
    if (best) {
      out.push_back({"xfer",
                     "gather " + size + ' ' + name(p) + " vs best other: " + describe(best->second),
                     *g, best->first, "GB/s", target_vs_other_methods});
    }
  }
  return out;
}

/// compare_to_targets for every item size in `results`.
inline std::vector<comparison> compare_to_targets(const study_results& results) {
  std::vector<comparison> out;
  for (const std::size_t s : results.item_sizes()) {
    auto some = compare_to_targets(results, s);
    out.insert(out.end(), some.begin(), some.end());
  }
  return out;
}

/// Notes that explain the study's numbers, for under a table.
inline std::vector<std::string> study_notes(const study_config& config, unsigned gather_threads) {
  char timing[160];
  std::snprintf(timing, sizeof timing,
                "xfer: GB/s = items x size / median of %d runs (%d warm-up; per-item memcpy: %d "
                "runs); the L2 is flushed before each run",
                config.timing.repeats, config.timing.warmup, config.per_item_timing.repeats);
  return {
      "xfer: " + std::to_string(config.items) +
          " items per size at random distinct slots of a pinned, mapped pool twice their size",
      timing,
      "xfer: bulk cudaMemcpy = one copy of the packed items from pinned memory (the link's "
      "ceiling)",
      "xfer: CPU gather uses " + std::to_string(gather_threads) +
          " threads; it is timed by the host clock (gather + copy + sync), the rest by CUDA events",
      "xfer: misaligned = items start 4 B past a 128 B boundary; random = offsets 0..127 "
      "(odd slot stride)",
      "xfer: naive zero-copy is n/a for random placement (its 4-byte loads need 4-byte aligned "
      "items)",
  };
}

// ---- the tour's section -----------------------------------------------------------------------

/// The tour's short version of the study: 20k items (at least 32 MiB), 256 B .. 16 KiB,
/// aligned and misaligned; CPU gather, naive zero-copy and squeeze against the bulk ceiling.
/// Without a GPU: the CPU gather alone against a contiguous host copy (no targets).
inline void tour_section(report_table& table, const tour_context& context) {
  study_config config;
  config.items = 20'000;
  constexpr std::array<std::size_t, 4> sizes{256, 1024, 4096, 16384};
  constexpr std::array placements{placement::aligned, placement::misaligned};
  worker_pool workers{default_gather_threads()};

  if (!context.has_gpu()) {
    for (const std::size_t s : sizes) {
      const item_set set = make_item_set(config.items, s, config.seed ^ s);
      std::vector<std::byte> pool(set.pool_bytes());
      std::vector<std::byte> staging(set.gathered_bytes());
      fill_random(pool, config.seed + s, workers);
      const double contiguous_ms =
          core::time_host(config.timing, [&] {
            host_copy(staging.data(), pool.data(), set.gathered_bytes(), workers);
          }).median_ms;
      for (const placement p : placements) {
        host_gather(pool.data(), set, p, staging.data(), workers);
        check_gathered(std::string{"xfer host gather "} + format_bytes(s) + ' ' + name(p), staging,
                       pool.data(), set, p, workers);
        const double gather_ms = core::time_host(config.timing, [&] {
                                   host_gather(pool.data(), set, p, staging.data(), workers);
                                 }).median_ms;
        table.add({"xfer", "CPU gather " + format_bytes(s) + ' ' + name(p) + " vs contiguous copy",
                   gbps(set.gathered_bytes(), gather_ms), gbps(set.gathered_bytes(), contiguous_ms),
                   "GB/s", std::nullopt});
      }
    }
    table.add_note("xfer (host only): " + std::to_string(config.items) + " items per size, " +
                   std::to_string(workers.size()) + " threads; GB/s by the host clock, median of " +
                   std::to_string(config.timing.repeats) + " runs; no targets without a GPU");
    return;
  }

  // At least 32 MiB per size: a 5 MB bulk copy (20k x 256 B) is too short for a stable
  // ceiling (seen on an H200: 30.6 GB/s in one run, 48-52 in others).
  constexpr std::size_t min_bytes = std::size_t{32} << 20;
  study_results results;
  for (const std::size_t s : sizes) {
    study_config sized = config;
    sized.items = std::max(config.items, min_bytes / s);
    gpu_study study{sized, s, workers};
    // Every (method, placement) checked, then timed in turns (collect_in_turns): timed one
    // after another, a tour on an H100 read the 16 KiB gather at 0.67 of the naive one.
    std::vector<std::pair<method, placement>> runs{
        {method::bulk_memcpy_ceiling, placement::aligned}};
    for (const placement p : placements) {
      for (const method m :
           {method::cpu_gather_bulk, method::naive_zero_copy, method::squeeze_gather}) {
        runs.emplace_back(m, p);
      }
    }
    std::vector<std::function<double()>> timed;
    for (const auto& [m, p] : runs) {
      study.verify(m, p);
      timed.emplace_back([&study, m, p] { return study.time_once(m, p); });
    }
    const auto times = collect_in_turns(config.timing, timed);
    for (std::size_t r = 0; r < runs.size(); ++r) {
      results.record(runs[r].first, s, runs[r].second, gbps(study.bytes(), times[r].median_ms));
    }
    for (const comparison& c : compare_to_targets(results, s)) table.add(c);
  }
  for (std::string& note : study_notes(config, workers.size())) table.add_note(std::move(note));
  table.add_note("xfer: small items: as many as make 32 MiB (131072 x 256 B, 32768 x 1 KiB)");
  table.add_note("xfer: the methods of a size timed in turns, one run of each a round");
}

}  // namespace squeeze::bench::xfer_study
