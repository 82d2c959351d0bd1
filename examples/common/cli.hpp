// examples/common/cli.hpp: what the examples' command lines share.
#pragma once

#include <charconv>
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

}  // namespace squeeze_examples
