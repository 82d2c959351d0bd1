// SPDX-License-Identifier: Apache-2.0
// bam's cache state machine on the host: hits and misses, clock order with second chance,
// dirty victims, abandon, cache_full, flush, validation, and std::threads hammering a tiny
// cache over a simulated backing (no lost write, every read exact, with injected failures).
// cache_full only when every slot is pinned: a slot being filled, evicted or written back is
// waited for; threads that all hold pins all get cache_full; many more threads than slots
// with fewer pins than slots never see it.
#include <squeeze/bam/cache_state.hpp>
#include <squeeze/core/backoff.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace bam = squeeze::bam;
using squeeze::status;

namespace {

// Fills `line` into a fresh cache position: acquire must miss without a victim to write back.
std::uint32_t fill_clean(const bam::cache_state_ref& cs, std::uint64_t line) {
  const bam::acquire_result r = cs.acquire(line);
  EXPECT_EQ(r.st, status::ok);
  EXPECT_TRUE(r.must_fill);
  EXPECT_EQ(r.writeback_line, bam::no_line);
  if (r.st == status::ok) cs.publish(line, r.slot);
  return r.slot;
}

// Every line word and slot word back to the empty state (the hand may have moved).
void expect_metadata_empty(const bam::cache_state_ref& cs) {
  for (std::uint64_t line = 0; line < cs.num_lines(); ++line) {
    const bam::line_state s = cs.state(line);
    ASSERT_FALSE(s.valid || s.busy || s.dirty || s.pins != 0) << "line " << line;
  }
  for (std::uint32_t slot = 0; slot < cs.num_slots(); ++slot) {
    const bam::slot_state s = cs.slot(slot);
    ASSERT_EQ(s.owner, bam::no_line) << "slot " << slot;
    ASSERT_FALSE(s.claimed || s.referenced) << "slot " << slot;
  }
}

// After every thread stopped: nothing pinned, busy or claimed; each valid line sits in a slot
// that names it as owner, and no two valid lines share a slot.
void expect_quiescent_and_consistent(const bam::cache_state_ref& cs) {
  std::set<std::uint32_t> used;
  for (std::uint64_t line = 0; line < cs.num_lines(); ++line) {
    const bam::line_state s = cs.state(line);
    ASSERT_EQ(s.pins, 0u) << "line " << line;
    ASSERT_FALSE(s.busy) << "line " << line;
    if (!s.valid) {
      ASSERT_FALSE(s.dirty) << "line " << line;
      continue;
    }
    const std::uint32_t slot = cs.slot_of(line);
    ASSERT_LT(slot, cs.num_slots()) << "line " << line;
    ASSERT_EQ(cs.slot(slot).owner, line) << "line " << line << " slot " << slot;
    ASSERT_TRUE(used.insert(slot).second) << "two valid lines in slot " << slot;
  }
  for (std::uint32_t slot = 0; slot < cs.num_slots(); ++slot) {
    const bam::slot_state s = cs.slot(slot);
    ASSERT_FALSE(s.claimed) << "slot " << slot;
    if (s.owner != bam::no_line) {
      ASSERT_TRUE(cs.state(s.owner).valid) << "slot " << slot << " names an invalid line";
    }
  }
}

// acquire(line) on a thread of its own, so that a test can see it wait, and for what.
class pending_acquire {
 public:
  pending_acquire(const bam::cache_state_ref& cs, std::uint64_t line)
      : thread_{[this, cs, line] {
          result_ = cs.acquire(line);
          done_.store(true);
        }} {}
  pending_acquire(const pending_acquire&) = delete;
  pending_acquire& operator=(const pending_acquire&) = delete;
  ~pending_acquire() {
    if (thread_.joinable()) thread_.join();
  }

  // True when acquire has not returned `ms` milliseconds from now (so it waits for something
  // the test holds; it may also just not have run yet, so this alone proves nothing).
  [[nodiscard]] bool waiting_after(int ms) const {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    return !done_.load();
  }

  // The result, once acquire returns; a hang aborts with a message instead of hanging.
  bam::acquire_result get() {
    const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!done_.load()) {
      if (std::chrono::steady_clock::now() > limit) {
        std::fprintf(stderr, "acquire did not return within 60 s\n");
        std::abort();
      }
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    thread_.join();
    return result_;
  }

 private:
  std::atomic<bool> done_{false};
  bam::acquire_result result_;
  std::thread thread_;  // last: starts once the members above exist
};

}  // namespace

// ---- single thread ------------------------------------------------------------------------

TEST(BamCacheState, InitialStateIsAllZeroBytes) {
  bam::host_cache_state owner{100, 7};
  const bam::cache_state_layout& l = owner.layout();
  EXPECT_EQ(l.hand_offset % 128, 0u);
  EXPECT_EQ(l.slots_offset % 128, 0u);
  EXPECT_EQ(l.lines_offset % 128, 0u);
  EXPECT_EQ(l.slot_of_offset % 128, 0u);
  EXPECT_GE(l.slots_offset, 8u);
  EXPECT_GE(l.lines_offset, l.slots_offset + 8 * 7);
  EXPECT_GE(l.slot_of_offset, l.lines_offset + 4 * 100);
  EXPECT_GE(l.bytes, l.slot_of_offset + 4 * 100);
  for (std::uint64_t i = 0; i < l.bytes; ++i) ASSERT_EQ(owner.data()[i], std::byte{0}) << i;
  expect_metadata_empty(owner.ref());

  // A buffer zeroed by anyone (as cudaMemset does) is an empty cache as well.
  std::vector<std::uint64_t> raw(l.bytes / 8, ~std::uint64_t{0});
  bam::initialize_host_cache_state(raw.data(), 100, 7);
  const bam::cache_state_ref cs{raw.data(), 100, 7};
  expect_metadata_empty(cs);
  EXPECT_EQ(fill_clean(cs, 99), 0u);
  cs.release(99);
}

