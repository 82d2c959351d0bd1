// SPDX-License-Identifier: Apache-2.0
// bench/common/json.hpp: the pieces of JSON the standalone bench programs write by hand.
#pragma once

#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

namespace squeeze::bench {

/// `s` as a JSON string: quoted, with '"', '\\' and control characters escaped.
inline std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\u%04x", static_cast<unsigned>(c));
      out += esc;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

/// `x` with 6 significant digits, or null when it is absent, infinite or NaN.
inline std::string json_number(std::optional<double> x) {
  if (!x || !std::isfinite(*x)) return "null";
  char text[32];
  std::snprintf(text, sizeof text, "%.6g", *x);
  return text;
}

}  // namespace squeeze::bench
