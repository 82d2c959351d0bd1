// SPDX-License-Identifier: Apache-2.0
// bench/common/report.hpp: what the benchmark programs and the tour share to report
// results: the measured-against-baseline comparison, the one results table, the tour's
// registry of family sections, and the exception that marks a wrong result.
//
// Host-compilable (g++ alone, with the CUDA runtime API header): nothing here runs on
// the GPU.
//
// The table's columns:
//   family | measurement | value | baseline (same run) | ratio | target | met?
// A row compares a value with a baseline measured in the same process (ratio =
// value / baseline) and, when there is a target, says whether ratio >= target.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdio>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "squeeze/core/device.hpp"

namespace squeeze::bench {

/// A result that differs from its reference. Programs exit non-zero when one is seen;
/// every other failure (no device, out of memory, a CUDA error) is reported and
/// survived.
class verification_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// ---- formatting -------------------------------------------------------------------

/// "64 B", "256 B", "1 KiB", "16 KiB", "1.5 MiB".
inline std::string format_bytes(std::size_t bytes) {
  constexpr std::array<const char*, 4> units{"B", "KiB", "MiB", "GiB"};
  double value = static_cast<double>(bytes);
  std::size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < units.size()) {
    value /= 1024.0;
    ++unit;
  }
  char text[32];
  if (value == static_cast<double>(static_cast<std::size_t>(value))) {
    std::snprintf(text, sizeof text, "%zu %s", static_cast<std::size_t>(value), units[unit]);
  } else {
    std::snprintf(text, sizeof text, "%.1f %s", value, units[unit]);
  }
  return text;
}

/// `value` with `digits` decimals, then " unit" when a unit is given.
inline std::string format_number(double value, int digits, const std::string& unit = {}) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", digits, value);
  return unit.empty() ? std::string{text} : std::string{text} + ' ' + unit;
}

// ---- comparisons --------------------------------------------------------------------

/// A measurement against a baseline taken in the same run, with an optional target on
/// their ratio. Higher is better for both (throughputs).
struct comparison {
  std::string family;              ///< "xfer", "ibp", ...
  std::string measurement;         ///< what was measured and against what
  double value = 0.0;              ///< in `unit`
  std::optional<double> baseline;  ///< in `unit`; absent when there is none
  std::string unit = "GB/s";
  std::optional<double> min_ratio;  ///< target: value / baseline >= min_ratio

  [[nodiscard]] std::optional<double> ratio() const {
    if (!baseline || *baseline <= 0.0) return std::nullopt;
    return value / *baseline;
  }
  /// Whether the target is met; absent when there is no target (or nothing to compare).
  [[nodiscard]] std::optional<bool> met() const {
    const auto r = ratio();
    if (!min_ratio || !r) return std::nullopt;
    return *r >= *min_ratio;
  }
};

// ---- the table --------------------------------------------------------------------

/// The one table the tour prints (the benchmark programs print their target checks in
/// it too). Rows are either comparisons or errors; notes are printed under the table.
class report_table {
 public:
  void add(const comparison& c) {
    const auto r = c.ratio();
    const auto met = c.met();
    rows_.push_back(row{
        {c.family, c.measurement, format_number(c.value, 2, c.unit),
         c.baseline ? format_number(*c.baseline, 2, c.unit) : "-", r ? format_number(*r, 2) : "-",
         c.min_ratio ? ">= " + format_number(*c.min_ratio, 2) : "-",
         met ? (*met ? "yes" : "NO") : "-"},
        false});
  }
  /// A row that says a family (or part of one) failed with `message`.
  void add_error(const std::string& family, const std::string& message) {
    rows_.push_back(row{{family, "error: " + message, "", "", "", "", ""}, true});
  }
  /// A line printed under the table (units, methods, settings).
  void add_note(std::string note) { notes_.push_back(std::move(note)); }

  [[nodiscard]] bool empty() const noexcept { return rows_.empty(); }
  /// Rows with a target, and those whose target was not met.
  [[nodiscard]] std::size_t targets() const noexcept { return count_met("yes") + count_met("NO"); }
  [[nodiscard]] std::size_t missed() const noexcept { return count_met("NO"); }

  void print(std::FILE* out) const {
    static constexpr std::array<const char*, columns> header{
        "family", "measurement", "value", "baseline (same run)", "ratio", "target", "met?"};
    std::array<std::size_t, columns> width{};
    for (std::size_t c = 0; c < columns; ++c) width[c] = std::string_view{header[c]}.size();
    for (const row& r : rows_) {
      if (r.error) continue;  // error rows are not aligned: their message may be long
      for (std::size_t c = 0; c < columns; ++c) width[c] = std::max(width[c], r.cells[c].size());
    }
    const auto print_cells = [&](const auto& cells) {
      for (std::size_t c = 0; c < columns; ++c) {
        const int pad = c + 1 < columns ? static_cast<int>(width[c]) : 0;  // none at the end
        std::fprintf(out, c == 0 ? "%-*s" : " | %-*s", pad, std::string{cells[c]}.c_str());
      }
      std::fputc('\n', out);
    };
    print_cells(header);
    std::size_t rule = 3 * (columns - 1);
    for (std::size_t w : width) rule += w;
    std::fprintf(out, "%s\n", std::string(rule, '-').c_str());
    for (const row& r : rows_) {
      if (r.error) {
        std::fprintf(out, "%-*s | %s\n", static_cast<int>(width[0]), r.cells[0].c_str(),
                     r.cells[1].c_str());
      } else {
        print_cells(r.cells);
      }
    }
    for (const std::string& note : notes_) std::fprintf(out, "  %s\n", note.c_str());
  }

 private:
  static constexpr std::size_t columns = 7;
  struct row {
    std::array<std::string, columns> cells;
    bool error;
  };
  [[nodiscard]] std::size_t count_met(std::string_view verdict) const noexcept {
    return static_cast<std::size_t>(std::count_if(rows_.begin(), rows_.end(), [&](const row& r) {
      return !r.error && r.cells[6] == verdict;
    }));
  }
  std::vector<row> rows_;
  std::vector<std::string> notes_;
};

// ---- the tour's registry ----------------------------------------------------------------

/// What a tour section knows about the machine.
struct tour_context {
  std::optional<core::device_info> device;  ///< absent: no usable CUDA device
  std::string no_device_reason;             ///< what to tell the user when device is absent

  [[nodiscard]] bool has_gpu() const noexcept { return device.has_value(); }
};

/// One family's part of the tour: adds its rows (and notes) to the table. Without a GPU
/// (context.has_gpu() false) it runs its host-side parts only. It throws
/// verification_error when a result is wrong, anything else when it cannot run.
struct tour_section {
  std::string family;
  std::function<void(report_table&, const tour_context&)> run;
};

}  // namespace squeeze::bench
