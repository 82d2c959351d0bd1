// SPDX-License-Identifier: Apache-2.0
// squeeze_bench_uvm: bam arrays against CUDA unified memory. The same
// kernels read the same data from managed memory (the UVM side) and from pinned host memory
// through bam (the squeeze side), in one process, every output checked before it is timed.
//
//   squeeze_bench_uvm [--json FILE] [--kernels rand4,row512,bfs,cc] [--graphs kron,urand]
//       [--variants zero-copy,bam-1pct,bam-10pct,uvm-demand,uvm-advise,uvm-prefetch | uvm |
//       squeeze | all] [--traversals odt,vertex,line-aware] [--scale 24] [--cold-reps 3]
//       [--warm-reps 3] [--cold prefetch|touch] [--random-mib 2048] [--word-reads 33554432]
//       [--row-reads 4194304] [--graph-line 1024] [--random-line 512] [--margin-mib 2048]
//       [--graph-dir DIR]
//
// Kernels (the data: one array; every other buffer is in GPU memory on both sides):
//   rand4    --word-reads random 4-byte reads over --random-mib MiB of 32-bit words, a thread
//            per read; the reads are summed and the sum compared with the host's
//   row512   --row-reads random reads of 512-byte rows over the same amount of data, a warp
//            per row (16 bytes a lane); checked the same way
//   bfs, cc  bam::bfs and bam::connected_components on a Kronecker or uniform-random graph
//            of 2^--scale vertices (edge factor 16; the bam_bfs / bam_cc setup): row offsets
//            in GPU memory, the edge list (4-byte ids) is the data; BFS from a vertex of
//            largest degree; depths and labels compared with io::bfs_reference /
//            io::cc_reference
// Variants:
//   uvm-demand    the edge list / words in cudaMallocManaged memory, first touched on the
//                 host, read by the kernels through a plain pointer (bam::array over
//                 device_memory: the same code as zero-copy); pages migrate on GPU faults
//   uvm-advise    the same after cudaMemAdvise(PreferredLocation = host) and
//                 cudaMemAdvise(AccessedBy = this GPU): the GPU reads the host pages in place
//   uvm-prefetch  the same, with cudaMemPrefetchAsync of the whole range to the GPU inside
//                 the timed region before the kernels (a best case: it knows all will be read)
//   zero-copy     bam::array<T, mapped_host_memory>: pinned mapped host memory read in place
//                 (EMOGI's direct access; the graph traversal is vertex-centric)
//   bam-1pct, bam-10pct  bam::array<T, cached_host_memory>, a cache of 1 % / 10 % of the
//                 data in GPU memory (lines of --random-line B for rand4/row512, --graph-line
//                 B for graphs); graphs with each --traversals (default ODT), named e.g.
//                 bam-1pct-odt. The UVM variants and zero-copy use the vertex traversal (the
//                 cached traversals need a cache).
//
// How each number is made (METHOD.md): each variant is set up (its advice), run once cold
// and checked (that run is also the warm-up: module loading, the first faults), then timed
// --cold-reps times cold, then run once more untimed and timed --warm-reps times warm; every
// timed run is checked too. A run is timed by CUDA events on the default stream around the
// whole traversal (BFS and CC synchronize once per level/round, inside the region); the
// median is reported (min, max, all samples and the host wall time in the JSON).
//   cold: before each run, untimed: the managed range is moved back to the host
//         (cudaMemPrefetchAsync to the host and a wait; --cold touch: the host reads and
//         rewrites one byte of every page instead), bam caches are cleared, and the L2 is
//         overwritten. So a UVM kernel starts with no page on the GPU, and bam with an
//         empty cache. zero-copy has nothing to make cold but the L2.
//   warm: no reset between runs: UVM keeps what the earlier runs migrated (for these
//         kernels all the data they read: every page for rand4/row512/CC, the edge lists of
//         the reached vertices for BFS), bam keeps the lines its cache holds.
// Baselines: every record carries the best (lowest median) UVM variant of the same kernel,
// graph and temperature in this run, and the best of the two on-demand ones (demand,
// advise). The project's target: BFS with bam ODT and a 1 % cache, cold, >= 2x faster than the
// best UVM variant, cold.
//
// The memory guard: managed memory is allocated only after every other GPU buffer of a case
// exists, and only when managed bytes + --margin-mib fit the GPU's free memory
// (cudaMemGetInfo). Otherwise the UVM variants of that case are skipped, said on stdout and
// listed under "skipped": oversubscribed managed memory can hang these GPUs. Cases run one
// after another; each frees its memory before the next.
//
// JSON (--json FILE; rewritten after every case, so a run cut short keeps what it measured):
// {
//   "schema": "squeeze.bench.uvm/1",
//   "context": {
//     "gpu": "NVIDIA H100 80GB HBM3 (sm_90, 132 SMs, 79.1 GiB, L2 50.0 MiB)",
//     "gpu_name", "driver_version", "runtime_version" (CUDA's integers, e.g. 13000),
//     "concurrent_managed_access", "pageable_memory_access" (HMM possible): bools,
//     "gpu_total_bytes", "gpu_free_bytes_at_start", "margin_bytes",
//     "cold_method": "prefetch" | "touch", "cold_reps", "warm_reps",
//     "graph_scale", "graph_line_bytes", "random_line_bytes", "random_data_bytes",
//     "word_reads", "row_reads", "date" (UTC), "notes": [strings]
//   },
//   "records": [ one per kernel x graph x variant x temperature:
//     "kernel": "rand4" | "row512" | "bfs" | "cc",
//     "graph": "kron" | "urand" | "none" (random reads),
//     "variant": "uvm-demand" | "uvm-advise" | "uvm-prefetch" | "zero-copy" | "bam-1pct" |
//                "bam-10pct" (random reads) | "bam-1pct-odt" | "bam-10pct-vertex" | ...,
//     "side": "uvm" | "squeeze",
//     "backing": "managed" | "mapped_host_memory" | "cached_host_memory",
//     "traversal": "vertex" | "odt" | "line_aware" (graphs) | "thread-per-read" |
//                  "warp-per-row" (random reads),
//     "temperature": "cold" | "warm",
//     "cache_percent" (0 without a cache), "cache_bytes", "line_bytes" (0 without a cache),
//     "data_bytes": bytes of the array read (edge list or words),
//     "useful_bytes": bytes the kernel needs: reads x 4 or x 512 (random reads), the edge
//                     list once (graphs),
//     "reads" (random reads; 0 for graphs), "vertices", "edges" (directed entries), "source"
//     (graphs; 0 otherwise), "rounds" (BFS levels / CC rounds of the checked run),
//     "verified": true when every run matched the host; false: "error" says why, no times,
//     "median_ms", "min_ms", "max_ms": CUDA-event time per traversal / pass,
//     "samples_ms": [every timed run], "wall_median_ms": host clock, same runs,
//     "GBps": useful_bytes / median (1e9 B/s),
//     "uvm_best_variant", "uvm_best_ms": the fastest UVM variant here (same kernel, graph,
//                     temperature), "speedup_vs_uvm_best": uvm_best_ms / median_ms,
//     "uvm_on_demand_best_variant", "uvm_on_demand_best_ms",
//     "speedup_vs_uvm_on_demand_best": the same without uvm-prefetch
//     (null where there is no such UVM record) ],
//   "targets": [ {"what", "kernel", "graph", "variant", "temperature", "baseline_variant"
//                 (the best UVM variant), "ratio" (its time / the variant's: a speed-up; null
//                 if not measured), "target", "met", "on_demand_variant",
//                 "ratio_vs_on_demand" (the same against the best of demand and advise)} ],
//   "skipped": [ {"kernel", "graph", "variant", "reason"} ]
// }
//
// Exit: 0; 1 without a GPU (said on stderr) or on a fatal error; 2 on a bad option; 3 when a
// result differs from the host, a variant fails, or the JSON cannot be written.
#include <squeeze/bam/array.cuh>
#include <squeeze/bam/graph.cuh>
#include <squeeze/core/buffer.hpp>
#include <squeeze/core/cuda_error.hpp>
#include <squeeze/core/device.hpp>
#include <squeeze/core/launch.hpp>
#include <squeeze/core/timer.hpp>
#include <squeeze/io/graph.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <exception>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "../../examples/common/json.hpp"  // the JSON value writers the examples use
#include "bam/uvm_study.cuh"
#include "common/l2_flush.hpp"

