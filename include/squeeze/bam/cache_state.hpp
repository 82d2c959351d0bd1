// SPDX-License-Identifier: Apache-2.0
// squeeze/bam/cache_state.hpp: the state machine of bam's software cache (host and device).
//
// The data behind a bam array is cut into lines of line_bytes (numbered 0..num_lines-1, the
// backing's order). The cache has num_slots slots of line_bytes each; the caller owns the slot
// storage (slot s lives at base + s * line_bytes). This header keeps only the metadata and
// changes it only with atomics (cuda::atomic_ref at device scope), so the same code runs in
// GPU threads and, in the tests, in std::threads. It never touches the slot data or the
// backing: acquire() says what to read and write, the caller does the I/O and reports back.
//
// Metadata, one allocation, all zero bytes in the initial state (cudaMemset(p, 0, bytes) or
// initialize_host_cache_state() builds an empty cache; see cache_state_layout):
//
//   hand                 uint64             the clock hand, a counter taken with fetch_add
//   slot word [slot]     uint64 x num_slots which line a slot holds, CLAIMED, REFERENCE
//   line word [line]     uint32 x num_lines state and pin count of a line, BY LINE NUMBER
//   slot_of   [line]     uint32 x num_lines the slot of a valid line, written before VALID
//
// line word (indexed by the data line, never by the slot):
//
//    31      30     29     28                                            0
//   +-------+------+-------+----------------------------------------------+
//   | VALID | BUSY | DIRTY |  pins: references held by callers (29 bits)  |
//   +-------+------+-------+----------------------------------------------+
//
//   VALID  the line is in slot slot_of[line]
//   BUSY   one thread owns the line's transition: a fetch (VALID clear), or an eviction or
//          write-back of a dirty line (VALID set). Nobody pins a BUSY line.
//   DIRTY  the copy in the slot is newer than the backing
//   pins   threads using the slot's data. A thread probing the line adds 1 with fetch_add and
//          takes it back at once when the line was not VALID and not BUSY, so the count may
//          hold such transient probes on any line in any state; every transition keeps them
//          (fetch_or / fetch_and / fetch_xor / fetch_sub of its own bits only), and the CASes
//          that need a count of exactly 0 fail on them and are retried or skipped.
//
// slot word:
//
//    63        62          61                                             0
//   +---------+-----------+------------------------------------------------+
//   | CLAIMED | REFERENCE |  owner: line + 1, or 0 when the slot is empty  |
//   +---------+-----------+------------------------------------------------+
//
//   CLAIMED    a thread is deciding about the slot (trying to evict its line) or filling it;
//              only the claimer changes the owner, so a line leaves a slot only through the
//              thread that claimed that slot. Other threads skip CLAIMED slots.
//   REFERENCE  set by every hit and by publish; the clock clears it instead of evicting
//              (second chance)
//
// Line states and transitions (pins omitted where they do not matter):
//
//                         acquire: miss, claims BUSY
//      +---------+  -------------------------------------->  +-------------------+
//      | INVALID |                                           | FETCHING          |
//      |  (0)    |  <--------------------------------------  | BUSY, pins >= 1   |
//      +---------+      abandon / cache_full (undo claim)    +-------------------+
//        ^     ^                                                       |  publish
//        |     |  evicted clean (CAS: VALID, pins 0 -> 0)              v
//        |     +-------------------------------------------  +-------------------+
//        |                                                   | VALID       pins  |
//        |                                                   |  --mark_dirty-->  |
//        |  finish_eviction                                  | VALID|DIRTY pins  |
//        |                                                   +-------------------+
//        |                                  evicted dirty:  |     ^  end_writeback (clean)
//        |       (CAS: VALID|DIRTY, pins 0 -> +BUSY)         |     |  cancel_writeback (dirty)
//        |                    begin_writeback (same CAS)     v     |  abandon_eviction (dirty)
//        |                                                   +-------------------+
//        +-------------------------------------------------  | VALID|DIRTY|BUSY  |
//                                                            | write-back running|
//                                                            +-------------------+
//
// Protocol (per thread; on the GPU a warp leader calls it for its warp):
//
//   r = acquire(line)
//     hit    (VALID, not BUSY): pins + 1 in the same fetch_add that reads the state, the
//            slot's REFERENCE bit set; use slot r.slot, then release(line).
//     busy   (someone fetches, evicts or writes back the line): take the probe back, wait
//            (bounded exponential backoff, __nanosleep on the GPU) until BUSY clears, retry.
//     miss   (not VALID, not BUSY): the probe's pin becomes the fetcher's pin and the line
//            turns BUSY (CAS), so exactly one thread fetches a missing line. It then takes a
//            slot by clock: hand.fetch_add(1) picks a slot; a CLAIMED slot is skipped, a
//            REFERENCE bit is cleared and the slot skipped (second chance), a slot whose
//            owner looks pinned or BUSY is skipped unclaimed; otherwise the slot is CLAIMED and
//            its owner checked again: an empty slot is taken, an owner that is VALID, not BUSY,
//            pins 0 is evicted by one CAS on its line word (a clean owner becomes INVALID, a
//            dirty one VALID|DIRTY|BUSY and comes back in r.writeback_line), anything else
//            un-claims the slot and the clock moves on. Returns r.must_fill with the slot
//            CLAIMED and the line BUSY.
//     sweep  after `eviction_rounds` rounds of 2 * num_slots probes without a victim (a thread
//            alone sweeps every slot twice per round; with other fetchers on the hand, hits
//            setting REFERENCE again and slots in transition, it may not), one pass over every
//            slot from the hand on, REFERENCE ignored, decides. Each slot is
//              free          empty, or its owner VALID, not BUSY, pins 0: taken as above;
//              in transition CLAIMED (another fetcher deciding or filling), its owner BUSY
//                            (a write-back or an eviction running) or not yet VALID (being
//                            published), or the slot word changed during the look;
//              pinned        its owner VALID, not BUSY, pins > 0, the slot unchanged around
//                            the look.
//            A free slot is taken. Some slot in transition: back to the clock after a backoff
//            (every transition ends without any pin being released: the thread that holds it
//            does not call acquire meanwhile, see the caller rules). Every slot pinned:
//     full   the claim is undone (line INVALID again, no slot held) and acquire returns
//            status::cache_full. So cache_full means that the pass saw every slot pinned, each
//            at the moment it looked at it; pins count the probes of try_acquire too, which
//            last a few instructions. Defined and without deadlock: acquire never waits for a
//            pin to drop, and a thread that finds only pins claims nothing, so threads that all
//            hold pins and all ask for more all get cache_full. The caller releases what it
//            holds and retries, or reports. The result carries a digest of the pins the sweep
//            saw, so a caller that retries can tell pins that come and go (progress) from
//            pins that stay (bam::warp_acquire reports only the second, after a while).
//
//   after a miss, the caller:
//     1. if r.writeback_line != no_line: writes the slot's data (still the victim's) to the
//        backing at that line, then finish_eviction(victim) (the victim turns INVALID; a
//        thread waiting for it then fetches the written data). If that write fails:
//        abandon_eviction(line, slot, victim) puts the victim back, VALID|DIRTY, and drops
//        the fetch of `line`; nothing is lost.
//     2. fills the slot from the backing at `line`, then publish(line, slot): slot_of[line]
//        is stored, the slot's owner set (REFERENCE set, CLAIMED cleared), and the line word
//        turns BUSY -> VALID with release order, so a thread that sees VALID sees the data
//        and slot_of. The fetcher still holds its pin: it reads or writes, then release().
//        If the read fails: abandon(line, slot) (after step 1 is finished): the slot turns
//        empty, the line INVALID, the error is the caller's to report; a later acquire
//        fetches again.
//
//   writes: mark_dirty(line) while holding a pin (before release); the data itself must be
//   written before release(line). A dirty line is written back when it is evicted (step 1)
//   or by a flush: begin_writeback(line) takes a VALID, DIRTY, unpinned line (BUSY), the
//   caller writes slot slot_of(line) to the backing, end_writeback(line) clears DIRTY and
//   BUSY (cancel_writeback(line) clears only BUSY when the write failed). A flush loops until
//   no line is dirty; a pinned line cannot be taken (release first). So no write is lost:
//   a dirty line leaves the cache only through a write-back the caller confirmed.
//
// Memory order: every change of a line word is an RMW, so the release of one thread and the
// acquire of the next always meet (release sequences): a reader's release() happens before
// the eviction CAS (acq_rel) that lets a fetcher overwrite the slot; publish (release) happens
// before a hit (acquire); a writer's release happens before the write-back of its data;
// finish_eviction (release) happens before the next fetch of the victim reads the backing.
// A GPU caller adds what this per-thread protocol cannot see:
//   - when several threads (a warp, a block) filled the slot, each of them makes its stores
//     visible before the leader calls publish: __syncwarp() / __syncthreads() preceded by
//     cuda::atomic_thread_fence(cuda::memory_order_release, cuda::thread_scope_device)
//     (or __threadfence()) in every writing thread;
//   - after a leader's hit or publish, the other threads synchronize with it (__syncwarp())
//     and issue an acquire fence before they touch the slot; before the leader's release(),
//     every thread that wrote the slot issues a release fence and the warp synchronizes
//     again, so that nobody still reads or writes the slot once its pin is gone;
//   - a backing written by one thread and read by another through other paths (DMA, a host
//     I/O service) needs that path's own completion ordering before finish_eviction /
//     end_writeback and before publish.
//
// Caller rules (breaking them is a hang or corruption, not a status):
//   - a thread that holds a fetch (BUSY from acquire), an eviction or a write-back does not
//     call acquire before it has published / abandoned / finished it: a waiter on that line
//     would wait for itself, and a miss on another line could wait in its sweep for the
//     transition this thread holds. Pins may be held (nobody waits for a pin). On the GPU,
//     coalesce the lanes that want one line first (__match_any_sync) so one leader acquires
//     it, and do not acquire a line for one lane while another lane of the same warp must
//     help fill a different line.
//   - at most 2^29 - 1 pins and probes at once on one line (far above the threads a GPU
//     keeps resident).
//   - publish / abandon / finish_eviction / release / mark_dirty / end_writeback only for
//     what acquire / begin_writeback gave this thread; no bounds checks there.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <thread>
#include <type_traits>

