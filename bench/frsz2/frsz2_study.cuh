// SPDX-License-Identifier: Apache-2.0
// bench/frsz2/frsz2_study.cuh: the FRSZ2 read kernels that squeeze_bench_frsz2 and the tour
// share (the roofline of Grützmacher et al. (FRSZ2), §IV-C), and the tour's frsz2 section.
#pragma once

#include <squeeze/core.hpp>
#include <squeeze/frsz2/array.cuh>
#include <squeeze/frsz2/compress.cuh>

#include <cmath>
#include <cstddef>
#include <random>
#include <string>
#include <vector>

#include "common/report.hpp"

namespace squeeze::bench::frsz2_study {

namespace frsz2 = squeeze::frsz2;

constexpr int threads = 256;

// A reader gives each lane `lane_values` values of tile t (32 x lane_values values) as
// double, in two steps: fetch(t) issues the loads, decode() turns them into values (so a
// loop can have all its loads in flight before the first decode waits on one).

/// Plain storage, one value per thread.
template <class S>
struct plain_reader {
  static constexpr int lane_values = 1;
  const S* p;
  SQUEEZE_DEVICE S fetch(std::size_t t) const { return p[t * 32 + threadIdx.x % 32]; }
  SQUEEZE_DEVICE void decode(S x, double (&v)[1]) const {
    v[0] = frsz2::accessor<S, double>{}.load(&x, 0);
  }
};
/// FRSZ2 storage, one value per thread through the accessor (branch-free decode).
template <class F>
struct value_reader {
  static constexpr int lane_values = 1;
  frsz2::compressed_handle<F> h;
  SQUEEZE_DEVICE double fetch(std::size_t t) const {
    return frsz2::accessor<F, double>{}.access(h, t * 32 + threadIdx.x % 32);
  }
  SQUEEZE_DEVICE void decode(double x, double (&v)[1]) const { v[0] = x; }
};
/// FRSZ2 storage with the warp decoder (lane j: value j of a block; branch-free decode).
template <class F>
struct warp_reader {
  static constexpr int lane_values = 1;
  frsz2::compressed_ref<F> v;
  SQUEEZE_DEVICE double fetch(std::size_t t) const { return frsz2::warp_decode<F>(v, t); }
  SQUEEZE_DEVICE void decode(double x, double (&out)[1]) const { out[0] = x; }
};
/// Any storage, four consecutive values per thread: accessor::read_vector, decode_vector.
template <class S>
struct vector_reader {
  using accessor = frsz2::accessor<S, double>;
  static constexpr int lane_values = frsz2::vector_values;
  typename accessor::data_handle_type h;
  SQUEEZE_DEVICE typename accessor::vector_type fetch(std::size_t t) const {
    return accessor{}.read_vector(h, (t * 32 + threadIdx.x % 32) * lane_values);
  }
  SQUEEZE_DEVICE void decode(const typename accessor::vector_type& r,
                             double (&v)[lane_values]) const {
    accessor{}.decode_vector(r, v);
  }
};

/// Any storage by frsz2::tile_reader: lane j reads values V j .. V j + V - 1 of each tile of
/// 32 V values, with the lane's offsets computed once (for_lane()).
template <class S, int V = frsz2::vector_values>
struct tile_reader {
  static constexpr int lane_values = V;
  typename frsz2::accessor<S, double>::data_handle_type h;
  struct lane_reader {
    static constexpr int lane_values = V;
    frsz2::tile_reader<S, double, V> r;
    using raw_type = typename frsz2::tile_reader<S, double, V>::vector_type;
    SQUEEZE_DEVICE auto fetch(std::size_t t) const { return r.read(t); }
    SQUEEZE_DEVICE void decode(const raw_type& raw, double (&v)[lane_values]) const {
      r.decode(raw, v);
    }
    template <int K, class Use>
    SQUEEZE_DEVICE void decode_each(const raw_type (&raw)[K], Use&& use) const {
      r.decode_each(raw, use);
    }
  };
  SQUEEZE_DEVICE lane_reader for_lane() const { return {{h, threadIdx.x % 32}}; }
};

/// The reader a thread uses: readers with per-lane state make it once (for_lane()).
template <class Reader>
SQUEEZE_DEVICE auto lane_reader_of(const Reader& r) {
  if constexpr (requires { r.for_lane(); })
    return r.for_lane();
  else
    return r;
}

/// Decodes reads raw[0 .. K) and hands each one's values to use(k, values): by the reader's
/// decode_each where it has one (one test for rare blocks for the whole batch), else by
/// decode() of each.
template <class LaneReader, class Raw, int K, class Use>
SQUEEZE_DEVICE void decode_each(const LaneReader& read, const Raw (&raw)[K], Use&& use) {
  if constexpr (requires { read.decode_each(raw, use); }) {
    read.decode_each(raw, use);
  } else {
#pragma unroll
    for (int k = 0; k < K; ++k) {
      double v[LaneReader::lane_values];
      read.decode(raw[k], v);
      use(k, v);
    }
  }
}

template <int Flops>
SQUEEZE_DEVICE double work(double v) {
  double y = v;
#pragma unroll
  for (int f = 0; f < Flops / 2; ++f) y = fma(y, v, 0.5);
  return y;
}

/// Reads a lane has in flight by default: 8 for one-value readers, 4 for vector readers (of
/// 4 or 8 values).
template <class Reader>
inline constexpr int default_unroll = Reader::lane_values == 1 ? 8 : 4;

// Each warp reads `unroll` whole tiles per step with no condition between the reads, so
// all their loads are in flight before the first decode waits (a conditional read per tile
// let the compiler decode each tile before loading the next: latency-bound, 3x slower).
// `Unroll` sets the reads in flight. The kernel strides over the tiles by the whole grid:
// launch it on read_grid() blocks.
template <class Reader, int Flops, int Unroll = default_unroll<Reader>>
SQUEEZE_KERNEL(threads)
void read_kernel(Reader reader, std::size_t n, double* sink) {
  constexpr int lanes_values = Reader::lane_values;
  const auto read = lane_reader_of(reader);
  constexpr int unroll = Unroll;
  const std::size_t tiles = n / (32 * lanes_values);
  const std::size_t warp = (blockIdx.x * std::size_t{threads} + threadIdx.x) / 32;
  const std::size_t warps = std::size_t{gridDim.x} * threads / 32;
  const std::size_t full = tiles / unroll * unroll;
  double acc = 0.0;
  for (std::size_t t0 = warp * unroll; t0 < full; t0 += warps * unroll) {
    decltype(read.fetch(0)) raw[unroll];
#pragma unroll
    for (int u = 0; u < unroll; ++u) raw[u] = read.fetch(t0 + u);
    decode_each(read, raw, [&](int, const double(&v)[lanes_values]) {
#pragma unroll
      for (int c = 0; c < lanes_values; ++c) acc += work<Flops>(v[c]);
    });
  }
  if (full + warp < tiles) {
    double v[lanes_values];
    read.decode(read.fetch(full + warp), v);
#pragma unroll
    for (int c = 0; c < lanes_values; ++c) acc += work<Flops>(v[c]);
  }
  sink[blockIdx.x * std::size_t{threads} + threadIdx.x] = acc;
}

/// Blocks of read_kernel an SM holds at most (2048 threads): sinks are sized for it.
inline constexpr unsigned max_blocks_per_sm = 2048 / threads;

/// max_blocks_per_sm blocks on every SM of `device`: no read_grid() is larger, so a sink of
/// a double per thread of this grid fits any read kernel.
inline unsigned max_read_grid(int device = 0) {
  int sms = 0;
  SQUEEZE_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return max_blocks_per_sm * static_cast<unsigned>(sms);
}

/// The grid read_kernel runs on: the blocks the device holds at once, so the grid-stride loop
/// runs in one wave. (The first version launched max_blocks_per_sm an SM whatever the
/// kernel's registers allowed. In a probe on an H100, 2026-11-26, whose float32 and float16
/// kernels fit 6 blocks an SM, one wave read 2-3 % faster.)
template <class Reader, int Flops, int Unroll = default_unroll<Reader>>
unsigned read_grid(int device = 0) {
  int sms = 0, per_sm = 0;
  SQUEEZE_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  SQUEEZE_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
      &per_sm, read_kernel<Reader, Flops, Unroll>, threads, 0));
  return static_cast<unsigned>(sms) * static_cast<unsigned>(per_sm);
}

