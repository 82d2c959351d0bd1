// SPDX-License-Identifier: Apache-2.0
// bench/xfer/xfer_bench.cu: squeeze_bench_xfer, the transfer study (Kamath et al.,
// EuroSys 2026 (IBP), §4.4, Figure 5) as a Google Benchmark program. See xfer_study.cuh for
// the setup and methods.
//
//   squeeze_bench_xfer [--items=N] [--benchmark_filter=squeeze_gather]
//                      [--benchmark_out=xfer.json --benchmark_out_format=json]
//
// One benchmark per (method, item size, placement), named
//   xfer/<method>/<item bytes>/<placement>        e.g. xfer/squeeze_gather/4096/misaligned
// plus xfer/bulk_memcpy_ceiling/<item bytes>/packed once per size. Each runs a fixed
// number of iterations (the study's repeats) timed manually: CUDA events, or the host
// clock for cpu_gather_bulk. Counters:
//   GB/s           items x size / median iteration time
//   ratio_to_bulk  GB/s / the bulk ceiling's GB/s, measured once per size in this process
//                  (for the ceiling's own benchmark it shows the run-to-run spread)
//   median_ms      the median iteration time
// (The console shows counters with SI prefixes, 950m = 0.95; the JSON has plain numbers.)
// naive_zero_copy is not registered for random placement (it needs 4-byte aligned items).
// After the runs the target checks are printed as a table (to stderr when the benchmark
// output on stdout is JSON or CSV). Exit status: 0, or 1 when a result was wrong.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/report.hpp"
#include "squeeze/core.hpp"
#include "xfer/xfer_study.cuh"

namespace {

namespace study = squeeze::bench::xfer_study;
using squeeze::bench::report_table;
using squeeze::bench::verification_error;
using study::method;
using study::placement;

/// What the benchmarks share: one study at a time (the size being run; benchmarks are
/// registered size by size, so each size's pool is built once), the ceilings, the results.
struct bench_state {
  study::study_config config;
  study::worker_pool workers{study::default_gather_threads()};
  std::unique_ptr<study::gpu_study> current;
  study::study_results results;
  bool verification_failed = false;

  study::gpu_study& study_for(std::size_t item_bytes) {
    if (!current || current->item_bytes() != item_bytes) {
      current.reset();  // free the previous size's buffers first
      current = std::make_unique<study::gpu_study>(config, item_bytes, workers);
    }
    return *current;
  }

