// SPDX-License-Identifier: Apache-2.0
// bench/coll/coll_bench.cu: the OSU-style allreduce latency table, with nccl-tests' algbw
// and busbw, for squeeze's ring and recursive doubling (raw, FRSZ2 on the wire at l = 8 and
// 16, IBP lossless, the naive point-to-point variant) and the selectors, against the
// transport's own allreduce (ncclAllReduce, MPI_Allreduce) in the same run, and, over NCCL,
// against NCCL's own ring (a second communicator made with NCCL_ALGO=Ring). One process
// per GPU:
//
//   mpiexec -n 2 squeeze_bench_coll [--min-bytes 524288] [--max-bytes 536870912]
//       [--iters 20] [--warmup 5] [--type float|double] [--transport nccl|mpi|both]
//       [--data dense|sparse] [--label default] [--json out.json] [--codec-study]
//       [--trace BYTES]
//
// --data: gradient-like N(0, 10^-2) values (dense), or the same with 9 rows of 64 values in
// 10 zero on each rank, the rows chosen per rank (sparse: an embedding table's gradients,
// where the lossless codec pays). The selectors use their default options (each call's
// arguments checked the first time a signature is seen): selector(frsz2_16) calibrates on
// synthetic values, selector(ibp) on this rank's input.
//
// Latency = the median over --iters calls (more below 16 MiB: iters x 16 MiB / size, at
// most 5 x iters, since a median of 20 calls of ~20 us moves by a few percent from run to
// run) of the slowest rank's time (each call timed by
// CUDA events between an MPI_Barrier and the call's completion, then the max over ranks),
// each variant in a block of its own calls; a selector's calls alternate with
// ncclAllReduce's, whose median in that block (native_paired_us) is the selector's baseline.
// algbw = bytes / latency; busbw = algbw * 2 (n - 1) / n (nccl-tests). Every variant's first
// call is checked against the native allreduce of the same data: raw variants within
// rounding of a different summation order, FRSZ2 within its bound, and every rank holding
// the same bits (a checksum compared across ranks). --label names the link setting in the
// output (export NCCL_P2P_DISABLE / NCCL_SHM_DISABLE around the run; NCCL_NVLS_ENABLE=0
// always). Ranks that share a GPU (more ranks than GPUs) skip NCCL, which allows one rank
// per GPU. --codec-study first prints the codec's GB/s on this GPU (rank 0). --trace BYTES:
// after that size's row, one more call of each of squeeze's compressed allreducers is traced
// (allreducer::trace_next_call: when each step's and slice's message was encoded, arrived and
// was decoded, from the call's start), printed by rank 0 and kept in the JSON ("traces").
// Each selector's calibration (milliseconds per rung of its ladder and candidate) is printed
// after the table and kept in the JSON ("selectors").
#include <mpi.h>
#include <nccl.h>

#include <algorithm>
#include <array>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "coll/coll_study.cuh"
#include "squeeze/coll/allreduce.cuh"
#include "squeeze/coll/mpi.hpp"
#include "squeeze/coll/mpi_nccl.hpp"
#include "squeeze/coll/nccl.hpp"
#include "squeeze/coll/selector.cuh"
#include "squeeze/core/buffer.hpp"
#include "squeeze/core/device.hpp"
#include "squeeze/core/timer.hpp"
#include "squeeze/frsz2/wire.cuh"
#include "squeeze/ibp/wire.cuh"

namespace coll = squeeze::coll;
namespace core = squeeze::core;
namespace frsz2 = squeeze::frsz2;
namespace study = squeeze::bench::coll_study;

