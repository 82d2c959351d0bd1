// SPDX-License-Identifier: Apache-2.0
// squeeze_bench_ibp: IBP decompression throughput against space savings (Kamath et al.,
// EuroSys 2026, §6.1),
// and the compressed gather's speedup over the plain gather. See ibp/ibp_study.cuh.
//
//   squeeze_bench_ibp [--items=N] [--fashion-mnist=train-images-idx3-ubyte]
//                     [--benchmark_out=file.json --benchmark_out_format=json]
// With --fashion-mnist (the uncompressed IDX file), also space savings and
// preprocessing / compression rates on real data (printed in the table).
//
// Per (row size S, saving s) four benchmarks, in this order: ideal, plain, decode (the
// condensed layout) and decode_in_place (the in-place layout).
// Counters: GB/s of uncompressed rows delivered; for decode also ratio_to_ideal,
// speedup_vs_plain and the bound 1 / (1 - s). The targets are checked at the end.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <tuple>

#include "common/report.hpp"
#include "ibp/ibp_study.cuh"

namespace {

namespace study = squeeze::bench::ibp_study;
using method = study::decode_case::method;

struct state {
  std::size_t items = 100'000;
  std::unique_ptr<study::decode_case> current;  // one case's buffers at a time
  std::tuple<std::size_t, double> current_key{0, 0.0};
  std::map<std::tuple<std::size_t, double, method>, double> gbps;
  std::map<std::tuple<std::size_t, double>, double> measured_saving;
  bool wrong = false;
  std::string fashion_mnist;  // uncompressed train-images IDX, for the real-data rows

  study::decode_case& get(std::size_t s, double saving) {
    if (!current || current_key != std::tuple{s, saving}) {
      current.reset();
      current = std::make_unique<study::decode_case>(
          items, s, saving, 1000 * s + static_cast<std::uint64_t>(100 * saving));
      current_key = {s, saving};
      measured_saving[{s, saving}] = current->saving();
    }
    return *current;
  }
};

void run(benchmark::State& bs, state& st, method m, std::size_t s, double saving) {
  study::decode_case* c = nullptr;
  try {
    c = &st.get(s, saving);
    c->verify(m);
    for (int i = 0; i < 2; ++i) static_cast<void>(c->time_once(m));
  } catch (const squeeze::bench::verification_error& e) {
    st.wrong = true;
    bs.SkipWithError(e.what());
    return;
  } catch (const std::exception& e) {
    bs.SkipWithError(e.what());
    return;
  }
  std::vector<double> samples;
  for (auto _ : bs) {
    const double ms = c->time_once(m);
    bs.SetIterationTime(ms * 1e-3);
    samples.push_back(ms);
  }
  const double g =
      static_cast<double>(c->output_bytes()) / (squeeze::core::summarize(samples).median_ms * 1e6);
  st.gbps[{s, saving, m}] = g;
  bs.counters["GB/s"] = g;
  bs.counters["saving"] = c->saving();
  if (m == method::decode) {
    bs.counters["ratio_to_ideal"] = g / st.gbps[{s, saving, method::ideal}];
    bs.counters["speedup_vs_plain"] = g / st.gbps[{s, saving, method::plain}];
    bs.counters["speedup_bound"] = 1.0 / (1.0 - c->saving());
  }
}

}  // namespace

int main(int argc, char** argv) {
  state st;
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg{argv[i]};
    if (arg.rfind("--fashion-mnist=", 0) == 0) {
      st.fashion_mnist = std::string{arg.substr(16)};
    } else if (arg.rfind("--items=", 0) == 0) {
      st.items = std::strtoull(argv[i] + 8, nullptr, 10);
      if (st.items == 0) {
        std::fprintf(stderr, "--items needs a positive integer\n");
        return 2;
      }
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  const auto presence = squeeze::core::detect_devices();
  if (!presence.present()) {
    std::printf("squeeze_bench_ibp: %s; nothing to run\n", presence.message().c_str());
    return 0;
  }
  benchmark::AddCustomContext("gpu", squeeze::core::describe(squeeze::core::query_device()));
  benchmark::AddCustomContext("ibp_items", std::to_string(st.items));
  for (const std::size_t s : {std::size_t{256}, std::size_t{1024}, std::size_t{4096}}) {
    for (const double saving : {0.10, 0.25, 0.50, 0.75, 0.90}) {
      for (const method m :
           {method::ideal, method::plain, method::decode, method::decode_in_place}) {
        const char* name = m == method::ideal    ? "ideal"
                           : m == method::plain  ? "plain"
                           : m == method::decode ? "decode"
                                                 : "decode_in_place";
        const std::string bench = std::string{"ibp/"} + name + '/' + std::to_string(s) + '/' +
                                  std::to_string(static_cast<int>(100 * saving + 0.5));
        benchmark::RegisterBenchmark(
            bench.c_str(), [&st, m, s, saving](benchmark::State& bs) { run(bs, st, m, s, saving); })
            ->Iterations(10)
            ->UseManualTime()
            ->Unit(benchmark::kMillisecond);
      }
    }
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();

  squeeze::bench::report_table table;
  for (const auto& [key, saving] : st.measured_saving) {
    const auto [s, wanted] = key;
    const auto d = st.gbps.find({s, wanted, method::decode});
    const auto i = st.gbps.find({s, wanted, method::ideal});
    const auto p = st.gbps.find({s, wanted, method::plain});
    if (d == st.gbps.end() || i == st.gbps.end() || p == st.gbps.end()) continue;
    study::add_rows(table, study::case_result{s, saving, d->second, i->second, p->second}, wanted);
    const auto ip = st.gbps.find({s, wanted, method::decode_in_place});
    if (ip != st.gbps.end()) {
      table.add({"ibp",
                 "in-place decode " + squeeze::bench::format_bytes(s) + " at " +
                     squeeze::bench::format_number(100.0 * saving, 0) +
                     " % saved vs condensed decode",
                 ip->second, d->second, "GB/s", std::nullopt});
    }
  }
  if (!st.fashion_mnist.empty()) {
    try {
      const auto sets = study::real_data_sets(st.fashion_mnist);
      for (const auto& d : sets) study::add_real_data_rows(table, d);
      study::add_cluster_rows(table, sets[1], {4, 16, 64});  // Fashion-MNIST uint8, C = 4
      table.add_note(
          "ibp: the savings Kamath et al. report, for scale: sparse GNN 92.9 %, dense GNN "
          "10.4 %, DLRM 8.3 %, KV-cache 2-9 %");
    } catch (const squeeze::bench::verification_error& e) {
      st.wrong = true;
      table.add_error("ibp", e.what());
    } catch (const std::exception& e) {
      table.add_error("ibp", e.what());
    }
  }
  std::printf("\n");
  table.print(stdout);
  std::printf("\n%zu of %zu targets met\n", table.targets() - table.missed(), table.targets());
  return st.wrong ? 1 : 0;
}
