// SPDX-License-Identifier: Apache-2.0
// squeeze/core/status.hpp: what device code reports instead of throwing.
//
// Host+device. A kernel that meets bad input (an index past the end, a truncated
// stream) writes a status and carries on without touching memory outside its bounds;
// the host launcher reads it back and throws the matching squeeze::error.
#pragma once

#include <cstdint>

#include "squeeze/core/config.hpp"

namespace squeeze {

/// What device code reports instead of throwing (core::report_status; first error wins);
/// the host turns it into an exception with squeeze::throw_if_error.
enum class status : std::uint32_t {
  ok = 0,                ///< no error
  invalid_argument = 1,  ///< a parameter is outside its range
  out_of_bounds = 2,     ///< an index or offset points outside the data it was given
  truncated = 3,         ///< the input ended before the data it describes
  corrupt = 4,           ///< the input contradicts its own metadata
  io_error = 5,          ///< a storage request failed
  cache_full = 6,        ///< every line of a software cache is pinned: nothing can be evicted
};

/// The status in words ("ok", "out of bounds", ...).
SQUEEZE_HOST_DEVICE constexpr const char* to_string(status s) noexcept {
  switch (s) {
    case status::ok: return "ok";
    case status::invalid_argument: return "invalid argument";
    case status::out_of_bounds: return "out of bounds";
    case status::truncated: return "truncated input";
    case status::corrupt: return "corrupt input";
    case status::io_error: return "I/O error";
    case status::cache_full: return "cache full (every line pinned)";
  }
  return "unknown status";
}

}  // namespace squeeze