namespace bam = squeeze::bam;
namespace core = squeeze::core;
namespace io = squeeze::io;

namespace uvm_bench {

using namespace bam_uvm;

/// The stream the bam arrays are built, cleared and checked on: the legacy default stream,
/// where this bench's kernels, copies and timers run.
constexpr cudaStream_t bench_stream = nullptr;

struct usage_error {
  std::string message;
};

struct options {
  std::string json;
  std::vector<std::string> kernels{"rand4", "row512", "bfs", "cc"};
  std::vector<std::string> graphs{"kron", "urand"};
  std::vector<std::string> variants{"zero-copy",  "bam-1pct",   "bam-10pct",
                                    "uvm-demand", "uvm-advise", "uvm-prefetch"};
  std::vector<std::string> traversals{"odt"};
  int scale = 24;
  int cold_reps = 3;
  int warm_reps = 3;
  cold_method cold = cold_method::prefetch;
  std::uint64_t random_mib = 2048;
  std::uint64_t word_reads = std::uint64_t{1} << 25;
  std::uint64_t row_reads = std::uint64_t{1} << 22;
  std::uint32_t graph_line = 1024;
  std::uint32_t random_line = 512;
  std::uint64_t margin_mib = 2048;
  std::string graph_dir;

  [[nodiscard]] bool wants(const std::vector<std::string>& list, std::string_view x) const {
    return std::find(list.begin(), list.end(), x) != list.end();
  }
  [[nodiscard]] bool kernel(std::string_view k) const { return wants(kernels, k); }
  [[nodiscard]] bool variant(std::string_view v) const { return wants(variants, v); }
  [[nodiscard]] bool any_uvm() const {
    return variant("uvm-demand") || variant("uvm-advise") || variant("uvm-prefetch");
  }
};

const char* usage_text() {
  return "usage: squeeze_bench_uvm [--json FILE] [--kernels rand4,row512,bfs,cc]\n"
         "  [--graphs kron,urand] [--variants zero-copy,bam-1pct,bam-10pct,uvm-demand,\n"
         "  uvm-advise,uvm-prefetch | uvm | squeeze | all] [--traversals odt,vertex,line-aware]\n"
         "  [--scale 24] [--cold-reps 3] [--warm-reps 3] [--cold prefetch|touch]\n"
         "  [--random-mib 2048] [--word-reads N] [--row-reads N] [--graph-line 1024]\n"
         "  [--random-line 512] [--margin-mib 2048] [--graph-dir DIR]\n";
}

std::vector<std::string> split(std::string_view s) {
  std::vector<std::string> out;
  while (!s.empty()) {
    const auto comma = s.find(',');
    if (comma != 0) out.emplace_back(s.substr(0, comma));
    if (comma == std::string_view::npos) break;
    s.remove_prefix(comma + 1);
  }
  return out;
}

options parse(int argc, char** argv) {
  options o;
  const auto check_list = [](std::string_view flag, const std::vector<std::string>& got,
                             const std::vector<std::string>& allowed) {
    for (const auto& x : got) {
      if (std::find(allowed.begin(), allowed.end(), x) == allowed.end()) {
        throw usage_error{std::string{flag} + ": unknown '" + x + "'"};
      }
    }
    if (got.empty()) throw usage_error{std::string{flag} + " needs at least one name"};
  };
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw usage_error{std::string{a} + " needs a value"};
      return argv[++i];
    };
    const auto number = [&]() -> std::uint64_t {
      const std::string v = value();
      char* end = nullptr;
      const unsigned long long x = std::strtoull(v.c_str(), &end, 10);
      if (v.empty() || v[0] == '-' || end == v.c_str() || *end != '\0') {
        throw usage_error{std::string{a} + ": '" + v + "' is not a number"};
      }
      return x;
    };
    if (a == "--json") {
      o.json = value();
    } else if (a == "--kernels") {
      o.kernels = split(value());
      check_list(a, o.kernels, {"rand4", "row512", "bfs", "cc"});
    } else if (a == "--graphs") {
      o.graphs = split(value());
      check_list(a, o.graphs, {"kron", "urand"});
    } else if (a == "--variants") {
      std::vector<std::string> v;
      for (const auto& x : split(value())) {
        if (x == "uvm" || x == "all") {
          for (const char* y : {"uvm-demand", "uvm-advise", "uvm-prefetch"}) v.emplace_back(y);
        }
        if (x == "squeeze" || x == "all") {
          for (const char* y : {"zero-copy", "bam-1pct", "bam-10pct"}) v.emplace_back(y);
        }
        if (x != "uvm" && x != "squeeze" && x != "all") v.push_back(x);
      }
      check_list(
          a, v, {"zero-copy", "bam-1pct", "bam-10pct", "uvm-demand", "uvm-advise", "uvm-prefetch"});
      o.variants = v;
    } else if (a == "--traversals") {
      o.traversals = split(value());
      check_list(a, o.traversals, {"odt", "vertex", "line-aware"});
    } else if (a == "--scale") {
      o.scale = static_cast<int>(number());
    } else if (a == "--cold-reps") {
      o.cold_reps = static_cast<int>(number());
    } else if (a == "--warm-reps") {
      o.warm_reps = static_cast<int>(number());
    } else if (a == "--cold") {
      const std::string c = value();
      if (c != "prefetch" && c != "touch") throw usage_error{"--cold prefetch|touch"};
      o.cold = c == "touch" ? cold_method::touch : cold_method::prefetch;
    } else if (a == "--random-mib") {
      o.random_mib = number();
    } else if (a == "--word-reads") {
      o.word_reads = number();
    } else if (a == "--row-reads") {
      o.row_reads = number();
    } else if (a == "--graph-line") {
      o.graph_line = static_cast<std::uint32_t>(number());
    } else if (a == "--random-line") {
      o.random_line = static_cast<std::uint32_t>(number());
    } else if (a == "--margin-mib") {
      o.margin_mib = number();
    } else if (a == "--graph-dir") {
      o.graph_dir = value();
    } else if (a == "--help" || a == "-h") {
      std::fputs(usage_text(), stdout);
      std::exit(0);
    } else {
      throw usage_error{"unknown option '" + std::string{a} + "'"};
    }
  }
  if (o.scale < 1 || o.scale > 30) throw usage_error{"--scale must be in 1..30"};
  if (o.cold_reps < 1 || o.warm_reps < 1) throw usage_error{"--cold-reps and --warm-reps >= 1"};
  if (o.random_mib < 1) throw usage_error{"--random-mib must be at least 1"};
  if (o.word_reads < 1 || o.row_reads < 1) throw usage_error{"--word-reads, --row-reads >= 1"};
  return o;
}