namespace coll_bench {

struct options {
  std::size_t min_bytes = 512u << 10;
  std::size_t max_bytes = 512u << 20;
  int iters = 20;
  int warmup = 5;
  bool dbl = false;
  bool nccl = true, mpi = true;
  std::string label = "default";
  std::string json;
  bool codec_study = false;
  bool sparse = false;
  std::size_t trace_bytes = 0;
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "squeeze_bench_coll: %s\nusage: mpiexec -n N squeeze_bench_coll [--min-bytes B] "
               "[--max-bytes B] [--iters I] [--warmup W] [--type float|double] "
               "[--transport nccl|mpi|both] [--data dense|sparse] [--label TEXT] [--json FILE] "
               "[--codec-study] [--trace BYTES]\n",
               why.c_str());
  MPI_Abort(MPI_COMM_WORLD, 2);
  std::exit(2);
}

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(std::string{a} + " needs a value");
      return argv[++i];
    };
    auto number = [&]() -> std::size_t {
      const std::string v = value();
      char* end = nullptr;
      const unsigned long long x = std::strtoull(v.c_str(), &end, 10);
      if (end == v.c_str() || *end != '\0') usage(std::string{a} + ": '" + v + "' is no number");
      return static_cast<std::size_t>(x);
    };
    if (a == "--min-bytes")
      o.min_bytes = number();
    else if (a == "--max-bytes")
      o.max_bytes = number();
    else if (a == "--iters")
      o.iters = static_cast<int>(number());
    else if (a == "--warmup")
      o.warmup = static_cast<int>(number());
    else if (a == "--type") {
      const std::string t = value();
      if (t != "float" && t != "double") usage("--type float|double");
      o.dbl = t == "double";
    } else if (a == "--transport") {
      const std::string t = value();
      if (t != "nccl" && t != "mpi" && t != "both") usage("--transport nccl|mpi|both");
      o.nccl = t != "mpi";
      o.mpi = t != "nccl";
    } else if (a == "--data") {
      const std::string d = value();
      if (d != "dense" && d != "sparse") usage("--data dense|sparse");
      o.sparse = d == "sparse";
    } else if (a == "--label")
      o.label = value();
    else if (a == "--json")
      o.json = value();
    else if (a == "--codec-study")
      o.codec_study = true;
    else if (a == "--trace")
      o.trace_bytes = number();
    else
      usage("unknown option " + std::string{a});
  }
  if (o.min_bytes == 0 || o.min_bytes > o.max_bytes || o.iters < 1)
    usage("bad size range or iters");
  return o;
}

struct record {
  std::string transport, variant;
  std::size_t bytes = 0;
  double median_us = 0, min_us = 0, max_us = 0;
  double algbw = 0, busbw = 0;
  double max_err = 0, max_ref = 0;
  bool ranks_identical = true;
  int iters = 0;                // calls timed
  std::string chosen;           // the selector's pick
  double native_paired_us = 0;  // a selector's: ncclAllReduce timed in alternation with it
};

/// One traced call (--trace): rank 0's timeline of a variant at one size.
struct traced_call {
  std::string transport, variant;
  std::size_t bytes = 0;
  double total_us = 0;
  std::vector<coll::step_trace> steps;
};

int rank = 0, ranks = 1;

/// max over ranks of each value (non-negative doubles compare like their bits)
void max_over_ranks(std::vector<double>& v) {
  MPI_Allreduce(MPI_IN_PLACE, v.data(), static_cast<int>(v.size()), MPI_DOUBLE, MPI_MAX,
                MPI_COMM_WORLD);
}

/// A selector's table (coll::selector::measurements): milliseconds per rung and candidate.
struct calibration {
  std::string transport, variant;
  std::vector<std::size_t> ladder;
  std::vector<std::array<double, coll::path_count>> ms;
};

template <class Selector>
calibration calibration_of(const Selector& sel) {
  return {{}, {}, sel.options().ladder, sel.measurements()};
}

/// One variant of the table: a name and a call.
struct variant {
  std::string name;
  double bits_per_value;  // 0: lossless
  std::function<void(const void*, void*, std::size_t, cudaStream_t)> call;
  std::function<std::string()> chosen;  // the selector reports its pick
  /// squeeze's compressed allreducers: arm the next call's trace, and read it.
  std::function<void()> arm_trace;
  std::function<std::vector<coll::step_trace>()> trace;
  /// A selector's calibration: what it measured at each rung of its ladder.
  std::function<calibration()> calibrated;
};

