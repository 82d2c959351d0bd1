// SPDX-License-Identifier: Apache-2.0
// bench/tour/tour.cu: squeeze_tour [family ...], a short run of every family's headline
// measurement (or of the families named), printed as one table:
//
//   family | measurement | value | baseline (same run) | ratio | target | met?
//
// Each family contributes one section (a function adding rows to the table) to the
// registry below; its study header defines it. Without a GPU each section runs its
// host-side parts only. A section that fails becomes an "error: ..." row and the tour
// goes on. Exit status: 0, or 1 when a correctness check failed (a missed performance
// target is reported, not fatal).
//
// Adding a family: write `void tour_section(report_table&, const tour_context&)` in its
// bench/<family>/<family>_study.cuh, include that header here, and add one line to
// tour_sections().
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "bam/bam_study.cuh"
#include "coll/coll_study.cuh"
#include "common/report.hpp"
#include "frsz2/frsz2_study.cuh"
#include "ibp/ibp_study.cuh"
#include "roast/roast_study.cuh"
#include "squeeze/core.hpp"
#include "xfer/xfer_study.cuh"

namespace {

using namespace squeeze::bench;

/// The registry: every family's section, in the order they are run and printed.
std::vector<tour_section> tour_sections() {
  return {
      {"xfer", xfer_study::tour_section},   {"ibp", ibp_study::tour_section},
      {"frsz2", frsz2_study::tour_section}, {"roast", roast_study::tour_section},
      {"bam", bam_study::tour_section},     {"coll", coll_study::tour_section},
  };
}

/// Finds the GPU, or says why there is none (in the words every program uses,
/// core::device_presence::message()). Never throws.
tour_context detect() {
  tour_context context;
  const squeeze::core::device_presence presence = squeeze::core::detect_devices();
  if (!presence.present()) {
    context.no_device_reason = presence.message();
    return context;
  }
  try {
    context.device = squeeze::core::query_device();
  } catch (const std::exception& e) {
    context.no_device_reason = std::string{"cannot query the GPU ("} + e.what() + ")";
  }
  return context;
}

}  // namespace

int main(int argc, char** argv) {
  // The coll section measures another NCCL link setting in a child process of this program.
  if (argc > 1 && std::string{argv[1]} == "--coll-link-child") {
#if defined(SQUEEZE_HAVE_NCCL)
    return coll_study::link_child_main();
#else
    return 1;
#endif
  }
  std::vector<std::string> only(argv + 1, argv + argc);
  for (const std::string& name : only) {
    bool known = false;
    for (const tour_section& section : tour_sections()) known = known || section.family == name;
    if (!known) {
      std::fprintf(stderr, "squeeze_tour: no family '%s' (xfer, ibp, frsz2, roast, bam, coll)\n",
                   name.c_str());
      return 2;
    }
  }
  const tour_context context = detect();
  if (context.has_gpu()) {
    std::printf("squeeze tour on GPU %d: %s\n", context.device->ordinal,
                squeeze::core::describe(*context.device).c_str());
  } else {
    std::printf("squeeze tour: %s; running host-side parts only\n",
                context.no_device_reason.c_str());
  }

  report_table table;
  bool wrong_result = false;
  for (const tour_section& section : tour_sections()) {
    if (!only.empty() && std::find(only.begin(), only.end(), section.family) == only.end())
      continue;
    std::printf("  %s ...", section.family.c_str());
    std::fflush(stdout);
    const auto start = std::chrono::steady_clock::now();
    try {
      section.run(table, context);
    } catch (const verification_error& e) {
      wrong_result = true;
      table.add_error(section.family, std::string{"WRONG RESULT: "} + e.what());
    } catch (const std::exception& e) {  // squeeze::error and the rest
      table.add_error(section.family, e.what());
    } catch (...) {
      table.add_error(section.family, "unknown exception");
    }
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    std::printf(" %.1f s\n", took.count());
  }

  std::printf("\n");
  table.print(stdout);
  if (table.targets() > 0) {
    std::printf("\n%zu of %zu targets met\n", table.targets() - table.missed(), table.targets());
  } else {
    std::printf("\nno targets checked\n");
  }
  if (wrong_result) std::printf("a correctness check FAILED\n");
  return wrong_result ? 1 : 0;
}
