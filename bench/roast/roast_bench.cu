// SPDX-License-Identifier: Apache-2.0
// bench/roast/roast_bench.cu: ROAST-MM in the Table 7 setting of Desai et al. (ICML 2023).
//
// Batch 512, square K = N in {512 .. 16384}, |M| = 4 MB and 64 MB. The baseline is cuBLAS
// on the dense W in the same precision, in the same run: W is ROAST's own W, materialized
// from M, so both compute the same product and the outputs are cross-checked. Also the
// per-element HashedNet GEMM (every weight hashed on its own) at the sizes where it is
// affordable. Reported: the median device time per call (20 calls captured into a CUDA
// graph, 20 timed replays after 3 eager warm-up calls; one call between two events would
// count the host's work before each launch too), TFLOPS, and in the summary ROAST / cuBLAS
// time ratios.
//
//   squeeze_bench_roast [--max-dim=16384] [google benchmark flags]
#include <benchmark/benchmark.h>
#include <cublas_v2.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/manual_time.hpp"
#include "roast/roast_study.cuh"
#include "squeeze/core/buffer.hpp"
#include "squeeze/core/device.hpp"
#include "squeeze/core/timer.hpp"
#include "squeeze/roast/gemm.cuh"

namespace core = squeeze::core;
namespace roast = squeeze::roast;

namespace roast_bench {

using namespace squeeze::bench::roast_study;

/// HashedNet: every weight at its own hashed slot of M (per-element hash), fp32 SIMT GEMM.
struct hashednet_problem {
  const float* x;
  const float* memory;
  float* y;
  roast::universal_hash hash;
  std::uint64_t dim;
  float scale;
  __host__ __device__ std::uint64_t rows() const { return batch; }
  __host__ __device__ std::uint64_t cols() const { return dim; }
  __host__ __device__ std::uint64_t depth() const { return dim; }
  __device__ float a(std::uint64_t m, std::uint64_t k) const { return x[m * dim + k]; }
  __device__ float b(std::uint64_t k, std::uint64_t n) const {
    return scale * memory[hash(k * dim + n)];
  }
  __device__ void store(std::uint64_t m, std::uint64_t n, float v) const { y[m * dim + n] = v; }
};

std::map<std::string, double> ms;  // median per benchmark name

/// Device time per call of `work` (on timing_stream()): 20 calls captured into a CUDA graph,
/// its replays timed with events. The time of one call between two events, which also
/// counts the host's work before the launch, is kept as a counter (see timing_stream()).
template <class Work>
void timed(benchmark::State& bs, const std::string& name, Work&& work) {
  ms[name] = squeeze::bench::time_manual_graph(bs, timing_stream(), 20, work);
  bs.counters["TFLOPS"] = 2.0 * batch * 1e-9 * bs.range(0) * bs.range(0) / ms[name];
  bs.counters["one_call_us"] =
      1e3 * core::time_region(timing_stream(), {.warmup = 1, .repeats = 20}, work).median_ms;
}

/// Everything one (type, size) needs, allocated on first use.
template <class T>
struct fixture {
  std::uint64_t dim;
  core::device_buffer<T> x, y_roast, y_dense, w;
  core::device_buffer<T> dy, dx_roast, dx_dense;  // backward (16-bit types)
  core::device_buffer<float> dw, dm, dm_ref;
  std::map<int, core::device_buffer<T>> memory;  // by MB
  std::map<int, roast::mapping> maps;