// ---- records ---------------------------------------------------------------------------------

struct record {
  std::string kernel, graph = "none", variant, side, backing, traversal, temperature;
  double cache_percent = 0.0;
  std::uint64_t cache_bytes = 0;
  std::uint32_t line_bytes = 0;
  std::uint64_t data_bytes = 0, useful_bytes = 0, reads = 0, vertices = 0, edges = 0;
  std::uint32_t source = 0, rounds = 0;
  bool verified = false;
  std::string error;
  std::vector<double> samples_ms, wall_ms;
  core::timing_summary time;
  double wall_median_ms = NAN;
  std::string uvm_best_variant, uvm_on_demand_best_variant;
  double uvm_best_ms = NAN, uvm_on_demand_best_ms = NAN;

  [[nodiscard]] double gbps() const {
    return verified ? static_cast<double>(useful_bytes) / (time.median_ms * 1e-3) / 1e9 : NAN;
  }
};

struct skip_note {
  std::string kernel, graph, variant, reason;
};

std::vector<record> records;
std::vector<skip_note> skipped;
bool any_failure = false;

/// For every record, the best UVM variant (and the best on-demand one) of its kernel, graph
/// and temperature.
void fill_baselines() {
  for (auto& r : records) {
    r.uvm_best_variant.clear();
    r.uvm_on_demand_best_variant.clear();
    r.uvm_best_ms = r.uvm_on_demand_best_ms = NAN;
    for (const auto& u : records) {
      if (u.side != "uvm" || !u.verified || u.kernel != r.kernel || u.graph != r.graph ||
          u.temperature != r.temperature) {
        continue;
      }
      if (std::isnan(r.uvm_best_ms) || u.time.median_ms < r.uvm_best_ms) {
        r.uvm_best_ms = u.time.median_ms;
        r.uvm_best_variant = u.variant;
      }
      if (u.variant != "uvm-prefetch" &&
          (std::isnan(r.uvm_on_demand_best_ms) || u.time.median_ms < r.uvm_on_demand_best_ms)) {
        r.uvm_on_demand_best_ms = u.time.median_ms;
        r.uvm_on_demand_best_variant = u.variant;
      }
    }
  }
}

const record* find_record(std::string_view kernel, std::string_view graph, std::string_view variant,
                          std::string_view temperature) {
  for (const auto& r : records) {
    if (r.kernel == kernel && r.graph == graph && r.variant == variant &&
        r.temperature == temperature) {
      return &r;
    }
  }
  return nullptr;
}

// ---- one variant: setup, verify, cold runs, warm runs -----------------------------------

/// The error a kernel reported through `array` (its check), or "" when none.
template <class Array>
std::string reported_error(Array& array) {
  try {
    array.check(bench_stream);
  } catch (const std::exception& e) {
    return e.what();
  }
  return {};
}

/// Whether UVM variant `mode` can run on this GPU; when not, says so under "skipped".
bool uvm_mode_runs(uvm_mode mode, bool concurrent, const std::string& kernel,
                   const std::string& graph) {
  if (mode == uvm_mode::demand || concurrent) return true;
  skipped.push_back({kernel, graph, to_string(mode),
                     "the GPU has no concurrentManagedAccess (no advice, no prefetch)"});
  return false;
}

/// What measure() needs to run one variant of one kernel.
struct variant_run {
  record base;                         ///< the fields its cold and warm records share
  std::function<void()> setup;         ///< once, first (a UVM variant's advice); may be empty
  std::function<void()> make_cold;     ///< untimed, before each cold run; may be empty
  std::function<void()> reset;         ///< untimed, before every run: poison outputs
  std::function<std::uint32_t()> run;  ///< the timed work (default stream); returns rounds
  std::function<std::string()> check;  ///< after every run: "" when it matches the host
  std::function<void()> teardown;      ///< once, last; may be empty
};

struct run_result {
  double ms = 0.0, wall_ms = 0.0;
  std::uint32_t rounds = 0;
  std::string error;
};

squeeze::bench::l2_flusher* flusher = nullptr;

run_result run_once(variant_run& v, bool cold) {
  if (cold) {
    if (v.make_cold) v.make_cold();
    flusher->flush(nullptr);
  }
  v.reset();
  SQUEEZE_CUDA_TRY(cudaDeviceSynchronize());
  run_result r;
  core::event_timer timer{nullptr};
  const auto start = std::chrono::steady_clock::now();
  timer.start();
  r.rounds = v.run();
  timer.stop();
  SQUEEZE_CUDA_TRY(cudaDeviceSynchronize());
  r.wall_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  r.ms = timer.elapsed_ms();
  r.error = v.check();
  return r;
}