#include <cuda/atomic>

#include "squeeze/core/backoff.hpp"
#include "squeeze/core/config.hpp"
#include "squeeze/core/error.hpp"
#include "squeeze/core/status.hpp"

namespace squeeze::bam {

/// "No line": acquire_result::writeback_line when there is nothing to write back.
inline constexpr std::uint64_t no_line = ~std::uint64_t{0};
/// "No slot": acquire_result::slot when acquire failed.
inline constexpr std::uint32_t no_slot = ~std::uint32_t{0};

/// What acquire() tells its caller.
struct acquire_result {
  status st = status::ok;        ///< ok, cache_full, or out_of_bounds (line >= num_lines)
  std::uint32_t slot = no_slot;  ///< where the line is (ok), no_slot otherwise
  bool must_fill = false;        ///< the caller fetches the line and publishes (or abandons)
  std::uint64_t writeback_line = no_line;  ///< dirty victim in `slot` to write back first
  /// try_acquire only: the line was BUSY (another thread fetches, evicts or writes it back);
  /// nothing is held, try again later.
  bool busy = false;
  /// cache_full only: a digest of what the sweep saw (each slot's owner and its line word,
  /// pin count included). Two cache_full results with different digests mean that some pin
  /// was taken or dropped in between: the cache is busy, not stuck.
  std::uint64_t pinned_digest = 0;
};

/// A line word decoded (for tests, assertions and debugging; racy by nature).
struct line_state {
  bool valid = false;      ///< VALID: the line is in slot slot_of[line]
  bool busy = false;       ///< BUSY: one thread owns the line's transition
  bool dirty = false;      ///< DIRTY: the slot's copy is newer than the backing
  std::uint32_t pins = 0;  ///< references held by callers
};

/// A slot word decoded (for tests, assertions and debugging; racy by nature).
struct slot_state {
  std::uint64_t owner = no_line;  ///< the line the slot holds, or no_line when empty
  bool claimed = false;           ///< CLAIMED: a fetcher owns the slot
  bool referenced = false;        ///< REFERENCE: used since the clock last passed
};

/// Where the metadata arrays lie in one allocation of `bytes` bytes (every offset a multiple
/// of 128, the hand alone in its 128-byte segment). `of` validates the sizes.
struct cache_state_layout {
  /// Every array starts on a multiple of this many bytes.
  static constexpr std::uint64_t alignment = 128;
  /// Lines are numbered below 2^48 (the owner field would take 2^62 - 1; 2^48 keeps every
  /// byte count exact and is far beyond the metadata a GPU holds: 8 bytes a line).
  static constexpr std::uint64_t max_lines = std::uint64_t{1} << 48;
  /// Slot numbers fit 32 bits with one value left for no_slot.
  static constexpr std::uint64_t max_slots = no_slot;

