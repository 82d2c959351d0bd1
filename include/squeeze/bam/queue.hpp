// SPDX-License-Identifier: Apache-2.0
// squeeze/bam/queue.hpp: storage I/O queues between GPU threads and a host I/O service
// (host and device).
//
// GPU threads place read/write requests for cache lines in submission queues, ring a
// doorbell, and wait for completions; a host service (bam/io_service.hpp: a pool of threads
// with pread/pwrite) drains the queues. A kernel receives a `queue_ref` (or a `queue_set_ref`
// holding many queues; pick one per warp, e.g. by hashing the warp id) by value:
//
//   read:   t = q.submit({io_op::read, len, offset, id});     // reserve + publish + ring
//           io_completion c = q.wait(t);                      // c.code, c.bytes
//           copy q.staging(t) -> cache line (a warp, zero-copy reads of mapped memory)
//           q.release(t);
//   write:  t = q.reserve();
//           copy cache line -> q.staging(t);
//           q.submit(t, {io_op::write, len, offset, id});
//           io_completion c = q.wait(t);  q.release(t);
//
// Each queue lives in two regions, because GPU atomics on mapped host memory are not atomic
// with respect to the CPU (cudaDevAttrHostNativeAtomicSupported is 0 on PCIe hosts):
//
//   control region: device memory, only GPU threads touch it (atomics at device scope)
//   +----------------------------------+-------------------------------------------+
//   | control_block (128 B)            | turn[depth] (8 B each)                    |
//   |  next_ticket  fetch_add: tickets |  turn of entry i, lap L = ticket / depth: |
//   |  rung         tickets [0, rung)  |   2L     free for lap L                   |
//   |               are rung           |   2L+1   published for lap L (ringable)   |
//   |  rings        doorbell writes    |   2L+2   released = free for lap L+1      |
//   |  lock         the ringer's lock  |  (all zero at start)                      |
//   +----------------------------------+-------------------------------------------+
//
//   shared region: pinned mapped host memory, GPU and host exchange entries here
//   (plain stores + system-scope release/acquire, never read-modify-write atomics)
//   +-------------------+----------------------+-----------------------+-----------------+
//   | doorbell_block    | submission[depth]    | completion[depth]     | staging[depth]  |
//   | 128 B             | 64 B each, GPU       | 64 B each, host       | line_bytes each |
//   |  tail  GPU->host  | writes, host reads   | writes, GPU reads     | (stride rounded |
//   |  rings GPU->host  |  ticket, offset,     |  tag = ticket + 1     | to 128 B, base  |
//   |  consumed         |  command_id, op,     |  code (status)        | 4096 B aligned) |
//   |        host->GPU  |  length              |  bytes                |                 |
//   +-------------------+----------------------+-----------------------+-----------------+
//   region size rounded to 4096 B; queue k of a set starts at k * that size.
//
// Protocol for ticket t (entry i = t % depth, lap L = t / depth):
//
//   1 reserve   t = next_ticket.fetch_add(1); spin until turn[i] == 2L (the entry's
//               previous lap was released). No lock: a thread waits only for its own entry.
//   2 fill      write submission[i] (and, for a write, staging[i]) with plain stores;
//               system-scope release fence (device pass) so the host sees them.
//   3 publish   turn[i] = 2L+1 (seq_cst).
//   4 ring      try the lock; the holder scans from `rung` while turn says "published for
//               this ticket", sets rung to the first unpublished ticket and, if it moved,
//               writes the doorbell tail once for the whole batch (release, system scope).
//               It unlocks and re-checks the first unrung entry (see "No lost wake-up").
//               A thread that fails the try-lock returns at once: submit never blocks.
//   5 serve     the host polls `tail` (cheap: host memory), takes tickets [consumed, tail)
//               in order, preads into / pwrites from staging[i], writes completion[i].code
//               and .bytes, then completion[i].tag = t + 1 (release), and advances
//               `consumed`. Entries may complete in any order: each has its own tag.
//   6 wait      the submitting thread spins (acquire, system scope) until
//               completion[i].tag == t + 1, then reads code and bytes (and the staging data).
//   7 release   turn[i] = 2L+2 (release): the entry is free for ticket t + depth.
//
// In-order doorbell: rung only moves over a contiguous run of published tickets, so the
// doorbell never covers an entry still being written, and the host needs no per-entry
// "valid" flag. A thread holds an entry from reserve to release; between reserve and submit
// later tickets of the same queue cannot be rung, so fill promptly.
//
// No lost wake-up. Publishes, the lock's exchange and unlock, the scan's loads and the
// re-check are seq_cst, so they fall in one total order S. Let P publish ticket m: a scan
// that reads entry m after P in S sees it published, so it suffices that some scan after P
// reaches m. If P's try-lock succeeds, its own scan does. If it fails, the holder H unlocks
// after P's exchange in S and then re-checks the entry n where its scan stopped (n <= m, or
// m was rung already). If the re-check sees n published, H scans again, after P. If not,
// n's publish follows the re-check, hence P, and the scan that rings n reads n after that
// publish. Either way a scan after P starts at or below m; it reaches m unless it stops at
// an unpublished n' < m, and then the same step applies to n' (finitely many tickets lie
// below m). The one thread that still has to ring is always the lock holder or the
// publisher of the first unrung ticket, never nobody.