void measure(variant_run& v, const options& o) {
  record cold = v.base, warm = v.base;
  cold.temperature = "cold";
  warm.temperature = "warm";
  std::string error;
  try {
    if (v.setup) v.setup();
    // The check run: cold, untimed; also the warm-up (module loading, first faults).
    run_result first = run_once(v, true);
    error = first.error;
    cold.rounds = warm.rounds = first.rounds;
    for (int i = 0; i < o.cold_reps && error.empty(); ++i) {
      const run_result r = run_once(v, true);
      cold.samples_ms.push_back(r.ms);
      cold.wall_ms.push_back(r.wall_ms);
      error = r.error;
    }
    if (error.empty()) error = run_once(v, false).error;  // untimed: warms what cold left
    for (int i = 0; i < o.warm_reps && error.empty(); ++i) {
      const run_result r = run_once(v, false);
      warm.samples_ms.push_back(r.ms);
      warm.wall_ms.push_back(r.wall_ms);
      error = r.error;
    }
    if (v.teardown) v.teardown();
  } catch (const std::exception& e) {
    error = std::string{"failed: "} + e.what();
  }
  for (record* r : {&cold, &warm}) {
    r->verified = error.empty();
    r->error = error;
    if (r->verified) {
      r->time = core::summarize(r->samples_ms);
      r->wall_median_ms = core::summarize(r->wall_ms).median_ms;
    }
  }
  const std::string label = v.base.kernel + (v.base.graph == "none" ? "" : " " + v.base.graph);
  if (error.empty()) {
    std::printf("  %-14s %-20s cold %10.2f ms  warm %10.2f ms  %3u rounds  matches the host\n",
                label.c_str(), v.base.variant.c_str(), cold.time.median_ms, warm.time.median_ms,
                cold.rounds);
  } else {
    any_failure = true;
    std::printf("  %-14s %-20s MISMATCH OR ERROR, not timed: %s\n", label.c_str(),
                v.base.variant.c_str(), error.c_str());
  }
  std::fflush(stdout);
  records.push_back(std::move(cold));
  records.push_back(std::move(warm));
}

// ---- JSON ------------------------------------------------------------------------------------

using squeeze_examples::json_number;
using squeeze_examples::json_string;

struct gpu_context {
  core::device_info info;
  int device = 0;
  int driver = 0, runtime = 0;
  bool concurrent_managed = false;
  std::size_t free_at_start = 0, total = 0;
  std::string date;
};

struct target_result {
  std::string what, kernel, graph, variant, temperature, baseline_variant;
  std::string on_demand_variant;  ///< the best UVM variant without prefetch
  double ratio = NAN, target = 2.0;
  double ratio_on_demand = NAN;  ///< against on_demand_variant (supplementary)
  [[nodiscard]] bool met() const { return std::isfinite(ratio) && ratio >= target; }
};

std::vector<target_result> evaluate_targets(const options& o) {
  std::vector<target_result> out;
  if (!o.kernel("bfs")) return out;
  for (const auto& graph : o.graphs) {
    target_result t;
    t.what = "BFS " + graph +
             ": bam ODT with a 1 % cache, cold, >= 2x faster than the best "
             "UVM variant, cold";
    t.kernel = "bfs";
    t.graph = graph;
    t.variant = "bam-1pct-odt";
    t.temperature = "cold";
    const record* r = find_record("bfs", graph, t.variant, "cold");
    if (r != nullptr && r->verified && std::isfinite(r->uvm_best_ms)) {
      t.ratio = r->uvm_best_ms / r->time.median_ms;
      t.baseline_variant = r->uvm_best_variant;
      t.ratio_on_demand = r->uvm_on_demand_best_ms / r->time.median_ms;
      t.on_demand_variant = r->uvm_on_demand_best_variant;
    }
    out.push_back(t);
  }
  return out;
}

std::vector<std::string> notes(const options& o) {
  return {"cold: before each timed run the managed range is moved to the host (" +
              std::string{o.cold == cold_method::prefetch ? "cudaMemPrefetchAsync to the host"
                                                          : "the host touches every page"} +
              "), bam caches are cleared and the L2 is overwritten; none of it is timed",
          "warm: runs back to back after an untimed run; UVM keeps what it migrated, bam its "
          "cache",
          "uvm-prefetch times cudaMemPrefetchAsync of the whole range to the GPU plus the kernels",
          "managed memory is allocated only when it plus the margin fits cudaMemGetInfo's free "
          "memory (never oversubscribed)",
          "row offsets, outputs, FirstVertexLists and caches are in GPU memory for every variant; "
          "only the edge list / random-read words differ in where they live",
          "times are CUDA-event medians over whole traversals (BFS/CC synchronize per level)"};
}