  std::uint64_t num_lines = 0;       ///< lines of the data
  std::uint32_t num_slots = 0;       ///< slots of the cache
  std::uint64_t hand_offset = 0;     ///< the clock hand: uint64 x 1
  std::uint64_t slots_offset = 0;    ///< slot words: uint64 x num_slots
  std::uint64_t lines_offset = 0;    ///< line words: uint32 x num_lines
  std::uint64_t slot_of_offset = 0;  ///< slot_of: uint32 x num_lines
  std::uint64_t bytes = 0;           ///< the whole allocation

  /// Throws invalid_argument unless 1 <= num_lines <= max_lines and 1 <= num_slots <=
  /// max_slots.
  static cache_state_layout of(std::uint64_t num_lines, std::uint64_t num_slots) {
    SQUEEZE_EXPECTS(num_lines >= 1, "bam::cache_state: the data needs at least one line");
    SQUEEZE_EXPECTS(num_lines <= max_lines, "bam::cache_state: " + std::to_string(num_lines) +
                                                " lines; at most 2^48 are supported");
    SQUEEZE_EXPECTS(num_slots >= 1, "bam::cache_state: the cache needs at least one slot");
    SQUEEZE_EXPECTS(num_slots <= max_slots,
                    "bam::cache_state: " + std::to_string(num_slots) +
                        " slots; slot numbers must fit 32 bits (at most 2^32 - 1 slots)");
    const auto round_up = [](std::uint64_t b) {
      return (b + alignment - 1) / alignment * alignment;
    };
    cache_state_layout l;
    l.num_lines = num_lines;
    l.num_slots = static_cast<std::uint32_t>(num_slots);
    l.hand_offset = 0;
    l.slots_offset = alignment;
    l.lines_offset = l.slots_offset + round_up(8 * num_slots);
    l.slot_of_offset = l.lines_offset + round_up(4 * num_lines);
    l.bytes = l.slot_of_offset + round_up(4 * num_lines);
    return l;
  }
};

/// The cache's metadata as a view: trivially copyable, passed by value to kernels. Every
/// member function is per-thread and safe to call from any number of threads at once under
/// the protocol above. Built on the host by the constructor, which validates.
class cache_state_ref {
 public:
  // line word
  static constexpr std::uint32_t valid_bit = std::uint32_t{1} << 31;  ///< line word: VALID
  static constexpr std::uint32_t busy_bit = std::uint32_t{1} << 30;   ///< line word: BUSY
  static constexpr std::uint32_t dirty_bit = std::uint32_t{1} << 29;  ///< line word: DIRTY
  static constexpr std::uint32_t pin_mask = dirty_bit - 1;            ///< line word: pins
  // slot word
  static constexpr std::uint64_t claimed_bit = std::uint64_t{1} << 63;    ///< slot word: CLAIMED
  static constexpr std::uint64_t reference_bit = std::uint64_t{1} << 62;  ///< slot word: REFERENCE
  static constexpr std::uint64_t owner_mask = reference_bit - 1;  ///< slot word: the line held
  /// Rounds of 2 * num_slots clock probes before a sweep over every slot decides (a victim,
  /// cache_full when every slot is pinned, or more rounds while some slot is in transition).
  static constexpr std::uint32_t default_eviction_rounds = 4;

