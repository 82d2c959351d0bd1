// SPDX-License-Identifier: Apache-2.0
// cb_gmres: the CB-GMRES experiment of Grützmacher et al. (FRSZ2 in GMRES). Solves A x = b
// with restarted GMRES whose Krylov basis is stored as float64, float32, float16, bfloat16 or
// FRSZ2 (l = 16, 21, 32), all arithmetic in fp64, and compares iterations, accuracy and time
// with the float64 basis.
//
//   cb_gmres [matrix.mtx] [--generate N] [--formats LIST] [--tol T] [--max-iters K]
//            [--restart M] [--json PATH]
//
// Without a file it generates the 3D convection-diffusion matrix on an N^3 grid (N = 108 by
// default: 1,259,712 rows, 8.7 M entries, like SuiteSparse's atmosmodd). As in their experiment,
// x* = sin(i) normalized to unit norm, b = A x*, x0 = 0, restart 100, no preconditioner; the
// stopping test is the true relative residual ||b - A x|| / ||b|| <= T.
#include <squeeze/core.hpp>
#include <squeeze/frsz2/cb_gmres.cuh>
#include <squeeze/io/csr.hpp>
#include <squeeze/io/matrix_market.hpp>
#include <squeeze/io/stencil.hpp>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/cli.hpp"
#include "common/gpu.hpp"
#include "common/json.hpp"
#include "common/manufactured.hpp"

namespace core = squeeze::core;
namespace frsz2 = squeeze::frsz2;
namespace io = squeeze::io;

namespace {

constexpr const char* usage =
    "usage: cb_gmres [matrix.mtx] [--generate N] [--formats LIST] [--tol T] [--max-iters K]\n"
    "                [--restart M] [--json PATH]\n"
    "  matrix.mtx     a square Matrix Market matrix (default: --generate 108)\n"
    "  --generate N   the 3D convection-diffusion matrix on an N^3 grid (atmosmodd-like at 108)\n"
    "  --formats LIST basis storages, comma-separated (default: all):\n"
    "                 float64,float32,float16,bfloat16,frsz2_16,frsz2_21,frsz2_32\n"
    "  --tol T        target relative residual ||b - A x|| / ||b|| (default 1e-10)\n"
    "  --max-iters K  iteration cap per solve (default 20000)\n"
    "  --restart M    Krylov vectors per cycle (default 100)\n"
    "  --json PATH    also write the results as JSON\n";

using squeeze_examples::parse_number;
using squeeze_examples::usage_error;

struct arguments {
  std::optional<std::string> matrix_file;
  int generate = 108;
  bool generate_given = false;
  std::vector<std::string> formats;
  squeeze_examples::solver_options solver;
  std::optional<std::string> json;
};

struct run {
  std::string format;
  double bits_per_value = 0;
  frsz2::cb_gmres_result result;
  double solution_error = 0;  ///< ||x - x*|| (x* has unit norm)
};

/// One storage: its name, its bits per value, and the solve.
struct format_entry {
  const char* name;
  double bits_per_value;
  frsz2::cb_gmres_result (*solve)(frsz2::csr_ref, std::span<const double>, std::span<double>,
                                  const frsz2::cb_gmres_options&, cudaStream_t);
};

template <class Basis>
constexpr format_entry entry() {
  return {frsz2::storage_traits<Basis>::name(), frsz2::storage_traits<Basis>::bits_per_value,
          &frsz2::cb_gmres_solve<Basis>};
}

constexpr format_entry known_formats[] = {
    entry<double>(),
    entry<float>(),
    entry<__half>(),
    entry<__nv_bfloat16>(),
    entry<frsz2::format<16>>(),
    entry<frsz2::format<21>>(),
    entry<frsz2::format<32>>(),
};

const format_entry* find_format(std::string_view name) {
  for (const format_entry& f : known_formats) {
    if (name == f.name) return &f;
  }
  return nullptr;
}

arguments parse(int argc, char** argv) {
  arguments args;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    const auto value = [&] { return squeeze_examples::option_value(argc, argv, i); };
    if (arg == "--help" || arg == "-h") {
      std::fputs(usage, stdout);
      std::exit(0);
    } else if (arg == "--generate") {
      args.generate = parse_number<int>(arg, value());
      args.generate_given = true;
      if (args.generate < 1 || args.generate > 600) {
        throw usage_error{"--generate: the grid side must lie in [1, 600]"};
      }
    } else if (arg == "--formats") {
      args.formats.clear();
      for (const std::string_view name : squeeze_examples::list_items(arg, value())) {
        if (find_format(name) == nullptr) {
          throw usage_error{"--formats: unknown format '" + std::string{name} +
                            "' (known: float64, float32, float16, bfloat16, frsz2_16, frsz2_21, "
                            "frsz2_32)"};
        }
        args.formats.emplace_back(name);
      }
    } else if (squeeze_examples::parse_solver_option(arg, value, args.solver)) {
    } else if (arg == "--json") {
      args.json = std::string{value()};
    } else if (arg.starts_with("-")) {
      throw usage_error{"unknown option '" + std::string{arg} + "'"};
    } else {
      if (args.matrix_file) throw usage_error{"more than one matrix file given"};
      args.matrix_file = std::string{arg};
    }
  }
  if (args.matrix_file && args.generate_given) {
    throw usage_error{"give a matrix file or --generate, not both"};
  }
  if (args.formats.empty()) {
    for (const format_entry& f : known_formats) args.formats.emplace_back(f.name);
  }
  return args;
}

