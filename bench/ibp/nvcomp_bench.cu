// SPDX-License-Identifier: Apache-2.0
// squeeze_bench_nvcomp: IBP against nvCOMP 6's batched lossless codecs, the compressors users
// would pick instead. What is measured and how: ibp/nvcomp_study.cuh.
//
//   squeeze_bench_nvcomp [--json FILE] [--fashion-mnist PATH] [--npy FILE]
//       [--datasets LIST] [--rows LIST] [--codecs LIST] [--chunking row,64k]
//       [--ibp-chunks 1,2,4,8] [--batch ROWS | --batch-mib 32] [--set-mib 128]
//       [--repeats 10] [--warmup 2] [--compress-repeats 3] [--seed 1]
// (--opt VALUE or --opt=VALUE; LIST is comma-separated.)
//   --datasets      fashion-mnist-u8 (fm-u8), fashion-mnist-f32 (fm-f32), normal, embedding,
//                   zeros50, zeros90, npy (default: all; npy when --npy is given)
//   --fashion-mnist the uncompressed train-images-idx3-ubyte, or a directory holding it
//                   (default: the first of shared/data/fashion-mnist,
//                   ../shared/data/fashion-mnist, .data/fm, /usr/share/datasets/fashion-mnist)
//   --codecs        ibp, bitcomp, bitcomp-sparse, cascaded, cascaded-max, ans, lz4, gdeflate,
//                   zstd (default: all)
//   --batch         rows per delivered batch (default: --batch-mib of rows, at most all)
//   --set-mib       size of each generated data set
// Data: Fashion-MNIST training images as uint8 and as float32 (pixel / 255); float32 N(0, 1);
// embedding-like float32 N(0, 0.05); float32 with each value 0 with probability 0.5 / 0.9,
// else N(0, 1); the .npy file's bytes. Each is cut into rows of S bytes, S = 256, 1024, 4096.
//
// Exit status: 0 when every output matched its reference (nvCOMP error statuses are recorded
// in their records, not failures); 1 when one did not (status "wrong") or a data set stopped
// on an error outside any record; 2 for bad arguments, missing data or an unwritable JSON
// file; 3 without a CUDA device (nothing measured, no JSON written).
//
// ---- JSON (--json FILE; rewritten after each data set, so a cut run keeps what it did) ----
// {
//   "program": "squeeze_bench_nvcomp",
//   "gpu": "NVIDIA H100 80GB HBM3",            name of the device every number comes from
//   "gpu_description": "... (sm_90, 132 SMs, 79.1 GiB, L2 50.0 MiB)",
//   "nvcomp_version": "6.0.0.12",                 headers built against
//   "nvcomp_library_version": 6000,               nvcompGetProperties at run time
//   "cuda_runtime_version": 13000, "cuda_driver_version": 13000,
//   "settings": {"batch_rows" (0: batch_bytes of rows), "batch_bytes", "set_bytes" (each
//                generated set), "repeats", "warmup", "compress_repeats",
//                "ibp_sweep_thresholds", "seed"},
//   "datasets": [{"name", "description", "element_bytes", "bytes"}],
//   "records": [ one per data set x row size x codec x chunking:
//     "dataset"               data set name (as in "datasets")
//     "element_bytes"         1 (uint8), 4 (float32), the .npy's item size
//     "row_bytes"             S: bytes per row (256, 1024, 4096)
//     "rows"                  rows in the set (its bytes / S, the tail dropped)
//     "batch_rows"            rows per delivered batch (distinct, random order)
//     "library"               "squeeze" (plain, ibp) or "nvcomp"
//     "codec"                 "plain" (no compression: the baseline), "ibp", or the nvCOMP
//                             codec: "bitcomp" (algorithm 0), "bitcomp-sparse" (algorithm 1),
//                             "cascaded" (level 3), "cascaded-max" (level 7), "ans", "lz4",
//                             "gdeflate", "zstd"
//     "chunking"              "row" (one compressed unit per row; ibp and plain always) or
//                             "64KiB" (nvCOMP chunks of 65536 / S whole rows)
//     "chunk_bytes"           uncompressed bytes per compressed unit (S or 65536)
//     "ibp_chunk_bytes"       IBP's chunk size C (1, 2, 4, 8); null for the others
//     "options"               the codec's settings in words (IBP: C and the threshold T the
//                             sweep chose)
//     "status"                "ok"; "error" (an nvCOMP or CUDA call failed, or some chunks
//                             reported an error status: see "message"); "wrong" (an output
//                             differed from its reference); "skipped" (row size unusable)
//     "message"               what failed, "" when ok
//     "ratio"                 uncompressed / compressed bytes over the whole set (sizes and
//                             offsets, which both sides keep, not counted); null unless
//                             compressed
//     "compressed_bytes"      the whole set compressed
//     "preprocess_gbps"       IBP only: GB/s (1e9 B/s of the set) of building the codebook
//                             (bit counts + threshold sweep on the GPU, host clock)
//     "compress_gbps"         GB/s of uncompressed input compressed, input on the GPU (IBP:
//                             ibp::compress_condensed by the host clock, its allocation and
//                             one synchronization included; nvCOMP: CUDA events around the
//                             batched CompressAsync into preallocated buffers)
//     "decompress_gbps"       GB/s of uncompressed output, the whole set decompressed with
//                             the compressed data already in device memory
//     "delivered_gbps"        GB/s of uncompressed batch rows delivered from pinned host
//                             memory into a dense device tensor, end to end (nvCOMP: the
//                             faster of its two transports)
//     "delivered_exact_gbps"  nvCOMP: chunks fetched by exact length (xfer::warp_copy)
//     "delivered_slots_gbps"  nvCOMP: chunks fetched as fixed slots (xfer::gather_rows)
//     "transport"             "xfer" (plain), "ibp", or nvCOMP's faster: "exact" / "slots"
//     "batch_chunks"          compressed units fetched per batch
//     "batch_fetched_bytes"   compressed bytes per batch crossing PCIe (exact transport)
//     "batch_slot_bytes"      nvCOMP: bytes per batch of the slots transport
//     "plain_gbps"            the plain gather's GB/s, same batch, same run
//     "delivered_vs_plain"    delivered_gbps / plain_gbps
//     "ratio_vs_ibp"          nvCOMP: ratio / IBP's best ratio over C (same data set and
//                             row size); null when IBP does not compress it (ratio <= 1)
//     "delivered_vs_ibp"      nvCOMP: delivered / IBP's fastest delivery over the C that
//                             compress; null as above
//     "wins_end_to_end"       nvCOMP with ratio_vs_ibp >= 1.5: whether it delivers faster
//                             than IBP; null otherwise
//     "gpu"                   the device name again
//   ]
// }
// Absent measurements (after a failure, or not applicable) are null.
#include <cuda_runtime.h>
#include <nvcomp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "common/json.hpp"
#include "common/report.hpp"
#include "ibp/nvcomp_study.cuh"