TEST(BamCacheState, MissThenHitAndPins) {
  bam::host_cache_state owner{64, 4};
  const bam::cache_state_ref cs = owner.ref();

  const bam::acquire_result miss = cs.acquire(5);
  ASSERT_EQ(miss.st, status::ok);
  ASSERT_TRUE(miss.must_fill);
  ASSERT_EQ(miss.writeback_line, bam::no_line);
  ASSERT_LT(miss.slot, 4u);
  bam::line_state s = cs.state(5);
  EXPECT_TRUE(s.busy);
  EXPECT_FALSE(s.valid);
  EXPECT_EQ(s.pins, 1u);
  EXPECT_TRUE(cs.slot(miss.slot).claimed);

  cs.publish(5, miss.slot);
  s = cs.state(5);
  EXPECT_TRUE(s.valid);
  EXPECT_FALSE(s.busy);
  EXPECT_EQ(s.pins, 1u);  // the fetcher still holds its pin
  EXPECT_EQ(cs.slot_of(5), miss.slot);
  EXPECT_EQ(cs.slot(miss.slot).owner, 5u);
  EXPECT_FALSE(cs.slot(miss.slot).claimed);
  EXPECT_TRUE(cs.slot(miss.slot).referenced);

  const bam::acquire_result hit = cs.acquire(5);
  ASSERT_EQ(hit.st, status::ok);
  EXPECT_FALSE(hit.must_fill);
  EXPECT_EQ(hit.slot, miss.slot);
  EXPECT_EQ(hit.writeback_line, bam::no_line);
  EXPECT_EQ(cs.state(5).pins, 2u);
  cs.release(5);
  cs.release(5);
  EXPECT_EQ(cs.state(5).pins, 0u);
  EXPECT_TRUE(cs.state(5).valid);

  // Another line goes to another slot while a free one exists.
  const std::uint32_t other = fill_clean(cs, 6);
  EXPECT_NE(other, miss.slot);
  cs.release(6);
  expect_quiescent_and_consistent(cs);
}

TEST(BamCacheState, TryAcquireReportsABusyLineAndHoldsNothing) {
  bam::host_cache_state owner{64, 4};
  const bam::cache_state_ref cs = owner.ref();
  const bam::acquire_result miss = cs.try_acquire(9);
  ASSERT_EQ(miss.st, status::ok);
  ASSERT_TRUE(miss.must_fill);
  EXPECT_FALSE(miss.busy);
  // While it is being fetched, a second try returns at once, busy, with no pin taken.
  const bam::acquire_result second = cs.try_acquire(9);
  EXPECT_TRUE(second.busy);
  EXPECT_EQ(second.st, status::ok);
  EXPECT_EQ(second.slot, bam::no_slot);
  EXPECT_FALSE(second.must_fill);
  EXPECT_EQ(cs.state(9).pins, 1u);
  cs.publish(9, miss.slot);
  const bam::acquire_result hit = cs.try_acquire(9);
  EXPECT_FALSE(hit.busy);
  EXPECT_EQ(hit.slot, miss.slot);
  EXPECT_EQ(cs.state(9).pins, 2u);
  cs.release(9);
  cs.release(9);
  expect_quiescent_and_consistent(cs);
}

TEST(BamCacheState, OutOfBoundsLineIsAStatus) {
  bam::host_cache_state owner{10, 2};
  const bam::acquire_result r = owner.ref().acquire(10);
  EXPECT_EQ(r.st, status::out_of_bounds);
  EXPECT_EQ(r.slot, bam::no_slot);
  EXPECT_FALSE(r.must_fill);
  EXPECT_FALSE(owner.ref().begin_writeback(10));
  expect_metadata_empty(owner.ref());
}

TEST(BamCacheState, EvictionFollowsClockWithSecondChance) {
  bam::host_cache_state owner{16, 4};
  const bam::cache_state_ref cs = owner.ref();
  // Lines 0..3 fill slots 0..3 in clock order.
  for (std::uint64_t line = 0; line < 4; ++line) {
    ASSERT_EQ(fill_clean(cs, line), line);
    cs.release(line);
  }
  // Every slot was just referenced: the hand clears the four bits, then takes slot 0.
  ASSERT_EQ(fill_clean(cs, 4), 0u);
  cs.release(4);
  EXPECT_FALSE(cs.state(0).valid);
  for (std::uint64_t line = 1; line < 4; ++line) EXPECT_TRUE(cs.state(line).valid);
  for (std::uint32_t slot = 1; slot < 4; ++slot) EXPECT_FALSE(cs.slot(slot).referenced);

  // A hit on line 1 (the oldest) gives it a second chance: line 2 goes instead.
  const bam::acquire_result hit = cs.acquire(1);
  ASSERT_EQ(hit.st, status::ok);
  ASSERT_FALSE(hit.must_fill);
  ASSERT_EQ(hit.slot, 1u);
  cs.release(1);
  EXPECT_TRUE(cs.slot(1).referenced);
  ASSERT_EQ(fill_clean(cs, 5), 2u);
  cs.release(5);
  EXPECT_TRUE(cs.state(1).valid);
  EXPECT_FALSE(cs.state(2).valid);
  EXPECT_FALSE(cs.slot(1).referenced);  // the second chance is spent

  // Next: line 3 in slot 3 (unreferenced), then line 1, now unreferenced, after slot 0's
  // freshly published line 4 gets its own second chance.
  ASSERT_EQ(fill_clean(cs, 6), 3u);
  cs.release(6);
  EXPECT_FALSE(cs.state(3).valid);
  ASSERT_EQ(fill_clean(cs, 7), 1u);
  cs.release(7);
  EXPECT_FALSE(cs.state(1).valid);
  EXPECT_TRUE(cs.state(4).valid);

  // A line evicted earlier comes back through a new fetch.
  const bam::acquire_result again = cs.acquire(0);
  ASSERT_EQ(again.st, status::ok);
  EXPECT_TRUE(again.must_fill);
  cs.publish(0, again.slot);
  cs.release(0);
  expect_quiescent_and_consistent(cs);
}

