// SPDX-License-Identifier: Apache-2.0
// tests/common/coll_test.hpp: what the coll tests share (the local runs, MPI and NCCL):
// inputs, a host reduction, bit comparison, and a lossless codec of data-dependent size.
#pragma once

#include <squeeze/coll/codec.hpp>
#include <squeeze/core/config.hpp>
#include <squeeze/core/cuda_error.hpp>
#include <squeeze/core/reduce_op.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace squeeze::test {

// ---- a lossless codec of data-dependent size: drops trailing zeros --------------------
// message: [uint64 n][uint64 kept][values 0 .. kept)  (kept = 1 + index of the last nonzero)
template <class T, int Threads>
SQUEEZE_KERNEL(Threads)
void last_nonzero_kernel(const T* src, std::size_t n, unsigned long long* kept) {
  for (std::size_t i = blockIdx.x * std::size_t{Threads} + threadIdx.x; i < n;
       i += std::size_t{gridDim.x} * Threads) {
    if (src[i] != T{0}) atomicMax(kept, static_cast<unsigned long long>(i + 1));
  }
}
template <class T>
SQUEEZE_KERNEL(32)
void finish_header_kernel(std::uint64_t* header, std::size_t n, std::uint64_t* size) {
  header[0] = n;
  *size = 16 + header[1] * sizeof(T);
}
template <class T, int Threads>
SQUEEZE_KERNEL(Threads)
void untrim_kernel(const std::uint64_t* header, std::size_t bytes, std::size_t n, T* dst, int op,
                   bool reduce) {
  const std::uint64_t kept = header[0] == n && 16 + header[1] * sizeof(T) == bytes ? header[1] : 0;
  const T* values = reinterpret_cast<const T*>(header + 2);
  for (std::size_t i = blockIdx.x * std::size_t{Threads} + threadIdx.x; i < n;
       i += std::size_t{gridDim.x} * Threads) {
    const T v = i < kept ? values[i] : T{0};
    dst[i] = reduce ? core::apply(static_cast<core::reduce_op>(op), dst[i], v) : v;
  }
}

struct trim_codec {
  static constexpr bool lossless = true;
  static constexpr bool fixed_size = false;
  static constexpr std::size_t granule = 1;
  static const char* name() { return "trim"; }
  template <class T>
  static std::size_t max_wire_bytes(std::size_t n) {
    return 16 + n * sizeof(T);
  }
  template <class T>
  void encode(const T* src, std::size_t n, std::byte* wire, std::uint64_t* size,
              cudaStream_t s) {
    auto* header = reinterpret_cast<std::uint64_t*>(wire);
    SQUEEZE_CUDA_TRY(cudaMemsetAsync(header + 1, 0, 8, s));
    if (n > 0) {
      last_nonzero_kernel<T, 256><<<64, 256, 0, s>>>(
          src, n, reinterpret_cast<unsigned long long*>(header + 1));
      SQUEEZE_CHECK_LAUNCH();
      SQUEEZE_CUDA_TRY(cudaMemcpyAsync(header + 2, src, n * sizeof(T), cudaMemcpyDeviceToDevice, s));
    }
    finish_header_kernel<T><<<1, 1, 0, s>>>(header, n, size);
    SQUEEZE_CHECK_LAUNCH();
    ++encodes;
  }
  template <class T>
  void decode(const std::byte* wire, std::size_t bytes, std::size_t n, T* dst, cudaStream_t s) {
    run<T>(wire, bytes, n, dst, core::reduce_op::sum, false, s);
  }
  template <class T>
  void decode_reduce(const std::byte* wire, std::size_t bytes, std::size_t n, T* dst,
                     core::reduce_op op, cudaStream_t s) {
    run<T>(wire, bytes, n, dst, op, true, s);
  }
  template <class T>
  void run(const std::byte* wire, std::size_t bytes, std::size_t n, T* dst, core::reduce_op op,
           bool reduce, cudaStream_t s) {
    if (n == 0) return;
    untrim_kernel<T, 256><<<64, 256, 0, s>>>(reinterpret_cast<const std::uint64_t*>(wire), bytes,
                                             n, dst, static_cast<int>(op), reduce);
    SQUEEZE_CHECK_LAUNCH();
  }
  int encodes = 0;
};
static_assert(coll::wire_codec_for<trim_codec, float>);
static_assert(coll::wire_codec_for<trim_codec, double>);

// ---- running a collective over N local ranks ------------------------------------------
enum class data_kind { integers, normal, trailing_zeros };

template <class T>
std::vector<std::vector<T>> make_inputs(int ranks, std::size_t count, data_kind kind,
                                        std::uint64_t seed) {
  std::vector<std::vector<T>> in(static_cast<std::size_t>(ranks), std::vector<T>(count));
  std::mt19937_64 rng{seed};
  std::normal_distribution<double> normal{0.0, 1.0};
  std::uniform_int_distribution<int> small{-8, 8};
  for (int r = 0; r < ranks; ++r) {
    auto& v = in[static_cast<std::size_t>(r)];
    // trailing zeros: each rank's data ends at a different place
    const std::size_t keep = count == 0 ? 0 : (count * static_cast<std::size_t>(r + 1)) / (ranks + 1);
    for (std::size_t i = 0; i < count; ++i) {
      switch (kind) {
        case data_kind::integers: v[i] = static_cast<T>(small(rng)); break;
        case data_kind::normal: v[i] = static_cast<T>(normal(rng)); break;
        case data_kind::trailing_zeros: v[i] = i < keep ? static_cast<T>(normal(rng)) : T{0}; break;
      }
    }
  }
  return in;
}

template <class T>
std::vector<T> host_reduce(const std::vector<std::vector<T>>& in, core::reduce_op op) {
  std::vector<T> out = in.front();
  for (std::size_t r = 1; r < in.size(); ++r) {
    for (std::size_t i = 0; i < out.size(); ++i) {
      if (op == core::reduce_op::sum) {
        out[i] = static_cast<T>(static_cast<double>(out[i]) + static_cast<double>(in[r][i]));
      } else {
        out[i] = core::apply(op, out[i], in[r][i]);
      }
    }
  }
  return out;
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

/// Largest |x| over all inputs.
template <class T>
double max_abs(const std::vector<std::vector<T>>& in) {
  double m = 0;
  for (const auto& v : in)
    for (T x : v) m = std::max(m, std::abs(static_cast<double>(x)));
  return m;
}

/// Largest |got[i] - want[i]| (want.size() values; got at least as long), infinity when a
/// difference is NaN (std::max would skip it).
template <class T>
double max_abs_difference(const std::vector<T>& got, const std::vector<T>& want) {
  double worst = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double d = std::abs(static_cast<double>(got[i]) - static_cast<double>(want[i]));
    worst = std::isnan(d) ? HUGE_VAL : std::max(worst, d);
    if (std::isinf(worst)) break;
  }
  return worst;
}

}  // namespace squeeze::test
