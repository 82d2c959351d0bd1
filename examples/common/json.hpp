// SPDX-License-Identifier: Apache-2.0
// examples/common/json.hpp: the two JSON value writers the examples' --json outputs need.
#pragma once

#include <cmath>
#include <cstdio>
#include <string>
#include <string_view>

namespace squeeze_examples {

/// `s` as a JSON string: quoted, with quotes, backslashes and control characters escaped.
inline std::string json_string(std::string_view s) {
  std::string out{"\""};
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      out += buf;
    } else {
      out += c;
    }
  }
  return out + '"';
}

/// `v` with every digit a double holds, or null when it is infinite or NaN.
inline std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

}  // namespace squeeze_examples