TEST(BamCacheState, DirtyVictimIsReportedForWriteback) {
  bam::host_cache_state owner{16, 2};
  const bam::cache_state_ref cs = owner.ref();
  ASSERT_EQ(fill_clean(cs, 0), 0u);
  cs.mark_dirty(0);
  cs.release(0);
  ASSERT_EQ(fill_clean(cs, 1), 1u);
  cs.release(1);
  EXPECT_TRUE(cs.state(0).dirty);
  EXPECT_FALSE(cs.state(1).dirty);

  // Line 2 evicts line 0 (slot 0), which is dirty: its data must be written back first.
  const bam::acquire_result r = cs.acquire(2);
  ASSERT_EQ(r.st, status::ok);
  ASSERT_TRUE(r.must_fill);
  ASSERT_EQ(r.slot, 0u);
  ASSERT_EQ(r.writeback_line, 0u);
  bam::line_state victim = cs.state(0);
  EXPECT_TRUE(victim.valid && victim.busy && victim.dirty);
  EXPECT_EQ(victim.pins, 0u);
  EXPECT_FALSE(cs.begin_writeback(0));  // the evictor owns it
  cs.finish_eviction(0);
  victim = cs.state(0);
  EXPECT_FALSE(victim.valid || victim.busy || victim.dirty || victim.pins != 0);
  cs.publish(2, r.slot);
  cs.release(2);

  // Line 3 evicts line 1, which is clean: nothing to write back.
  const bam::acquire_result clean = cs.acquire(3);
  ASSERT_EQ(clean.st, status::ok);
  ASSERT_EQ(clean.slot, 1u);
  EXPECT_EQ(clean.writeback_line, bam::no_line);
  EXPECT_FALSE(cs.state(1).valid);
  cs.publish(3, clean.slot);
  cs.release(3);
  expect_quiescent_and_consistent(cs);
}

TEST(BamCacheState, AbandonLeavesNothingBehind) {
  bam::host_cache_state owner{8, 2};
  const bam::cache_state_ref cs = owner.ref();
  const bam::acquire_result r = cs.acquire(3);
  ASSERT_EQ(r.st, status::ok);
  ASSERT_TRUE(r.must_fill);
  cs.abandon(3, r.slot);
  expect_metadata_empty(cs);

  // A later acquire fetches again.
  const bam::acquire_result retry = cs.acquire(3);
  ASSERT_EQ(retry.st, status::ok);
  EXPECT_TRUE(retry.must_fill);
  cs.publish(3, retry.slot);
  cs.mark_dirty(3);
  cs.release(3);

  // Abandon after a finished dirty eviction: the victim is out (written back), the slot empty.
  ASSERT_EQ(fill_clean(cs, 4), 1u - retry.slot);
  cs.release(4);
  bam::acquire_result evict = cs.acquire(5);
  ASSERT_EQ(evict.st, status::ok);
  ASSERT_EQ(evict.writeback_line, 3u);
  cs.finish_eviction(3);
  cs.abandon(5, evict.slot);
  EXPECT_FALSE(cs.state(3).valid);
  EXPECT_FALSE(cs.state(5).valid || cs.state(5).busy || cs.state(5).pins != 0);
  EXPECT_EQ(cs.slot(evict.slot).owner, bam::no_line);
  EXPECT_FALSE(cs.slot(evict.slot).claimed);
  expect_quiescent_and_consistent(cs);
}

TEST(BamCacheState, AbandonEvictionKeepsTheDirtyVictim) {
  bam::host_cache_state owner{8, 1};
  const bam::cache_state_ref cs = owner.ref();
  ASSERT_EQ(fill_clean(cs, 2), 0u);
  cs.mark_dirty(2);
  cs.release(2);

  const bam::acquire_result r = cs.acquire(6);
  ASSERT_EQ(r.st, status::ok);
  ASSERT_EQ(r.writeback_line, 2u);
  cs.abandon_eviction(6, r.slot, 2);  // the write-back failed

  const bam::line_state victim = cs.state(2);
  EXPECT_TRUE(victim.valid && victim.dirty);
  EXPECT_FALSE(victim.busy);
  EXPECT_EQ(victim.pins, 0u);
  EXPECT_FALSE(cs.state(6).valid || cs.state(6).busy || cs.state(6).pins != 0);
  EXPECT_EQ(cs.slot(0).owner, 2u);
  EXPECT_FALSE(cs.slot(0).claimed);

  // The victim is still served from its slot, and a flush still finds it dirty.
  const bam::acquire_result hit = cs.acquire(2);
  ASSERT_EQ(hit.st, status::ok);
  EXPECT_FALSE(hit.must_fill);
  EXPECT_EQ(hit.slot, 0u);
  cs.release(2);
  ASSERT_TRUE(cs.begin_writeback(2));
  cs.end_writeback(2);
  EXPECT_FALSE(cs.state(2).dirty);
  expect_quiescent_and_consistent(cs);
}

