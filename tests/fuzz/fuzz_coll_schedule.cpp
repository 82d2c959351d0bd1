// SPDX-License-Identifier: Apache-2.0
// Fuzz target: coll::schedule_step and coll::chunk_layout on arbitrary arguments (the sizes
// a transport reports, counts and granules a caller passes). Arguments outside the
// documented ranges must end in squeeze::invalid_argument; accepted ones must give a plan
// whose peers and chunks lie in range, and a layout whose chunks tile [0, count).
#include <squeeze/coll/schedule.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "fuzz/fuzz_support.hpp"

namespace coll = squeeze::coll;

namespace {

using squeeze::fuzz::take;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto a = (take<std::uint8_t>(data, size) & 1) != 0 ? coll::algorithm::recursive_doubling
                                                           : coll::algorithm::ring;
  const int rank = take<std::int32_t>(data, size);
  const int n = take<std::int32_t>(data, size);
  const int step = take<std::int32_t>(data, size);
  const auto count = take<std::uint64_t>(data, size);
  const int parts = take<std::int32_t>(data, size);
  const auto granule = take<std::uint64_t>(data, size);
  try {
    const coll::step_plan p = coll::schedule_step(a, rank, n, step);
    SQUEEZE_FUZZ_ASSERT_TRUE(n >= 1 && n <= coll::max_ranks && rank >= 0 && rank < n);
    SQUEEZE_FUZZ_ASSERT_TRUE(step >= 0 && step < coll::steps(a, n));
    const int chunks = coll::chunks(a, n);
    if (p.sends())
      SQUEEZE_FUZZ_ASSERT_TRUE(p.send_peer >= 0 && p.send_peer < n && p.send_peer != rank &&
                               p.send_chunk >= 0 && p.send_chunk < chunks);
    if (p.receives())
      SQUEEZE_FUZZ_ASSERT_TRUE(p.recv_peer >= 0 && p.recv_peer < n && p.recv_peer != rank &&
                               p.recv_chunk >= 0 && p.recv_chunk < chunks);
  } catch (const squeeze::error&) {
  }
  try {
    const coll::chunk_layout lay{count, parts, granule};
    SQUEEZE_FUZZ_ASSERT_TRUE(parts >= 1 && granule >= 1);
    SQUEEZE_FUZZ_ASSERT_TRUE(lay.per_chunk % granule == 0);
    // the chunks tile [0, count) in order (checked over at most 4096 of them)
    const int shown = parts < 4096 ? parts : 4096;
    for (int c = 0; c < shown; ++c) {
      SQUEEZE_FUZZ_ASSERT_TRUE(lay.first(c) <= lay.first(c + 1) && lay.first(c + 1) <= count);
      SQUEEZE_FUZZ_ASSERT_TRUE(lay.size(c) <= lay.per_chunk);
    }
    SQUEEZE_FUZZ_ASSERT_TRUE(lay.first(0) == 0 && lay.first(parts) == count);
  } catch (const squeeze::error&) {
  }
  return 0;
}