  cache_state_ref() = default;

  /// A view of metadata placed in `storage` (cache_state_layout::of(num_lines,
  /// num_slots).bytes bytes, 8-byte aligned, 128 recommended; host or device memory; all
  /// zero bytes for an empty cache). Host only: throws invalid_argument for bad sizes, a null
  /// or misaligned `storage`, or eviction_rounds == 0.
  cache_state_ref(void* storage, std::uint64_t num_lines, std::uint64_t num_slots,
                  std::uint32_t eviction_rounds = default_eviction_rounds) {
    const cache_state_layout l = cache_state_layout::of(num_lines, num_slots);
    SQUEEZE_EXPECTS(storage != nullptr, "bam::cache_state: the metadata storage is null");
    SQUEEZE_EXPECTS(reinterpret_cast<std::uintptr_t>(storage) % 8 == 0,
                    "bam::cache_state: the metadata storage must be 8-byte aligned");
    SQUEEZE_EXPECTS(eviction_rounds >= 1, "bam::cache_state: eviction_rounds must be at least 1");
    auto* base = static_cast<std::byte*>(storage);
    hand_ = reinterpret_cast<std::uint64_t*>(base + l.hand_offset);
    slots_ = reinterpret_cast<std::uint64_t*>(base + l.slots_offset);
    lines_ = reinterpret_cast<std::uint32_t*>(base + l.lines_offset);
    slot_of_ = reinterpret_cast<std::uint32_t*>(base + l.slot_of_offset);
    num_lines_ = l.num_lines;
    num_slots_ = l.num_slots;
    eviction_rounds_ = eviction_rounds;
  }