// Progress. With one ticket per thread at a time (reserve/submit/wait/release, then the
// next) every ticket completes, by induction on tickets: reserve(t) waits for the release of
// t - depth, whose owner has published it and waits only for the host; every ticket below t
// is eventually published, so t - depth is rung (no lost wake-up), served and released. A
// thread holding an unsubmitted ticket must not reserve another on the same queue: the new
// entry may wait for a release that needs the first ticket rung (a deadlock). Reserving up
// to `depth` tickets in a row is safe only where no other thread uses the queue.
//
// Cost. Every poll of a completion is a read of host memory across PCIe; where a warp
// fetches one line, let one lane submit and wait and the warp copy the staging buffer.
// A one-off run on an H200 (4 KiB lines from the page cache, 132 queues of depth 64, 8
// service threads, 17k-135k requests) gave 4-5 M requests/s (17-20 GB/s) with either style;
// 4 service threads gave 2.5-3.3 M/s. Not a benchmark; the backoff constants are untuned.
//
// Direct NVMe (a later backing; the same ticket/turn/ring logic, `ticket_ring`, is reused):
//   * the control region and the queues move to GPU memory pinned for peer DMA
//     (nvidia_p2p_get_pages), and the submission array becomes the NVMe SQ: entry i is the
//     64-byte NVMe command (opcode 0x02 read / 0x01 write, CID = i, SLBA = offset / block
//     size, NLB = length / block size - 1) whose PRP points at the cache line itself, so the
//     SSD DMAs into GPU memory and the staging buffer and the warp copy disappear;
//   * the ringer writes `rung % depth` to the SQ tail doorbell register in the SSD's BAR
//     (mapped into the GPU with cudaHostRegisterIoMemory) instead of the `tail` word; the
//     batching and the no-lost-wake-up argument are unchanged;
//   * completions arrive in the NVMe CQ in completion order, with CID and a phase bit, so
//     `wait` scans the CQ for (CID == i, phase of its lap) instead of checking tag == t + 1,
//     and the CQ head (and its doorbell) advance with the same mark-then-sweep lock as
//     `rung`; a nonzero NVMe status field maps to status::io_error. An SQ entry may be
//     reused once its command completed (the SSD has fetched it by then), so `release`
//     keeps its meaning.
#pragma once

#include <cuda/atomic>

#include <cstddef>
#include <cstdint>
#include <thread>
#include <type_traits>

#include "squeeze/core/backoff.hpp"
#include "squeeze/core/config.hpp"
#include "squeeze/core/status.hpp"