TEST(BamCacheState, CacheFullWhenEverySlotIsPinnedThenRecovers) {
  bam::host_cache_state owner{32, 3};
  const bam::cache_state_ref cs = owner.ref();
  for (std::uint64_t line = 0; line < 3; ++line) fill_clean(cs, line);  // pins kept
  cs.mark_dirty(2);

  const bam::acquire_result full = cs.acquire(9);
  EXPECT_EQ(full.st, status::cache_full);
  EXPECT_EQ(full.slot, bam::no_slot);
  EXPECT_FALSE(full.must_fill);
  EXPECT_EQ(full.writeback_line, bam::no_line);
  const bam::line_state undone = cs.state(9);
  EXPECT_FALSE(undone.valid || undone.busy || undone.dirty || undone.pins != 0);
  for (std::uint64_t line = 0; line < 3; ++line) {
    EXPECT_TRUE(cs.state(line).valid);
    EXPECT_EQ(cs.state(line).pins, 1u);
    EXPECT_FALSE(cs.slot(static_cast<std::uint32_t>(line)).claimed);
  }
  // Still full on a second try, with the same pins: the same digest (whatever the line
  // asked for). A hit on a pinned line works meanwhile and shows in the digest.
  const bam::acquire_result again = cs.acquire(10);
  EXPECT_EQ(again.st, status::cache_full);
  EXPECT_EQ(again.pinned_digest, full.pinned_digest);
  const bam::acquire_result hit = cs.acquire(1);
  ASSERT_EQ(hit.st, status::ok);
  EXPECT_FALSE(hit.must_fill);
  const bam::acquire_result while_hit = cs.acquire(10);
  EXPECT_EQ(while_hit.st, status::cache_full);
  EXPECT_NE(while_hit.pinned_digest, full.pinned_digest);
  cs.release(1);
  const bam::acquire_result after_hit = cs.acquire(10);
  EXPECT_EQ(after_hit.st, status::cache_full);
  EXPECT_EQ(after_hit.pinned_digest, full.pinned_digest);

  // Releasing line 1 makes it the only victim.
  cs.release(1);
  const bam::acquire_result r = cs.acquire(9);
  ASSERT_EQ(r.st, status::ok);
  ASSERT_TRUE(r.must_fill);
  EXPECT_EQ(r.slot, 1u);
  EXPECT_EQ(r.writeback_line, bam::no_line);
  EXPECT_FALSE(cs.state(1).valid);
  cs.publish(9, r.slot);
  cs.release(9);
  cs.release(0);
  cs.release(2);
  EXPECT_TRUE(cs.state(2).dirty);  // a pinned dirty line was never given up
  expect_quiescent_and_consistent(cs);
}

TEST(BamCacheState, WritebackTakesOnlyValidDirtyUnpinnedLines) {
  bam::host_cache_state owner{8, 4};
  const bam::cache_state_ref cs = owner.ref();
  EXPECT_FALSE(cs.begin_writeback(0));  // absent
  fill_clean(cs, 0);
  cs.release(0);
  EXPECT_FALSE(cs.begin_writeback(0));  // clean
  fill_clean(cs, 1);
  cs.mark_dirty(1);
  EXPECT_FALSE(cs.begin_writeback(1));  // pinned
  cs.release(1);

  ASSERT_TRUE(cs.begin_writeback(1));
  bam::line_state s = cs.state(1);
  EXPECT_TRUE(s.valid && s.busy && s.dirty);
  EXPECT_FALSE(cs.begin_writeback(1));  // taken already
  cs.cancel_writeback(1);               // the write failed: still dirty
  s = cs.state(1);
  EXPECT_TRUE(s.valid && s.dirty);
  EXPECT_FALSE(s.busy);

  ASSERT_TRUE(cs.begin_writeback(1));
  const std::uint32_t slot = cs.slot_of(1);
  cs.end_writeback(1);
  s = cs.state(1);
  EXPECT_TRUE(s.valid);
  EXPECT_FALSE(s.busy || s.dirty);
  const bam::acquire_result hit = cs.acquire(1);  // still cached after the write-back
  ASSERT_EQ(hit.st, status::ok);
  EXPECT_FALSE(hit.must_fill);
  EXPECT_EQ(hit.slot, slot);
  cs.release(1);
  expect_quiescent_and_consistent(cs);
}

TEST(BamCacheState, BadSizesThrow) {
  const auto throws_with = [](auto&& make, const std::string& text) {
    try {
      make();
      ADD_FAILURE() << "no exception; expected one mentioning '" << text << "'";
    } catch (const squeeze::invalid_argument& e) {
      EXPECT_NE(e.message().find(text), std::string::npos) << e.what();
    }
  };
  throws_with([] { bam::host_cache_state{0, 4}; }, "at least one line");
  throws_with([] { bam::host_cache_state{16, 0}; }, "at least one slot");
  throws_with([] { bam::host_cache_state{16, std::uint64_t{1} << 32}; }, "fit 32 bits");
  throws_with([] { (void)bam::cache_state_layout::of((std::uint64_t{1} << 48) + 1, 4); },
              "at most 2^48");
  throws_with([] { bam::host_cache_state{16, 4, 0}; }, "eviction_rounds");
  throws_with([] { bam::cache_state_ref(nullptr, 16, 4); }, "null");
  std::vector<std::uint64_t> raw(bam::cache_state_layout::of(16, 4).bytes / 8 + 1);
  throws_with([&] { bam::cache_state_ref(reinterpret_cast<std::byte*>(raw.data()) + 4, 16, 4); },
              "aligned");
  // The limits themselves are accepted.
  EXPECT_NO_THROW((void)bam::cache_state_layout::of(std::uint64_t{1} << 48, 4));
  EXPECT_NO_THROW((void)bam::cache_state_layout::of(1, bam::cache_state_layout::max_slots));
  EXPECT_NO_THROW((bam::host_cache_state{1, 1}));
}

// ---- many threads -------------------------------------------------------------------------

TEST(BamCacheState, OneFetcherPerMissingLine) {
  constexpr int threads = 8;
  for (int round = 0; round < 50; ++round) {
    bam::host_cache_state owner{4, 4};
    const bam::cache_state_ref cs = owner.ref();
    std::vector<std::uint64_t> slot_data(4, 0);
    std::atomic<int> fills{0};
    std::atomic<int> bad{0};
    std::atomic<bool> go{false};
    std::vector<std::uint32_t> seen(threads, bam::no_slot);
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        while (!go.load()) std::this_thread::yield();
        const bam::acquire_result r = cs.acquire(2);
        if (r.st != status::ok) {
          bad.fetch_add(1);
          return;
        }
        if (r.must_fill) {
          fills.fetch_add(1);
          std::this_thread::sleep_for(std::chrono::microseconds(200));  // a slow read
          slot_data[r.slot] = 0xfeed0002;
          cs.publish(2, r.slot);
        }
        if (slot_data[r.slot] != 0xfeed0002) bad.fetch_add(1);
        seen[t] = r.slot;
        cs.release(2);
      });
    }
    go.store(true);
    for (auto& th : pool) th.join();
    ASSERT_EQ(fills.load(), 1) << "round " << round;
    ASSERT_EQ(bad.load(), 0) << "round " << round;
    for (int t = 1; t < threads; ++t) ASSERT_EQ(seen[t], seen[0]);
    ASSERT_EQ(cs.state(2).pins, 0u);
    expect_quiescent_and_consistent(cs);
  }
}

