// SPDX-License-Identifier: Apache-2.0
// squeeze_bench_frsz2: the roofline of Grützmacher et al. (FRSZ2, §IV-C): 2^28 random values
// read through each storage format with 0 ... 64 flops per value, and compression against
// device copy.
//
//   squeeze_bench_frsz2 [--values=N] [--benchmark_out=file.json --benchmark_out_format=json]
//
// Benchmarks:
//   frsz2/copy                       cudaMemcpy device to device of N doubles (the ceiling of
//                                    compression: bytes read + written over time)
//   frsz2/read/<storage>/<path>/<f>  every value read once as a double and put through f
//                                    flops (f/2 dependent FMAs); path = value (one value
//                                    per thread: accessor.access), warp (FRSZ2 only: the
//                                    warp decoder, one coalesced load per block), vector
//                                    (four values per thread: accessor.read_vector), tile
//                                    (the same values by frsz2::tile_reader, which keeps
//                                    the lane's offsets), tile8 (8 values per thread) or
//                                    tile8u3 (the same, 3 reads in flight instead of 4).
//                                    Each read kernel runs on as many blocks as fit at once
//                                    (frsz2_study::read_grid).
//   frsz2/compress/<storage>         frsz2::compress of N doubles
// Counters: GB/s of storage bytes (read: stored bytes; compress: input + output bytes),
// Gvalues/s. The project's targets are checked in the table at the end.
#include <benchmark/benchmark.h>

#include <squeeze/core.hpp>
#include <squeeze/frsz2/array.cuh>
#include <squeeze/frsz2/compress.cuh>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "common/manual_time.hpp"
#include "common/report.hpp"
#include "frsz2/frsz2_study.cuh"

namespace frsz2 = squeeze::frsz2;
namespace core = squeeze::core;

namespace frsz2_bench {

using squeeze::bench::frsz2_study::default_unroll;
using squeeze::bench::frsz2_study::max_read_grid;
using squeeze::bench::frsz2_study::plain_reader;
using squeeze::bench::frsz2_study::read_grid;
using squeeze::bench::frsz2_study::read_kernel;
using squeeze::bench::frsz2_study::threads;
using squeeze::bench::frsz2_study::tile_reader;
using squeeze::bench::frsz2_study::value_reader;
using squeeze::bench::frsz2_study::vector_reader;
using squeeze::bench::frsz2_study::warp_reader;

/// The buffers of one run: the values in every storage.
struct state {
  std::size_t n = std::size_t{1} << 28;
  unsigned check_grid = 0;  // the grid of the cross-check runs: max_read_grid()
  core::device_buffer<double> x, copy_dst, sink;
  frsz2::array<double> f64;
  frsz2::array<float> f32;
  frsz2::array<__half> f16;
  frsz2::array<__nv_bfloat16> bf16;
  frsz2::array<frsz2::format<16>> z16;
  frsz2::array<frsz2::format<21>> z21;
  frsz2::array<frsz2::format<32>> z32;
  std::map<std::string, double> ms;                  // median per benchmark name
  std::map<std::string, std::vector<double>> sinks;  // results, for cross-checks
  bool wrong = false;

