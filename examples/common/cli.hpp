// SPDX-License-Identifier: Apache-2.0
// examples/common/cli.hpp: what the examples' command lines share.
#pragma once

#include <charconv>
#include <cmath>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <vector>

namespace squeeze_examples {

/// A command-line mistake: reported with the usage, exit status 2.
struct usage_error {
  std::string message;
};

/// `text` as a number of type T (all of it), or a usage_error naming `option`.
template <class T>
T parse_number(std::string_view option, std::string_view text) {
  T value{};
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc{} || ptr != end) {
    throw usage_error{std::string{option} + ": '" + std::string{text} + "' is not a valid " +
                      (std::is_integral_v<T> ? "integer" : "number")};
  }
  return value;
}

/// The value after option argv[i] (advancing i past it), or a usage_error when it is
/// missing.
inline std::string_view option_value(int argc, char** argv, int& i) {
  if (i + 1 >= argc) throw usage_error{std::string{argv[i]} + " needs a value"};
  return argv[++i];
}

/// The comma-separated items of `list`, the value of `option`, in order (empty items kept,
/// so the caller rejects them by name); a usage_error when there are none.
inline std::vector<std::string_view> list_items(std::string_view option, std::string_view list) {
  std::vector<std::string_view> items;
  while (!list.empty()) {
    const std::size_t comma = list.find(',');
    items.push_back(list.substr(0, comma));
    list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
  }
  if (items.empty()) throw usage_error{std::string{option} + ": the list is empty"};
  return items;
}

/// What the solver examples share on their command line: --tol T (finite, >= 0),
/// --max-iters K (>= 0) and --restart M (in [1, max_restart]). Parses `arg` into its field
/// and returns true, or returns false when `arg` is none of them; `value()` gives the
/// option's value (option_value).
struct solver_options {
  double tolerance = 1e-10;
  int max_iterations = 20000;
  int restart = 100;
};
template <class Value>
bool parse_solver_option(std::string_view arg, Value&& value, solver_options& o,
                         int max_restart = 1 << 20) {
  if (arg == "--tol") {
    o.tolerance = parse_number<double>(arg, value());
    if (!std::isfinite(o.tolerance) || o.tolerance < 0) {
      throw usage_error{"--tol: the tolerance must be finite and >= 0"};
    }
  } else if (arg == "--max-iters") {
    o.max_iterations = parse_number<int>(arg, value());
    if (o.max_iterations < 0) throw usage_error{"--max-iters: must be >= 0"};
  } else if (arg == "--restart") {
    o.restart = parse_number<int>(arg, value());
    if (o.restart < 1 || o.restart > max_restart) {
      throw usage_error{"--restart: must lie in [1, " + std::to_string(max_restart) + "]"};
    }
  } else {
    return false;
  }
  return true;
}

}  // namespace squeeze_examples