// The cache has one slot. Whenever it is in transition (being filled, its dirty victim being
// evicted, its line written back by a flush), a miss on another line waits instead of
// reporting cache_full: nobody pins that slot. Once the slot is pinned, cache_full.
TEST(BamCacheStateThreads, ASlotInTransitionIsWaitedForNotReportedFull) {
  bam::host_cache_state owner{16, 1};
  const bam::cache_state_ref cs = owner.ref();

  // 1. Being filled (CLAIMED, line 0 BUSY): the miss on line 1 waits, then takes the slot
  //    once line 0 is published and released.
  const bam::acquire_result fill = cs.acquire(0);
  ASSERT_EQ(fill.st, status::ok);
  ASSERT_TRUE(fill.must_fill);
  {
    pending_acquire miss{cs, 1};
    EXPECT_TRUE(miss.waiting_after(20)) << "returned while the only slot was being filled";
    cs.publish(0, fill.slot);
    cs.release(0);
    const bam::acquire_result r = miss.get();
    ASSERT_EQ(r.st, status::ok) << "cache_full while the only slot was being filled";
    ASSERT_TRUE(r.must_fill);
    EXPECT_EQ(r.slot, 0u);
    EXPECT_EQ(r.writeback_line, bam::no_line);
    EXPECT_FALSE(cs.state(0).valid);
    cs.publish(1, r.slot);
    cs.mark_dirty(1);
    cs.release(1);
  }

  // 2. Its dirty victim being evicted (CLAIMED, line 1 VALID|DIRTY|BUSY): the miss on line 3
  //    waits; when line 2 is published and still pinned by its fetcher, it is cache_full.
  const bam::acquire_result evict = cs.acquire(2);
  ASSERT_EQ(evict.st, status::ok);
  ASSERT_EQ(evict.writeback_line, 1u);
  {
    pending_acquire miss{cs, 3};
    EXPECT_TRUE(miss.waiting_after(20)) << "returned while the only slot was being evicted";
    cs.finish_eviction(1);
    EXPECT_TRUE(miss.waiting_after(5)) << "returned while the only slot was being filled";
    cs.publish(2, evict.slot);  // the fetcher keeps its pin
    const bam::acquire_result r = miss.get();
    EXPECT_EQ(r.st, status::cache_full);
    EXPECT_EQ(r.slot, bam::no_slot);
    EXPECT_FALSE(r.must_fill);
    const bam::line_state undone = cs.state(3);
    EXPECT_FALSE(undone.valid || undone.busy || undone.pins != 0);
  }
  cs.mark_dirty(2);
  cs.release(2);

  // 3. Its line written back by a flush (line 2 VALID|DIRTY|BUSY, slot not claimed): the miss
  //    on line 4 waits, then evicts line 2, clean by then, with nothing to write back.
  ASSERT_TRUE(cs.begin_writeback(2));
  {
    pending_acquire miss{cs, 4};
    EXPECT_TRUE(miss.waiting_after(20)) << "returned while the only line was written back";
    cs.end_writeback(2);
    const bam::acquire_result r = miss.get();
    ASSERT_EQ(r.st, status::ok) << "cache_full while the only line was written back";
    EXPECT_EQ(r.slot, 0u);
    EXPECT_EQ(r.writeback_line, bam::no_line);
    cs.publish(4, r.slot);
    cs.release(4);
  }
  EXPECT_FALSE(cs.state(2).valid);
  expect_quiescent_and_consistent(cs);
}

// Every slot deliberately pinned: each of many more threads than slots gets cache_full on
// every miss, with nothing held after it, while hits on the pinned lines keep working; then
// the shape of a deadlock, where every slot is pinned by a thread that asks for another line:
// all of them get cache_full (none waits for the others' pins or claims).
TEST(BamCacheStateThreads, EverySlotPinnedGivesCacheFullToEveryThread) {
  constexpr std::uint32_t slots = 4;
  constexpr int threads = 16;
  constexpr int misses = 300;
  bam::host_cache_state owner{1024, slots};
  const bam::cache_state_ref cs = owner.ref();
  for (std::uint64_t line = 0; line < slots; ++line) {
    ASSERT_EQ(fill_clean(cs, line), line);  // pins kept
  }
  cs.mark_dirty(slots - 1);

  std::atomic<int> fulls{0};
  std::atomic<int> wrong{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (int i = 0; i < misses; ++i) {
        const std::uint64_t line = slots + static_cast<std::uint64_t>(t * misses + i) % 1000;
        const bam::acquire_result r = cs.acquire(line);
        if (r.st == status::cache_full && r.slot == bam::no_slot && !r.must_fill) {
          fulls.fetch_add(1);
        } else {
          wrong.fetch_add(1);
        }
        const auto pinned = static_cast<std::uint32_t>(i % slots);
        const bam::acquire_result hit = cs.acquire(pinned);
        if (hit.st != status::ok || hit.must_fill || hit.slot != pinned) wrong.fetch_add(1);
        if (hit.st == status::ok) cs.release(pinned);
      }
    });
  }
  for (auto& th : pool) th.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(fulls.load(), threads * misses);
  for (std::uint64_t line = slots; line < 1024; ++line) {
    const bam::line_state s = cs.state(line);
    ASSERT_FALSE(s.valid || s.busy || s.pins != 0) << "line " << line;
  }
  for (std::uint32_t slot = 0; slot < slots; ++slot) {
    EXPECT_EQ(cs.state(slot).pins, 1u);
    EXPECT_EQ(cs.slot(slot).owner, slot);
    EXPECT_FALSE(cs.slot(slot).claimed);
  }
  EXPECT_TRUE(cs.state(slots - 1).dirty);
  for (std::uint64_t line = 0; line < slots; ++line) cs.release(line);

  // Thread t pins line t, the slots are all pinned, and each asks for more, many times.
  std::barrier all_pinned{slots};
  pool.clear();
  for (std::uint32_t t = 0; t < slots; ++t) {
    pool.emplace_back([&, t] {
      const bam::acquire_result mine = cs.acquire(t);
      if (mine.st != status::ok || mine.must_fill) wrong.fetch_add(1);
      all_pinned.arrive_and_wait();
      for (int i = 0; i < misses; ++i) {
        if (cs.acquire(100 + t).st != status::cache_full) wrong.fetch_add(1);
      }
      all_pinned.arrive_and_wait();
      cs.release(t);
    });
  }
  for (auto& th : pool) th.join();
  EXPECT_EQ(wrong.load(), 0);
  expect_quiescent_and_consistent(cs);

  // Nothing pinned any more: a miss takes a slot (line 3 written back first, so the victim
  // is clean whichever it is).
  ASSERT_TRUE(cs.begin_writeback(slots - 1));
  cs.end_writeback(slots - 1);
  const bam::acquire_result r = cs.acquire(999);
  ASSERT_EQ(r.st, status::ok);
  EXPECT_TRUE(r.must_fill);
  EXPECT_EQ(r.writeback_line, bam::no_line);
  cs.abandon(999, r.slot);
  expect_quiescent_and_consistent(cs);
}