/// The table's variants over transport t; `ring_t`, when given, is a transport over a
/// communicator restricted to NCCL's ring; `sample` this rank's input (selector(ibp)).
template <class T, class Transport>
std::vector<variant> variants(Transport& t, Transport* ring_t, std::span<const T> sample) {
  using f16 = frsz2::wire_codec<16>;
  using f8 = frsz2::wire_codec<8>;
  using ibp = squeeze::ibp::wire_codec;
  auto raw = std::make_shared<coll::allreducer<Transport>>(t);
  auto c16 = std::make_shared<coll::allreducer<Transport, f16>>(t);
  auto c8 = std::make_shared<coll::allreducer<Transport, f8>>(t);
  auto cibp = std::make_shared<coll::allreducer<Transport, ibp>>(t);
  auto sel = std::make_shared<coll::selector<Transport, f16>>(t);
  auto sel_ibp = std::make_shared<coll::selector<Transport, ibp>>(t);
  const auto sum = coll::reduce_op::sum;
  auto cast = [](const void* p) { return static_cast<const T*>(p); };
  auto out = [](void* p) { return static_cast<T*>(p); };
  using A = coll::algorithm;
  const double l16 = 16.5, l8 = 8.5;
  std::vector<variant> v;
  v.push_back({"native", 0,
               [&t, cast, out](const void* s, void* r, std::size_t n, cudaStream_t st) {
                 t.native_allreduce(cast(s), out(r), n, coll::reduce_op::sum, st);
               },
               nullptr, nullptr, nullptr, nullptr});
  if (ring_t != nullptr) {
    v.push_back({"native ring", 0,
                 [ring_t, cast, out](const void* s, void* r, std::size_t n, cudaStream_t st) {
                   ring_t->native_allreduce(cast(s), out(r), n, coll::reduce_op::sum, st);
                 },
                 nullptr, nullptr, nullptr, nullptr});
  }
  auto add = [&](std::string name, double bits, auto ar, coll::allreduce_options o) {
    // traced: the collective schedules with a codec (--trace)
    using codec = std::remove_cvref_t<decltype(ar->codec())>;
    const bool traced = o.collective && !coll::is_identity_codec<codec>;
    v.push_back({std::move(name), bits,
                 [ar, o, cast, out, sum](const void* s, void* r, std::size_t n, cudaStream_t st) {
                   (*ar)(cast(s), out(r), n, sum, st, o);
                 },
                 nullptr, nullptr, nullptr, nullptr});
    if (traced) {
      v.back().arm_trace = [ar] { ar->trace_next_call(); };
      v.back().trace = [ar] { return ar->trace(); };
    }
  };
  add("ring", 0, raw, {.algorithm = A::ring});
  add("rd", 0, raw, {.algorithm = A::recursive_doubling});
  add("ring+frsz2_16", l16, c16, {.algorithm = A::ring});
  add("ring+frsz2_8", l8, c8, {.algorithm = A::ring});
  add("rd+frsz2_16", l16, c16, {.algorithm = A::recursive_doubling});
  add("rd+frsz2_8", l8, c8, {.algorithm = A::recursive_doubling});
  add("ring+ibp", 0, cibp, {.algorithm = A::ring});
  add("rd+ibp", 0, cibp, {.algorithm = A::recursive_doubling});
  add("ring+frsz2_16 p2p", l16, c16, {.algorithm = A::ring, .collective = false});
  add("rd+frsz2_16 p2p", l16, c16, {.algorithm = A::recursive_doubling, .collective = false});
  v.push_back({"selector(frsz2_16)", l16,
               [sel, cast, out, sum](const void* s, void* r, std::size_t n, cudaStream_t st) {
                 if (!sel->calibrated()) sel->template calibrate<T>(st);
                 (*sel)(cast(s), out(r), n, sum, st);
               },
               [sel] { return std::string{coll::name(sel->last_choice())}; }, nullptr, nullptr,
               [sel] { return calibration_of(*sel); }});
  v.push_back(
      {"selector(ibp)", 0,
       [sel_ibp, sample, cast, out, sum](const void* s, void* r, std::size_t n, cudaStream_t st) {
         if (!sel_ibp->calibrated()) sel_ibp->template calibrate<T>(st, sample);
         (*sel_ibp)(cast(s), out(r), n, sum, st);
       },
       [sel_ibp] { return std::string{coll::name(sel_ibp->last_choice())}; }, nullptr, nullptr,
       [sel_ibp] { return calibration_of(*sel_ibp); }});
  return v;
}