void write_json(const options& o, const gpu_context& ctx) {
  if (o.json.empty()) return;
  fill_baselines();
  std::FILE* f = std::fopen(o.json.c_str(), "w");
  if (f == nullptr) {
    std::fprintf(stderr, "squeeze_bench_uvm: cannot write %s: %s\n", o.json.c_str(),
                 std::strerror(errno));
    any_failure = true;
    return;
  }
  const auto b = [](bool x) { return x ? "true" : "false"; };
  std::fprintf(f, "{\n  \"schema\": \"squeeze.bench.uvm/1\",\n  \"context\": {\n");
  std::fprintf(f, "    \"gpu\": %s,\n    \"gpu_name\": %s,\n",
               json_string(core::describe(ctx.info)).c_str(), json_string(ctx.info.name).c_str());
  std::fprintf(f, "    \"driver_version\": %d,\n    \"runtime_version\": %d,\n", ctx.driver,
               ctx.runtime);
  std::fprintf(f, "    \"concurrent_managed_access\": %s,\n    \"pageable_memory_access\": %s,\n",
               b(ctx.concurrent_managed), b(ctx.info.pageable_memory_access));
  std::fprintf(f,
               "    \"gpu_total_bytes\": %zu,\n    \"gpu_free_bytes_at_start\": %zu,\n"
               "    \"margin_bytes\": %llu,\n",
               ctx.total, ctx.free_at_start, static_cast<unsigned long long>(o.margin_mib << 20));
  std::fprintf(f, "    \"cold_method\": \"%s\",\n    \"cold_reps\": %d,\n    \"warm_reps\": %d,\n",
               o.cold == cold_method::prefetch ? "prefetch" : "touch", o.cold_reps, o.warm_reps);
  std::fprintf(f,
               "    \"graph_scale\": %d,\n    \"graph_line_bytes\": %u,\n"
               "    \"random_line_bytes\": %u,\n    \"random_data_bytes\": %llu,\n"
               "    \"word_reads\": %llu,\n    \"row_reads\": %llu,\n    \"date\": %s,\n",
               o.scale, o.graph_line, o.random_line,
               static_cast<unsigned long long>(o.random_mib << 20),
               static_cast<unsigned long long>(o.word_reads),
               static_cast<unsigned long long>(o.row_reads), json_string(ctx.date).c_str());
  std::fprintf(f, "    \"notes\": [");
  const auto n = notes(o);
  for (std::size_t i = 0; i < n.size(); ++i) {
    std::fprintf(f, "%s\n      %s", i ? "," : "", json_string(n[i]).c_str());
  }
  std::fprintf(f, "\n    ]\n  },\n  \"records\": [");
  for (std::size_t i = 0; i < records.size(); ++i) {
    const record& r = records[i];
    std::fprintf(f, "%s\n    {\"kernel\": %s, \"graph\": %s, \"variant\": %s, \"side\": %s, ",
                 i ? "," : "", json_string(r.kernel).c_str(), json_string(r.graph).c_str(),
                 json_string(r.variant).c_str(), json_string(r.side).c_str());
    std::fprintf(f, "\"backing\": %s, \"traversal\": %s, \"temperature\": %s, ",
                 json_string(r.backing).c_str(), json_string(r.traversal).c_str(),
                 json_string(r.temperature).c_str());
    std::fprintf(f, "\"cache_percent\": %s, \"cache_bytes\": %llu, \"line_bytes\": %u, ",
                 json_number(r.cache_percent).c_str(),
                 static_cast<unsigned long long>(r.cache_bytes), r.line_bytes);
    std::fprintf(f,
                 "\"data_bytes\": %llu, \"useful_bytes\": %llu, \"reads\": %llu, "
                 "\"vertices\": %llu, \"edges\": %llu, \"source\": %u, \"rounds\": %u, ",
                 static_cast<unsigned long long>(r.data_bytes),
                 static_cast<unsigned long long>(r.useful_bytes),
                 static_cast<unsigned long long>(r.reads),
                 static_cast<unsigned long long>(r.vertices),
                 static_cast<unsigned long long>(r.edges), r.source, r.rounds);
    std::fprintf(f, "\"verified\": %s, \"error\": %s, ", b(r.verified),
                 json_string(r.error).c_str());
    const bool t = r.verified;
    std::fprintf(f, "\"median_ms\": %s, \"min_ms\": %s, \"max_ms\": %s, \"samples_ms\": [",
                 json_number(t ? r.time.median_ms : NAN).c_str(),
                 json_number(t ? r.time.min_ms : NAN).c_str(),
                 json_number(t ? r.time.max_ms : NAN).c_str());
    for (std::size_t k = 0; t && k < r.samples_ms.size(); ++k) {
      std::fprintf(f, "%s%s", k ? ", " : "", json_number(r.samples_ms[k]).c_str());
    }
    std::fprintf(f, "], \"wall_median_ms\": %s, \"GBps\": %s, ",
                 json_number(r.wall_median_ms).c_str(), json_number(r.gbps()).c_str());
    const auto variant_or_null = [](const std::string& v) {
      return v.empty() ? std::string{"null"} : json_string(v);
    };
    std::fprintf(f,
                 "\"uvm_best_variant\": %s, \"uvm_best_ms\": %s, \"speedup_vs_uvm_best\": %s, "
                 "\"uvm_on_demand_best_variant\": %s, \"uvm_on_demand_best_ms\": %s, "
                 "\"speedup_vs_uvm_on_demand_best\": %s}",
                 variant_or_null(r.uvm_best_variant).c_str(), json_number(r.uvm_best_ms).c_str(),
                 json_number(t ? r.uvm_best_ms / r.time.median_ms : NAN).c_str(),
                 variant_or_null(r.uvm_on_demand_best_variant).c_str(),
                 json_number(r.uvm_on_demand_best_ms).c_str(),
                 json_number(t ? r.uvm_on_demand_best_ms / r.time.median_ms : NAN).c_str());
  }
  std::fprintf(f, "\n  ],\n  \"targets\": [");
  const auto targets = evaluate_targets(o);
  for (std::size_t i = 0; i < targets.size(); ++i) {
    const auto& t = targets[i];
    std::fprintf(f,
                 "%s\n    {\"what\": %s, \"kernel\": %s, \"graph\": %s, \"variant\": %s, "
                 "\"temperature\": %s, \"baseline_variant\": %s, \"ratio\": %s, "
                 "\"target\": %s, \"met\": %s, \"on_demand_variant\": %s, "
                 "\"ratio_vs_on_demand\": %s}",
                 i ? "," : "", json_string(t.what).c_str(), json_string(t.kernel).c_str(),
                 json_string(t.graph).c_str(), json_string(t.variant).c_str(),
                 json_string(t.temperature).c_str(),
                 t.baseline_variant.empty() ? "null" : json_string(t.baseline_variant).c_str(),
                 json_number(t.ratio).c_str(), json_number(t.target).c_str(), b(t.met()),
                 t.on_demand_variant.empty() ? "null" : json_string(t.on_demand_variant).c_str(),
                 json_number(t.ratio_on_demand).c_str());
  }
  std::fprintf(f, "\n  ],\n  \"skipped\": [");
  for (std::size_t i = 0; i < skipped.size(); ++i) {
    const auto& s = skipped[i];
    std::fprintf(f, "%s\n    {\"kernel\": %s, \"graph\": %s, \"variant\": %s, \"reason\": %s}",
                 i ? "," : "", json_string(s.kernel).c_str(), json_string(s.graph).c_str(),
                 json_string(s.variant).c_str(), json_string(s.reason).c_str());
  }
  std::fprintf(f, "\n  ]\n}\n");
  if (std::fclose(f) != 0) {
    std::fprintf(stderr, "squeeze_bench_uvm: cannot write %s\n", o.json.c_str());
    any_failure = true;
  }
}

// ---- the UVM variants over one managed range ---------------------------------------------

/// The managed copy of a case's data and the guard's answer. Built after every other GPU
/// buffer of the case.
template <class T>
struct managed_data {
  std::optional<managed_buffer<T>> buffer;
  std::unique_ptr<bam::array<T, bam::device_memory>> array;  ///< plain loads on its pointer

  /// Allocates and fills (on the host: first touch) when the guard allows; otherwise notes
  /// the skip for each requested UVM variant of `kernels`.
  managed_data(const options& o, std::span<const T> host,
               const std::vector<std::pair<std::string, std::string>>& kernels) {
    if (!o.any_uvm()) return;
    const memory_check m = check_managed_fits(host.size_bytes(), o.margin_mib << 20);
    if (!m.fits) {
      std::printf("  SKIP UVM: %s\n", m.message.c_str());
      for (const auto& [kernel, graph] : kernels) {
        for (const char* v : {"uvm-demand", "uvm-advise", "uvm-prefetch"}) {
          if (o.variant(v)) skipped.push_back({kernel, graph, v, m.message});
        }
      }
      return;
    }
    std::printf("  managed memory: %.2f GiB (GPU free %.2f of %.2f GiB, margin %.2f GiB)\n",
                static_cast<double>(host.size_bytes()) / (1u << 30),
                static_cast<double>(m.free_bytes) / (1u << 30),
                static_cast<double>(m.total_bytes) / (1u << 30),
                static_cast<double>(o.margin_mib) / 1024.0);
    buffer.emplace(host.size());
    T* dst = buffer->data();
    parallel_for(host.size(), [&](std::uint64_t begin, std::uint64_t end) {
      std::memcpy(dst + begin, host.data() + begin, (end - begin) * sizeof(T));
    });
    array = std::make_unique<bam::array<T, bam::device_memory>>(dst, host.size(), bench_stream);
  }
};

