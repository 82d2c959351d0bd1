// SPDX-License-Identifier: Apache-2.0
// squeeze/core/timer.hpp: stream-ordered timing of GPU regions with CUDA events.
//
//   core::event_timer t{stream};
//   t.start();  launch(stream);  t.stop();
//   float ms = t.elapsed_ms();                  // waits for the stop event only
//
//   auto s = core::time_region(stream, {.warmup = 3, .repeats = 20}, [&] { launch(stream); });
//   s.median_ms ...
//
// time_region's events bracket the host's work too: a call that spends 10 us on the host
// before its launch counts those 10 us when the GPU was idle. time_graph leaves them out: it
// captures `calls` calls into a CUDA graph and times the replays (per call).
//
//   auto g = core::time_graph(stream, {.warmup = 3, .repeats = 20}, 20, [&] { launch(stream); });
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <utility>
#include <vector>

#include "squeeze/core/cuda_error.hpp"
#include "squeeze/core/error.hpp"

namespace squeeze::core {

/// An owned CUDA event: timing enabled by default; pass cudaEventDisableTiming for an event
/// that only orders streams (cheaper to record and wait on).
class event {
 public:
  /// Creates the event with cudaEventCreateWithFlags(flags); throws cuda_error.
  explicit event(unsigned flags = cudaEventDefault) {
    SQUEEZE_CUDA_TRY(cudaEventCreateWithFlags(&handle_, flags));
  }
  /// Takes other's event; other is left empty.
  event(event&& other) noexcept : handle_{std::exchange(other.handle_, nullptr)} {}
  /// Swaps the two events (the one given up is destroyed with `other`).
  event& operator=(event&& other) noexcept {
    std::swap(handle_, other.handle_);
    return *this;
  }
  event(const event&) = delete;
  event& operator=(const event&) = delete;
  ~event() {
    if (handle_ != nullptr) static_cast<void>(cudaEventDestroy(handle_));
  }
  /// The handle.
  [[nodiscard]] cudaEvent_t get() const noexcept { return handle_; }
  /// Records the event on `stream` (cudaEventRecord).
  void record(cudaStream_t stream) { SQUEEZE_CUDA_TRY(cudaEventRecord(handle_, stream)); }
  /// Waits until the work recorded before the event is done (cudaEventSynchronize).
  void synchronize() const { SQUEEZE_CUDA_TRY(cudaEventSynchronize(handle_)); }

 private:
  cudaEvent_t handle_{nullptr};
};

/// Times one region of work on one stream: the device time between start() and stop().
class event_timer {
 public:
  /// A timer of work on `stream`.
  explicit event_timer(cudaStream_t stream) : stream_{stream} {}
  /// Records the start event on the stream.
  void start() { start_.record(stream_); }
  /// Records the stop event on the stream.
  void stop() { stop_.record(stream_); }
  /// Milliseconds between the two events; blocks until the stop event has completed.
  [[nodiscard]] float elapsed_ms() const {
    stop_.synchronize();
    float ms = 0.0f;
    SQUEEZE_CUDA_TRY(cudaEventElapsedTime(&ms, start_.get(), stop_.get()));
    return ms;
  }