  explicit fixture(std::uint64_t d)
      : dim{d}, x{batch * d}, y_roast{batch * d}, y_dense{batch * d}, w{d * d} {
    fill(x, 11 + d, 1.0f);
    if constexpr (!std::is_same_v<T, float>) {
      dy = core::device_buffer<T>{batch * d};
      dx_roast = core::device_buffer<T>{batch * d};
      dx_dense = core::device_buffer<T>{batch * d};
      dw = core::device_buffer<float>{d * d};
      fill(dy, 23 + d, 1.0f);
    }
    for (int mb : {4, 64}) {
      const std::uint64_t values = std::uint64_t(mb) * 1000000 / sizeof(T);
      memory.emplace(mb, core::device_buffer<T>{values});
      fill(memory.at(mb), 13 + d + mb, 1.0f);
      maps.emplace(mb, roast::mapping{roast::module_desc{d, d, tile, roast::gms_scale(1.0, d), 17},
                                      values, sizeof(T)});
    }
    if constexpr (!std::is_same_v<T, float>) {
      dm = core::device_buffer<float>{memory.at(4).size()};
      dm_ref = core::device_buffer<float>{memory.at(4).size()};
    }
    // The same M with the sign hash on (key -4).
    maps.emplace(-4,
                 roast::mapping{roast::module_desc{d, d, tile, roast::gms_scale(1.0, d), 17, true},
                                memory.at(4).size(), sizeof(T)});
    SQUEEZE_CUDA_TRY(cudaDeviceSynchronize());
  }
  void materialize(int key) {
    materialize_kernel<<<2048, 256>>>(maps.at(key), memory.at(key < 0 ? -key : key).data(),
                                      w.data());
    SQUEEZE_CHECK_LAUNCH();
  }
};

template <class T>
fixture<T>& get(std::uint64_t d) {
  static std::map<std::uint64_t, std::unique_ptr<fixture<T>>> all;
  auto& f = all[d];
  if (!f) {
    all.clear();  // one size at a time keeps the largest within memory
    all[d] = std::make_unique<fixture<T>>(d);
    return *all[d];
  }
  return *f;
}

/// ROAST's Y against cuBLAS's on the materialized W: the largest difference relative to
/// the largest |Y| must be within the precision (TF32 or bf16 output).
template <class T>
void cross_check(fixture<T>& f, const std::string& what) {
  require_close(relative_difference(f.y_roast, f.y_dense), std::is_same_v<T, float> ? 5e-3 : 2e-2,
                what);
}

/// Registers benchmark `name` at size d: body(bs, name, fixture) inside the error handling
/// every case shares.
template <class T, class Body>
void reg(const std::string& name, std::uint64_t d, int iterations, Body body) {
  benchmark::RegisterBenchmark(name.c_str(),
                               [=](benchmark::State& bs) {
                                 try {
                                   body(bs, name, get<T>(d));
                                 } catch (const std::exception& e) {
                                   bs.SkipWithError(e.what());
                                 }
                               })
      ->Arg(static_cast<int64_t>(d))
      ->Iterations(iterations)
      ->UseManualTime()
      ->Unit(benchmark::kMicrosecond);
}

template <class T>
void register_type(const char* type, std::uint64_t max_dim) {
  using F = fixture<T>;
  for (std::uint64_t d = 512; d <= max_dim; d *= 2) {
    const std::string size = std::to_string(d);
    for (int key : {4, 64, -4}) {  // |M| in MB; -4: 4 MB with the sign hash
      if (key < 0 && d != 8192) continue;
      const int mb = key < 0 ? -key : key;
      const std::string name = std::string{"roast/forward/"} + type + "/" + std::to_string(mb) +
                               (key < 0 ? "MB-signs/" : "MB/") + size;
      reg<T>(name, d, 20, [d, key, mb](benchmark::State& bs, const std::string& n, F& f) {
        timed(bs, n, [&] {
          roast::forward(f.x.data(), d, f.memory.at(mb).data(), f.maps.at(key), batch,
                         f.y_roast.data(), d, timing_stream());
        });
        // The baseline on the same W, then the cross-check of the two outputs.
        f.materialize(key);
        cublas_forward(f.x.data(), f.w.data(), f.y_dense.data(), d, d);
        cross_check(f, n);
      });
    }
    reg<T>(std::string{"cublas/forward/"} + type + "/" + size, d, 20,
           [d](benchmark::State& bs, const std::string& n, F& f) {
             f.materialize(4);
             timed(bs, n, [&] { cublas_forward(f.x.data(), f.w.data(), f.y_dense.data(), d, d); });
           });
    if constexpr (!std::is_same_v<T, float>) {
      reg<T>(std::string{"cublas/dx/"} + type + "/" + size, d, 20,
             [d](benchmark::State& bs, const std::string& n, F& f) {
               f.materialize(4);
               timed(bs, n, [&] {
                 cublas_backward_input(f.dy.data(), f.w.data(), f.dx_dense.data(), d, d);
               });
             });
      reg<T>(std::string{"roast/dx/"} + type + "/4MB/" + size, d, 20,
             [d](benchmark::State& bs, const std::string& n, F& f) {
               timed(bs, n, [&] {
                 roast::backward_input(f.dy.data(), d, f.memory.at(4).data(), f.maps.at(4), batch,
                                       f.dx_roast.data(), d, timing_stream());
               });
               f.materialize(4);
               cublas_backward_input(f.dy.data(), f.w.data(), f.dx_dense.data(), d, d);
               require_close(relative_difference(f.dx_roast, f.dx_dense), 2e-2, n);
             });
      reg<T>(std::string{"cublas/dw/"} + type + "/" + size, d, 20,
             [d](benchmark::State& bs, const std::string& n, F& f) {
               timed(bs, n,
                     [&] { cublas_backward_weight(f.x.data(), f.dy.data(), f.dw.data(), d, d); });
             });
      // dM with atomics (workspace 0), and through a gradient_fold (deterministic; built once,
      // outside the timing) with its default workspace and, at 8192, a sweep of workspace
      // sizes in MiB (1024: the whole dense gradient, one strip).
      std::vector<std::uint64_t> workspaces{0, roast::gradient_fold::default_workspace_bytes >> 20};
      if (d == 8192) workspaces.insert(workspaces.end(), {8, 16, 64, 1024});
      for (std::size_t i = 0; i < workspaces.size(); ++i) {
        const std::uint64_t mib = workspaces[i];
        const std::string name = (mib == 0 ? std::string{"roast/dm/"}
                                  : i == 1 ? std::string{"roast/dm-fold/"}
                                           : "roast/dm-fold-" + std::to_string(mib) + "MiB/") +
                                 type + "/4MB/" + size;
        reg<T>(name, d, 20, [d, mib](benchmark::State& bs, const std::string& n, F& f) {
          std::optional<roast::gradient_fold> fold;
          roast::gemm_options options;
          if (mib != 0) options.fold = &fold.emplace(f.maps.at(4), nullptr, mib << 20);
          const auto run = [&] {
            roast::backward_memory(f.x.data(), d, f.dy.data(), d, f.maps.at(4), batch, f.dm.data(),
                                   timing_stream(), options);
          };
          f.dm.fill_bytes(0, nullptr);
          timed(bs, n, run);
          // One more call into a zeroed dM against the fold of cuBLAS's dW.
          f.dm.fill_bytes(0, nullptr);
          run();
          cublas_backward_weight(f.x.data(), f.dy.data(), f.dw.data(), d, d);
          f.dm_ref.fill_bytes(0, nullptr);
          fold_dense_gradient<<<2048, 256>>>(f.maps.at(4), f.dw.data(), f.dm_ref.data());
          SQUEEZE_CHECK_LAUNCH();
          require_close(relative_difference(f.dm, f.dm_ref), 1e-3, n);
        });
      }
      // The fold kernel alone over the whole dense gradient (one strip): its bandwidth.
      if (d == 8192) {
        reg<T>(std::string{"roast/fold-only/"} + type + "/4MB/" + size, d, 20,
               [d](benchmark::State& bs, const std::string& n, F& f) {
                 roast::gradient_fold fold{f.maps.at(4), nullptr, std::uint64_t{1} << 40};
                 roast::gemm_options options;
                 options.fold = &fold;
                 roast::backward_memory(f.x.data(), d, f.dy.data(), d, f.maps.at(4), batch,
                                        f.dm.data(), timing_stream(), options);
                 timed(bs, n, [&] { fold.fold_strip(0, f.dm.data(), timing_stream()); });
                 bs.counters.erase("TFLOPS");
                 bs.counters["workspace_bytes"] = static_cast<double>(fold.workspace_bytes());
               });
      }
      // One layer's training step: forward, dX, dW (dense) or dM (ROAST).
      reg<T>(std::string{"cublas/step/"} + type + "/" + size, d, 20,
             [d](benchmark::State& bs, const std::string& n, F& f) {
               f.materialize(4);
               timed(bs, n, [&] {
                 cublas_forward(f.x.data(), f.w.data(), f.y_dense.data(), d, d);
                 cublas_backward_input(f.dy.data(), f.w.data(), f.dx_dense.data(), d, d);
                 cublas_backward_weight(f.x.data(), f.dy.data(), f.dw.data(), d, d);
               });
             });
      // The same step with dM through a gradient_fold (built once, outside the timing).
      for (const bool folded : {false, true}) {
        const std::string name =
            std::string{folded ? "roast/step-fold/" : "roast/step/"} + type + "/4MB/" + size;
        reg<T>(name, d, 20, [d, folded](benchmark::State& bs, const std::string& n, F& f) {
          const auto& map = f.maps.at(4);
          const T* m = f.memory.at(4).data();
          std::optional<roast::gradient_fold> fold;
          roast::gemm_options options;
          if (folded) options.fold = &fold.emplace(map, nullptr);
          timed(bs, n, [&] {
            roast::forward(f.x.data(), d, m, map, batch, f.y_roast.data(), d, timing_stream());
            roast::backward_input(f.dy.data(), d, m, map, batch, f.dx_roast.data(), d,
                                  timing_stream());
            roast::backward_memory(f.x.data(), d, f.dy.data(), d, map, batch, f.dm.data(),
                                   timing_stream(), options);
          });
        });
      }
    } else if (d <= 8192) {
      reg<T>(std::string{"hashednet/forward/fp32/4MB/"} + size, d, 5,
             [d](benchmark::State& bs, const std::string& n, F& f) {
               const hashednet_problem p{
                   f.x.data(),
                   f.memory.at(4).data(),
                   f.y_dense.data(),
                   roast::universal_hash::from_seed(19, f.memory.at(4).size()),
                   d,
                   roast::gms_scale(1.0, d)};
               timed(bs, n, [&] { roast::detail::launch_simt(p, timing_stream()); });
             });
    }
  }
}

}  // namespace roast_bench