/// A UVM variant: `launch(ref)` runs the kernel over the managed array's ref.
template <class T, class Launch>
variant_run uvm_variant(const options& o, managed_data<T>& m, uvm_mode mode, int device,
                        record base, Launch launch) {
  variant_run v;
  base.variant = to_string(mode);
  base.side = "uvm";
  base.backing = "managed";
  v.base = std::move(base);
  T* data = m.buffer->data();
  const std::size_t bytes = m.buffer->bytes();
  const cold_method how = o.cold;
  v.setup = [=] {
    move_to_host(data, bytes, how);
    apply_advice(data, bytes, mode, device);
  };
  v.make_cold = [=] { move_to_host(data, bytes, how); };
  v.run = [=, &m] {
    if (mode == uvm_mode::prefetch) prefetch_to_gpu(data, bytes, device);
    return launch(m.array->ref());
  };
  v.teardown = [=] { move_to_host(data, bytes, how); };  // the GPU's memory free again
  return v;
}

// ---- random reads ----------------------------------------------------------------------------

unsigned grid_blocks() {
  return static_cast<unsigned>(core::per_sm(8));
}

/// rand4 (T = std::uint32_t) or row512 (T = uint4) over --random-mib MiB of words.
template <class T>
void random_case(const options& o, const std::string& kernel, int device, bool concurrent) {
  constexpr bool rows = std::is_same_v<T, uint4>;
  const std::uint64_t bytes = o.random_mib << 20;
  const std::uint64_t words = bytes / 4;
  const std::uint64_t elements = bytes / sizeof(T);
  const std::uint64_t reads = rows ? o.row_reads : o.word_reads;
  const std::uint64_t seed = rows ? 0x512 : 0x4;
  std::printf("\n%s: %.2f GiB of data, %llu random %s (%.2f GiB read)\n", kernel.c_str(),
              static_cast<double>(bytes) / (1u << 30), static_cast<unsigned long long>(reads),
              rows ? "512-byte rows" : "4-byte words",
              static_cast<double>(reads * (rows ? 512 : 4)) / (1u << 30));
  core::pinned_buffer<T> host{elements, core::host_memory::mapped};
  auto* host_words = reinterpret_cast<std::uint32_t*>(host.data());
  parallel_for(words, [&](std::uint64_t begin, std::uint64_t end) {
    for (std::uint64_t i = begin; i < end; ++i) host_words[i] = data_word(i);
  });
  const std::uint64_t expected = rows ? host_row_sum(host_words, words / row_words, reads, seed)
                                      : host_word_sum(host_words, words, reads, seed);
  core::device_buffer<unsigned long long> sum{1};
  const unsigned blocks = grid_blocks();

  record base;
  base.kernel = kernel;
  base.traversal = rows ? "warp-per-row" : "thread-per-read";
  base.data_bytes = bytes;
  base.useful_bytes = reads * (rows ? 512 : 4);
  base.reads = reads;

  const auto launch = [&, blocks](auto ref) -> std::uint32_t {
    if constexpr (rows) {
      random_row_kernel<<<blocks, 256>>>(ref, reads, seed, sum.data());
    } else {
      random_word_kernel<<<blocks, 256>>>(ref, reads, seed, sum.data());
    }
    SQUEEZE_CHECK_LAUNCH();
    return 0;
  };
  const auto reset = [&] { sum.fill_bytes(0, nullptr); };
  const auto checker = [&](auto& array) {
    return [&]() -> std::string {
      if (std::string e = reported_error(array); !e.empty()) return e;
      unsigned long long got = 0;
      SQUEEZE_CUDA_TRY(cudaMemcpy(&got, sum.data(), sizeof got, cudaMemcpyDeviceToHost));
      if (got == expected) return {};
      return "sum " + std::to_string(got) + ", the host's " + std::to_string(expected);
    };
  };

  // The squeeze side.
  const std::uint64_t lines = (bytes + o.random_line - 1) / o.random_line;
  bam::array<T, bam::mapped_host_memory> direct{host, bench_stream};
  std::unique_ptr<bam::array<T, bam::cached_host_memory>> cached[2];
  const double percents[2] = {1.0, 10.0};
  const char* names[2] = {"bam-1pct", "bam-10pct"};
  for (int c = 0; c < 2; ++c) {
    if (!o.variant(names[c])) continue;
    cached[c] = std::make_unique<bam::array<T, bam::cached_host_memory>>(
        host,
        bam::cache_options{
            o.random_line,
            std::max<std::uint64_t>(
                16, static_cast<std::uint64_t>(static_cast<double>(lines) * percents[c] / 100.0))},
        bench_stream);
  }
  // The UVM side: its memory last, after the guard.
  managed_data<T> managed{o, std::span<const T>{host.data(), elements}, {{kernel, "none"}}};

  if (o.variant("zero-copy")) {
    variant_run v;
    v.base = base;
    v.base.variant = "zero-copy";
    v.base.side = "squeeze";
    v.base.backing = "mapped_host_memory";
    v.reset = reset;
    v.run = [&] { return launch(direct.ref()); };
    v.check = checker(direct);
    measure(v, o);
  }
  for (int c = 0; c < 2; ++c) {
    if (!cached[c]) continue;
    variant_run v;
    v.base = base;
    v.base.variant = names[c];
    v.base.side = "squeeze";
    v.base.backing = "cached_host_memory";
    v.base.cache_percent = percents[c];
    v.base.cache_bytes = cached[c]->cache_used()->options().slots * o.random_line;
    v.base.line_bytes = o.random_line;
    auto& array = *cached[c];
    v.make_cold = [&] { array.clear(bench_stream); };
    v.reset = reset;
    v.run = [&] { return launch(array.ref()); };
    v.check = checker(array);
    measure(v, o);
  }
  if (managed.array) {
    for (const uvm_mode mode : {uvm_mode::demand, uvm_mode::advise, uvm_mode::prefetch}) {
      if (!o.variant(to_string(mode)) || !uvm_mode_runs(mode, concurrent, kernel, "none")) continue;
      variant_run v = uvm_variant(o, managed, mode, device, base, launch);
      v.reset = reset;
      v.check = checker(*managed.array);
      measure(v, o);
    }
  }
}

// ---- graphs ----------------------------------------------------------------------------------

struct graph_data {
  io::graph g;
  std::uint32_t source = 0;
  std::vector<std::uint32_t> bfs_reference, cc_reference;
};