/// --trace: one traced call of each traced variant at this size (after a warm call).
template <class T>
void trace_variants(const char* transport_name, std::vector<variant>& list, const T* input, T* work,
                    std::size_t n, std::size_t bytes, cudaStream_t s,
                    std::vector<traced_call>& traces) {
  for (variant& v : list) {
    if (!v.arm_trace) continue;
    v.call(input, work, n, s);
    SQUEEZE_CUDA_TRY(cudaStreamSynchronize(s));
    MPI_Barrier(MPI_COMM_WORLD);
    v.arm_trace();
    core::event_timer timer{s};
    timer.start();
    v.call(input, work, n, s);
    timer.stop();
    traced_call tc{transport_name, v.name, bytes, timer.elapsed_ms() * 1e3, v.trace()};
    if (rank == 0) {
      std::printf("  trace %s, %zu bytes, %.1f us: step.slice encoded / arrived / decoded us:",
                  v.name.c_str(), bytes, tc.total_us);
      for (const auto& st : tc.steps) {
        std::printf("  %d.%d %.0f/%.0f/%.0f", st.step, st.slice, st.encoded_us, st.arrived_us,
                    st.consumed_us);
      }
      std::printf("\n");
    }
    traces.push_back(std::move(tc));
  }
}

/// Calls timed at `bytes`: --iters from 16 MiB up, more below (at most 5x).
int iters_at(const options& o, std::size_t bytes) {
  constexpr std::size_t full = std::size_t{16} << 20;
  if (bytes >= full) return o.iters;
  return static_cast<int>(std::min<std::size_t>(
      static_cast<std::size_t>(o.iters) * 5, static_cast<std::size_t>(o.iters) * (full / bytes)));
}

