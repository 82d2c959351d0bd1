// SPDX-License-Identifier: Apache-2.0
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
  core::event_timer timer{nullptr};  // the default stream, where `work` runs
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

/// time_manual without the host's part of each call: 3 eager runs of `work` (enqueued on
/// `stream`, a created stream), then `calls` runs captured into a CUDA graph, one replay per
/// iteration of `bs` between CUDA events; each iteration's manual time is the time per run.
/// Returns the median per run in ms. Waits for the device first, so work enqueued on other
/// streams before is done.
template <class Work>
double time_manual_graph(benchmark::State& bs, cudaStream_t stream, int calls, Work&& work) {
  SQUEEZE_CUDA_TRY(cudaDeviceSynchronize());
  for (int i = 0; i < 3; ++i) work();
  SQUEEZE_CUDA_TRY(cudaStreamSynchronize(stream));
  const core::captured_calls graph{stream, calls, work};
  graph.launch();
  core::event_timer timer{stream};
  std::vector<double> samples;
  for (auto _ : bs) {
    timer.start();
    graph.launch();
    timer.stop();
    const double ms = timer.elapsed_ms() / calls;
    bs.SetIterationTime(ms * 1e-3);
    samples.push_back(ms);
  }
  SQUEEZE_CUDA_TRY(cudaStreamSynchronize(stream));
  return core::summarize(samples).median_ms;
}

}  // namespace squeeze::bench