namespace squeeze::bam {

/// What a request does with its entry's staging buffer.
enum class io_op : std::uint32_t {
  read = 0,   ///< file -> staging (the host preads)
  write = 1,  ///< staging -> file (the host pwrites)
};

/// One storage request: `length` bytes at byte `offset` of the backing file.
struct io_request {
  io_op op = io_op::read;        ///< read or write
  std::uint32_t length = 0;      ///< bytes, at most the queue's line_bytes
  std::uint64_t offset = 0;      ///< file offset in bytes
  std::uint64_t command_id = 0;  ///< the caller's tag (e.g. the line index); in host errors
};

/// What the host reports for a request.
struct io_completion {
  status code = status::ok;  ///< ok, io_error (short read, failed syscall), invalid_argument
  std::uint32_t bytes = 0;   ///< bytes transferred (valid even on error)
  /// Whether the request succeeded.
  [[nodiscard]] SQUEEZE_HOST_DEVICE constexpr bool ok() const noexcept {
    return code == status::ok;
  }
};

/// Sizes and offsets of one queue's two regions (see the diagram above).
struct queue_layout {
  std::uint32_t depth = 0;       ///< entries per queue
  std::uint32_t line_bytes = 0;  ///< staging bytes per entry (a cache line)

  static constexpr std::size_t block_bytes = 128;    ///< header and control block size
  static constexpr std::size_t entry_bytes = 64;     ///< one submission or completion entry
  static constexpr std::size_t region_align = 4096;  ///< shared region and staging base
  static constexpr std::uint32_t max_depth = 65536;  ///< an NVMe queue's limit
  static constexpr std::uint32_t max_line_bytes = 1u << 30;  ///< the largest staging entry

  /// Whether depth and line_bytes are in range.
  [[nodiscard]] SQUEEZE_HOST_DEVICE constexpr bool valid() const noexcept {
    return depth > 0 && depth <= max_depth && line_bytes > 0 && line_bytes <= max_line_bytes;
  }
  /// x rounded up to a multiple of a.
  SQUEEZE_HOST_DEVICE static constexpr std::size_t round_up(std::size_t x, std::size_t a) noexcept {
    return (x + a - 1) / a * a;
  }
  // shared region (mapped host memory)
  /// Shared region: where the submission entries start.
  [[nodiscard]] SQUEEZE_HOST_DEVICE constexpr std::size_t submission_offset() const noexcept {
    return block_bytes;
  }
  /// Shared region: where the completion entries start.
  [[nodiscard]] SQUEEZE_HOST_DEVICE constexpr std::size_t completion_offset() const noexcept {
    return submission_offset() + std::size_t{depth} * entry_bytes;
  }
  /// Shared region: where the staging buffers start.
  [[nodiscard]] SQUEEZE_HOST_DEVICE constexpr std::size_t staging_offset() const noexcept {
    return round_up(completion_offset() + std::size_t{depth} * entry_bytes, region_align);
  }
  /// Bytes between two entries' staging buffers.
  [[nodiscard]] SQUEEZE_HOST_DEVICE constexpr std::size_t staging_stride() const noexcept {
    return round_up(line_bytes, block_bytes);
  }
  /// Bytes of one queue's shared region (a multiple of 4096).
  [[nodiscard]] SQUEEZE_HOST_DEVICE constexpr std::size_t shared_bytes() const noexcept {
    return round_up(staging_offset() + std::size_t{depth} * staging_stride(), region_align);
  }
  // control region (device memory)
  /// Control region: where the entries' turns start.
  [[nodiscard]] SQUEEZE_HOST_DEVICE constexpr std::size_t turns_offset() const noexcept {
    return block_bytes;
  }
  /// Bytes of one queue's control region (a multiple of 128; zero-filled at start).
  [[nodiscard]] SQUEEZE_HOST_DEVICE constexpr std::size_t control_bytes() const noexcept {
    return round_up(turns_offset() + std::size_t{depth} * sizeof(std::uint64_t), block_bytes);
  }
};

namespace detail {

/// Control block at the start of a queue's control region (device memory).
struct alignas(128) control_block {
  std::uint64_t next_ticket;  ///< fetch_add by submitters
  std::uint64_t rung;         ///< tickets [0, rung) are covered by the doorbell
  std::uint64_t rings;        ///< doorbell writes so far
  std::uint32_t lock;         ///< 1 while a thread advances `rung` and rings
};

/// Doorbell block at the start of a queue's shared region (mapped host memory).
struct alignas(128) doorbell_block {
  std::uint64_t tail;      ///< the doorbell: tickets [0, tail) are submitted (GPU writes)
  std::uint64_t rings;     ///< copy of control_block::rings, for the host's statistics
  std::uint64_t consumed;  ///< tickets [0, consumed) taken by the host (host writes)
};

/// A submission entry (GPU writes, host reads once the doorbell covers it).
struct alignas(64) submission_entry {
  std::uint64_t ticket;
  std::uint64_t offset;
  std::uint64_t command_id;
  std::uint32_t op;
  std::uint32_t length;
};

/// A completion entry (host writes, GPU reads once tag == ticket + 1).
struct alignas(64) completion_entry {
  std::uint64_t tag;
  std::uint32_t code;
  std::uint32_t bytes;
};

static_assert(sizeof(control_block) == queue_layout::block_bytes);
static_assert(sizeof(doorbell_block) == queue_layout::block_bytes);
static_assert(sizeof(submission_entry) == queue_layout::entry_bytes);
static_assert(sizeof(completion_entry) == queue_layout::entry_bytes);

template <class T>
using device_atomic = cuda::atomic_ref<T, cuda::thread_scope_device>;
template <class T>
using system_atomic = cuda::atomic_ref<T, cuda::thread_scope_system>;

}  // namespace detail

/// The transport-independent half of a queue: tickets, per-entry turns, and the in-order,
/// batched ring (steps 1, 3, 4 and 7 of the protocol). Works on a queue's control region;
/// the caller says what "ringing" writes (the `tail` word here; an NVMe doorbell register in
/// a direct-NVMe backing). Trivially copyable.
class ticket_ring {
 public:
  ticket_ring() = default;
  /// `control`: the queue's control region (layout.control_bytes(), zero-filled, device
  /// memory on a GPU).
  SQUEEZE_HOST_DEVICE ticket_ring(void* control, std::uint32_t depth) noexcept
      : control_{static_cast<detail::control_block*>(control)}, depth_{depth} {}