namespace {

namespace study = squeeze::bench::nvcomp_study;
namespace core = squeeze::core;
using squeeze::bench::format_bytes;
using squeeze::bench::format_number;

constexpr int exit_wrong = 1;
constexpr int exit_usage = 2;
constexpr int exit_no_device = 3;

const std::vector<std::string> all_data_sets{"fashion-mnist-u8", "fashion-mnist-f32", "normal",
                                             "embedding",        "zeros50",           "zeros90"};

struct options {
  std::string json;
  std::string fashion_mnist;
  std::string npy;
  std::vector<std::string> data_sets;  ///< empty: all (+ npy when given)
  std::size_t set_bytes = std::size_t{128} << 20;
  study::settings s;
};

/// Prints the usage (after `why`) and exits: 0 for --help, 2 otherwise.
[[noreturn]] void usage(const std::string& why, bool help = false) {
  std::fprintf(
      help ? stdout : stderr,
      "squeeze_bench_nvcomp: %s\n"
      "usage: squeeze_bench_nvcomp [--json FILE] [--fashion-mnist PATH] [--npy FILE]\n"
      "    [--datasets LIST] [--rows LIST] [--codecs LIST] [--chunking row,64k]\n"
      "    [--ibp-chunks 1,2,4,8] [--batch ROWS | --batch-mib MIB] [--set-mib MIB]\n"
      "    [--repeats N] [--warmup N] [--compress-repeats N] [--seed N]\n"
      "  data sets: fashion-mnist-u8 (fm-u8) fashion-mnist-f32 (fm-f32) normal embedding\n"
      "             zeros50 zeros90 npy\n"
      "  codecs:    ibp bitcomp bitcomp-sparse cascaded cascaded-max ans lz4 gdeflate zstd\n"
      "  (see the top of bench/ibp/nvcomp_bench.cu for the JSON fields)\n",
      why.c_str());
  std::exit(help ? 0 : exit_usage);
}

std::vector<std::string> split(const std::string& list) {
  std::vector<std::string> out;
  std::size_t begin = 0;
  while (begin <= list.size()) {
    const std::size_t end = std::min(list.find(',', begin), list.size());
    if (end > begin) out.push_back(list.substr(begin, end - begin));
    begin = end + 1;
  }
  return out;
}

std::size_t number(const std::string& option, const std::string& v) {
  char* end = nullptr;
  const unsigned long long x = std::strtoull(v.c_str(), &end, 10);
  if (v.empty() || end == v.c_str() || *end != '\0' || v[0] == '-')
    usage(option + ": '" + v + "' is not a non-negative integer");
  return static_cast<std::size_t>(x);
}

options parse(int argc, char** argv) {
  options o;
  bool codecs_given = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string value;
    bool has_value = false;
    if (const std::size_t eq = arg.find('='); arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      has_value = true;
    }
    const auto next = [&]() -> std::string {
      if (has_value) return value;
      if (i + 1 >= argc) usage(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--help" || arg == "-h") {
      usage("IBP against nvCOMP's batched codecs", true);
    } else if (arg == "--json") {
      o.json = next();
    } else if (arg == "--fashion-mnist") {
      o.fashion_mnist = next();
    } else if (arg == "--npy") {
      o.npy = next();
    } else if (arg == "--datasets") {
      o.data_sets.clear();
      for (std::string d : split(next())) {
        if (d == "fm-u8") d = "fashion-mnist-u8";
        if (d == "fm-f32") d = "fashion-mnist-f32";
        if (d != "npy" &&
            std::find(all_data_sets.begin(), all_data_sets.end(), d) == all_data_sets.end())
          usage("unknown data set '" + d + "'");
        o.data_sets.push_back(d);
      }
    } else if (arg == "--rows") {
      o.s.row_sizes.clear();
      for (const std::string& r : split(next())) {
        const std::size_t s = number(arg, r);
        if (s == 0) usage("--rows: sizes must be positive");
        o.s.row_sizes.push_back(s);
      }
    } else if (arg == "--codecs") {
      codecs_given = true;
      o.s.ibp = false;
      o.s.nvcomp_codecs.clear();
      const auto& known = study::nvcomp_codec_names();
      for (const std::string& c : split(next())) {
        if (c == "ibp") {
          o.s.ibp = true;
        } else if (std::find(known.begin(), known.end(), c) != known.end()) {
          o.s.nvcomp_codecs.push_back(c);
        } else {
          usage("unknown codec '" + c + "'");
        }
      }
    } else if (arg == "--chunking") {
      o.s.chunk_per_row = o.s.chunk_64k = false;
      for (const std::string& c : split(next())) {
        if (c == "row") {
          o.s.chunk_per_row = true;
        } else if (c == "64k" || c == "64KiB") {
          o.s.chunk_64k = true;
        } else {
          usage("--chunking takes row and/or 64k");
        }
      }
    } else if (arg == "--ibp-chunks") {
      o.s.ibp_chunks.clear();
      for (const std::string& c : split(next())) {
        const std::size_t v = number(arg, c);
        if (v != 1 && v != 2 && v != 4 && v != 8) usage("--ibp-chunks: 1, 2, 4 or 8");
        o.s.ibp_chunks.push_back(static_cast<std::uint32_t>(v));
      }
    } else if (arg == "--batch") {
      o.s.batch_rows = number(arg, next());
      if (o.s.batch_rows == 0) usage("--batch must be positive");
    } else if (arg == "--batch-mib") {
      o.s.batch_bytes = number(arg, next()) << 20;
      if (o.s.batch_bytes == 0) usage("--batch-mib must be positive");
    } else if (arg == "--set-mib") {
      o.set_bytes = number(arg, next()) << 20;
      if (o.set_bytes == 0) usage("--set-mib must be positive");
    } else if (arg == "--repeats") {
      o.s.timing.repeats = static_cast<int>(number(arg, next()));
      if (o.s.timing.repeats < 1) usage("--repeats must be positive");
    } else if (arg == "--warmup") {
      o.s.timing.warmup = static_cast<int>(number(arg, next()));
    } else if (arg == "--compress-repeats") {
      o.s.compress_timing.repeats = static_cast<int>(number(arg, next()));
      if (o.s.compress_timing.repeats < 1) usage("--compress-repeats must be positive");
    } else if (arg == "--seed") {
      o.s.seed = number(arg, next());
    } else {
      usage("unknown option '" + arg + "'");
    }
  }
  if (o.data_sets.empty()) {
    o.data_sets = all_data_sets;
    if (!o.npy.empty()) o.data_sets.push_back("npy");
  }
  if (std::find(o.data_sets.begin(), o.data_sets.end(), "npy") != o.data_sets.end() &&
      o.npy.empty())
    usage("data set npy needs --npy FILE");
  if (codecs_given && !o.s.ibp && o.s.nvcomp_codecs.empty()) usage("--codecs: none left");
  if (o.s.row_sizes.empty() || o.s.ibp_chunks.empty()) usage("empty --rows or --ibp-chunks");
  return o;
}

// ---- output ------------------------------------------------------------------------------

using squeeze::bench::json_number;
using squeeze::bench::json_string;

template <class T>
std::string json_integer(std::optional<T> v) {
  return v ? std::to_string(*v) : "null";
}

std::string json_bool(std::optional<bool> v) {
  if (!v) return "null";
  return *v ? "true" : "false";
}

/// What the JSON says of a data set (its bytes are released once measured).
struct data_set_info {
  std::string name;
  std::string description;
  std::uint32_t element_bytes = 0;
  std::size_t bytes = 0;
};

struct run_context {
  std::string gpu;
  std::string gpu_description;
  int nvcomp_library_version = 0;
  int cuda_runtime = 0;
  int cuda_driver = 0;
};

/// Writes the whole file again (called after each data set). False when it cannot.
bool write_json(const options& o, const run_context& ctx, const std::vector<data_set_info>& sets,
                const std::vector<study::record>& records) {
  std::FILE* f = std::fopen(o.json.c_str(), "w");
  if (f == nullptr) return false;
  std::fprintf(f, "{\n  \"program\": \"squeeze_bench_nvcomp\",\n");
  std::fprintf(f, "  \"gpu\": %s,\n  \"gpu_description\": %s,\n", json_string(ctx.gpu).c_str(),
               json_string(ctx.gpu_description).c_str());
  std::fprintf(f, "  \"nvcomp_version\": \"%d.%d.%d.%d\",\n  \"nvcomp_library_version\": %d,\n",
               NVCOMP_VER_MAJOR, NVCOMP_VER_MINOR, NVCOMP_VER_PATCH, NVCOMP_VER_BUILD,
               ctx.nvcomp_library_version);
  std::fprintf(f, "  \"cuda_runtime_version\": %d,\n  \"cuda_driver_version\": %d,\n",
               ctx.cuda_runtime, ctx.cuda_driver);
  std::fprintf(f,
               "  \"settings\": {\"batch_rows\": %zu, \"batch_bytes\": %zu, \"set_bytes\": %zu, "
               "\"repeats\": %d, \"warmup\": %d, \"compress_repeats\": %d, "
               "\"ibp_sweep_thresholds\": %d, \"seed\": %llu},\n",
               o.s.batch_rows, o.s.batch_bytes, o.set_bytes, o.s.timing.repeats, o.s.timing.warmup,
               o.s.compress_timing.repeats, o.s.sweep_steps + 1,
               static_cast<unsigned long long>(o.s.seed));
  std::fprintf(f, "  \"datasets\": [");
  for (std::size_t i = 0; i < sets.size(); ++i) {
    std::fprintf(
        f, "%s\n    {\"name\": %s, \"description\": %s, \"element_bytes\": %u, \"bytes\": %zu}",
        i ? "," : "", json_string(sets[i].name).c_str(), json_string(sets[i].description).c_str(),
        sets[i].element_bytes, sets[i].bytes);
  }
  std::fprintf(f, "\n  ],\n  \"records\": [");
  for (std::size_t i = 0; i < records.size(); ++i) {
    const study::record& r = records[i];
    std::optional<double> vs_plain;
    if (r.delivered_gbps && r.plain_gbps > 0) vs_plain = *r.delivered_gbps / r.plain_gbps;
    std::fprintf(f, "%s\n    {", i ? "," : "");
    std::fprintf(f, "\"dataset\": %s, \"element_bytes\": %u, \"row_bytes\": %zu, \"rows\": %zu, ",
                 json_string(r.dataset).c_str(), r.element_bytes, r.row_bytes, r.rows);
    std::fprintf(f, "\"batch_rows\": %zu, \"library\": %s, \"codec\": %s, \"chunking\": %s, ",
                 r.batch_rows, json_string(r.library).c_str(), json_string(r.codec).c_str(),
                 json_string(r.chunking).c_str());
    std::fprintf(f, "\"chunk_bytes\": %zu, \"ibp_chunk_bytes\": %s, \"options\": %s, ",
                 r.chunk_bytes, json_integer(r.ibp_chunk_bytes).c_str(),
                 json_string(r.options).c_str());
    std::fprintf(f, "\"status\": %s, \"message\": %s, \"ratio\": %s, \"compressed_bytes\": %s, ",
                 json_string(r.status).c_str(), json_string(r.message).c_str(),
                 json_number(r.ratio).c_str(), json_integer(r.compressed_bytes).c_str());
    std::fprintf(f, "\"preprocess_gbps\": %s, \"compress_gbps\": %s, \"decompress_gbps\": %s, ",
                 json_number(r.preprocess_gbps).c_str(), json_number(r.compress_gbps).c_str(),
                 json_number(r.decompress_gbps).c_str());
    std::fprintf(f,
                 "\"delivered_gbps\": %s, \"delivered_exact_gbps\": %s, "
                 "\"delivered_slots_gbps\": %s, \"transport\": %s, ",
                 json_number(r.delivered_gbps).c_str(), json_number(r.delivered_exact_gbps).c_str(),
                 json_number(r.delivered_slots_gbps).c_str(), json_string(r.transport).c_str());
    std::fprintf(f, "\"batch_chunks\": %s, \"batch_fetched_bytes\": %s, \"batch_slot_bytes\": %s, ",
                 json_integer(r.batch_chunks).c_str(), json_integer(r.batch_fetched_bytes).c_str(),
                 json_integer(r.batch_slot_bytes).c_str());
    std::fprintf(f, "\"plain_gbps\": %s, \"delivered_vs_plain\": %s, \"ratio_vs_ibp\": %s, ",
                 json_number(r.plain_gbps).c_str(), json_number(vs_plain).c_str(),
                 json_number(r.ratio_vs_ibp).c_str());
    std::fprintf(f, "\"delivered_vs_ibp\": %s, \"wins_end_to_end\": %s, \"gpu\": %s}",
                 json_number(r.delivered_vs_ibp).c_str(), json_bool(r.wins_end_to_end).c_str(),
                 json_string(r.gpu).c_str());
  }
  std::fprintf(f, "\n  ]\n}\n");
  return std::fclose(f) == 0;
}

std::string cell(std::optional<double> v, int digits) {
  return v ? format_number(*v, digits) : "-";
}

void print_header() {
  std::printf("%-18s %6s %-22s %6s %8s %8s %8s %7s %6s  %s\n", "data set", "row", "codec", "ratio",
              "comp", "decomp", "deliver", "/plain", "/ibp", "status");
  std::printf("%-18s %6s %-22s %6s %8s %8s %8s %7s %6s\n", "", "", "", "", "GB/s", "GB/s", "GB/s",
              "", "");
}

void print_record(const study::record& r) {
  std::optional<double> vs_plain;
  if (r.delivered_gbps && r.plain_gbps > 0) vs_plain = *r.delivered_gbps / r.plain_gbps;
  std::string status = r.status;
  if (!r.message.empty()) status += ": " + r.message;
  if (r.ok() && !r.transport.empty() && r.library == "nvcomp") status += " (" + r.transport + ")";
  if (r.wins_end_to_end)
    status += *r.wins_end_to_end ? " [>=1.5x ratio, wins]" : " [>=1.5x ratio, loses]";
  std::printf("%-18s %6s %-22s %6s %8s %8s %8s %7s %6s  %s\n", r.dataset.c_str(),
              format_bytes(r.row_bytes).c_str(), r.label().c_str(), cell(r.ratio, 2).c_str(),
              cell(r.compress_gbps, 1).c_str(), cell(r.decompress_gbps, 1).c_str(),
              cell(r.delivered_gbps, 1).c_str(), cell(vs_plain, 2).c_str(),
              cell(r.delivered_vs_ibp, 2).c_str(), status.c_str());
  std::fflush(stdout);
}

/// The project's targets, per data set and row size: IBP's fastest delivery (over the C that
/// compress) against every nvCOMP codec's; and, for nvCOMP codecs that compress >= 1.5x
/// better than IBP's best ratio, whether that wins end to end.
void add_targets(squeeze::bench::report_table& table, const std::vector<study::record>& records) {
  std::map<std::tuple<std::string, std::size_t>, std::vector<const study::record*>> cases;
  std::vector<std::tuple<std::string, std::size_t>> order;
  for (const study::record& r : records) {
    const auto key = std::tuple{r.dataset, r.row_bytes};
    if (!cases.contains(key)) order.push_back(key);
    cases[key].push_back(&r);
  }
  for (const auto& key : order) {
    const auto& list = cases[key];
    const std::string where = std::get<0>(key) + " " + format_bytes(std::get<1>(key));
    const study::record* ibp = nullptr;
    const study::record* fastest = nullptr;
    std::size_t failed = 0;
    for (const study::record* r : list) {
      if (r->library == "nvcomp" && !r->ok()) ++failed;
      if (!r->ok()) continue;
      if (r->codec == "ibp" && *r->ratio > 1.0 &&
          (ibp == nullptr || *r->delivered_gbps > *ibp->delivered_gbps))
        ibp = r;
      if (r->library == "nvcomp" &&
          (fastest == nullptr || *r->delivered_gbps > *fastest->delivered_gbps))
        fastest = r;
    }
    if (failed > 0)
      table.add_note(where + ": " + std::to_string(failed) +
                     " nvCOMP record(s) failed (see status)");
    if (ibp == nullptr) {
      table.add_note(where + ": IBP does not compress it (or failed): no target");
      continue;
    }
    if (fastest == nullptr) continue;
    table.add({"ibp vs nvcomp",
               where + ": IBP " + ibp->label() + " (" + format_number(*ibp->ratio, 2) +
                   "x) vs fastest nvCOMP " + fastest->label() + " (" +
                   format_number(*fastest->ratio, 2) + "x), delivered",
               *ibp->delivered_gbps, *fastest->delivered_gbps, "GB/s", 1.0});
    for (const study::record* r : list) {
      if (!r->wins_end_to_end) continue;
      table.add({"ibp vs nvcomp",
                 where + ": " + r->label() + " compresses " + format_number(*r->ratio, 2) + "x (" +
                     format_number(*r->ratio_vs_ibp, 2) +
                     "x IBP's best); delivered vs IBP's (> 1: wins end to end)",
                 *r->delivered_gbps, *ibp->delivered_gbps, "GB/s", std::nullopt});
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const options o = parse(argc, argv);
  const core::device_presence presence = core::detect_devices();
  if (!presence.present()) {
    std::fprintf(stderr, "squeeze_bench_nvcomp: %s; nothing measured, no JSON written\n",
                 presence.message().c_str());
    return exit_no_device;
  }
  run_context ctx;
  std::vector<study::data_set> loaded;  // Fashion-MNIST and the .npy, read before any timing
  try {
    const bool fm_u8 =
        std::find(o.data_sets.begin(), o.data_sets.end(), "fashion-mnist-u8") != o.data_sets.end();
    const bool fm_f32 =
        std::find(o.data_sets.begin(), o.data_sets.end(), "fashion-mnist-f32") != o.data_sets.end();
    if (fm_u8 || fm_f32) {
      for (auto& d :
           study::fashion_mnist_sets(study::find_fashion_mnist(o.fashion_mnist), fm_u8, fm_f32))
        loaded.push_back(std::move(d));
    }
    if (!o.npy.empty()) loaded.push_back(study::npy_set(o.npy));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "squeeze_bench_nvcomp: %s\n", e.what());
    return exit_usage;
  }

  int status = 0;
  std::vector<study::record> records;
  std::vector<data_set_info> described;
  try {
    const core::device_info info = core::query_device();
    ctx.gpu = info.name;
    ctx.gpu_description = core::describe(info);
    nvcompProperties_t props{};
    study::nvcomp_check(nvcompGetProperties(&props), "nvcompGetProperties");
    ctx.nvcomp_library_version = static_cast<int>(props.version);
    SQUEEZE_CUDA_TRY(cudaRuntimeGetVersion(&ctx.cuda_runtime));
    SQUEEZE_CUDA_TRY(cudaDriverGetVersion(&ctx.cuda_driver));
    std::printf("squeeze_bench_nvcomp: IBP vs nvCOMP %d.%d.%d (library %d) on %s\n",
                NVCOMP_VER_MAJOR, NVCOMP_VER_MINOR, NVCOMP_VER_PATCH, ctx.nvcomp_library_version,
                ctx.gpu_description.c_str());
    std::printf(
        "batch: %s rows (or %s of rows), distinct, random order, from pinned mapped host memory; "
        "%d warm-up + %d timed runs (median), compression %d timed\n\n",
        o.s.batch_rows ? std::to_string(o.s.batch_rows).c_str() : "-",
        format_bytes(o.s.batch_bytes).c_str(), o.s.timing.warmup, o.s.timing.repeats,
        o.s.compress_timing.repeats);

    study::study st{o.s};
    print_header();
    for (std::size_t k = 0; k < o.data_sets.size(); ++k) {
      const std::string& name = o.data_sets[k];
      study::data_set d;
      const std::uint64_t seed = o.s.seed * 100 + k;
      if (name == "normal") {
        d = study::gaussian_floats("normal", "float32 N(0, 1)", o.set_bytes, 1.0f, 0.0, seed);
      } else if (name == "embedding") {
        d = study::gaussian_floats("embedding", "float32 N(0, 0.05), embedding-like", o.set_bytes,
                                   0.05f, 0.0, seed);
      } else if (name == "zeros50" || name == "zeros90") {
        const double z = name == "zeros50" ? 0.5 : 0.9;
        d = study::gaussian_floats(
            name,
            "float32, each value 0 with probability " + format_number(z, 1) + ", else N(0, 1)",
            o.set_bytes, 1.0f, z, seed);
      } else {
        const std::string want = name == "npy" ? "npy:" : name;
        const auto it = std::find_if(loaded.begin(), loaded.end(), [&](const study::data_set& l) {
          return l.name.rfind(want, 0) == 0 && !l.bytes.empty();
        });
        if (it == loaded.end()) continue;
        d = std::move(*it);
      }
      described.push_back({d.name, d.description, d.element_bytes, d.bytes.size()});
      std::printf("-- %s: %s, %s\n", d.name.c_str(), d.description.c_str(),
                  format_bytes(d.bytes.size()).c_str());
      try {
        st.run(d, [&](const study::record& r) {
          records.push_back(r);
          print_record(r);
        });
      } catch (const squeeze::bench::verification_error& e) {
        std::printf("!! %s: wrong result: %s\n", d.name.c_str(), e.what());
        status = exit_wrong;
      } catch (const std::exception& e) {
        std::printf("!! %s: %s\n", d.name.c_str(), e.what());
        status = status != 0 ? status : exit_wrong;
      }
      if (!o.json.empty() && !write_json(o, ctx, described, records)) {
        std::fprintf(stderr, "squeeze_bench_nvcomp: cannot write %s\n", o.json.c_str());
        status = status != 0 ? status : exit_usage;
      }
    }
    if (st.wrong()) status = exit_wrong;
  } catch (const squeeze::bench::verification_error& e) {
    std::printf("!! wrong result: %s\n", e.what());
    status = exit_wrong;
  } catch (const std::exception& e) {
    std::printf("!! %s\n", e.what());
    status = status != 0 ? status : exit_wrong;
  }

  squeeze::bench::report_table table;
  add_targets(table, records);
  std::size_t errors = 0, wrongs = 0;
  for (const study::record& r : records) {
    errors += r.status == "error" ? 1 : 0;
    wrongs += r.status == "wrong" ? 1 : 0;
  }
  table.add_note("GPU: " + ctx.gpu_description);
  table.add_note(
      "delivered = GB/s of uncompressed batch rows from pinned host memory into a "
      "dense device tensor; nvCOMP: chunk gather (xfer) + batched decompress (+ row "
      "gather for 64 KiB chunks)");
  std::printf("\n");
  table.print(stdout);
  std::printf("\n%zu of %zu targets met; %zu records, %zu with errors, %zu wrong%s%s\n",
              table.targets() - table.missed(), table.targets(), records.size(), errors, wrongs,
              o.json.empty() ? "" : "; JSON: ", o.json.c_str());
  return status;
}
