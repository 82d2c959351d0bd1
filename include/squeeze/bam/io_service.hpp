// SPDX-License-Identifier: Apache-2.0
// squeeze/bam/io_service.hpp: the host I/O service that serves a file through the storage
// queues of bam/queue.hpp (host only; compiles with g++).
//
//   bam::io_service io{"graph.bin", {.queues = 132, .depth = 64, .line_bytes = 4096}, stream};
//   kernel<<<grid, block, 0, stream>>>(io.queues(), ...);  // queue_set_ref, by value
//   cudaStreamSynchronize(stream);  io.check();  // throws io_error if a request failed
//
//        GPU threads                       mapped host memory              host threads
//   reserve/fill/publish ──────────► submission[i] + doorbell tail ◄─── poll (cheap: local)
//   (device-memory counters)                                            pread / pwrite
//   wait: acquire tag ◄───────────── completion[i], staging[i] ◄─────── complete
//
// The service owns the queues (control regions in device memory, shared regions in pinned
// mapped host memory), opens the file, and runs a pool of threads; thread j serves queues
// j, j + threads, ... in ticket order, taking every rung entry of a queue per poll (a batch).
// Reads loop until the request is filled (retrying EINTR, continuing after partial reads);
// reaching end of file first completes with status::io_error and the bytes read. Failed
// requests are counted and the first message kept, so an error reaches both the waiting GPU
// thread (its completion) and the host (errors(), first_error(), check()).
//
// pread/pwrite rather than io_uring: the library stays header-only with no liburing
// dependency, a pool of blocking threads already keeps `threads` requests in flight, and
// buffered reads that hit the page cache are CPU copies that io_uring would not speed up.
// io_uring (with O_DIRECT, one SQE per entry) fits the same queue_server interface: entries
// may complete out of order since each has its own completion tag.
//
// With queue_memory::host both regions are ordinary host memory and queue_ref works between
// host threads: the tests run the same protocol with std::thread in place of GPU threads,
// without a GPU.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "squeeze/bam/queue.hpp"
#include "squeeze/core/buffer.hpp"
#include "squeeze/core/error.hpp"
#include "squeeze/xfer/mapped_memory.hpp"

namespace squeeze::bam {

/// Where the queues live.
enum class queue_memory {
  mapped,  ///< control regions in device memory, shared regions pinned and mapped (CUDA)
  host,    ///< both in ordinary host memory: queues between host threads (tests, no GPU)
};

/// How the file is opened.
enum class file_access { read_only, read_write };

/// The shape of an io_service: its queues, their staging, its threads, the file's access.
struct io_service_config {
  std::uint32_t queues = 64;        ///< e.g. one per SM, or per group of warps
  std::uint32_t depth = 64;         ///< entries per queue (at most 65536)
  std::uint32_t line_bytes = 4096;  ///< staging bytes per entry: the cache line size
  std::uint32_t threads = 4;        ///< service threads (at most `queues` are used)
  file_access access = file_access::read_only;  ///< read_write for write-backs to reach the file
  queue_memory memory = queue_memory::mapped;   ///< mapped (GPU clients) or host (tests)
  /// How long an idle service thread sleeps between polls after spinning and yielding.
  std::chrono::microseconds idle_sleep{50};
  /// Test hook, called before each pread/pwrite attempt: a nonzero errno makes the attempt
  /// fail with it (EINTR is retried like a real one). Empty: no faults. Called from the
  /// service threads concurrently; must be thread-safe and must not throw.
  std::function<int(const io_request&)> fault{};
};

/// Counters since construction.
struct io_stats {
  std::uint64_t requests = 0;        ///< completed requests, failed ones included
  std::uint64_t errors = 0;          ///< requests completed with a status other than ok
  std::uint64_t bytes_read = 0;      ///< into staging buffers
  std::uint64_t bytes_written = 0;   ///< from staging buffers
  std::uint64_t batches = 0;         ///< polls that found new entries in a queue
  std::uint64_t doorbell_rings = 0;  ///< doorbell writes by the submitters, all queues
};

namespace detail {

/// An owned file descriptor.
class file_handle {
 public:
  file_handle() = default;
  explicit file_handle(int fd) noexcept : fd_{fd} {}
  file_handle(file_handle&& other) noexcept : fd_{std::exchange(other.fd_, -1)} {}
  file_handle& operator=(file_handle&& other) noexcept {
    std::swap(fd_, other.fd_);
    return *this;
  }
  file_handle(const file_handle&) = delete;
  file_handle& operator=(const file_handle&) = delete;
  ~file_handle() {
    if (fd_ >= 0) ::close(fd_);
  }
  [[nodiscard]] int get() const noexcept { return fd_; }