graph_data load_graph(const options& o, const std::string& kind) {
  graph_data d;
  const auto start = std::chrono::steady_clock::now();
  std::filesystem::path file;
  if (!o.graph_dir.empty()) {
    file = std::filesystem::path{o.graph_dir} / (kind + "_s" + std::to_string(o.scale) + ".sqg");
  }
  if (!file.empty() && std::filesystem::exists(file)) {
    d.g = io::read_graph_binary(file);
  } else {
    if (kind == "kron") {
      io::kron_options k;
      k.scale = o.scale;
      d.g = io::generate_kron(k);
    } else {
      io::urand_options u;
      u.num_vertices = std::uint64_t{1} << o.scale;
      d.g = io::generate_urand(u);
    }
    if (!file.empty()) {
      std::filesystem::create_directories(file.parent_path());
      io::write_graph_binary(file, d.g);
    }
  }
  const double built =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (std::uint32_t v = 1; v < d.g.num_vertices(); ++v) {
    if (d.g.degree(v) > d.g.degree(d.source)) d.source = v;
  }
  if (o.kernel("bfs")) d.bfs_reference = io::bfs_reference(d.g, d.source);
  if (o.kernel("cc")) d.cc_reference = io::cc_reference(d.g);
  const double total =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf(
      "\ngraph %s scale %d: %llu vertices, %llu edge entries (%.2f GiB edge list), source %u "
      "(degree %llu); built in %.1f s, host references in %.1f s\n",
      kind.c_str(), o.scale, static_cast<unsigned long long>(d.g.num_vertices()),
      static_cast<unsigned long long>(d.g.num_edges()),
      static_cast<double>(d.g.num_edges()) * 4 / (1u << 30), d.source,
      static_cast<unsigned long long>(d.g.degree(d.source)), built, total - built);
  return d;
}

bam::traversal traversal_of(const std::string& name) {
  return name == "odt"      ? bam::traversal::odt
         : name == "vertex" ? bam::traversal::vertex
                            : bam::traversal::line_aware;
}

void graph_case(const options& o, const std::string& kind, int device, bool concurrent) {
  const graph_data d = load_graph(o, kind);
  const io::graph& g = d.g;
  const auto n = static_cast<std::uint32_t>(g.num_vertices());
  const std::uint64_t m = g.num_edges();
  core::device_buffer<std::uint64_t> offsets{g.row_offsets.size()};
  offsets.copy_from(std::span<const std::uint64_t>{g.row_offsets}, nullptr);
  core::device_buffer<std::uint32_t> out{n};
  const std::uint64_t lines = (m * 4 + o.graph_line - 1) / o.graph_line;
  core::device_buffer<std::uint32_t> fvl{std::max<std::uint64_t>(lines, 1)};
  bam::first_vertex_list(offsets.data(), n, m, o.graph_line / 4, fvl.data(), bench_stream);
  core::pinned_buffer<std::uint32_t> neighbors{std::max<std::uint64_t>(m, 1),
                                               core::host_memory::mapped};
  parallel_for(m, [&](std::uint64_t begin, std::uint64_t end) {
    std::memcpy(neighbors.data() + begin, g.neighbors.data() + begin, (end - begin) * 4);
  });
  bam::array<std::uint32_t, bam::mapped_host_memory> direct{neighbors, bench_stream};
  std::unique_ptr<bam::array<std::uint32_t, bam::cached_host_memory>> cached[2];
  const double percents[2] = {1.0, 10.0};
  const char* names[2] = {"bam-1pct", "bam-10pct"};
  for (int c = 0; c < 2; ++c) {
    if (!o.variant(names[c])) continue;
    const auto slots = std::max<std::uint64_t>(
        16, static_cast<std::uint64_t>(static_cast<double>(lines) * percents[c] / 100.0));
    cached[c] = std::make_unique<bam::array<std::uint32_t, bam::cached_host_memory>>(
        neighbors, bam::cache_options{o.graph_line, slots}, bench_stream);
  }
  std::vector<std::pair<std::string, std::string>> uvm_kernels;
  for (const char* k : {"bfs", "cc"}) {
    if (o.kernel(k)) uvm_kernels.emplace_back(k, kind);
  }
  managed_data<std::uint32_t> managed{o, std::span<const std::uint32_t>{g.neighbors}, uvm_kernels};
  std::vector<std::uint32_t> got(n);

  for (const char* algo : {"bfs", "cc"}) {
    if (!o.kernel(algo)) continue;
    const bool bfs = std::string_view{algo} == "bfs";
    const std::vector<std::uint32_t>& reference = bfs ? d.bfs_reference : d.cc_reference;
    record base;
    base.kernel = algo;
    base.graph = kind;
    base.traversal = "vertex";
    base.data_bytes = base.useful_bytes = m * 4;
    base.vertices = n;
    base.edges = m;
    base.source = bfs ? d.source : 0;
    // run(array ref, traversal): one whole BFS / CC; returns levels / rounds.
    const auto algorithm = [&, bfs](auto ref, bam::traversal how) -> std::uint32_t {
      const bam::graph_ref<decltype(ref)> gr{offsets.data(), ref, n, fvl.data()};
      return bfs ? bam::bfs(gr, m, d.source, how, out.data(), bench_stream)
                 : bam::connected_components(gr, m, how, out.data(), bench_stream);
    };
    const auto reset = [&] { out.fill_bytes(0xFF, nullptr); };
    const auto checker = [&](auto& array) {
      return [&]() -> std::string {
        if (std::string e = reported_error(array); !e.empty()) return e;
        out.copy_to(std::span<std::uint32_t>{got}, nullptr);
        SQUEEZE_CUDA_TRY(cudaDeviceSynchronize());
        std::uint64_t wrong = 0, first = 0;
        for (std::uint64_t v = n; v-- > 0;) {
          if (got[v] != reference[v]) {
            ++wrong;
            first = v;
          }
        }
        if (wrong == 0) return {};
        return std::to_string(wrong) + " of " + std::to_string(n) +
               " vertices differ from the host reference (first: vertex " + std::to_string(first) +
               ", got " + std::to_string(got[first]) + ", want " +
               std::to_string(reference[first]) + ")";
      };
    };
    if (o.variant("zero-copy")) {
      variant_run v;
      v.base = base;
      v.base.variant = "zero-copy";
      v.base.side = "squeeze";
      v.base.backing = "mapped_host_memory";
      v.reset = reset;
      v.run = [&] { return algorithm(direct.ref(), bam::traversal::vertex); };
      v.check = checker(direct);
      measure(v, o);
    }
    for (int c = 0; c < 2; ++c) {
      if (!cached[c]) continue;
      for (const auto& t : o.traversals) {
        variant_run v;
        v.base = base;
        v.base.variant = std::string{names[c]} + "-" + t;
        v.base.side = "squeeze";
        v.base.backing = "cached_host_memory";
        v.base.traversal = t == "line-aware" ? "line_aware" : t;
        v.base.cache_percent = percents[c];
        v.base.cache_bytes = cached[c]->cache_used()->options().slots * o.graph_line;
        v.base.line_bytes = o.graph_line;
        auto& array = *cached[c];
        const bam::traversal how = traversal_of(t);
        v.make_cold = [&] { array.clear(bench_stream); };
        v.reset = reset;
        v.run = [&, how] { return algorithm(array.ref(), how); };
        v.check = checker(array);
        measure(v, o);
      }
    }
    if (managed.array) {
      for (const uvm_mode mode : {uvm_mode::demand, uvm_mode::advise, uvm_mode::prefetch}) {
        if (!o.variant(to_string(mode)) || !uvm_mode_runs(mode, concurrent, algo, kind)) {
          continue;
        }
        variant_run v = uvm_variant(o, managed, mode, device, base, [&](auto ref) {
          return algorithm(ref, bam::traversal::vertex);
        });
        v.reset = reset;
        v.check = checker(*managed.array);
        measure(v, o);
      }
    }
  }
}