template <class T, class Transport>
void run_table(const char* transport_name, Transport& t, Transport* ring_t, const options& o,
               cudaStream_t s, std::vector<record>& records, std::vector<traced_call>& traces,
               std::vector<calibration>& calibrations) {
  const std::size_t max_count = o.max_bytes / sizeof(T);
  core::device_buffer<T> input{max_count}, ref{max_count}, work{max_count};
  const auto seed = 1000 + static_cast<std::uint64_t>(rank);
  if (o.sparse) {
    study::fill_sparse_rows(input.data(), max_count, seed, 1e-2, s);
  } else {
    study::fill_normal(input.data(), max_count, seed, 1e-2, s);
  }
  auto list = variants<T>(t, ring_t, std::span<const T>{input.data(), max_count});
  core::event start, stop;
  if (rank == 0) {
    std::printf("\n# %s, %d ranks, %s (%s), link setting: %s\n# %-10s", transport_name, ranks,
                sizeof(T) == 4 ? "float" : "double", o.sparse ? "90 % of rows of 64 zero" : "dense",
                o.label.c_str(), "size");
    for (const auto& v : list) std::printf(" %18s", v.name.c_str());
    std::printf("   (median us of the slowest rank; speedup over native below)\n");
  }
  for (std::size_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= 2) {
    const std::size_t n = bytes / sizeof(T);
    // the reference: the native allreduce of the same inputs
    t.native_allreduce(input.data(), ref.data(), n, coll::reduce_op::sum, s);
    SQUEEZE_CUDA_TRY(cudaStreamSynchronize(s));
    std::vector<double> us(list.size());
    std::vector<record> checked;
    for (std::size_t k = 0; k < list.size(); ++k) {
      auto& v = list[k];
      record r;
      r.transport = transport_name;
      r.variant = v.name;
      r.bytes = bytes;
      // first call: checked
      SQUEEZE_CUDA_TRY(cudaMemsetAsync(work.data(), 0xA5, n * sizeof(T), s));
      v.call(input.data(), work.data(), n, s);
      const auto c = study::compare(work.data(), ref.data(), n, s);
      std::vector<double> worst{c.max_abs_diff, c.max_abs_ref};
      max_over_ranks(worst);
      std::uint64_t sums[2] = {c.checksum, ~c.checksum};
      MPI_Allreduce(MPI_IN_PLACE, sums, 2, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
      r.ranks_identical = sums[0] == c.checksum && sums[1] == ~c.checksum;
      r.max_err = worst[0];
      r.max_ref = worst[1];
      const double allowed =
          v.bits_per_value == 0
              ? 1e-5 * worst[1] * ranks  // another summation order
              : (ranks + 2) * std::ldexp(1.0, 2 - static_cast<int>(v.bits_per_value)) * worst[1];
      if (!(r.max_err <= allowed) ||
          (!r.ranks_identical && v.name.find("p2p") == std::string::npos &&
           v.name.find("native") == std::string::npos)) {
        if (rank == 0) {
          std::fprintf(stderr,
                       "VERIFICATION FAILED: %s %s at %zu bytes: max error %.3g (allowed %.3g), "
                       "ranks identical: %d\n",
                       transport_name, v.name.c_str(), bytes, r.max_err, allowed,
                       r.ranks_identical ? 1 : 0);
        }
        MPI_Abort(MPI_COMM_WORLD, 3);
      }
      checked.push_back(r);
    }
    // Each variant is timed in a block of its own calls: NCCL's first collective after
    // send/recv (or the reverse) costs more, which timing variants in turn would charge to
    // the next one. A selector's block alternates its calls with ncclAllReduce's, and its
    // ratio is taken against those (native_paired_us): the same moments, the same
    // preceding operation.
    auto once = [&](variant& v) {
      MPI_Barrier(MPI_COMM_WORLD);
      start.record(s);
      v.call(input.data(), work.data(), n, s);
      stop.record(s);
      stop.synchronize();
      float ms = 0;
      SQUEEZE_CUDA_TRY(cudaEventElapsedTime(&ms, start.get(), stop.get()));
      return static_cast<double>(ms);
    };
    auto over_ranks = [](const core::timing_summary& t) {
      std::vector<double> t3{t.median_ms, t.min_ms, t.max_ms};
      max_over_ranks(t3);
      return t3;
    };
    const int iters = iters_at(o, bytes);
    for (std::size_t k = 0; k < list.size(); ++k) {
      record& r = checked[k];
      r.iters = iters;
      const bool paired = static_cast<bool>(list[k].chosen);
      std::vector<double> mine, native;
      for (int i = 0; i < o.warmup + iters; ++i) {
        const double t = once(list[k]);
        const double t0 = paired ? once(list[0]) : 0.0;
        if (i < o.warmup) continue;
        mine.push_back(t);
        native.push_back(t0);
      }
      const auto t3 = over_ranks(core::summarize(mine));
      r.median_us = t3[0] * 1e3;
      r.min_us = t3[1] * 1e3;
      r.max_us = t3[2] * 1e3;
      r.algbw = static_cast<double>(bytes) / (r.median_us * 1e3);
      r.busbw = r.algbw * 2.0 * (ranks - 1) / ranks;
      if (paired) {
        r.chosen = list[k].chosen();
        r.native_paired_us = over_ranks(core::summarize(native))[0] * 1e3;
      }
      us[k] = r.median_us;
      records.push_back(r);
    }
    if (rank == 0) {
      std::printf("  %-10zu", bytes);
      for (double x : us) std::printf(" %18.1f", x);
      std::printf("\n  %-10s", "speedup");
      for (double x : us) std::printf(" %17.2fx", us[0] / x);
      std::printf("\n  %-10s", "busbw GB/s");
      for (double x : us)
        std::printf(" %18.2f", static_cast<double>(bytes) / (x * 1e3) * 2.0 * (ranks - 1) / ranks);
      std::printf("   selector: %s", records.back().chosen.c_str());
      for (std::size_t k = 0; k < list.size(); ++k) {
        const record& r = records[records.size() - list.size() + k];
        if (r.native_paired_us > 0) {
          std::printf("  %s / native in alternation: %.2fx", r.variant.c_str(),
                      r.native_paired_us / r.median_us);
        }
      }
      std::printf("\n");
      std::fflush(stdout);
    }
    if (bytes == o.trace_bytes)
      trace_variants(transport_name, list, input.data(), work.data(), n, bytes, s, traces);
  }
  for (const variant& v : list) {
    if (!v.calibrated) continue;
    calibration c = v.calibrated();
    c.transport = transport_name;
    c.variant = v.name;
    if (rank == 0) {
      std::printf("# %s calibration, ms (native, ring, rd, ring+codec, rd+codec):\n",
                  v.name.c_str());
      for (std::size_t k = 0; k < c.ms.size(); ++k) {
        std::printf("  %-10zu", c.ladder[k]);
        for (double x : c.ms[k]) std::printf(" %9.4f", x);
        std::printf("\n");
      }
    }
    calibrations.push_back(std::move(c));
  }
}

void write_json(const options& o, const std::vector<record>& records,
                const std::vector<study::codec_rates>& codecs,
                const std::vector<traced_call>& traces,
                const std::vector<calibration>& calibrations) {
  std::FILE* f = std::fopen(o.json.c_str(), "w");
  if (f == nullptr) {
    std::fprintf(stderr, "cannot write %s\n", o.json.c_str());
    return;
  }
  const auto info = core::query_device();
  std::fprintf(f,
               "{\n  \"context\": {\"device\": \"%s\", \"ranks\": %d, \"label\": \"%s\", "
               "\"type\": \"%s\", \"data\": \"%s\", \"iters\": %d, \"warmup\": %d, "
               "\"NCCL_P2P_DISABLE\": \"%s\", \"NCCL_SHM_DISABLE\": \"%s\", \"NCCL_NVLS_ENABLE\": "
               "\"%s\"},\n",
               core::describe(info).c_str(), ranks, o.label.c_str(), o.dbl ? "double" : "float",
               o.sparse ? "sparse" : "dense", o.iters, o.warmup,
               std::getenv("NCCL_P2P_DISABLE") ? std::getenv("NCCL_P2P_DISABLE") : "",
               std::getenv("NCCL_SHM_DISABLE") ? std::getenv("NCCL_SHM_DISABLE") : "",
               std::getenv("NCCL_NVLS_ENABLE") ? std::getenv("NCCL_NVLS_ENABLE") : "");
  std::fprintf(f, "  \"codecs\": [");
  for (std::size_t i = 0; i < codecs.size(); ++i) {
    const auto& c = codecs[i];
    std::fprintf(
        f,
        "%s\n    {\"codec\": \"%s\", \"type\": \"%s\", \"ratio\": %.4f, \"encode_GBps\": %.1f, "
        "\"decode_GBps\": %.1f, \"decode_reduce_GBps\": %.1f}",
        i ? "," : "", c.codec.c_str(), c.type.c_str(), c.ratio, c.encode_gbs, c.decode_gbs,
        c.decode_reduce_gbs);
  }
  std::fprintf(f, "],\n  \"allreduce\": [");
  for (std::size_t i = 0; i < records.size(); ++i) {
    const auto& r = records[i];
    std::fprintf(
        f,
        "%s\n    {\"transport\": \"%s\", \"variant\": \"%s\", \"bytes\": %zu, \"median_us\": %.2f, "
        "\"min_us\": %.2f, \"max_us\": %.2f, \"algbw_GBps\": %.3f, \"busbw_GBps\": %.3f, "
        "\"max_abs_err\": %.4g, \"max_abs_ref\": %.4g, \"ranks_identical\": %s",
        i ? "," : "", r.transport.c_str(), r.variant.c_str(), r.bytes, r.median_us, r.min_us,
        r.max_us, r.algbw, r.busbw, r.max_err, r.max_ref, r.ranks_identical ? "true" : "false");
    std::fprintf(f, ", \"iters\": %d", r.iters);
    if (!r.chosen.empty()) {
      std::fprintf(f, ", \"chosen\": \"%s\", \"native_paired_us\": %.2f", r.chosen.c_str(),
                   r.native_paired_us);
    }
    std::fprintf(f, "}");
  }
  std::fprintf(f, "\n  ],\n  \"traces\": [");
  const auto number = [](float x) {
    return std::isnan(x) ? std::string{"null"} : std::to_string(x);
  };
  for (std::size_t i = 0; i < traces.size(); ++i) {
    const auto& t = traces[i];
    std::fprintf(f,
                 "%s\n    {\"transport\": \"%s\", \"variant\": \"%s\", \"bytes\": %zu, "
                 "\"total_us\": %.2f, \"steps\": [",
                 i ? "," : "", t.transport.c_str(), t.variant.c_str(), t.bytes, t.total_us);
    for (std::size_t k = 0; k < t.steps.size(); ++k) {
      const auto& st = t.steps[k];
      std::fprintf(f,
                   "%s{\"step\": %d, \"slice\": %d, \"encoded_us\": %s, \"arrived_us\": %s, "
                   "\"decoded_us\": %s}",
                   k ? ", " : "", st.step, st.slice, number(st.encoded_us).c_str(),
                   number(st.arrived_us).c_str(), number(st.consumed_us).c_str());
    }
    std::fprintf(f, "]}");
  }
  std::fprintf(f, "\n  ],\n  \"selectors\": [");
  for (std::size_t i = 0; i < calibrations.size(); ++i) {
    const auto& c = calibrations[i];
    std::fprintf(f, "%s\n    {\"transport\": \"%s\", \"variant\": \"%s\", \"candidates\": [",
                 i ? "," : "", c.transport.c_str(), c.variant.c_str());
    for (int p = 0; p < coll::path_count; ++p)
      std::fprintf(f, "%s\"%s\"", p ? ", " : "", coll::name(static_cast<coll::path>(p)));
    std::fprintf(f, "], \"rungs\": [");
    for (std::size_t k = 0; k < c.ms.size(); ++k) {
      std::fprintf(f, "%s{\"bytes\": %zu, \"ms\": [", k ? ", " : "", c.ladder[k]);
      for (std::size_t p = 0; p < c.ms[k].size(); ++p)
        std::fprintf(f, "%s%.5f", p ? ", " : "", c.ms[k][p]);
      std::fprintf(f, "]}");
    }
    std::fprintf(f, "]}");
  }
  std::fprintf(f, "\n  ]\n}\n");
  std::fclose(f);
}

}  // namespace coll_bench