  /// Lines of the data.
  SQUEEZE_HOST_DEVICE std::uint64_t num_lines() const { return num_lines_; }
  /// Slots of the cache.
  SQUEEZE_HOST_DEVICE std::uint32_t num_slots() const { return num_slots_; }
  /// Clock rounds before a sweep decides (default_eviction_rounds by default).
  SQUEEZE_HOST_DEVICE std::uint32_t eviction_rounds() const { return eviction_rounds_; }

  /// Pins `line` (hit), or makes this thread its fetcher (must_fill, with a claimed slot and
  /// maybe a dirty victim to write back first), or returns cache_full (every slot seen
  /// pinned) / out_of_bounds with nothing held. Waits while another thread fetches, evicts
  /// or writes back the line, and on a miss while no slot is free and some slot is in
  /// transition; never for a pin.
  [[nodiscard]] SQUEEZE_HOST_DEVICE acquire_result acquire(std::uint64_t line) const {
    core::backoff wait;
    for (;;) {
      const acquire_result r = try_acquire(line);
      if (!r.busy) return r;
      while (line_word(line).load(cuda::std::memory_order_relaxed) & busy_bit) wait.pause();
    }
  }

  /// acquire() without the wait: when the line is BUSY, returns at once with r.busy set and
  /// nothing held. For callers that must not spin while holding a fetch of their own (a warp
  /// whose lanes fetch several lines together: a lane waiting inside acquire for a line that
  /// another warp fetches, while that warp waits for a line this warp fetches, would never
  /// finish).
  [[nodiscard]] SQUEEZE_HOST_DEVICE acquire_result try_acquire(std::uint64_t line) const {
    acquire_result r;
    if (line >= num_lines_) {
      r.st = status::out_of_bounds;
      return r;
    }
    auto word = line_word(line);
    // One RMW both pins and reads the state: a line seen VALID and not BUSY here cannot be
    // evicted until release(), because an eviction needs pins == 0 in the same word.
    const std::uint32_t before = word.fetch_add(1, cuda::std::memory_order_acquire);
    if ((before & (valid_bit | busy_bit)) == valid_bit) {
      r.slot = slot_of_[line];
      touch(r.slot);
      return r;
    }
    if ((before & (valid_bit | busy_bit)) == 0) {
      // Missing and nobody fetches it: turn the probe's pin into the fetcher's.
      std::uint32_t current = before + 1;
      while ((current & (valid_bit | busy_bit)) == 0) {
        if (word.compare_exchange_weak(current, current | busy_bit, cuda::std::memory_order_acq_rel,
                                       cuda::std::memory_order_relaxed)) {
          return fetch(line);
        }
      }
    }
    word.fetch_sub(1, cuda::std::memory_order_relaxed);  // take the probe back
    r.busy = true;
    return r;
  }

  /// The slot of `line` is filled: stores slot_of, sets the slot's owner (REFERENCE set,
  /// CLAIMED cleared), turns the line BUSY -> VALID with release order. The fetcher keeps
  /// its pin (release() it when done). GPU: see the header comment for multi-thread fills.
  SQUEEZE_HOST_DEVICE void publish(std::uint64_t line, std::uint32_t slot) const {
    slot_of_[line] = slot;
    slot_word(slot).store((line + 1) | reference_bit, cuda::std::memory_order_release);
    line_word(line).fetch_xor(valid_bit | busy_bit, cuda::std::memory_order_release);
  }

  /// The fetch of `line` into `slot` failed (and any victim's write-back is finished): the
  /// slot turns empty, the line INVALID, the fetcher's pin is dropped.
  SQUEEZE_HOST_DEVICE void abandon(std::uint64_t line, std::uint32_t slot) const {
    slot_word(slot).store(0, cuda::std::memory_order_release);
    line_word(line).fetch_sub(busy_bit + 1, cuda::std::memory_order_release);
  }

  /// The write-back of the dirty `victim` failed: the victim stays in `slot`, VALID|DIRTY,
  /// and the fetch of `line` is dropped as by abandon. Call it before the slot is overwritten.
  SQUEEZE_HOST_DEVICE void abandon_eviction(std::uint64_t line, std::uint32_t slot,
                                            std::uint64_t victim) const {
    slot_word(slot).store((victim + 1) | reference_bit, cuda::std::memory_order_release);
    line_word(victim).fetch_and(~busy_bit, cuda::std::memory_order_release);
    line_word(line).fetch_sub(busy_bit + 1, cuda::std::memory_order_release);
  }

  /// The dirty victim acquire() returned is written to the backing: it turns INVALID.
  SQUEEZE_HOST_DEVICE void finish_eviction(std::uint64_t victim) const {
    line_word(victim).fetch_and(~(valid_bit | busy_bit | dirty_bit),
                                cuda::std::memory_order_release);
  }

