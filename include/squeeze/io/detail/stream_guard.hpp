// SPDX-License-Identifier: Apache-2.0
// squeeze/io/detail/stream_guard.hpp: a reader of the caller's std::istream reports errors as
// squeeze::error whatever exceptions() the caller set on the stream: the mask is cleared while
// the reader holds the stream and put back when it lets go.
#pragma once

#include <ios>
#include <istream>

namespace squeeze::io::detail {

class stream_exceptions_off {
 public:
  explicit stream_exceptions_off(std::istream& in) : in_{in}, mask_{in.exceptions()} {
    if (mask_ != std::ios::goodbit) in_.exceptions(std::ios::goodbit);  // (cannot throw)
  }
  stream_exceptions_off(const stream_exceptions_off&) = delete;
  stream_exceptions_off& operator=(const stream_exceptions_off&) = delete;
  /// Puts the caller's mask back. The state the reader left stays (eofbit after the last
  /// byte); std::ios::exceptions() would throw at once when the two meet, which a destructor
  /// must not: the caller's next operation on the stream sees that state instead.
  ~stream_exceptions_off() {
    if (mask_ == std::ios::goodbit) return;
    try {
      in_.exceptions(mask_);
    } catch (const std::ios_base::failure&) {  // the mask is set before the throw
    }
  }

 private:
  std::istream& in_;
  std::ios::iostate mask_;
};

}  // namespace squeeze::io::detail