namespace {

struct stress_config {
  const char* name;
  int threads;
  std::uint32_t slots;
  std::uint64_t lines;
  int ops_per_thread;
  int pins_per_op;             // lines a thread holds at once (2: forces cache_full paths)
  double fetch_fail_rate;      // abandon instead of publish
  double writeback_fail_rate;  // abandon_eviction / cancel_writeback instead of writing back
  bool concurrent_flusher;     // a thread that writes dirty lines back while the others run
  // Threads that may hold a pin or a probe at once (a permit from acquire to release); 0: no
  // limit. A fetcher gives its permit back while it fills (its slot is in transition, not
  // pinned) and takes one again without waiting to publish, or abandons the fetch and asks
  // again; so fills are many, pins few. Fewer than the slots: no moment has every slot
  // pinned, so any cache_full is a bug.
  int max_pinning = 0;
  // A thread that gets cache_full (it holds nothing: one pin per op) backs off and asks
  // again, as the GPU's warp_acquire does, so that every op completes.
  bool retry_full = false;
  std::uint32_t eviction_rounds = bam::cache_state_ref::default_eviction_rounds;
};

// Permits to pin, as a counting semaphore. Not std::counting_semaphore: libstdc++'s loses
// wake-ups when a release races a failed try_acquire (GCC bug 98033), and this test, with
// far more threads than permits, then hung on a 16-core machine.
class permits {
 public:
  explicit permits(int n) : free_{n} {}
  void acquire() {
    std::unique_lock lock{mutex_};
    freed_.wait(lock, [&] { return free_ > 0; });
    --free_;
  }
  bool try_acquire() {
    std::lock_guard lock{mutex_};
    if (free_ == 0) return false;
    --free_;
    return true;
  }
  void release() {
    {
      std::lock_guard lock{mutex_};
      ++free_;
    }
    freed_.notify_one();
  }

 private:
  std::mutex mutex_;
  std::condition_variable freed_;
  int free_;
};

// A simulated backing and cache. A line is `words` uint64: word 0 is a tag (the line
// number, written by the fills only), word 1 + t belongs to thread t, which adds 1 to it on
// every write and keeps the count it expects. So every read is checked exactly, and at the
// end the backing must hold every write.
class simulation {
 public:
  explicit simulation(const stress_config& c)
      : config_{c},
        words_{1 + static_cast<std::size_t>(c.threads)},
        owner_{c.lines, c.slots, c.eviction_rounds},
        cs_{owner_.ref()},
        backing_(c.lines * words_, 0),
        slots_(std::size_t{c.slots} * words_, 0),
        expected_(static_cast<std::size_t>(c.threads), std::vector<std::uint64_t>(c.lines, 0)) {
    for (std::uint64_t line = 0; line < c.lines; ++line) backing_[line * words_] = tag(line);
  }

  void run() {
    std::atomic<bool> stop{false};
    std::vector<std::thread> pool;
    for (int t = 0; t < config_.threads; ++t) pool.emplace_back([this, t] { worker(t); });
    std::thread flusher;
    if (config_.concurrent_flusher) {
      flusher = std::thread([this, &stop] {
        std::mt19937_64 rng{12345};
        while (!stop.load(std::memory_order_relaxed)) {
          for (std::uint64_t line = 0; line < config_.lines; ++line) write_back(line, rng);
          std::this_thread::yield();
        }
      });
    }
    // A broken protocol hangs rather than fails: turn a hang into a failure with a message.
    std::mutex mutex;
    std::condition_variable finished;
    bool done = false;
    std::thread watchdog([&] {
      std::unique_lock lock{mutex};
      if (!finished.wait_for(lock, std::chrono::seconds(300), [&] { return done; })) {
        std::fprintf(stderr, "[ %s ] no progress after 300 s: the cache protocol hangs\n",
                     config_.name);
        std::abort();
      }
    });
    for (auto& th : pool) th.join();
    stop.store(true);
    if (flusher.joinable()) flusher.join();
    {
      std::lock_guard lock{mutex};
      done = true;
    }
    finished.notify_one();
    watchdog.join();
  }

  // Writes every dirty line back (no failures), until none is dirty.
  void flush_all() {
    std::mt19937_64 rng{1};
    for (int pass = 0; pass < 4; ++pass) {
      for (std::uint64_t line = 0; line < config_.lines; ++line) {
        if (cs_.begin_writeback(line)) {
          copy_out(line, cs_.slot_of(line));
          cs_.end_writeback(line);
        }
      }
    }
    for (std::uint64_t line = 0; line < config_.lines; ++line) {
      ASSERT_FALSE(cs_.state(line).dirty) << "line " << line << " still dirty after the flush";
    }
  }