  /// Entries in the ring.
  [[nodiscard]] SQUEEZE_HOST_DEVICE std::uint32_t depth() const noexcept { return depth_; }
  /// The entry a ticket uses.
  [[nodiscard]] SQUEEZE_HOST_DEVICE std::uint32_t entry(std::uint64_t ticket) const noexcept {
    return static_cast<std::uint32_t>(ticket % depth_);
  }

  /// Step 1: takes the next ticket and waits until its entry is free for this lap.
  [[nodiscard]] SQUEEZE_HOST_DEVICE std::uint64_t reserve() const noexcept {
    const std::uint64_t t = detail::device_atomic<std::uint64_t>{control_->next_ticket}.fetch_add(
        1, cuda::memory_order_relaxed);
    const detail::device_atomic<std::uint64_t> turn{turns()[entry(t)]};
    core::backoff wait{2048};
    while (turn.load(cuda::memory_order_acquire) != 2 * lap(t)) wait.pause();
    return t;
  }

  /// Steps 3 and 4: publishes `ticket` (whose entry the caller has filled) and rings if
  /// this thread wins the lock: `ring(tail, rings)` is called inside the critical section
  /// with the new doorbell value and the count of rings so far, once per batch. Never blocks.
  template <class Ring>
  SQUEEZE_HOST_DEVICE void publish(std::uint64_t ticket, Ring&& ring) const noexcept {
#if SQUEEZE_DEVICE_PASS
    // The entry's plain stores to mapped memory reach the host before the doorbell does.
    cuda::atomic_thread_fence(cuda::memory_order_release, cuda::thread_scope_system);
#endif
    detail::device_atomic<std::uint64_t>{turns()[entry(ticket)]}.store(2 * lap(ticket) + 1,
                                                                       cuda::memory_order_seq_cst);
    advance(ring);
  }

  /// Step 7: frees `ticket`'s entry for ticket + depth.
  SQUEEZE_HOST_DEVICE void release(std::uint64_t ticket) const noexcept {
    detail::device_atomic<std::uint64_t>{turns()[entry(ticket)]}.store(2 * lap(ticket) + 2,
                                                                       cuda::memory_order_release);
  }