using squeeze_examples::json_number;
using squeeze_examples::json_string;

void write_json(const std::string& path, const std::string& matrix_name,
                const io::csr_matrix<double, std::int32_t>& a, const std::string& gpu,
                const arguments& args, const std::vector<run>& runs, const run* baseline) {
  std::ofstream out{path};
  if (!out) throw squeeze::io_error{"cannot open '" + path + "' for writing"};
  out << "{\n  \"matrix\": {\"name\": " << json_string(matrix_name) << ", \"rows\": " << a.rows
      << ", \"nnz\": " << a.nnz() << "},\n"
      << "  \"gpu\": " << json_string(gpu) << ",\n"
      << "  \"tolerance\": " << json_number(args.solver.tolerance) << ",\n"
      << "  \"restart\": " << args.solver.restart << ",\n"
      << "  \"max_iterations\": " << args.solver.max_iterations << ",\n"
      << "  \"results\": [\n";
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const run& r = runs[i];
    const double speedup = baseline != nullptr && r.result.seconds > 0
                               ? baseline->result.seconds / r.result.seconds
                               : std::nan("");
    out << "    {\"format\": " << json_string(r.format)
        << ", \"bits_per_value\": " << json_number(r.bits_per_value)
        << ", \"iterations\": " << r.result.iterations << ", \"restarts\": " << r.result.restarts
        << ", \"reorthogonalizations\": " << r.result.reorthogonalizations
        << ", \"converged\": " << (r.result.converged ? "true" : "false")
        << ", \"stop\": " << json_string(frsz2::to_string(r.result.stop))
        << ", \"relative_residual\": " << json_number(r.result.relative_residual)
        << ", \"solution_error\": " << json_number(r.solution_error)
        << ", \"seconds\": " << json_number(r.result.seconds)
        << ", \"seconds_per_iteration\": " << json_number(r.result.seconds_per_iteration)
        << ", \"speedup_vs_float64\": " << json_number(speedup)
        << ", \"basis_bytes\": " << r.result.basis_bytes << "}"
        << (i + 1 < runs.size() ? ",\n" : "\n");
  }
  out << "  ]\n}\n";
  if (!out) throw squeeze::io_error{"writing '" + path + "' failed"};
}

}  // namespace