  /// The bulk ceiling's GB/s for this size, measured once.
  double ceiling_gbps(std::size_t item_bytes) {
    if (const auto g = results.gbps(method::bulk_memcpy_ceiling, item_bytes, placement::aligned)) {
      return *g;
    }
    study::gpu_study& s = study_for(item_bytes);
    const double g = study::gbps(
        s.bytes(), s.measure(method::bulk_memcpy_ceiling, placement::aligned).median_ms);
    results.record(method::bulk_memcpy_ceiling, item_bytes, placement::aligned, g);
    return g;
  }
};

/// Reports the exception in flight as the benchmark's error; remembers wrong results.
void skip_with_current_exception(benchmark::State& state, bench_state& b) {
  try {
    throw;
  } catch (const verification_error& e) {
    b.verification_failed = true;
    state.SkipWithError(e.what());
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  } catch (...) {
    state.SkipWithError("unknown exception");
  }
}

void run_benchmark(benchmark::State& state, bench_state& b, method m, std::size_t item_bytes,
                   placement p) {
  study::gpu_study* s = nullptr;
  double ceiling = 0.0;
  try {
    s = &b.study_for(item_bytes);
    ceiling = b.ceiling_gbps(item_bytes);
    s->verify(m, p);
    for (int i = 0; i < b.config.timing_for(m).warmup; ++i) static_cast<void>(s->time_once(m, p));
  } catch (...) {
    skip_with_current_exception(state, b);
    return;
  }
  std::vector<double> samples;  // ms
  for (auto _ : state) {
    double ms = 0.0;
    try {
      ms = s->time_once(m, p);
    } catch (...) {
      skip_with_current_exception(state, b);
      break;
    }
    state.SetIterationTime(ms * 1e-3);
    samples.push_back(ms);
  }
  if (state.error_occurred()) return;
  const double median_ms = squeeze::core::summarize(samples).median_ms;
  const double gbps = study::gbps(s->bytes(), median_ms);
  state.counters["GB/s"] = gbps;
  state.counters["ratio_to_bulk"] = gbps / ceiling;
  state.counters["median_ms"] = median_ms;
  if (m != method::bulk_memcpy_ceiling) b.results.record(m, item_bytes, p, gbps);
}

void register_benchmarks(bench_state& b) {
  const auto add = [&](method m, std::size_t item_bytes, placement p, const char* placement_name) {
    const std::string bench_name = std::string{"xfer/"} + study::name(m) + '/' +
                                   std::to_string(item_bytes) + '/' + placement_name;
    benchmark::RegisterBenchmark(bench_name.c_str(),
                                 [&b, m, item_bytes, p](benchmark::State& state) {
                                   run_benchmark(state, b, m, item_bytes, p);
                                 })
        ->Iterations(b.config.timing_for(m).repeats)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
  };
  for (const std::size_t s : study::item_sizes) {
    add(method::bulk_memcpy_ceiling, s, placement::aligned, "packed");
    for (const placement p : study::all_placements) {
      for (const method m : study::all_methods) {
        if (m == method::bulk_memcpy_ceiling || !study::applicable(m, p)) continue;
        add(m, s, p, study::name(p));
      }
    }
  }
}

/// Removes "--items=N" from argv (before benchmark::Initialize sees it); returns N.
std::optional<std::size_t> take_items_flag(int& argc, char** argv) {
  constexpr std::string_view flag = "--items=";
  std::optional<std::size_t> items;
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg{argv[i]};
    if (arg.starts_with(flag)) {
      char* end = nullptr;
      const unsigned long long n = std::strtoull(argv[i] + flag.size(), &end, 10);
      if (end == argv[i] + flag.size() || *end != '\0' || n == 0) {
        throw squeeze::invalid_argument{"--items needs a positive integer, got '" +
                                        std::string{arg} + "'"};
      }
      items = static_cast<std::size_t>(n);
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  argv[argc] = nullptr;
  return items;
}

/// Whether the console output is machine-readable (then the target table goes to stderr).
bool stdout_is_data(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg{argv[i]};
    if (arg == "--benchmark_format=json" || arg == "--benchmark_format=csv") return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  bench_state b;
  try {
    if (const auto items = take_items_flag(argc, argv)) b.config.items = *items;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "squeeze_bench_xfer: %s\n", e.what());
    return 2;
  }
  const bool data_on_stdout = stdout_is_data(argc, argv);  // before Initialize eats the flags
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;

  const squeeze::core::device_presence presence = squeeze::core::detect_devices();
  if (!presence.present()) {
    std::printf("squeeze_bench_xfer: %s; nothing to run\n", presence.message().c_str());
    return 0;
  }
  try {
    const squeeze::core::device_info device = squeeze::core::query_device();
    benchmark::AddCustomContext("gpu", squeeze::core::describe(device));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "squeeze_bench_xfer: cannot query the CUDA device: %s\n", e.what());
    return 1;
  }
  benchmark::AddCustomContext("xfer_items", std::to_string(b.config.items));
  benchmark::AddCustomContext("xfer_cpu_gather_threads", std::to_string(b.workers.size()));
  benchmark::AddCustomContext(
      "xfer_timing", "median of the iterations after " + std::to_string(b.config.timing.warmup) +
                         " warm-up runs; L2 flushed before each; CUDA events, "
                         "host clock for cpu_gather_bulk");

  register_benchmarks(b);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  b.current.reset();

  report_table table;
  for (const squeeze::bench::comparison& c : study::compare_to_targets(b.results)) table.add(c);
  for (std::string& note : study::study_notes(b.config, b.workers.size())) {
    table.add_note(std::move(note));
  }
  if (!table.empty()) {
    std::FILE* out = data_on_stdout ? stderr : stdout;
    std::fprintf(out,
                 "\nThe project's targets for the transfer study (Kamath et al., EuroSys "
                 "2026, §4.4, Figure 5):\n");
    table.print(out);
    std::fprintf(out, "%zu of %zu targets met\n", table.targets() - table.missed(),
                 table.targets());
  }
  if (b.verification_failed) {
    std::fprintf(stderr, "squeeze_bench_xfer: a result was WRONG (see the errors above)\n");
    return 1;
  }
  return 0;
}