  /// Allocates and fills every storage; main calls it before any benchmark is built.
  void init() {
    x = core::device_buffer<double>{n};
    copy_dst = core::device_buffer<double>{n};
    check_grid = max_read_grid();
    sink = core::device_buffer<double>{std::size_t{check_grid} * threads};
    // Random values as a Krylov vector holds them: normal, unit norm overall.
    std::vector<double> h(n);
    std::mt19937_64 rng{2024};
    std::normal_distribution<double> normal{0.0, 1.0 / std::sqrt(static_cast<double>(n))};
    for (auto& v : h) v = normal(rng);
    x.copy_from(std::span<const double>{h}, nullptr);
    f64 = frsz2::array<double>{n, nullptr};
    f32 = frsz2::array<float>{n, nullptr};
    f16 = frsz2::array<__half>{n, nullptr};
    bf16 = frsz2::array<__nv_bfloat16>{n, nullptr};
    z16 = frsz2::array<frsz2::format<16>>{n, nullptr};
    z21 = frsz2::array<frsz2::format<21>>{n, nullptr};
    z32 = frsz2::array<frsz2::format<32>>{n, nullptr};
    f64.store(0, x.data(), n, nullptr);
    f32.store(0, x.data(), n, nullptr);
    f16.store(0, x.data(), n, nullptr);
    bf16.store(0, x.data(), n, nullptr);
    z16.store(0, x.data(), n, nullptr);
    z21.store(0, x.data(), n, nullptr);
    z32.store(0, x.data(), n, nullptr);
    SQUEEZE_CUDA_TRY(cudaDeviceSynchronize());
  }
};

state st;

template <class Work>
void timed(benchmark::State& bs, const std::string& name, Work&& work) {
  st.ms[name] = squeeze::bench::time_manual(bs, work);
}

template <class Reader, int Flops, int Unroll = default_unroll<Reader>>
void read_case(benchmark::State& bs, const std::string& name, Reader reader,
               std::size_t stored_bytes) {
  try {
    const unsigned grid = read_grid<Reader, Flops, Unroll>();
    auto work = [&] {
      read_kernel<Reader, Flops, Unroll><<<grid, threads>>>(reader, st.n, st.sink.data());
      SQUEEZE_CHECK_LAUNCH();
    };
    timed(bs, name, work);
    // One more run for the cross-checks, on the same grid for every reader (the timed grids
    // differ by kernel), so readers of the same values in the same order leave equal sinks.
    read_kernel<Reader, Flops, Unroll><<<st.check_grid, threads>>>(reader, st.n, st.sink.data());
    SQUEEZE_CHECK_LAUNCH();
    std::vector<double> sink(st.sink.size());
    st.sink.copy_to(std::span<double>{sink}, nullptr);
    SQUEEZE_CUDA_TRY(cudaDeviceSynchronize());
    st.sinks[name] = std::move(sink);
  } catch (const std::exception& e) {
    bs.SkipWithError(e.what());
    return;
  }
  const double s = st.ms[name] * 1e-3;
  bs.counters["GB/s"] = static_cast<double>(stored_bytes) / s * 1e-9;
  bs.counters["Gvalues/s"] = static_cast<double>(st.n) / s * 1e-9;
  bs.counters["bits/value"] = 8.0 * static_cast<double>(stored_bytes) / static_cast<double>(st.n);
}

template <int Flops>
void register_reads() {
  const std::string f = '/' + std::to_string(Flops);
  auto reg = [](const std::string& name, auto fn) {
    benchmark::RegisterBenchmark(name.c_str(), [name, fn](benchmark::State& bs) { fn(bs, name); })
        ->Iterations(20)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
  };
  auto plain = [&](const char* storage, auto tag) {
    using S = decltype(tag);
    auto get = []() -> const frsz2::array<S>& {
      if constexpr (std::is_same_v<S, double>)
        return st.f64;
      else if constexpr (std::is_same_v<S, float>)
        return st.f32;
      else if constexpr (std::is_same_v<S, __half>)
        return st.f16;
      else
        return st.bf16;
    };
    reg(std::string{"frsz2/read/"} + storage + "/value" + f,
        [get](benchmark::State& bs, const std::string& name) {
          read_case<plain_reader<S>, Flops>(bs, name, plain_reader<S>{get().data_handle()},
                                            st.n * sizeof(S));
        });
    reg(std::string{"frsz2/read/"} + storage + "/vector" + f,
        [get](benchmark::State& bs, const std::string& name) {
          read_case<vector_reader<S>, Flops>(bs, name, vector_reader<S>{get().data_handle()},
                                             st.n * sizeof(S));
        });
    reg(std::string{"frsz2/read/"} + storage + "/tile" + f,
        [get](benchmark::State& bs, const std::string& name) {
          read_case<tile_reader<S>, Flops>(bs, name, tile_reader<S>{get().data_handle()},
                                           st.n * sizeof(S));
        });
    reg(std::string{"frsz2/read/"} + storage + "/tile8" + f,
        [get](benchmark::State& bs, const std::string& name) {
          read_case<tile_reader<S, 8>, Flops>(bs, name, tile_reader<S, 8>{get().data_handle()},
                                              st.n * sizeof(S));
        });
    reg(std::string{"frsz2/read/"} + storage + "/tile8u3" + f,
        [get](benchmark::State& bs, const std::string& name) {
          read_case<tile_reader<S, 8>, Flops, 3>(bs, name, tile_reader<S, 8>{get().data_handle()},
                                                 st.n * sizeof(S));
        });
  };
  plain("float64", double{});
  plain("float32", float{});
  plain("float16", __half{});
  plain("bfloat16", __nv_bfloat16{});
  auto packed = [&](const char* storage, auto tag) {
    using F = decltype(tag);
    auto get = []() -> const frsz2::array<F>& {
      if constexpr (F::bits == 16)
        return st.z16;
      else if constexpr (F::bits == 21)
        return st.z21;
      else
        return st.z32;
    };
    reg(std::string{"frsz2/read/"} + storage + "/value" + f,
        [get](benchmark::State& bs, const std::string& name) {
          read_case<value_reader<F>, Flops>(bs, name, value_reader<F>{get().data_handle()},
                                            F::bytes(st.n));
        });
    reg(std::string{"frsz2/read/"} + storage + "/warp" + f,
        [get](benchmark::State& bs, const std::string& name) {
          read_case<warp_reader<F>, Flops>(bs, name, warp_reader<F>{get().ref()}, F::bytes(st.n));
        });
    reg(std::string{"frsz2/read/"} + storage + "/vector" + f,
        [get](benchmark::State& bs, const std::string& name) {
          read_case<vector_reader<F>, Flops>(bs, name, vector_reader<F>{get().data_handle()},
                                             F::bytes(st.n));
        });
    reg(std::string{"frsz2/read/"} + storage + "/tile" + f,
        [get](benchmark::State& bs, const std::string& name) {
          read_case<tile_reader<F>, Flops>(bs, name, tile_reader<F>{get().data_handle()},
                                           F::bytes(st.n));
        });
    reg(std::string{"frsz2/read/"} + storage + "/tile8" + f,
        [get](benchmark::State& bs, const std::string& name) {
          read_case<tile_reader<F, 8>, Flops>(bs, name, tile_reader<F, 8>{get().data_handle()},
                                              F::bytes(st.n));
        });
    reg(std::string{"frsz2/read/"} + storage + "/tile8u3" + f,
        [get](benchmark::State& bs, const std::string& name) {
          read_case<tile_reader<F, 8>, Flops, 3>(bs, name, tile_reader<F, 8>{get().data_handle()},
                                                 F::bytes(st.n));
        });
  };
  packed("frsz2_16", frsz2::format<16>{});
  packed("frsz2_21", frsz2::format<21>{});
  packed("frsz2_32", frsz2::format<32>{});
}

template <class F>
void compress_case(benchmark::State& bs, const std::string& name, frsz2::array<F>& a) {
  try {
    timed(bs, name, [&] { a.store(0, st.x.data(), st.n, nullptr); });
  } catch (const std::exception& e) {
    bs.SkipWithError(e.what());
    return;
  }
  bs.counters["GB/s"] = static_cast<double>(st.n * 8 + F::bytes(st.n)) / (st.ms[name] * 1e6);
}

}  // namespace frsz2_bench