  void check() {
    EXPECT_EQ(read_errors_.load(), 0) << first_error_;
    std::uint64_t writes = 0;
    for (int t = 0; t < config_.threads; ++t) {
      for (std::uint64_t line = 0; line < config_.lines; ++line) {
        ASSERT_EQ(backing_[line * words_ + 1 + t], expected_[t][line])
            << "lost write: thread " << t << " line " << line;
        writes += expected_[t][line];
      }
    }
    for (std::uint64_t line = 0; line < config_.lines; ++line) {
      ASSERT_EQ(backing_[line * words_], tag(line)) << "backing tag of line " << line;
    }
    EXPECT_GT(writes, 0u);
    EXPECT_EQ(writes, total_writes_.load());
    EXPECT_GT(completed_.load(), 0);
    if (limited()) {
      EXPECT_EQ(full_.load(), 0) << "cache_full while at most " << config_.max_pinning - 1
                                 << " other threads could pin a line, with " << config_.slots
                                 << " slots";
      EXPECT_GT(starved_.load(), 0);  // fills outnumbered the permits at times
    }
    if ((limited() || config_.retry_full) && config_.fetch_fail_rate == 0 &&
        config_.writeback_fail_rate == 0) {
      EXPECT_EQ(completed_.load(), config_.threads * config_.ops_per_thread);
    }
    EXPECT_GT(evictions_.load(), 0);
    EXPECT_GT(dirty_evictions_.load(), 0);
    if (config_.fetch_fail_rate > 0) {
      EXPECT_GT(abandons_.load(), 0);
    }
    if (config_.writeback_fail_rate > 0) {
      EXPECT_GT(abandoned_evictions_.load(), 0);
    }
    expect_quiescent_and_consistent(cs_);
  }

  void report() const {
    std::printf(
        "[ %s ] ops done %d, cache_full %d, fills %d, evictions %d (dirty %d), abandons %d, "
        "abandoned evictions %d, flushed %d, fills without a permit to publish %d\n",
        config_.name, completed_.load(), full_.load(), fills_.load(), evictions_.load(),
        dirty_evictions_.load(), abandons_.load(), abandoned_evictions_.load(), flushed_.load(),
        starved_.load());
  }

 private:
  static constexpr std::uint64_t failed_fill = 0xdeadull;
  enum class got { held, full, failed, starved };

  bool limited() const { return config_.max_pinning > 0; }
  static std::uint64_t tag(std::uint64_t line) { return 0xabc0000000000000ull | line; }

  void copy_out(std::uint64_t line, std::uint32_t slot) {
    for (std::size_t w = 0; w < words_; ++w) {
      backing_[line * words_ + w] = slots_[slot * words_ + w];
    }
  }
  void copy_in(std::uint64_t line, std::uint32_t slot) {
    for (std::size_t w = 0; w < words_; ++w) {
      slots_[slot * words_ + w] = backing_[line * words_ + w];
    }
  }

  void error(const std::string& what) {
    if (read_errors_.fetch_add(1) == 0) first_error_ = what;
  }

  void write_back(std::uint64_t line, std::mt19937_64& rng) {
    if (!cs_.begin_writeback(line)) return;
    if (std::uniform_real_distribution<>{}(rng) < config_.writeback_fail_rate) {
      cs_.cancel_writeback(line);
      return;
    }
    copy_out(line, cs_.slot_of(line));
    cs_.end_writeback(line);
    flushed_.fetch_add(1, std::memory_order_relaxed);
  }

  // Acquires `line` and fills it when asked. Nothing is held unless it returns `held`: full
  // when the cache was, failed when the read or the victim's write-back failed, starved when
  // no permit was left to publish (max_pinning). `permit`: whether this thread holds one.
  got get(std::uint64_t line, std::uint32_t& slot, std::mt19937_64& rng, bool& permit) {
    if (limited() && !permit) {
      inside_.acquire();
      permit = true;
    }
    bam::acquire_result r;
    for (squeeze::core::backoff wait;; wait.pause()) {
      r = cs_.acquire(line);
      if (r.st != status::cache_full) break;
      full_.fetch_add(1, std::memory_order_relaxed);
      if (!config_.retry_full) return got::full;
    }
    if (r.st != status::ok || r.slot >= config_.slots) {
      error("acquire returned " + std::string{squeeze::to_string(r.st)});
      return got::failed;
    }
    if (r.must_fill) {
      if (limited()) {  // a fetch pins no slot until publish
        inside_.release();
        permit = false;
      }
      std::uniform_real_distribution<> u;
      if (r.writeback_line != bam::no_line) {
        if (slots_[r.slot * words_] != tag(r.writeback_line))
          error("victim slot holds another tag");
        if (u(rng) < config_.writeback_fail_rate) {
          cs_.abandon_eviction(line, r.slot, r.writeback_line);
          abandoned_evictions_.fetch_add(1, std::memory_order_relaxed);
          return got::failed;
        }
        copy_out(r.writeback_line, r.slot);
        cs_.finish_eviction(r.writeback_line);
        dirty_evictions_.fetch_add(1, std::memory_order_relaxed);
      }
      const std::uint64_t previous = slots_[r.slot * words_];
      if (previous != 0 && previous != failed_fill) {
        evictions_.fetch_add(1, std::memory_order_relaxed);
      }
      if (u(rng) < config_.fetch_fail_rate) {
        slots_[r.slot * words_] = failed_fill;  // a read that failed halfway
        cs_.abandon(line, r.slot);
        abandons_.fetch_add(1, std::memory_order_relaxed);
        return got::failed;
      }
      copy_in(line, r.slot);
      if (u(rng) < 0.05) std::this_thread::yield();  // a slow read widens the races
      if (limited()) {
        if (!inside_.try_acquire()) {  // waiting here could wait for a sweep that waits for us
          slots_[r.slot * words_] = failed_fill;
          cs_.abandon(line, r.slot);
          starved_.fetch_add(1, std::memory_order_relaxed);
          return got::starved;
        }
        permit = true;
      }
      cs_.publish(line, r.slot);
      fills_.fetch_add(1, std::memory_order_relaxed);
    }
    slot = r.slot;
    return got::held;
  }

