// SPDX-License-Identifier: Apache-2.0
// bench/common/in_turns.hpp: timing a measurement and its baselines in turns.
//
//   auto s = collect_in_turns({.warmup = 3, .repeats = 9}, {[&] { return time_a(); },
//                                                          [&] { return time_b(); }});
//   s[0].median_ms, s[1].median_ms
//
// Each function runs its method once and returns the time in milliseconds. A round runs each
// once, in order; `warmup` rounds are not kept. Timed in turns, whatever else the machine does
// (its clocks, the host, the link) falls on a value and its baseline alike. Timed one method
// after another, the tour's ratios moved by up to 0.26 between two runs of one binary on one
// H100 (2026-11-28: one method ran at half its speed in one of them).
#pragma once

#include <functional>
#include <utility>
#include <vector>

#include "squeeze/core/timer.hpp"

namespace squeeze::bench {

inline std::vector<core::timing_summary> collect_in_turns(
    core::timing_options timing, const std::vector<std::function<double()>>& runs) {
  std::vector<std::vector<double>> samples(runs.size());
  for (int round = 0; round < timing.warmup + timing.repeats; ++round) {
    for (std::size_t r = 0; r < runs.size(); ++r) {
      const double ms = runs[r]();
      if (round >= timing.warmup) samples[r].push_back(ms);
    }
  }
  std::vector<core::timing_summary> out;
  out.reserve(runs.size());
  for (std::vector<double>& s : samples) out.push_back(core::summarize(std::move(s)));
  return out;
}

}  // namespace squeeze::bench