 private:
  int fd_{-1};
};

/// Zero-filled, 4096-byte aligned host bytes (queue_memory::host).
class aligned_host_bytes {
 public:
  static constexpr std::align_val_t alignment{queue_layout::region_align};

  aligned_host_bytes() = default;
  explicit aligned_host_bytes(std::size_t bytes)
      : data_{static_cast<std::byte*>(::operator new(bytes, alignment))} {
    std::memset(data_, 0, bytes);
  }
  aligned_host_bytes(aligned_host_bytes&& other) noexcept
      : data_{std::exchange(other.data_, nullptr)} {}
  aligned_host_bytes& operator=(aligned_host_bytes&& other) noexcept {
    std::swap(data_, other.data_);
    return *this;
  }
  aligned_host_bytes(const aligned_host_bytes&) = delete;
  aligned_host_bytes& operator=(const aligned_host_bytes&) = delete;
  ~aligned_host_bytes() {
    if (data_ != nullptr) ::operator delete(data_, alignment);
  }
  [[nodiscard]] std::byte* data() const noexcept { return data_; }

 private:
  std::byte* data_{nullptr};
};

inline const char* op_name(io_op op) noexcept {
  return op == io_op::write ? "write" : "read";
}

}  // namespace detail

/// Serves one file through `config.queues` storage queues with a pool of host threads.
/// Non-copyable and non-movable (its threads refer to it); destruction stops and joins the
/// threads after serving what was already rung. Kernels using the queues must have finished
/// by then: a GPU thread still waiting on a completion would wait forever.
class io_service {
 public:
  /// Opens `path` (read-only or read-write, never created) and starts the service. With
  /// queue_memory::mapped the queues' control regions in GPU memory are zeroed on `stream`
  /// (asynchronous): kernels that use queues() must be ordered after it on `stream`. With
  /// queue_memory::host nothing touches a GPU and `stream` is not used. Throws io_error when
  /// the file cannot be opened or is not a regular file, invalid_argument for a bad
  /// configuration, cuda_error when queue_memory::mapped memory cannot be allocated.
  io_service(const std::string& path, io_service_config config, cudaStream_t stream)
      : path_{path}, config_{std::move(config)} {
    SQUEEZE_EXPECTS(config_.queues > 0, "bam::io_service: at least one queue");
    SQUEEZE_EXPECTS(
        config_.depth > 0 && config_.depth <= queue_layout::max_depth,
        "bam::io_service: depth must be in [1, 65536], got " + std::to_string(config_.depth));
    SQUEEZE_EXPECTS(config_.line_bytes > 0 && config_.line_bytes <= queue_layout::max_line_bytes,
                    "bam::io_service: line_bytes must be in [1, 2^30], got " +
                        std::to_string(config_.line_bytes));
    SQUEEZE_EXPECTS(config_.threads > 0, "bam::io_service: at least one service thread");
    layout_ = queue_layout{config_.depth, config_.line_bytes};
    const std::size_t limit = std::numeric_limits<std::size_t>::max() / 2;
    SQUEEZE_EXPECTS(layout_.shared_bytes() <= limit / config_.queues,
                    "bam::io_service: queues * depth * line_bytes overflows");

    const int flags = (config_.access == file_access::read_write ? O_RDWR : O_RDONLY) | O_CLOEXEC;
    file_ = detail::file_handle{::open(path_.c_str(), flags)};
    if (file_.get() < 0) {
      const int err = errno;
      throw io_error{
          "bam::io_service: cannot open '" + path_ + "' for " +
          (config_.access == file_access::read_write ? "reading and writing" : "reading") + ": " +
          std::strerror(err)};
    }
    struct stat st {};
    if (::fstat(file_.get(), &st) != 0) {
      const int err = errno;
      throw io_error{"bam::io_service: cannot stat '" + path_ + "': " + std::strerror(err)};
    }
    if (!S_ISREG(st.st_mode))
      throw io_error{"bam::io_service: '" + path_ + "' is not a regular file"};

    const std::size_t shared_total = layout_.shared_bytes() * config_.queues;
    const std::size_t control_total = layout_.control_bytes() * config_.queues;
    if (config_.memory == queue_memory::mapped) {
      mapped_ = xfer::allocate_mapped<std::byte>(shared_total);
      std::memset(mapped_.data(), 0, shared_total);
      control_ = core::device_buffer<std::byte>{control_total};
      control_.fill_bytes(0, stream);
      shared_host_ = mapped_.data();
      set_ = queue_set_ref{control_.data(), mapped_.device_data(), config_.queues, layout_};
    } else {
      host_shared_ = detail::aligned_host_bytes{shared_total};
      host_control_ = detail::aligned_host_bytes{control_total};
      shared_host_ = host_shared_.data();
      set_ = queue_set_ref{host_control_.data(), host_shared_.data(), config_.queues, layout_};
    }

    consumed_ = std::vector<padded_counter>(config_.queues);
    const std::uint32_t n = config_.threads < config_.queues ? config_.threads : config_.queues;
    try {
      threads_.reserve(n);
      for (std::uint32_t j = 0; j < n; ++j) threads_.emplace_back([this, j, n] { serve(j, n); });
    } catch (...) {
      stop();
      throw;
    }
  }