using namespace frsz2_bench;

int main(int argc, char** argv) {
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg{argv[i]};
    if (arg.rfind("--values=", 0) == 0) {
      st.n = std::strtoull(argv[i] + 9, nullptr, 10) / 32 * 32;
      if (st.n == 0) {
        std::fprintf(stderr, "--values needs an integer of at least 32\n");
        return 2;
      }
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  const auto presence = core::detect_devices();
  if (!presence.present()) {
    std::printf("squeeze_bench_frsz2: %s; nothing to run\n", presence.message().c_str());
    return 0;
  }
  // The buffers first: the benchmarks' readers take their handles when they are built.
  try {
    st.init();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "squeeze_bench_frsz2: %s\n", e.what());
    return 1;
  }
  benchmark::AddCustomContext("gpu", core::describe(core::query_device()));
  benchmark::AddCustomContext("frsz2_values", std::to_string(st.n));
  benchmark::RegisterBenchmark(
      "frsz2/copy",
      [](benchmark::State& bs) {
        try {
          timed(bs, "frsz2/copy", [] {
            SQUEEZE_CUDA_TRY(cudaMemcpyAsync(st.copy_dst.data(), st.x.data(), st.n * 8,
                                             cudaMemcpyDeviceToDevice, nullptr));
          });
        } catch (const std::exception& e) {
          bs.SkipWithError(e.what());
          return;
        }
        bs.counters["GB/s"] = static_cast<double>(st.n * 16) / (st.ms["frsz2/copy"] * 1e6);
      })
      ->Iterations(20)
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond);
  register_reads<0>();
  register_reads<2>();
  register_reads<4>();
  register_reads<8>();
  register_reads<16>();
  register_reads<32>();
  register_reads<64>();
  auto reg_compress = [](const char* name, auto tag) {
    using F = decltype(tag);
    benchmark::RegisterBenchmark(name,
                                 [name](benchmark::State& bs) {
                                   if constexpr (F::bits == 16)
                                     compress_case(bs, name, st.z16);
                                   else if constexpr (F::bits == 21)
                                     compress_case(bs, name, st.z21);
                                   else
                                     compress_case(bs, name, st.z32);
                                 })
        ->Iterations(20)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
  };
  reg_compress("frsz2/compress/frsz2_16", frsz2::format<16>{});
  reg_compress("frsz2/compress/frsz2_21", frsz2::format<21>{});
  reg_compress("frsz2/compress/frsz2_32", frsz2::format<32>{});
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();

  // The warp decoder and the accessor read the same values in the same order: their
  // results must agree bit for bit, and so must vector and tile reads. Reads of several
  // values per lane sum them in another order: the total of the sinks (a sum of 2^28 values
  // of N(0, 1/n), of order 1) agrees to rounding.
  const auto total = [](const std::vector<double>& v) {
    double t = 0;
    for (const double x : v) t += x;
    return t;
  };
  for (const char* s :
       {"float64", "float32", "float16", "bfloat16", "frsz2_16", "frsz2_21", "frsz2_32"}) {
    for (const int f : {0, 64}) {
      const std::string a = std::string{"frsz2/read/"} + s + "/value/" + std::to_string(f);
      const std::string b = std::string{"frsz2/read/"} + s + "/warp/" + std::to_string(f);
      const std::string c = std::string{"frsz2/read/"} + s + "/vector/" + std::to_string(f);
      const std::string d = std::string{"frsz2/read/"} + s + "/tile/" + std::to_string(f);
      if (st.sinks.count(a) && st.sinks.count(b) && st.sinks[a] != st.sinks[b]) {
        std::printf("WRONG: %s and %s read different values\n", a.c_str(), b.c_str());
        st.wrong = true;
      }
      for (const char* path : {"/vector/", "/tile8/", "/tile8u3/"}) {
        const std::string e = std::string{"frsz2/read/"} + s + path + std::to_string(f);
        if (f == 0 && st.sinks.count(a) && st.sinks.count(e) &&
            !(std::abs(total(st.sinks[a]) - total(st.sinks[e])) <= 1e-9)) {
          std::printf("WRONG: %s and %s read different values (totals %.17g, %.17g)\n", a.c_str(),
                      e.c_str(), total(st.sinks[a]), total(st.sinks[e]));
          st.wrong = true;
        }
      }
      if (st.sinks.count(c) && st.sinks.count(d) && st.sinks[c] != st.sinks[d]) {
        std::printf("WRONG: %s and %s read different values\n", c.c_str(), d.c_str());
        st.wrong = true;
      }
    }
  }
  auto best = [](const std::string& storage, int f) {
    double t = 0;
    for (const char* path : {"/value/", "/warp/", "/vector/", "/tile/", "/tile8/", "/tile8u3/"}) {
      const auto it = st.ms.find("frsz2/read/" + storage + path + std::to_string(f));
      if (it != st.ms.end() && (t == 0 || it->second < t)) t = it->second;
    }
    return t;
  };
  squeeze::bench::report_table table;
  for (const int f : {0, 8, 64}) {
    const std::string fl = " (" + std::to_string(f) + " flops/value)";
    auto speed = [&](const std::string& what, const std::string& a, const std::string& b,
                     double target) {
      const double ta = best(a, f), tb = best(b, f);
      if (ta <= 0 || tb <= 0) return;
      squeeze::bench::comparison c;
      c.family = "frsz2";
      c.measurement = what + fl;
      c.value = 1.0 / ta;
      c.baseline = 1.0 / tb;
      c.unit = "1/ms";
      if (f == 0) c.min_ratio = target;
      table.add(c);
    };
    speed("read frsz2_32 vs float32", "frsz2_32", "float32", 0.95);
    speed("read frsz2_16 vs float16", "frsz2_16", "float16", 0.95);
    speed("read frsz2_21 vs frsz2_32", "frsz2_21", "frsz2_32", 1.25);
    speed("read frsz2_32 vs float64", "frsz2_32", "float64", 0.0);
  }
  for (const char* s : {"frsz2_16", "frsz2_21", "frsz2_32"}) {
    const auto it = st.ms.find(std::string{"frsz2/compress/"} + s);
    const auto copy = st.ms.find("frsz2/copy");
    if (it == st.ms.end() || copy == st.ms.end()) continue;
    const double bytes = [&] {
      const std::string name{s};
      if (name == "frsz2_16") return double(frsz2::format<16>::bytes(st.n));
      if (name == "frsz2_21") return double(frsz2::format<21>::bytes(st.n));
      return double(frsz2::format<32>::bytes(st.n));
    }();
    squeeze::bench::comparison c;
    c.family = "frsz2";
    c.measurement = std::string{"compress "} + s + " vs device copy (read+written)";
    c.value = (8.0 * double(st.n) + bytes) / (it->second * 1e6);
    c.baseline = 16.0 * double(st.n) / (copy->second * 1e6);
    c.min_ratio = 0.8;
    table.add(c);
  }
  table.print(stdout);
  return st.wrong ? 1 : 0;
}