/// Median milliseconds of one read of n values (a multiple of 128) through `reader` at 0
/// flops/value; sink holds a double per thread of read_grid().
template <class Reader>
double time_read(Reader reader, std::size_t n, int device, double* sink,
                 core::timing_options timing) {
  const unsigned grid = read_grid<Reader, 0>(device);
  return core::time_region(nullptr, timing,
                           [&] {
                             read_kernel<Reader, 0><<<grid, threads>>>(reader, n, sink);
                             SQUEEZE_CHECK_LAUNCH();
                           })
      .median_ms;
}

/// The tour's frsz2 rows: 2^26 values read as double through float32 and float16 storage
/// and through frsz2_32 / frsz2_16 / frsz2_21, four values a thread (tile_reader), and
/// compression against a device copy. Checks that the warp decoder returns the host
/// reference's values (the vector reads are checked bit for bit by the GPU tests).
inline void tour_section(report_table& table, const tour_context& context) {
  if (!context.has_gpu()) {
    table.add_note("frsz2: no GPU, nothing to run (the host codec is covered by the tests)");
    return;
  }
  const std::size_t n = std::size_t{1} << 26;
  std::vector<double> h(n);
  std::mt19937_64 rng{7};
  std::normal_distribution<double> normal{0.0, 1.0 / std::sqrt(static_cast<double>(n))};
  for (auto& v : h) v = normal(rng);
  core::device_buffer<double> x{n}, back{n};
  x.copy_from(std::span<const double>{h}, nullptr);
  const int device = context.device->ordinal;
  core::device_buffer<double> sink{std::size_t{max_read_grid(device)} * threads};
  const core::timing_options timing{.warmup = 3, .repeats = 15};
  frsz2::array<float> f32{n, nullptr};
  frsz2::array<__half> f16{n, nullptr};
  frsz2::array<frsz2::format<32>> z32{n, nullptr};
  frsz2::array<frsz2::format<16>> z16{n, nullptr};
  frsz2::array<frsz2::format<21>> z21{n, nullptr};
  f32.store(0, x.data(), n, nullptr);
  f16.store(0, x.data(), n, nullptr);
  z32.store(0, x.data(), n, nullptr);
  z16.store(0, x.data(), n, nullptr);
  z21.store(0, x.data(), n, nullptr);
  // Correctness: the warp decoder (bulk decompress) against the host reference.
  z21.load(0, back.data(), n, nullptr);
  std::vector<double> got(n);
  back.copy_to(std::span<double>{got}, nullptr);
  SQUEEZE_CUDA_TRY(cudaDeviceSynchronize());
  const auto want = frsz2::decode(frsz2::encode<frsz2::format<21>>(h));
  if (got != want) throw verification_error{"frsz2_21 decoded on the GPU differs from the host"};

  // Every storage through frsz2::tile_reader as in the full bench: 8 values a thread for
  // FRSZ2, 4 for plain storage (H200, 2026-11-22: float16 0.127 ms with 4, 0.129 with 8;
  // frsz2_16 0.136 with 8, 0.155 with 4), each kernel on read_grid() blocks.
  double* const out = sink.data();
  const double t_f32 = time_read(tile_reader<float>{f32.data_handle()}, n, device, out, timing);
  const double t_f16 = time_read(tile_reader<__half>{f16.data_handle()}, n, device, out, timing);
  const double t_z32 =
      time_read(tile_reader<frsz2::format<32>, 8>{z32.data_handle()}, n, device, out, timing);
  const double t_z16 =
      time_read(tile_reader<frsz2::format<16>, 8>{z16.data_handle()}, n, device, out, timing);
  const double t_z21 =
      time_read(tile_reader<frsz2::format<21>, 8>{z21.data_handle()}, n, device, out, timing);
  auto speed = [&](const std::string& what, double t, double t_base, double target) {
    comparison c;
    c.family = "frsz2";
    c.measurement = what;
    c.value = 1.0 / t;
    c.baseline = 1.0 / t_base;
    c.unit = "1/ms";
    c.min_ratio = target;
    table.add(c);
  };
  speed("read 2^26 values: frsz2_32 vs float32 storage", t_z32, t_f32, 0.95);
  speed("read 2^26 values: frsz2_16 vs float16 storage", t_z16, t_f16, 0.95);
  speed("read 2^26 values: frsz2_21 vs frsz2_32", t_z21, t_z32, 1.25);
  const double t_copy = core::time_region(nullptr, timing, [&] {
                          SQUEEZE_CUDA_TRY(cudaMemcpyAsync(back.data(), x.data(), n * 8,
                                                           cudaMemcpyDeviceToDevice, nullptr));
                        }).median_ms;
  const double t_comp =
      core::time_region(nullptr, timing, [&] { z32.store(0, x.data(), n, nullptr); }).median_ms;
  comparison c;
  c.family = "frsz2";
  c.measurement = "compress frsz2_32 vs device copy (bytes read + written)";
  c.value = static_cast<double>(8 * n + frsz2::format<32>::bytes(n)) / (t_comp * 1e6);
  c.baseline = static_cast<double>(16 * n) / (t_copy * 1e6);
  c.min_ratio = 0.8;
  table.add(c);
  table.add_note(
      "frsz2: 2^26 N(0, 1/n) values read once as double (0 flops) by frsz2::tile_reader, "
      "8 a thread for FRSZ2, 4 for float32/float16");
}

}  // namespace squeeze::bench::frsz2_study