// ---- the table -------------------------------------------------------------------------------

void print_table(const options& o) {
  fill_baselines();
  std::printf(
      "\nbam vs unified memory, median per pass / traversal; GB/s = bytes the kernel needs / "
      "time; xUVM = the best UVM variant's time (same kernel, graph, temperature) / this one\n"
      "cold: managed data moved to the host, bam caches cleared, L2 overwritten before each "
      "run; warm: back to back\n");
  std::printf("%-7s %-6s %-20s %11s %11s %9s %9s %9s %9s\n", "kernel", "graph", "variant",
              "cold ms", "warm ms", "cold GB/s", "warm GB/s", "cold xUVM", "warm xUVM");
  for (const auto& r : records) {
    if (r.temperature != "cold") continue;
    const record* w = find_record(r.kernel, r.graph, r.variant, "warm");
    if (!r.verified) {
      std::printf("%-7s %-6s %-20s  not timed: %s\n", r.kernel.c_str(), r.graph.c_str(),
                  r.variant.c_str(), r.error.c_str());
      continue;
    }
    const double cold_x = r.uvm_best_ms / r.time.median_ms;
    const double warm_x = w != nullptr && w->verified ? w->uvm_best_ms / w->time.median_ms : NAN;
    std::printf("%-7s %-6s %-20s %11.2f %11.2f %9.2f %9.2f %9.2f %9.2f\n", r.kernel.c_str(),
                r.graph.c_str(), r.variant.c_str(), r.time.median_ms,
                w != nullptr && w->verified ? w->time.median_ms : NAN, r.gbps(),
                w != nullptr ? w->gbps() : NAN, cold_x, warm_x);
  }
  for (const auto& s : skipped) {
    std::printf("skipped: %s %s %s: %s\n", s.kernel.c_str(), s.graph.c_str(), s.variant.c_str(),
                s.reason.c_str());
  }
  for (const auto& t : evaluate_targets(o)) {
    if (std::isfinite(t.ratio)) {
      std::printf(
          "target: %s: %.2fx against %s (%s); %.2fx against %s, the best without "
          "prefetch\n",
          t.what.c_str(), t.ratio, t.baseline_variant.c_str(), t.met() ? "met" : "NOT met",
          t.ratio_on_demand, t.on_demand_variant.c_str());
    } else {
      std::printf("target: %s: not measured\n", t.what.c_str());
    }
  }
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

}  // namespace uvm_bench

int main(int argc, char** argv) {
  using namespace uvm_bench;
  options o;
  try {
    o = parse(argc, argv);
  } catch (const usage_error& e) {
    std::fprintf(stderr, "squeeze_bench_uvm: %s\n%s", e.message.c_str(), usage_text());
    return 2;
  }
  const auto presence = core::detect_devices();
  if (!presence.present()) {
    std::fprintf(stderr, "squeeze_bench_uvm: %s; nothing measured (this bench needs a GPU)\n",
                 presence.message().c_str());
    return 1;
  }
  try {
    gpu_context ctx;
    SQUEEZE_CUDA_TRY(cudaGetDevice(&ctx.device));
    ctx.info = core::query_device(ctx.device);
    SQUEEZE_CUDA_TRY(cudaDriverGetVersion(&ctx.driver));
    SQUEEZE_CUDA_TRY(cudaRuntimeGetVersion(&ctx.runtime));
    int concurrent = 0;
    SQUEEZE_CUDA_TRY(
        cudaDeviceGetAttribute(&concurrent, cudaDevAttrConcurrentManagedAccess, ctx.device));
    ctx.concurrent_managed = concurrent != 0;
    SQUEEZE_CUDA_TRY(cudaMemGetInfo(&ctx.free_at_start, &ctx.total));
    ctx.date = utc_now();
    std::printf(
        "squeeze_bench_uvm on %s; driver %d, runtime %d; concurrentManagedAccess %d, "
        "pageableMemoryAccess %d; GPU memory free %.2f of %.2f GiB\n",
        core::describe(ctx.info).c_str(), ctx.driver, ctx.runtime, concurrent,
        ctx.info.pageable_memory_access ? 1 : 0,
        static_cast<double>(ctx.free_at_start) / (1u << 30),
        static_cast<double>(ctx.total) / (1u << 30));
    std::printf(
        "managed memory (cudaMallocManaged, first touched on the host) is never allocated past "
        "the GPU's free memory less %.2f GiB; cold runs start with the data on the host (%s)\n",
        static_cast<double>(o.margin_mib) / 1024.0,
        o.cold == cold_method::prefetch ? "cudaMemPrefetchAsync to the host before each run"
                                        : "the host touches every page before each run");
    if (!ctx.concurrent_managed && o.cold == cold_method::prefetch) {
      std::printf("no concurrentManagedAccess: cold runs use --cold touch\n");
      o.cold = cold_method::touch;
    }
    squeeze::bench::l2_flusher l2;
    flusher = &l2;
    if (o.kernel("rand4")) {
      random_case<std::uint32_t>(o, "rand4", ctx.device, ctx.concurrent_managed);
      write_json(o, ctx);
    }
    if (o.kernel("row512")) {
      random_case<uint4>(o, "row512", ctx.device, ctx.concurrent_managed);
      write_json(o, ctx);
    }
    if (o.kernel("bfs") || o.kernel("cc")) {
      for (const auto& kind : o.graphs) {
        graph_case(o, kind, ctx.device, ctx.concurrent_managed);
        write_json(o, ctx);
      }
    }
    write_json(o, ctx);
    print_table(o);
    if (!o.json.empty()) std::printf("JSON: %s\n", o.json.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "squeeze_bench_uvm: %s\n", e.what());
    return 1;
  }
  return any_failure ? 3 : 0;
}