 private:
  [[nodiscard]] SQUEEZE_HOST_DEVICE std::uint64_t* turns() const noexcept {
    return reinterpret_cast<std::uint64_t*>(reinterpret_cast<std::byte*>(control_) +
                                            queue_layout::block_bytes);
  }
  [[nodiscard]] SQUEEZE_HOST_DEVICE std::uint64_t lap(std::uint64_t ticket) const noexcept {
    return ticket / depth_;
  }
  [[nodiscard]] SQUEEZE_HOST_DEVICE bool published(std::uint64_t ticket) const noexcept {
    return detail::device_atomic<std::uint64_t>{turns()[entry(ticket)]}.load(
               cuda::memory_order_seq_cst) == 2 * lap(ticket) + 1;
  }

  // Step 4. See "No lost wake-up" at the top of the file for why the re-check suffices.
  template <class Ring>
  SQUEEZE_HOST_DEVICE void advance(Ring& ring) const noexcept {
    const detail::device_atomic<std::uint32_t> lock{control_->lock};
    const detail::device_atomic<std::uint64_t> rung{control_->rung};
    for (;;) {
      if (lock.exchange(1u, cuda::memory_order_seq_cst) != 0u) return;  // the holder re-checks
      const std::uint64_t from = rung.load(cuda::memory_order_relaxed);
      std::uint64_t to = from;
      while (published(to)) ++to;  // stops within depth: entry `from` is at lap(from)
      if (to != from) {
        const detail::device_atomic<std::uint64_t> rings{control_->rings};
        const std::uint64_t count = rings.load(cuda::memory_order_relaxed) + 1;
        rings.store(count, cuda::memory_order_relaxed);
        ring(to, count);
        rung.store(to, cuda::memory_order_relaxed);
      }
      lock.store(0u, cuda::memory_order_seq_cst);
      if (!published(to)) return;  // a publish that raced with the scan: scan again
    }
  }

  detail::control_block* control_{nullptr};
  std::uint32_t depth_{0};
};

/// A GPU thread's view of one queue served by a host service (steps 1-7 above). Trivially
/// copyable; pass by value. All members are per-thread.
class queue_ref {
 public:
  queue_ref() = default;
  /// `control`: layout.control_bytes() of zero-filled device memory; `shared`: the device
  /// address of layout.shared_bytes() of zero-filled mapped host memory.
  SQUEEZE_HOST_DEVICE queue_ref(void* control, void* shared, queue_layout layout) noexcept
      : ring_{control, layout.depth}, shared_{static_cast<std::byte*>(shared)}, layout_{layout} {}

  /// The queue's layout.
  [[nodiscard]] SQUEEZE_HOST_DEVICE queue_layout layout() const noexcept { return layout_; }
  /// Entries in the queue.
  [[nodiscard]] SQUEEZE_HOST_DEVICE std::uint32_t depth() const noexcept { return layout_.depth; }
  /// Staging bytes per entry.
  [[nodiscard]] SQUEEZE_HOST_DEVICE std::uint32_t line_bytes() const noexcept {
    return layout_.line_bytes;
  }

  /// Takes a ticket and waits until its entry is free. Fill staging(ticket) for a write,
  /// then submit(ticket, request) promptly: later tickets cannot be rung before this one.
  [[nodiscard]] SQUEEZE_HOST_DEVICE std::uint64_t reserve() const noexcept {
    return ring_.reserve();
  }

  /// Writes the request into the ticket's entry, publishes it and rings the doorbell for
  /// every contiguous published entry (or leaves that to the thread holding the ring lock).
  /// Never blocks. `request.length` must not exceed line_bytes() (the host completes such a
  /// request with status::invalid_argument).
  SQUEEZE_HOST_DEVICE void submit(std::uint64_t ticket, const io_request& request) const noexcept {
    detail::submission_entry& e = submission(ticket);
    e.ticket = ticket;
    e.offset = request.offset;
    e.command_id = request.command_id;
    e.op = static_cast<std::uint32_t>(request.op);
    e.length = request.length;
    detail::doorbell_block* const bell = doorbell();
    ring_.publish(ticket, [bell](std::uint64_t tail, std::uint64_t rings) {
      detail::system_atomic<std::uint64_t>{bell->rings}.store(rings, cuda::memory_order_relaxed);
      detail::system_atomic<std::uint64_t>{bell->tail}.store(tail, cuda::memory_order_release);
    });
  }

