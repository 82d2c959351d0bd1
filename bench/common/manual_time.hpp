// bench/common/manual_time.hpp: timing one GPU region per Google Benchmark iteration.
#pragma once

#include <benchmark/benchmark.h>
#include <cuda_runtime_api.h>

#include <vector>

#include "squeeze/core/cuda_error.hpp"
#include "squeeze/core/timer.hpp"

namespace squeeze::bench {

/// Runs `work` (enqueued on the default stream) 3 times to warm up, then once per
/// iteration of `bs` between CUDA events, reporting each time as the iteration's manual time
/// (register the benchmark with UseManualTime). Returns the median in ms.
template <class Work>
double time_manual(benchmark::State& bs, Work&& work) {
  core::event_timer timer;
  for (int i = 0; i < 3; ++i) work();
  SQUEEZE_CUDA_TRY(cudaDeviceSynchronize());
  std::vector<double> samples;
  for (auto _ : bs) {
    timer.start();
    work();
    timer.stop();
    const double ms = timer.elapsed_ms();
    bs.SetIterationTime(ms * 1e-3);
    samples.push_back(ms);
  }
  return core::summarize(samples).median_ms;
}

}  // namespace squeeze::bench