  /// Drops one pin taken by acquire(). Every read and write of the slot comes before it.
  SQUEEZE_HOST_DEVICE void release(std::uint64_t line) const {
    line_word(line).fetch_sub(1, cuda::std::memory_order_release);
  }

  /// The caller (holding a pin on `line`) has written or will write the slot before release.
  SQUEEZE_HOST_DEVICE void mark_dirty(std::uint64_t line) const {
    line_word(line).fetch_or(dirty_bit, cuda::std::memory_order_relaxed);
  }

  /// Takes `line` for a write-back when it is VALID, DIRTY, not BUSY and unpinned (it turns
  /// BUSY; the caller writes slot_of(line) to the backing, then end_writeback or
  /// cancel_writeback). False otherwise (clean, absent, pinned, busy, or out of range): a
  /// flush retries a line that is still dirty later.
  [[nodiscard]] SQUEEZE_HOST_DEVICE bool begin_writeback(std::uint64_t line) const {
    if (line >= num_lines_) return false;
    auto word = line_word(line);
    std::uint32_t s = word.load(cuda::std::memory_order_relaxed);
    if ((s & (valid_bit | busy_bit | dirty_bit | pin_mask)) != (valid_bit | dirty_bit)) {
      return false;
    }
    return word.compare_exchange_strong(s, s | busy_bit, cuda::std::memory_order_acquire,
                                        cuda::std::memory_order_relaxed);
  }

  /// The write-back begun by begin_writeback succeeded: DIRTY and BUSY clear, still VALID.
  SQUEEZE_HOST_DEVICE void end_writeback(std::uint64_t line) const {
    line_word(line).fetch_and(~(dirty_bit | busy_bit), cuda::std::memory_order_release);
  }

  /// The write-back begun by begin_writeback failed: BUSY clears, the line stays DIRTY.
  SQUEEZE_HOST_DEVICE void cancel_writeback(std::uint64_t line) const {
    line_word(line).fetch_and(~busy_bit, cuda::std::memory_order_release);
  }

  /// The slot of `line`; meaningful while the caller holds a pin on it or its write-back.
  SQUEEZE_HOST_DEVICE std::uint32_t slot_of(std::uint64_t line) const { return slot_of_[line]; }

  /// The line word of `line`, decoded.
  SQUEEZE_HOST_DEVICE line_state state(std::uint64_t line) const {
    const std::uint32_t w = line_word(line).load(cuda::std::memory_order_acquire);
    line_state s;
    s.valid = (w & valid_bit) != 0;
    s.busy = (w & busy_bit) != 0;
    s.dirty = (w & dirty_bit) != 0;
    s.pins = w & pin_mask;
    return s;
  }

  /// The slot word of `slot`, decoded.
  SQUEEZE_HOST_DEVICE slot_state slot(std::uint32_t slot) const {
    const std::uint64_t w = slot_word(slot).load(cuda::std::memory_order_acquire);
    slot_state s;
    s.owner = (w & owner_mask) == 0 ? no_line : (w & owner_mask) - 1;
    s.claimed = (w & claimed_bit) != 0;
    s.referenced = (w & reference_bit) != 0;
    return s;
  }

 private:
  using line_atomic = cuda::atomic_ref<std::uint32_t, cuda::thread_scope_device>;
  using slot_atomic = cuda::atomic_ref<std::uint64_t, cuda::thread_scope_device>;

  SQUEEZE_HOST_DEVICE line_atomic line_word(std::uint64_t line) const {
    return line_atomic{lines_[line]};
  }
  SQUEEZE_HOST_DEVICE slot_atomic slot_word(std::uint32_t slot) const {
    return slot_atomic{slots_[slot]};
  }

  /// Sets the slot's REFERENCE bit (second chance) unless it is set already.
  SQUEEZE_HOST_DEVICE void touch(std::uint32_t slot) const {
    auto w = slot_word(slot);
    if ((w.load(cuda::std::memory_order_relaxed) & reference_bit) == 0) {
      w.fetch_or(reference_bit, cuda::std::memory_order_relaxed);
    }
  }

  /// What one look at a slot found.
  enum class slot_verdict : std::uint8_t {
    taken,          ///< this thread claimed it (r says for what)
    pinned,         ///< its owner is VALID, not BUSY, with pins > 0
    in_transition,  ///< claimed, being published, written back or evicted, or changing hands
  };