  /// reserve() then submit(): for reads, whose staging buffer is filled by the host.
  [[nodiscard]] SQUEEZE_HOST_DEVICE std::uint64_t submit(const io_request& request) const noexcept {
    const std::uint64_t ticket = reserve();
    submit(ticket, request);
    return ticket;
  }

  /// The ticket's staging buffer (line_bytes() bytes, 128-byte aligned, mapped host memory):
  /// the data of a completed read; the caller fills it before submitting a write.
  [[nodiscard]] SQUEEZE_HOST_DEVICE std::byte* staging(std::uint64_t ticket) const noexcept {
    return shared_ + layout_.staging_offset() +
           std::size_t{ring_.entry(ticket)} * layout_.staging_stride();
  }

  /// True, with the completion in `out`, when the host has completed `ticket`.
  [[nodiscard]] SQUEEZE_HOST_DEVICE bool poll(std::uint64_t ticket,
                                              io_completion& out) const noexcept {
    detail::completion_entry& c = completion(ticket);
    if (detail::system_atomic<std::uint64_t>{c.tag}.load(cuda::memory_order_acquire) != ticket + 1)
      return false;
    out.code = static_cast<status>(c.code);
    out.bytes = c.bytes;
    return true;
  }

  /// Waits (bounded backoff) until the host completes `ticket`.
  [[nodiscard]] SQUEEZE_HOST_DEVICE io_completion wait(std::uint64_t ticket) const noexcept {
    io_completion out{};
    core::backoff wait{2048};
    while (!poll(ticket, out)) wait.pause();
    return out;
  }

  /// Frees the ticket's entry (after wait(), once the staging data is no longer needed).
  SQUEEZE_HOST_DEVICE void release(std::uint64_t ticket) const noexcept { ring_.release(ticket); }

 private:
  [[nodiscard]] SQUEEZE_HOST_DEVICE detail::doorbell_block* doorbell() const noexcept {
    return reinterpret_cast<detail::doorbell_block*>(shared_);
  }
  [[nodiscard]] SQUEEZE_HOST_DEVICE detail::submission_entry& submission(
      std::uint64_t ticket) const noexcept {
    return reinterpret_cast<detail::submission_entry*>(
        shared_ + layout_.submission_offset())[ring_.entry(ticket)];
  }
  [[nodiscard]] SQUEEZE_HOST_DEVICE detail::completion_entry& completion(
      std::uint64_t ticket) const noexcept {
    return reinterpret_cast<detail::completion_entry*>(
        shared_ + layout_.completion_offset())[ring_.entry(ticket)];
  }

  ticket_ring ring_{};
  std::byte* shared_{nullptr};
  queue_layout layout_{};
};

/// `count` queues of one layout in two contiguous allocations: queue k's control region at
/// control + k * control_bytes(), its shared region at shared + k * shared_bytes().
/// Trivially copyable; pass by value.
class queue_set_ref {
 public:
  queue_set_ref() = default;
  /// `count` queues of `layout` whose regions lie back to back from control and shared.
  SQUEEZE_HOST_DEVICE queue_set_ref(void* control, void* shared, std::uint32_t count,
                                    queue_layout layout) noexcept
      : control_{static_cast<std::byte*>(control)},
        shared_{static_cast<std::byte*>(shared)},
        count_{count},
        layout_{layout} {}

  /// The number of queues.
  [[nodiscard]] SQUEEZE_HOST_DEVICE std::uint32_t size() const noexcept { return count_; }
  /// The layout every queue has.
  [[nodiscard]] SQUEEZE_HOST_DEVICE queue_layout layout() const noexcept { return layout_; }
  /// Queue k (k < size()).
  [[nodiscard]] SQUEEZE_HOST_DEVICE queue_ref operator[](std::uint32_t k) const noexcept {
    return queue_ref{control_ + std::size_t{k} * layout_.control_bytes(),
                     shared_ + std::size_t{k} * layout_.shared_bytes(), layout_};
  }