int main(int argc, char** argv) {
  using namespace coll_bench;
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  const options o = parse(argc, argv);
  int status = 0;
  try {
    const coll::placement at = coll::placement_of(MPI_COMM_WORLD);
    const int local_size = at.local_size;
    int devices = 0;
    SQUEEZE_CUDA_TRY(cudaGetDeviceCount(&devices));
    SQUEEZE_CUDA_TRY(cudaSetDevice(at.local_rank % devices));
    int shared = local_size > devices ? 1 : 0;
    MPI_Allreduce(MPI_IN_PLACE, &shared, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    core::stream s;
    std::vector<study::codec_rates> codecs;
    if (o.codec_study && rank == 0) {
      const std::size_t n = std::size_t{64} << 20;  // 256 MiB of float
      codecs.push_back(study::study_codec<frsz2::wire_codec<8>, float>(n, 10, s));
      codecs.push_back(study::study_codec<frsz2::wire_codec<16>, float>(n, 10, s));
      codecs.push_back(study::study_codec<frsz2::wire_codec<32>, float>(n, 10, s));
      codecs.push_back(study::study_codec<frsz2::wire_codec<16>, double>(n / 2, 10, s));
      codecs.push_back(study::study_codec<frsz2::wire_codec<32>, double>(n / 2, 10, s));
      codecs.push_back(study::study_codec<squeeze::ibp::wire_codec, float>(n, 10, s));
      const auto copy = core::time_region(s, {.warmup = 2, .repeats = 10}, [&] {
        static core::device_buffer<float> a{n}, b{n};
        SQUEEZE_CUDA_TRY(cudaMemcpyAsync(b.data(), a.data(), n * 4, cudaMemcpyDeviceToDevice, s));
      });
      std::printf("# codec study on %s (256 MiB of values; GB/s of raw values)\n",
                  core::describe(core::query_device()).c_str());
      std::printf("# device copy: %.0f GB/s read + written\n",
                  2.0 * n * 4 / (copy.median_ms * 1e6));
      for (const auto& c : codecs) {
        std::printf("  %-10s %-6s ratio %.3f  encode %7.1f  decode %7.1f  decode+reduce %7.1f\n",
                    c.codec.c_str(), c.type.c_str(), c.ratio, c.encode_gbs, c.decode_gbs,
                    c.decode_reduce_gbs);
      }
    }
    std::vector<record> records;
    std::vector<traced_call> traces;
    std::vector<calibration> calibrations;
    if (o.nccl && shared) {
      if (rank == 0)
        std::printf(
            "# NCCL skipped: %d ranks share %d GPU(s) on a node (NCCL allows one rank per GPU)\n",
            local_size, devices);
    } else if (o.nccl) {
      const coll::nccl_communicator comm{MPI_COMM_WORLD};
      coll::nccl_transport t{comm.get()};
      // NCCL reads NCCL_ALGO when a communicator is made: a second one restricted to its ring
      const char* before = std::getenv("NCCL_ALGO");
      const std::string saved = before != nullptr ? before : "";
      setenv("NCCL_ALGO", "Ring", 1);
      const coll::nccl_communicator ring_comm{MPI_COMM_WORLD};
      if (before != nullptr)
        setenv("NCCL_ALGO", saved.c_str(), 1);
      else
        unsetenv("NCCL_ALGO");
      coll::nccl_transport ring_t{ring_comm.get()};
      if (o.dbl)
        run_table<double>("nccl", t, &ring_t, o, s, records, traces, calibrations);
      else
        run_table<float>("nccl", t, &ring_t, o, s, records, traces, calibrations);
    }
    if (o.mpi) {
      coll::mpi_transport t{MPI_COMM_WORLD};
      const char* name = t.staged() ? "mpi-staged" : "mpi";
      if (rank == 0) {
        std::printf("# MPI transport: %s\n",
                    t.staged() ? "device buffers staged through pinned "
                                 "host memory (the library does not say it is CUDA-aware)"
                               : "device buffers "
                                 "handed to a CUDA-aware MPI");
      }
      if (o.dbl)
        run_table<double>(name, t, static_cast<coll::mpi_transport*>(nullptr), o, s, records,
                          traces, calibrations);
      else
        run_table<float>(name, t, static_cast<coll::mpi_transport*>(nullptr), o, s, records, traces,
                         calibrations);
    }
    if (rank == 0 && !o.json.empty()) write_json(o, records, codecs, traces, calibrations);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
    status = 1;
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return status;
}
