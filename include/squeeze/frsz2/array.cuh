// SPDX-License-Identifier: Apache-2.0
// squeeze/frsz2/array.cuh: an owning device array of n values in any storage (float64,
// float32, float16, bfloat16, FRSZ2), written in bulk from fp64/fp32 values on a stream and
// read in kernels through frsz2::accessor.
//
//   frsz2::array<frsz2::format<21>> basis{n, stream};
//   basis.store(0, x, n, stream);                 // compress x[0..n) (device pointer)
//   basis.store_normalized(0, x, n, norm2, stream); // x / sqrt(*norm2), norm2 on the device
//   accessor<frsz2::format<21>> acc;               // in a kernel: acc.access(h, i)
//   auto h = basis.data_handle();                  // (basis.ref(): the view, with its size)
//
// Writes cover whole blocks: store(first, ...) needs `first` on a block boundary
// (storage_traits<S>::block_size), and a range ending inside a block rewrites that block's
// remaining values as +0 (so a vector of n values is stored with one store of n values).
//
// The conversion kernel of plain storages is in frsz2/detail/.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>

#include "squeeze/core/buffer.hpp"
#include "squeeze/core/error.hpp"
#include "squeeze/frsz2/accessor.hpp"
#include "squeeze/frsz2/compress.cuh"
#include "squeeze/frsz2/detail/array_kernels.cuh"
#include "squeeze/frsz2/format.hpp"

namespace squeeze::frsz2 {

/// n values of storage S in device memory (stream-ordered allocation when given a stream).
template <storage S>
class array {
 public:
  /// Values written together: store's `first` is a multiple of it.
  static constexpr int block_size = storage_traits<S>::block_size;

  array() = default;
  /// Room for n values, allocated on `stream` (stream-ordered; uninitialized).
  explicit array(std::size_t n, cudaStream_t stream) : size_{n} {
    if constexpr (format_like<S>) {
      payload_ = core::device_buffer<std::uint32_t>{S::payload_words(n), stream};
      exponents_ = core::device_buffer<std::uint16_t>{S::blocks(n), stream};
    } else {
      values_ = core::device_buffer<S>{n, stream};
    }
  }

  /// Values.
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  /// Bytes the values occupy in device memory.
  [[nodiscard]] std::size_t bytes() const noexcept {
    if constexpr (format_like<S>)
      return payload_.bytes() + exponents_.bytes();
    else
      return values_.bytes();
  }

  /// The view of the values in device memory: `compressed_ref<S>` for FRSZ2 (what compress
  /// and the warp decoders take), `std::span<S>` for a plain storage.
  [[nodiscard]] auto ref() const noexcept {
    if constexpr (format_like<S>)
      return compressed_ref<S>{payload_.data(), exponents_.data(), size_};
    else
      return std::span<S>{values_.data(), size_};
  }
  /// Value 0's data handle for accessor<S, T> (its data_handle_type, as in
  /// cuda::std::mdspan): access(data_handle(), i) reads value i.
  [[nodiscard]] auto data_handle() const noexcept {
    if constexpr (format_like<S>)
      return ref().data_handle();
    else
      return values_.data();
  }

  /// Stores src[0..count) (device memory, fp64 or fp32) as values [first, first + count),
  /// ordered on `stream`. `first` must start a block; see the file comment for the tail.
  template <class Float>
  requires(std::is_same_v<Float, double> ||
           std::is_same_v<Float, float>) void store(std::size_t first, const Float* src,
                                                    std::size_t count, cudaStream_t stream,
                                                    rounding mode = rounding::nearest) {
    store_impl(first, src, count, nullptr, stream, mode, "frsz2::array::store");
  }

  /// store() of src / sqrt(*norm2): a vector normalized on its way in, by a squared norm a
  /// kernel left in device memory (read when the store runs, so the host need not wait for
  /// it). Where *norm2 is 0, negative or not finite the values are stored as they are. With
  /// `decoded` (device memory of count values), the same pass also writes the values as
  /// stored, as load() would return them: a plain copy for kernels that read the vector at
  /// random (an SpMV), without decoding FRSZ2 blocks on every read.
  template <class Float>
  requires(std::is_same_v<Float, double> || std::is_same_v<Float, float>) void store_normalized(
      std::size_t first, const Float* src, std::size_t count, const double* norm2,
      cudaStream_t stream, rounding mode = rounding::nearest, Float* decoded = nullptr) {
    SQUEEZE_EXPECTS(norm2 != nullptr, "frsz2::array::store_normalized: norm2 is null");
    store_impl(first, src, count, norm2, stream, mode, "frsz2::array::store_normalized", decoded);
  }

  /// Writes values [first, first + count) to dst (device memory) as Float, on `stream`.
  template <class Float>
  requires(std::is_same_v<Float, double> ||
           std::is_same_v<Float, float>) void load(std::size_t first, Float* dst, std::size_t count,
                                                   cudaStream_t stream) const {
    SQUEEZE_EXPECTS(first <= size_ && count <= size_ - first,
                    "frsz2::array::load: values [" + std::to_string(first) + ", " +
                        std::to_string(first + count) + ") are outside the array's " +
                        std::to_string(size_));
    SQUEEZE_EXPECTS(dst != nullptr || count == 0, "frsz2::array::load: dst is null");
    if (count == 0) return;
    if constexpr (format_like<S>) {
      decompress<S>(ref(), first, dst, count, stream);
    } else {
      detail::launch_convert(dst, values_.data() + first, count, stream);
    }
  }

 private:
  template <class Float>
  void store_impl(std::size_t first, const Float* src, std::size_t count, const double* norm2,
                  cudaStream_t stream, rounding mode, const char* who, Float* decoded = nullptr) {
    SQUEEZE_EXPECTS(first <= size_ && count <= size_ - first,
                    std::string{who} + ": values [" + std::to_string(first) + ", " +
                        std::to_string(first + count) + ") are outside the array's " +
                        std::to_string(size_));
    SQUEEZE_EXPECTS(first % block_size == 0, std::string{who} +
                                                 ": first = " + std::to_string(first) +
                                                 " is not on a block boundary (block size " +
                                                 std::to_string(block_size) + ")");
    SQUEEZE_EXPECTS(src != nullptr || count == 0, std::string{who} + ": src is null");
    if (count == 0) return;
    if constexpr (format_like<S>) {
      static_assert(std::is_same_v<Float, typename S::float_type>,
                    "frsz2::array::store: an FRSZ2 array stores values of its format's Float");
      const std::size_t b = first / block_size;
      detail::launch_compress(
          src,
          compressed_ref<S>{payload_.data() + b * S::words_per_block, exponents_.data() + b, count},
          stream, mode, norm2, decoded);
    } else {
      static_cast<void>(mode);
      detail::launch_convert(values_.data() + first, src, count, stream, norm2, decoded);
    }
  }

  std::size_t size_ = 0;
  core::device_buffer<std::conditional_t<format_like<S>, std::byte, S>> values_;  // plain
  core::device_buffer<std::uint32_t> payload_;                                    // FRSZ2
  core::device_buffer<std::uint16_t> exponents_;
};

}  // namespace squeeze::frsz2