 private:
  std::byte* control_{nullptr};
  std::byte* shared_{nullptr};
  std::uint32_t count_{0};
  queue_layout layout_{};
};

static_assert(std::is_trivially_copyable_v<ticket_ring>);
static_assert(std::is_trivially_copyable_v<queue_ref>);
static_assert(std::is_trivially_copyable_v<queue_set_ref>);

/// The host side of one queue (step 5): built on the *host* address of the queue's shared
/// region. One host thread serves a queue at a time; entries may complete in any order.
class queue_server {
 public:
  queue_server() = default;
  /// The server of the queue whose shared region is at `shared_host` (its host address).
  queue_server(void* shared_host, queue_layout layout) noexcept
      : shared_{static_cast<std::byte*>(shared_host)}, layout_{layout} {}

  /// The doorbell: tickets [0, doorbell()) have been submitted (acquire: their entries are
  /// visible).
  [[nodiscard]] std::uint64_t doorbell() const noexcept {
    return detail::system_atomic<std::uint64_t>{bell().tail}.load(cuda::memory_order_acquire);
  }
  /// How many times the doorbell was written (rings <= submissions; fewer means batching).
  [[nodiscard]] std::uint64_t rings() const noexcept {
    return detail::system_atomic<std::uint64_t>{bell().rings}.load(cuda::memory_order_relaxed);
  }
  /// Tickets [0, consumed()) have been taken by the host.
  [[nodiscard]] std::uint64_t consumed() const noexcept {
    return detail::system_atomic<std::uint64_t>{bell().consumed}.load(cuda::memory_order_relaxed);
  }
  /// Records that tickets [0, tickets) have been taken by the host.
  void set_consumed(std::uint64_t tickets) const noexcept {
    detail::system_atomic<std::uint64_t>{bell().consumed}.store(tickets,
                                                                cuda::memory_order_relaxed);
  }

  /// The request of a rung ticket (ticket < doorbell()). False when the entry holds another
  /// ticket, which the protocol rules out (a corrupted queue).
  [[nodiscard]] bool request(std::uint64_t ticket, io_request& out) const noexcept {
    const detail::submission_entry& e = submission(ticket);
    if (e.ticket != ticket) return false;
    out.op = static_cast<io_op>(e.op);
    out.length = e.length;
    out.offset = e.offset;
    out.command_id = e.command_id;
    return true;
  }

  /// The ticket's staging buffer, host address.
  [[nodiscard]] std::byte* staging(std::uint64_t ticket) const noexcept {
    return shared_ + layout_.staging_offset() + entry(ticket) * layout_.staging_stride();
  }

  /// Completes a rung ticket: the waiting thread sees `c` (and the staging data written
  /// before this call). The entry is the GPU's again afterwards: touch it no more.
  void complete(std::uint64_t ticket, io_completion c) const noexcept {
    detail::completion_entry& e = completion(ticket);
    e.code = static_cast<std::uint32_t>(c.code);
    e.bytes = c.bytes;
    detail::system_atomic<std::uint64_t>{e.tag}.store(ticket + 1, cuda::memory_order_release);
  }

  /// The queue's layout.
  [[nodiscard]] queue_layout layout() const noexcept { return layout_; }

 private:
  [[nodiscard]] std::size_t entry(std::uint64_t ticket) const noexcept {
    return static_cast<std::size_t>(ticket % layout_.depth);
  }
  [[nodiscard]] detail::doorbell_block& bell() const noexcept {
    return *reinterpret_cast<detail::doorbell_block*>(shared_);
  }
  [[nodiscard]] detail::submission_entry& submission(std::uint64_t ticket) const noexcept {
    return reinterpret_cast<detail::submission_entry*>(shared_ +
                                                       layout_.submission_offset())[entry(ticket)];
  }
  [[nodiscard]] detail::completion_entry& completion(std::uint64_t ticket) const noexcept {
    return reinterpret_cast<detail::completion_entry*>(shared_ +
                                                       layout_.completion_offset())[entry(ticket)];
  }

  std::byte* shared_{nullptr};
  queue_layout layout_{};
};

}  // namespace squeeze::bam