 private:
  cudaStream_t stream_;
  event start_;
  event stop_;
};

/// How core::collect and the timing loops built on it run the work.
struct timing_options {
  int warmup = 3;    ///< untimed runs first (module load, caches, clocks)
  int repeats = 20;  ///< timed runs; each is timed alone with its own pair of events
};

/// Milliseconds over the timed runs.
struct timing_summary {
  double median_ms = 0.0;  ///< the median (of an even count: the mean of the middle two)
  double min_ms = 0.0;     ///< the fastest run
  double max_ms = 0.0;     ///< the slowest run
  int samples = 0;         ///< timed runs
};

/// Summarizes samples (milliseconds); the median of an even count is the mean of the two
/// middle samples.
inline timing_summary summarize(std::vector<double> samples) {
  timing_summary s;
  if (samples.empty()) return s;
  std::sort(samples.begin(), samples.end());
  const std::size_t n = samples.size();
  s.samples = static_cast<int>(n);
  s.min_ms = samples.front();
  s.max_ms = samples.back();
  s.median_ms = n % 2 == 1 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
  return s;
}

/// Calls `sample()` (which runs something and returns its time in milliseconds)
/// options.warmup times, discarding the results, then options.repeats times, and
/// summarizes those. The building block of every timing loop: what is timed, and how
/// (events, host clock, an untimed step before each run), is the caller's.
template <class Sample>
timing_summary collect(timing_options options, Sample&& sample) {
  for (int i = 0; i < options.warmup; ++i) static_cast<void>(sample());
  std::vector<double> samples;
  samples.reserve(static_cast<std::size_t>(options.repeats));
  for (int i = 0; i < options.repeats; ++i) samples.push_back(sample());
  return summarize(std::move(samples));
}

/// Runs `work()` (which enqueues on `stream`) warmup + repeats times, each run timed alone
/// with a pair of events, and returns the summary of the timed runs.
template <class Work>
timing_summary time_region(cudaStream_t stream, timing_options options, Work&& work) {
  event_timer timer{stream};
  return collect(options, [&] {
    timer.start();
    work();
    timer.stop();
    return static_cast<double>(timer.elapsed_ms());
  });
}

/// `calls` runs of `work()` captured once into a CUDA graph, replayed by launch(). work must
/// enqueue on `stream` only, a created stream (the legacy default stream cannot be
/// captured), and must not synchronize. Run work once eagerly before, so first-call setup
/// (module loads, cached queries) stays out of the capture.
class captured_calls {
 public:
  /// Captures `calls` calls of work() on `stream` into a graph and instantiates it; throws
  /// invalid_argument for calls < 1, cuda_error when capture fails (the stream stays usable).
  template <class Work>
  captured_calls(cudaStream_t stream, int calls, Work&& work) : stream_{stream}, calls_{calls} {
    SQUEEZE_EXPECTS(calls >= 1, "core::captured_calls: calls must be at least 1");
    SQUEEZE_CUDA_TRY(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    cudaGraph_t graph = nullptr;
    try {
      for (int i = 0; i < calls; ++i) work();
    } catch (...) {
      static_cast<void>(cudaStreamEndCapture(stream, &graph));  // leave the stream usable
      if (graph != nullptr) static_cast<void>(cudaGraphDestroy(graph));
      throw;
    }
    SQUEEZE_CUDA_TRY(cudaStreamEndCapture(stream, &graph));
    const cudaError_t made = cudaGraphInstantiate(&exec_, graph, 0);
    static_cast<void>(cudaGraphDestroy(graph));
    SQUEEZE_CUDA_TRY(made);
  }
  captured_calls(const captured_calls&) = delete;
  captured_calls& operator=(const captured_calls&) = delete;
  ~captured_calls() {
    if (exec_ != nullptr) static_cast<void>(cudaGraphExecDestroy(exec_));
  }
  /// Replays the captured calls on the stream (cudaGraphLaunch).
  void launch() const { SQUEEZE_CUDA_TRY(cudaGraphLaunch(exec_, stream_)); }
  /// The calls one launch() replays.
  [[nodiscard]] int calls() const noexcept { return calls_; }

 private:
  cudaStream_t stream_;
  int calls_;
  cudaGraphExec_t exec_{nullptr};
};

/// Device time per run of `work()` (enqueued on `stream`, a created stream) without the
/// host's part: options.warmup eager runs, then `calls` runs captured into a graph, and
/// options.repeats replays each timed alone with a pair of events (the samples are per run).
template <class Work>
timing_summary time_graph(cudaStream_t stream, timing_options options, int calls, Work&& work) {
  for (int i = 0; i < options.warmup; ++i) work();
  SQUEEZE_CUDA_TRY(cudaStreamSynchronize(stream));
  const captured_calls graph{stream, calls, work};
  graph.launch();  // the graph's own first launch (upload) stays out of the samples
  event_timer timer{stream};
  return collect({.warmup = 0, .repeats = options.repeats}, [&] {
    timer.start();
    graph.launch();
    timer.stop();
    return static_cast<double>(timer.elapsed_ms()) / calls;
  });
}

/// Milliseconds `work()` takes by the host clock (for work that synchronizes itself, or
/// host work).
template <class Work>
double host_ms(Work&& work) {
  const auto start = std::chrono::steady_clock::now();
  work();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

/// Summary of `work()` timed by the host clock, after options.warmup untimed runs.
template <class Work>
timing_summary time_host(timing_options options, Work&& work) {
  return collect(options, [&] { return host_ms(work); });
}

}  // namespace squeeze::core