  io_service(const io_service&) = delete;
  io_service& operator=(const io_service&) = delete;
  io_service(io_service&&) = delete;
  io_service& operator=(io_service&&) = delete;
  ~io_service() { stop(); }

  /// Stops and joins the service threads after a last pass over the doorbells. Idempotent.
  void stop() noexcept {
    stop_.store(true, std::memory_order_release);
    for (std::thread& t : threads_)
      if (t.joinable()) t.join();
  }

  /// All queues, for kernels (device addresses; host addresses with queue_memory::host).
  [[nodiscard]] queue_set_ref queues() const noexcept { return set_; }
  /// Queue k.
  [[nodiscard]] queue_ref queue(std::uint32_t k) const {
    SQUEEZE_EXPECTS(k < config_.queues, "bam::io_service::queue: no queue " + std::to_string(k));
    return set_[k];
  }
  /// The host side of queue k (host addresses).
  [[nodiscard]] queue_server server(std::uint32_t k) const {
    SQUEEZE_EXPECTS(k < config_.queues, "bam::io_service::server: no queue " + std::to_string(k));
    return queue_server{shared_host_ + std::size_t{k} * layout_.shared_bytes(), layout_};
  }
  /// The layout of each queue.
  [[nodiscard]] queue_layout layout() const noexcept { return layout_; }
  /// The number of queues.
  [[nodiscard]] std::uint32_t size() const noexcept { return config_.queues; }
  /// The file served.
  [[nodiscard]] const std::string& path() const noexcept { return path_; }

  /// The file's current size in bytes. Request at most file_bytes() - offset bytes of the
  /// last line: reading past the end is a short read, completed with status::io_error.
  [[nodiscard]] std::uint64_t file_bytes() const {
    struct stat st {};
    if (::fstat(file_.get(), &st) != 0) {
      const int err = errno;
      throw io_error{"bam::io_service: cannot stat '" + path_ + "': " + std::strerror(err)};
    }
    return static_cast<std::uint64_t>(st.st_size);
  }

  /// Requests completed with an error so far.
  [[nodiscard]] std::uint64_t errors() const noexcept {
    return errors_.load(std::memory_order_acquire);
  }
  /// The first failed request's message; empty while errors() == 0.
  [[nodiscard]] std::string first_error() const {
    const std::lock_guard<std::mutex> guard{error_mutex_};
    return first_error_;
  }
  /// Throws io_error naming the first failure when any request failed.
  void check() const {
    const std::uint64_t n = errors();
    if (n == 0) return;
    throw io_error{std::to_string(n) + " storage request(s) failed; first: " + first_error()};
  }

  /// Counts of the requests served so far.
  [[nodiscard]] io_stats stats() const noexcept {
    io_stats s;
    s.requests = requests_.load(std::memory_order_relaxed);
    s.errors = errors_.load(std::memory_order_relaxed);
    s.bytes_read = bytes_read_.load(std::memory_order_relaxed);
    s.bytes_written = bytes_written_.load(std::memory_order_relaxed);
    s.batches = batches_.load(std::memory_order_relaxed);
    for (std::uint32_t k = 0; k < config_.queues; ++k)
      s.doorbell_rings +=
          queue_server{shared_host_ + std::size_t{k} * layout_.shared_bytes(), layout_}.rings();
    return s;
  }

 private:
  struct alignas(64) padded_counter {
    std::uint64_t value = 0;
  };

  // Service thread j of n: queues j, j + n, ...
  void serve(std::uint32_t j, std::uint32_t n) noexcept {
    std::uint32_t idle = 0;
    while (!stop_.load(std::memory_order_acquire)) {
      bool busy = false;
      for (std::uint32_t k = j; k < config_.queues; k += n) busy = serve_queue(k) || busy;
      if (busy) {
        idle = 0;
      } else if (idle < 64) {
        ++idle;
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
      } else if (idle < 1024) {
        ++idle;
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(config_.idle_sleep);
      }
    }
    for (std::uint32_t k = j; k < config_.queues; k += n) serve_queue(k);  // what was rung
  }