  /// This thread holds `line` BUSY with one pin: find it a slot, or undo when every slot is
  /// pinned. Clock rounds first; when they find no victim, a sweep over every slot decides.
  SQUEEZE_HOST_DEVICE acquire_result fetch(std::uint64_t line) const {
    acquire_result r;
    cuda::atomic_ref<std::uint64_t, cuda::thread_scope_device> hand{*hand_};
    const std::uint64_t probes = 2 * std::uint64_t{num_slots_};
    core::backoff wait;
    for (;;) {
      for (std::uint32_t round = 0; round < eviction_rounds_; ++round) {
        if (round > 0) wait.pause();
        for (std::uint64_t probe = 0; probe < probes; ++probe) {
          const auto s = static_cast<std::uint32_t>(
              hand.fetch_add(1, cuda::std::memory_order_relaxed) % num_slots_);
          auto sw = slot_word(s);
          std::uint64_t w = sw.load(cuda::std::memory_order_relaxed);
          if (w & claimed_bit) continue;  // another thread is deciding about it or filling it
          if (w & reference_bit) {        // second chance; a CAS so a claimed word is untouched
            sw.compare_exchange_strong(w, w & ~reference_bit, cuda::std::memory_order_relaxed,
                                       cuda::std::memory_order_relaxed);
            continue;
          }
          if (try_take(s, w, r) == slot_verdict::taken) return r;
        }
      }
      std::uint64_t digest = 0;
      const slot_verdict v = sweep(r, digest);
      if (v == slot_verdict::taken) return r;
      if (v == slot_verdict::pinned) {
        r.pinned_digest = digest;
        break;
      }
      wait.pause();  // some slot is in transition: it ends without any pin being released
    }
    line_word(line).fetch_sub(busy_bit + 1, cuda::std::memory_order_release);
    r.st = status::cache_full;
    return r;
  }

  /// One look at every slot, from the hand on, REFERENCE bits ignored: takes the first slot
  /// that is empty or holds an unpinned line; otherwise `pinned` when every slot was seen
  /// pinned (`digest`: a sum over the slots of a hash of the owner's line number and line
  /// word, whatever order the sweep took), `in_transition` when some slot was not.
  SQUEEZE_HOST_DEVICE slot_verdict sweep(acquire_result& r, std::uint64_t& digest) const {
    const std::uint64_t start =
        cuda::atomic_ref<std::uint64_t, cuda::thread_scope_device>{*hand_}.load(
            cuda::std::memory_order_relaxed);
    slot_verdict verdict = slot_verdict::pinned;
    for (std::uint32_t i = 0; i < num_slots_; ++i) {
      const auto s = static_cast<std::uint32_t>((start + i) % num_slots_);
      const std::uint64_t w = slot_word(s).load(cuda::std::memory_order_relaxed);
      const slot_verdict v =
          (w & claimed_bit) != 0 ? slot_verdict::in_transition : try_take(s, w, r);
      if (v == slot_verdict::taken) return v;
      if (v == slot_verdict::in_transition) verdict = v;
      if (verdict == slot_verdict::pinned) {
        const std::uint64_t owner = w & owner_mask;  // pinned: an owner, so owner >= 1
        const std::uint32_t word = line_word(owner - 1).load(cuda::std::memory_order_relaxed);
        const std::uint64_t x = (owner << 32 | word) * 0x9e3779b97f4a7c15ull;
        digest += x ^ x >> 31;
      }
    }
    return verdict;
  }