using namespace roast_bench;

int main(int argc, char** argv) {
  std::uint64_t max_dim = 16384;
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg{argv[i]};
    if (arg.rfind("--max-dim=", 0) == 0) {
      max_dim = std::strtoull(argv[i] + 10, nullptr, 10);
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  const auto presence = core::detect_devices();
  if (!presence.present()) {
    std::printf("squeeze_bench_roast: %s; nothing to run\n", presence.message().c_str());
    return 0;
  }
  benchmark::AddCustomContext("gpu", core::describe(core::query_device()));
  benchmark::AddCustomContext("roast_batch", std::to_string(batch));
  benchmark::AddCustomContext("roast_tile", std::to_string(tile.k) + "x" + std::to_string(tile.n));
  register_type<float>("tf32", max_dim);
  register_type<__nv_bfloat16>("bf16", max_dim);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();

  std::printf("\nROAST-MM forward / cuBLAS (same precision, same run; batch %llu, tile %ux%u)\n",
              static_cast<unsigned long long>(batch), tile.k, tile.n);
  std::printf("%-6s %6s %12s %12s %12s %8s %8s\n", "type", "dim", "cuBLAS us", "4MB us", "64MB us",
              "4MB x", "64MB x");
  for (const char* type : {"tf32", "bf16"}) {
    for (std::uint64_t d = 512; d <= max_dim; d *= 2) {
      const std::string s = std::to_string(d);
      const auto find = [](const std::string& k) { return ms.count(k) ? ms[k] : NAN; };
      const double base = find(std::string{"cublas/forward/"} + type + "/" + s);
      const double r4 = find(std::string{"roast/forward/"} + type + "/4MB/" + s);
      const double r64 = find(std::string{"roast/forward/"} + type + "/64MB/" + s);
      std::printf("%-6s %6s %12.1f %12.1f %12.1f %8.2f %8.2f\n", type, s.c_str(), base * 1e3,
                  r4 * 1e3, r64 * 1e3, r4 / base, r64 / base);
    }
  }
  std::printf("\nbf16 backward and one layer's training step, |M| = 4MB (ROAST / cuBLAS)\n");
  std::printf("%6s %10s %10s %6s %10s %10s %6s %10s %10s %6s\n", "dim", "cuBLAS dX", "dX", "x",
              "cuBLAS dW", "dM", "x", "cuBLAS st", "step", "x");
  for (std::uint64_t d = 512; d <= max_dim; d *= 2) {
    const std::string s = std::to_string(d);
    const auto find = [](const std::string& k) { return ms.count(k) ? ms[k] * 1e3 : NAN; };
    const double bx = find("cublas/dx/bf16/" + s), rx = find("roast/dx/bf16/4MB/" + s);
    const double bw = find("cublas/dw/bf16/" + s), rm = find("roast/dm/bf16/4MB/" + s);
    const double bs = find("cublas/step/bf16/" + s), rs = find("roast/step/bf16/4MB/" + s);
    std::printf("%6s %10.1f %10.1f %6.2f %10.1f %10.1f %6.2f %10.1f %10.1f %6.2f\n", s.c_str(), bx,
                rx, rx / bx, bw, rm, rm / bw, bs, rs, rs / bs);
  }
  std::printf("\nthe same through a gradient_fold (deterministic), |M| = 4MB\n");
  std::printf("%6s %10s %10s %6s %10s %10s %6s\n", "dim", "cuBLAS dW", "dM fold", "x", "cuBLAS st",
              "step", "x");
  for (std::uint64_t d = 512; d <= max_dim; d *= 2) {
    const std::string s = std::to_string(d);
    const auto find = [](const std::string& k) { return ms.count(k) ? ms[k] * 1e3 : NAN; };
    const double bw = find("cublas/dw/bf16/" + s), rm = find("roast/dm-fold/bf16/4MB/" + s);
    const double bs = find("cublas/step/bf16/" + s), rs = find("roast/step-fold/bf16/4MB/" + s);
    std::printf("%6s %10.1f %10.1f %6.2f %10.1f %10.1f %6.2f\n", s.c_str(), bw, rm, rm / bw, bs, rs,
                rs / bs);
  }
  if (ms.count("roast/fold-only/bf16/4MB/8192")) {
    const double t = ms["roast/fold-only/bf16/4MB/8192"];
    const double bytes = 8192.0 * 8192.0 * sizeof(float);
    std::printf("the fold alone, 8192 (one strip, %.0f MB read): %.1f us, %.0f GB/s\n", bytes / 1e6,
                t * 1e3, bytes / (t * 1e-3) / 1e9);
  }
  for (const int mib : {8, 16, 64, 1024}) {
    const std::string k = "roast/dm-fold-" + std::to_string(mib) + "MiB/bf16/4MB/8192";
    if (ms.count(k) && ms.count("cublas/dw/bf16/8192")) {
      std::printf("dM through a fold with a %4d MiB workspace, 8192: %.1f us (%.2f x cuBLAS dW)\n",
                  mib, ms[k] * 1e3, ms[k] / ms["cublas/dw/bf16/8192"]);
    }
  }
  for (const char* type : {"tf32", "bf16"}) {
    const std::string k = std::string{"roast/forward/"} + type + "/4MB-signs/8192";
    const std::string b = std::string{"cublas/forward/"} + type + "/8192";
    if (ms.count(k) && ms.count(b)) {
      std::printf("%-6s 8192 with the sign hash, 4MB: %.1f us (%.2f x cuBLAS)\n", type, ms[k] * 1e3,
                  ms[k] / ms[b]);
    }
  }
  const auto hn = ms.find("hashednet/forward/fp32/4MB/8192");
  const auto rt = ms.find("roast/forward/tf32/4MB/8192");
  if (hn != ms.end() && rt != ms.end()) {
    std::printf("HashedNet (per-element, fp32) 8192: %.1f us; ROAST TF32 4MB is %.1fx faster\n",
                hn->second * 1e3, hn->second / rt->second);
  }
  return 0;
}