  // Serves every rung ticket of queue k in order; false when there was none.
  bool serve_queue(std::uint32_t k) noexcept {
    const queue_server q = server_unchecked(k);
    std::uint64_t& head = consumed_[k].value;
    const std::uint64_t tail = q.doorbell();
    if (tail == head) return false;
    for (; head != tail; ++head) {
      io_request r;
      io_completion c;
      if (!q.request(head, r)) {
        c = fail(status::corrupt, 0,
                 "queue " + std::to_string(k) + " entry for ticket " + std::to_string(head) +
                     " holds another ticket (corrupted queue)");
      } else {
        c = perform(r, q.staging(head));
      }
      requests_.fetch_add(1, std::memory_order_relaxed);
      q.complete(head, c);
    }
    q.set_consumed(head);
    batches_.fetch_add(1, std::memory_order_relaxed);
    return true;
  }

  [[nodiscard]] queue_server server_unchecked(std::uint32_t k) const noexcept {
    return queue_server{shared_host_ + std::size_t{k} * layout_.shared_bytes(), layout_};
  }

  io_completion perform(const io_request& r, std::byte* staging) {
    const bool write = r.op == io_op::write;
    if (r.op != io_op::read && !write)
      return fail(status::invalid_argument, 0,
                  describe(r) + ": unknown op " + std::to_string(static_cast<std::uint32_t>(r.op)));
    if (r.length > layout_.line_bytes)
      return fail(
          status::invalid_argument, 0,
          describe(r) + ": longer than a line (" + std::to_string(layout_.line_bytes) + " bytes)");
    constexpr auto max_offset = static_cast<std::uint64_t>(std::numeric_limits<off_t>::max());
    if (r.offset > max_offset - r.length)
      return fail(status::invalid_argument, 0, describe(r) + ": offset out of range");

    std::uint32_t done = 0;
    while (done < r.length) {
      const std::size_t want = r.length - done;
      const auto at = static_cast<off_t>(r.offset + done);
      ssize_t got = -1;
      int err = config_.fault ? config_.fault(r) : 0;
      if (err == 0) {
        got = write ? ::pwrite(file_.get(), staging + done, want, at)
                    : ::pread(file_.get(), staging + done, want, at);
        if (got < 0) err = errno;
      }
      if (err == EINTR) continue;
      if (err != 0)
        return fail(status::io_error, done,
                    describe(r) + (write ? ": pwrite" : ": pread") + " failed after " +
                        std::to_string(done) + " bytes: " + std::strerror(err));
      if (got == 0)
        return fail(status::io_error, done,
                    describe(r) + (write ? ": wrote nothing" : ": end of file") + " after " +
                        std::to_string(done) + " bytes");
      done += static_cast<std::uint32_t>(got);
    }
    (write ? bytes_written_ : bytes_read_).fetch_add(done, std::memory_order_relaxed);
    return io_completion{status::ok, done};
  }

  [[nodiscard]] std::string describe(const io_request& r) const {
    return std::string{detail::op_name(r.op)} + " of " + std::to_string(r.length) +
           " bytes at offset " + std::to_string(r.offset) + " of '" + path_ + "' (command " +
           std::to_string(r.command_id) + ")";
  }

  io_completion fail(status code, std::uint32_t bytes, std::string message) {
    {
      const std::lock_guard<std::mutex> guard{error_mutex_};
      if (first_error_.empty()) first_error_ = std::move(message);
    }
    errors_.fetch_add(1, std::memory_order_release);
    return io_completion{code, bytes};
  }

  std::string path_;
  io_service_config config_;
  queue_layout layout_{};
  detail::file_handle file_;
  core::pinned_buffer<std::byte> mapped_;
  core::device_buffer<std::byte> control_;
  detail::aligned_host_bytes host_shared_;
  detail::aligned_host_bytes host_control_;
  std::byte* shared_host_{nullptr};
  queue_set_ref set_{};
  std::vector<padded_counter> consumed_;  // per queue, touched by its service thread only

  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> requests_{0};
  std::atomic<std::uint64_t> errors_{0};
  std::atomic<std::uint64_t> bytes_read_{0};
  std::atomic<std::uint64_t> bytes_written_{0};
  std::atomic<std::uint64_t> batches_{0};
  mutable std::mutex error_mutex_;
  std::string first_error_;
  std::vector<std::thread> threads_;  // last: joined before the members above go
};

}  // namespace squeeze::bam