  /// Slot `s` was read as `w`, not CLAIMED. Takes it when it is empty or its owner is VALID,
  /// not BUSY and unpinned: claims it, then evicts the owner in one CAS on its line word that
  /// fails on any pin or probe (r.slot, r.must_fill, r.writeback_line set). Otherwise says
  /// why not. A slot whose owner looks pinned is never claimed, so threads that only find
  /// pins leave no CLAIMED bit behind for each other to mistake for a transition.
  SQUEEZE_HOST_DEVICE slot_verdict try_take(std::uint32_t s, std::uint64_t w,
                                            acquire_result& r) const {
    auto sw = slot_word(s);
    const std::uint64_t owner = w & owner_mask;
    if (owner != 0) {
      const std::uint32_t v = line_word(owner - 1).load(cuda::std::memory_order_relaxed);
      if ((v & (valid_bit | busy_bit)) != valid_bit) return slot_verdict::in_transition;
      if ((v & pin_mask) != 0) {
        // Pinned, provided the slot still held that owner, unclaimed, around the look.
        const std::uint64_t again = sw.load(cuda::std::memory_order_relaxed);
        return (again & (claimed_bit | owner_mask)) == owner ? slot_verdict::pinned
                                                             : slot_verdict::in_transition;
      }
    }
    // Claim it; a REFERENCE bit that a hit sets meanwhile does not stop us, anything else does.
    while (!sw.compare_exchange_weak(w, w | claimed_bit, cuda::std::memory_order_acquire,
                                     cuda::std::memory_order_relaxed)) {
      if ((w & (claimed_bit | owner_mask)) != owner) return slot_verdict::in_transition;
    }
    if (owner == 0) {  // empty
      r.slot = s;
      r.must_fill = true;
      return slot_verdict::taken;
    }
    // We hold the slot's claim, so its owner cannot leave it under us (no ABA): evict it
    // when it is VALID, not BUSY and unpinned. A failed CAS means the word changed (a probe,
    // a pin, a mark_dirty): look again.
    const std::uint64_t victim = owner - 1;
    auto vw = line_word(victim);
    std::uint32_t v = vw.load(cuda::std::memory_order_relaxed);
    while ((v & (valid_bit | busy_bit | pin_mask)) == valid_bit) {
      const bool dirty = (v & dirty_bit) != 0;
      if (vw.compare_exchange_weak(v, dirty ? (v | busy_bit) : 0u, cuda::std::memory_order_acq_rel,
                                   cuda::std::memory_order_relaxed)) {
        r.slot = s;
        r.must_fill = true;
        if (dirty) r.writeback_line = victim;
        return slot_verdict::taken;
      }
    }
    sw.fetch_and(~claimed_bit, cuda::std::memory_order_release);  // keep a REFERENCE set meanwhile
    return (v & (valid_bit | busy_bit)) == valid_bit ? slot_verdict::pinned
                                                     : slot_verdict::in_transition;
  }

  std::uint64_t* hand_ = nullptr;     // [1]
  std::uint64_t* slots_ = nullptr;    // [num_slots] slot words
  std::uint32_t* lines_ = nullptr;    // [num_lines] line words
  std::uint32_t* slot_of_ = nullptr;  // [num_lines]
  std::uint64_t num_lines_ = 0;
  std::uint32_t num_slots_ = 0;
  std::uint32_t eviction_rounds_ = default_eviction_rounds;
};

static_assert(std::is_trivially_copyable_v<cache_state_ref>, "kernels take the ref by value");

/// Writes the empty cache (all zero bytes) into host memory `storage` of
/// cache_state_layout::of(num_lines, num_slots).bytes bytes; validates as the ref does. For
/// device memory, cudaMemset(storage, 0, bytes) does the same.
inline void initialize_host_cache_state(void* storage, std::uint64_t num_lines,
                                        std::uint64_t num_slots) {
  const cache_state_layout l = cache_state_layout::of(num_lines, num_slots);
  SQUEEZE_EXPECTS(storage != nullptr, "bam::cache_state: the metadata storage is null");
  std::memset(storage, 0, l.bytes);
}

/// Cache metadata in host memory (tests, host-side simulations): allocates, zeroes, and
/// hands out the ref. Move-only; reset() only while no thread uses the ref.
class host_cache_state {
 public:
  /// An empty cache of `num_slots` slots over `num_lines` lines; throws invalid_argument for
  /// sizes cache_state_layout::of refuses.
  host_cache_state(std::uint64_t num_lines, std::uint64_t num_slots,
                   std::uint32_t eviction_rounds = cache_state_ref::default_eviction_rounds)
      : layout_{cache_state_layout::of(num_lines, num_slots)},
        storage_{static_cast<std::byte*>(
            ::operator new (layout_.bytes, std::align_val_t{cache_state_layout::alignment}))} {
    initialize_host_cache_state(storage_.get(), num_lines, num_slots);
    ref_ = cache_state_ref{storage_.get(), num_lines, num_slots, eviction_rounds};
  }

  /// The view the threads share.
  [[nodiscard]] cache_state_ref ref() const { return ref_; }
  /// Where the arrays lie in data().
  [[nodiscard]] const cache_state_layout& layout() const { return layout_; }
  /// The raw metadata bytes (layout().bytes of them).
  [[nodiscard]] const std::byte* data() const { return storage_.get(); }
  /// Back to the empty cache.
  void reset() {
    initialize_host_cache_state(storage_.get(), layout_.num_lines, layout_.num_slots);
  }

 private:
  struct aligned_delete {
    void operator()(std::byte* p) const {
      ::operator delete (p, std::align_val_t{cache_state_layout::alignment});
    }
  };
  cache_state_layout layout_;
  std::unique_ptr<std::byte, aligned_delete> storage_;
  cache_state_ref ref_;
};

}  // namespace squeeze::bam