int main(int argc, char** argv) try {
  arguments args;
  try {
    args = parse(argc, argv);
  } catch (const usage_error& e) {
    std::fprintf(stderr, "cb_gmres: %s\n%s", e.message.c_str(), usage);
    return 2;
  }

  // The matrix, x* = sin(i) / ||sin||, b = A x*.
  std::string matrix_name;
  io::csr_matrix<double, std::int32_t> a;
  if (args.matrix_file) {
    a = io::read_matrix_market<double>(*args.matrix_file);
    matrix_name = std::filesystem::path{*args.matrix_file}.stem().string();
  } else {
    a = io::convection_diffusion_3d(args.generate, args.generate, args.generate);
    matrix_name = "convection_diffusion_" + std::to_string(args.generate) + "^3";
  }
  const auto [x_star, b] = squeeze_examples::manufacture(matrix_name, a);
  const std::size_t n = b.size();
  std::printf("matrix: %s, %lld rows, %lld entries; tolerance %.1e, restart %d, cap %d\n",
              matrix_name.c_str(), static_cast<long long>(a.rows), static_cast<long long>(a.nnz()),
              args.solver.tolerance, args.solver.restart, args.solver.max_iterations);

  const auto presence = core::detect_devices();
  if (!presence.present()) return squeeze_examples::exit_without_gpu("cb_gmres", presence);
  const std::string gpu = core::query_device().name;
  std::printf("GPU: %s\n", core::describe(core::query_device()).c_str());

  core::stream stream;
  const frsz2::device_csr d_a{a.rows, a.cols, a.row_ptr, a.col_idx, a.values, stream};
  core::device_buffer<double> d_b{n, stream};
  core::device_buffer<double> d_x{n, stream};
  d_b.copy_from(std::span<const double>{b}, stream);
  const frsz2::cb_gmres_options options{.restart = args.solver.restart,
                                        .tolerance = args.solver.tolerance,
                                        .max_iterations = args.solver.max_iterations};

  std::vector<run> runs;
  std::vector<double> x(n);
  std::printf("\n%-9s %6s %10s %8s %13s %11s %10s %10s %8s  %s\n", "format", "bits", "iterations",
              "restarts", "rel.residual", "||x - x*||", "ms/iter", "total s", "speedup", "stop");
  for (const std::string& name : args.formats) {
    const format_entry& f = *find_format(name);
    // Warm-up (module load, first-touch of the allocations, and at least 50 ms of work so
    // the GPU's clocks are up: a small matrix's solve takes a few ms, and the first one after
    // an idle GPU would run up to 2x slower), then the timed solve from x0 = 0.
    frsz2::cb_gmres_options warm = options;
    warm.max_iterations = std::min(options.max_iterations, 2);
    const auto warm_start = std::chrono::steady_clock::now();
    do {
      SQUEEZE_CUDA_TRY(cudaMemsetAsync(d_x.data(), 0, n * sizeof(double), stream));
      static_cast<void>(f.solve(d_a.ref(), {d_b.data(), n}, {d_x.data(), n}, warm, stream));
    } while (std::chrono::steady_clock::now() - warm_start < std::chrono::milliseconds{50});
    // The timed solves from x0 = 0: at least 3 and at least 100 ms of them (at most 50),
    // their median time. Solves are deterministic: each takes the same steps to the same x.
    // (Single solves of a small matrix, a few ms, varied by up to 25 %.)
    std::vector<double> seconds;
    run r{f.name, f.bits_per_value, {}, 0.0};
    const auto timed_start = std::chrono::steady_clock::now();
    do {
      SQUEEZE_CUDA_TRY(cudaMemsetAsync(d_x.data(), 0, n * sizeof(double), stream));
      r.result = f.solve(d_a.ref(), {d_b.data(), n}, {d_x.data(), n}, options, stream);
      seconds.push_back(r.result.seconds);
    } while (seconds.size() < 3 ||
             (seconds.size() < 50 &&
              std::chrono::steady_clock::now() - timed_start < std::chrono::milliseconds{100}));
    std::sort(seconds.begin(), seconds.end());
    r.result.seconds = seconds[seconds.size() / 2];
    r.result.seconds_per_iteration =
        r.result.iterations > 0 ? r.result.seconds / r.result.iterations : 0.0;
    d_x.copy_to(std::span<double>{x}, stream);
    stream.synchronize();
    double err = 0;
    for (std::size_t i = 0; i < n; ++i) err += (x[i] - x_star[i]) * (x[i] - x_star[i]);
    r.solution_error = std::sqrt(err);
    runs.push_back(r);
  }

  const run* baseline = nullptr;
  for (const run& r : runs) {
    if (r.format == "float64") baseline = &r;
  }
  for (const run& r : runs) {
    char speedup[16] = "n/a";
    if (baseline != nullptr && r.result.seconds > 0) {
      std::snprintf(speedup, sizeof speedup, "%.2fx", baseline->result.seconds / r.result.seconds);
    }
    std::printf("%-9s %6.2f %10d %8d %13.3e %11.3e %10.4f %10.3f %8s  %s\n", r.format.c_str(),
                r.bits_per_value, r.result.iterations, r.result.restarts,
                r.result.relative_residual, r.solution_error, r.result.seconds_per_iteration * 1e3,
                r.result.seconds, speedup, frsz2::to_string(r.result.stop));
  }
  if (args.json) {
    write_json(*args.json, matrix_name, a, gpu, args, runs, baseline);
    std::printf("\nwrote %s\n", args.json->c_str());
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "cb_gmres: %s\n", e.what());
  return 1;
}