  // Reads (checks the tag and this thread's word) or writes (adds 1 to it and marks dirty).
  void use(int t, std::uint64_t line, std::uint32_t slot, bool write) {
    std::uint64_t* data = &slots_[slot * words_];
    if (data[0] != tag(line)) {
      error("thread " + std::to_string(t) + " line " + std::to_string(line) + ": slot " +
            std::to_string(slot) + " holds tag " + std::to_string(data[0]));
      return;
    }
    if (data[1 + t] != expected_[t][line]) {
      error("thread " + std::to_string(t) + " line " + std::to_string(line) + ": read " +
            std::to_string(data[1 + t]) + ", expected " + std::to_string(expected_[t][line]));
      return;
    }
    if (write) {
      data[1 + t] += 1;
      expected_[t][line] += 1;
      cs_.mark_dirty(line);
      total_writes_.fetch_add(1, std::memory_order_relaxed);
    }
  }

  void worker(int t) {
    std::mt19937_64 rng{static_cast<std::uint64_t>(t) * 7919 + 17};
    // Skewed lines: half the accesses go to a hot eighth, so hits, waits on busy lines and
    // evictions all happen often on a tiny cache.
    std::uniform_int_distribution<std::uint64_t> any{0, config_.lines - 1};
    std::uniform_int_distribution<std::uint64_t> hot{0, config_.lines / 8};
    std::bernoulli_distribution pick_hot{0.5};
    std::bernoulli_distribution is_write{0.4};
    for (int op = 0; op < config_.ops_per_thread; ++op) {
      bool permit = false;
      std::uint64_t lines[2] = {};
      std::uint32_t slots[2] = {};
      int held = 0;
      for (int k = 0; k < config_.pins_per_op; ++k) {
        const std::uint64_t line = pick_hot(rng) ? hot(rng) : any(rng);
        got g = get(line, slots[held], rng, permit);
        while (g == got::starved) g = get(line, slots[held], rng, permit);
        if (g != got::held) break;
        lines[held++] = line;
      }
      for (int k = 0; k < held; ++k) {
        // The same line held twice is pinned twice; write through the first pin only.
        const bool dup = k == 1 && lines[1] == lines[0];
        use(t, lines[k], slots[k], !dup && is_write(rng));
      }
      for (int k = held - 1; k >= 0; --k) cs_.release(lines[k]);
      if (permit) inside_.release();
      if (held == config_.pins_per_op) completed_.fetch_add(1, std::memory_order_relaxed);
    }
  }

  stress_config config_;
  std::size_t words_;
  bam::host_cache_state owner_;
  bam::cache_state_ref cs_;
  std::vector<std::uint64_t> backing_;                     // [lines][words]
  std::vector<std::uint64_t> slots_;                       // [slots][words]
  std::vector<std::vector<std::uint64_t>> expected_;       // [threads][lines], thread-private
  permits inside_{config_.max_pinning};  // permits to pin
  std::atomic<int> read_errors_{0};
  std::string first_error_;
  std::atomic<std::uint64_t> total_writes_{0};
  std::atomic<int> completed_{0}, full_{0}, fills_{0}, evictions_{0}, dirty_evictions_{0},
      abandons_{0}, abandoned_evictions_{0}, flushed_{0}, starved_{0};
};

void stress(const stress_config& c) {
  // A thread that retries cache_full must hold nothing: with two pins it could wait for
  // threads that wait for it.
  ASSERT_TRUE(!c.retry_full || c.pins_per_op == 1);
  // One permit covers one pin; fewer permits than slots.
  ASSERT_TRUE(c.max_pinning == 0 || (c.pins_per_op == 1 && !c.retry_full));
  ASSERT_LT(c.max_pinning, static_cast<int>(c.slots));
  simulation sim{c};
  sim.run();
  sim.flush_all();
  sim.check();
  sim.report();
}

}  // namespace

TEST(BamCacheStateThreads, ReadsAndWritesOnATinyCache) {
  stress({"16 threads, 4 slots, 64 lines", 16, 4, 64, 3000, 1, 0.0, 0.0, false});
}

TEST(BamCacheStateThreads, MoreLinesWithAConcurrentFlusher) {
  stress({"8 threads, 8 slots, 256 lines, flusher", 8, 8, 256, 4000, 1, 0.0, 0.0, true});
}

TEST(BamCacheStateThreads, TwoPinsPerThreadHitCacheFullSafely) {
  stress({"12 threads x 2 pins, 6 slots, 64 lines", 12, 6, 64, 3000, 2, 0.0, 0.0, true});
}

TEST(BamCacheStateThreads, InjectedFetchAndWritebackFailures) {
  stress({"16 threads, 5 slots, 128 lines, failures", 16, 5, 128, 3000, 1, 0.1, 0.1, true});
}

TEST(BamCacheStateThreads, OneSlot) {
  stress({"8 threads, 1 slot, 16 lines, failures", 8, 1, 16, 2000, 1, 0.05, 0.05, true});
}

// Many more threads than slots, most of them filling slots (in transition) and only a few
// pinning lines at once (a permit each, the thread that asks included): at any moment some
// slot is free or in transition, so acquire must never say cache_full, however the clock
// fares (one round of probes only, then the sweep decides). With one permit nobody else
// holds a pin while a thread asks, so cache_full is impossible; with two, the one other
// pinned line would have to move to every one of the 8 slots during one sweep.
TEST(BamCacheStateThreads, MoreThreadsThanSlotsFewerPinsNeverFull) {
  stress({"32 threads, 8 slots, 2 may pin, 1 round", 32, 8, 256, 1500, 1, 0.0, 0.0, true, 2, false,
          1});
  stress({"48 threads, 4 slots, 1 may pin", 48, 4, 128, 1000, 1, 0.0, 0.0, true, 1});
}

// The GPU's case on the host: 64 threads on 4 slots, each op retried on cache_full (every
// slot pinned by the others, briefly) until it completes, as warp_acquire does, with a
// flusher running; every read exact, every write in the backing after the flush.
TEST(BamCacheStateThreads, SixtyFourThreadsOnFourSlotsRetryUntilDone) {
  stress({"64 threads, 4 slots, 512 lines, retry", 64, 4, 512, 1500, 1, 0.0, 0.0, true, 0, true});
}
