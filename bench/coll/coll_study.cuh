// SPDX-License-Identifier: Apache-2.0
// bench/coll/coll_study.cuh: what the coll bench and the tour share: gradient-like inputs
// made on the device, checks of a result against a reference on the device, the codec
// throughput study, and the variants the latency table compares.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/report.hpp"
#include "squeeze/coll/allreduce.cuh"
#include "squeeze/coll/selector.cuh"
#include "squeeze/core/buffer.hpp"
#include "squeeze/core/config.hpp"
#include "squeeze/core/cuda_error.hpp"
#include "squeeze/core/timer.hpp"
#include "squeeze/frsz2/wire.cuh"
#include "squeeze/ibp/wire.cuh"
#if defined(SQUEEZE_HAVE_NCCL)
#include "squeeze/coll/nccl.hpp"
#endif

extern "C" char** environ;  // the parent's environment, for the tour's child process

namespace squeeze::bench::coll_study {

namespace coll = squeeze::coll;

/// N(0, scale^2)-like values from a hash of (seed, i) (Box-Muller on two hashed uniforms):
/// gradient-like, never all zeros, the same on every run.
template <class T>
SQUEEZE_KERNEL(256)
void fill_normal_kernel(T* x, std::size_t n, std::uint64_t seed, double scale) {
  for (std::size_t i = blockIdx.x * std::size_t{256} + threadIdx.x; i < n;
       i += std::size_t{gridDim.x} * 256) {
    std::uint64_t h = (i + 1) * 0x9E3779B97F4A7C15ull ^ seed * 0xBF58476D1CE4E5B9ull;
    h ^= h >> 31;
    h *= 0x94D049BB133111EBull;
    h ^= h >> 29;
    const double u1 = (static_cast<double>(h >> 40) + 1.0) * 0x1p-24;
    const double u2 = static_cast<double>((h >> 16) & 0xffffff) * 0x1p-24;
    x[i] = static_cast<T>(scale * sqrt(-2.0 * log(u1)) * cospi(2.0 * u2));
  }
}

template <class T>
void fill_normal(T* x, std::size_t n, std::uint64_t seed, double scale, cudaStream_t s) {
  if (n == 0) return;
  const auto blocks = static_cast<unsigned>(std::min<std::size_t>((n + 255) / 256, 4096));
  fill_normal_kernel<T><<<blocks, 256, 0, s>>>(x, n, seed, scale);
  SQUEEZE_CHECK_LAUNCH();
}

/// Zeros all values of 9 rows in 10 (rows of `row` values, chosen by a hash of (seed,
/// row)): gradients of an embedding table, where a step touches few rows.
template <class T>
SQUEEZE_KERNEL(256)
void sparsify_rows_kernel(T* x, std::size_t n, std::size_t row, std::uint64_t seed) {
  for (std::size_t i = blockIdx.x * std::size_t{256} + threadIdx.x; i < n;
       i += std::size_t{gridDim.x} * 256) {
    std::uint64_t h = (i / row + 1) * 0x9E3779B97F4A7C15ull ^ (seed + 17) * 0xD1B54A32D192ED03ull;
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 32;
    if (h % 10 != 0) x[i] = T{0};
  }
}

/// fill_normal, then 90 % of the rows of 64 values zeroed (sparsify_rows_kernel).
template <class T>
void fill_sparse_rows(T* x, std::size_t n, std::uint64_t seed, double scale, cudaStream_t s) {
  fill_normal(x, n, seed, scale, s);
  if (n == 0) return;
  const auto blocks = static_cast<unsigned>(std::min<std::size_t>((n + 255) / 256, 4096));
  sparsify_rows_kernel<T><<<blocks, 256, 0, s>>>(x, n, 64, seed);
  SQUEEZE_CHECK_LAUNCH();
}

/// out[0] = max |a - b| bits, out[1] = max |b| bits, out[2] = an order-free checksum of a's
/// bits (sum of hashed words): compare results across ranks without copying them.
template <class T>
SQUEEZE_KERNEL(256)
void compare_kernel(const T* a, const T* b, std::size_t n, unsigned long long* out) {
  double diff = 0, mag = 0;
  unsigned long long sum = 0;
  for (std::size_t i = blockIdx.x * std::size_t{256} + threadIdx.x; i < n;
       i += std::size_t{gridDim.x} * 256) {
    const double x = static_cast<double>(a[i]), y = static_cast<double>(b[i]);
    diff = fmax(diff, x != x ? INFINITY : fabs(x - y));
    mag = fmax(mag, fabs(y));
    unsigned long long bits = sizeof(T) == 8 ? static_cast<unsigned long long>(
                                                   __double_as_longlong(static_cast<double>(a[i])))
                                             : __float_as_uint(static_cast<float>(a[i]));
    bits = (bits + i) * 0x9E3779B97F4A7C15ull;
    sum += bits ^ (bits >> 29);
  }
  // non-negative doubles order like their bit patterns
  atomicMax(&out[0], static_cast<unsigned long long>(__double_as_longlong(diff)));
  atomicMax(&out[1], static_cast<unsigned long long>(__double_as_longlong(mag)));
  atomicAdd(&out[2], sum);
}

struct comparison {
  double max_abs_diff = 0;
  double max_abs_ref = 0;
  std::uint64_t checksum = 0;
};

template <class T>
comparison compare(const T* a, const T* b, std::size_t n, cudaStream_t s) {
  core::device_buffer<unsigned long long> out{3};
  SQUEEZE_CUDA_TRY(cudaMemsetAsync(out.data(), 0, out.bytes(), s));
  if (n > 0) {
    compare_kernel<T><<<std::min<std::size_t>((n + 255) / 256, 2048), 256, 0, s>>>(a, b, n,
                                                                                out.data());
    SQUEEZE_CHECK_LAUNCH();
  }
  unsigned long long host[3];
  SQUEEZE_CUDA_TRY(cudaMemcpyAsync(host, out.data(), sizeof host, cudaMemcpyDeviceToHost, s));
  SQUEEZE_CUDA_TRY(cudaStreamSynchronize(s));
  comparison c;
  c.max_abs_diff = std::bit_cast<double>(host[0]);
  c.max_abs_ref = std::bit_cast<double>(host[1]);
  c.checksum = host[2];
  return c;
}

/// One row of the codec study: GB/s of raw values through encode, decode, decode_reduce.
struct codec_rates {
  std::string codec;
  std::string type;
  double ratio = 0;  // message bytes / raw bytes
  double encode_gbs = 0, decode_gbs = 0, decode_reduce_gbs = 0;
};

template <class Codec, class T>
codec_rates study_codec(std::size_t n, int repeats, cudaStream_t s) {
  Codec codec;
  core::device_buffer<T> x{n}, y{n};
  const std::size_t bound = Codec::template max_wire_bytes<T>(n);
  core::device_buffer<std::byte> wire{bound};
  core::device_buffer<std::uint64_t> size{1};  // a variable-size codec's message length
  fill_normal(x.data(), n, 7, 1e-2, s);
  fill_normal(y.data(), n, 8, 1e-2, s);
  auto time = [&](auto&& work) {
    return core::time_region(s, {.warmup = 2, .repeats = repeats}, work).median_ms;
  };
  const double raw = static_cast<double>(n * sizeof(T));
  codec_rates r;
  r.codec = Codec::name();
  r.type = sizeof(T) == 4 ? "float" : "double";
  r.encode_gbs = raw / (time([&] { codec.encode(x.data(), n, wire.data(), size.data(), s); }) * 1e6);
  std::size_t bytes = bound;
  if constexpr (!Codec::fixed_size) {
    std::uint64_t host = 0;
    SQUEEZE_CUDA_TRY(cudaMemcpyAsync(&host, size.data(), 8, cudaMemcpyDeviceToHost, s));
    SQUEEZE_CUDA_TRY(cudaStreamSynchronize(s));
    bytes = static_cast<std::size_t>(host);
  }
  r.ratio = static_cast<double>(bytes) / raw;
  r.decode_gbs = raw / (time([&] { codec.decode(wire.data(), bytes, n, y.data(), s); }) * 1e6);
  r.decode_reduce_gbs =
      raw / (time([&] {
               codec.decode_reduce(wire.data(), bytes, n, y.data(), coll::reduce_op::max, s);
             }) *
             1e6);
  return r;
}

#if defined(SQUEEZE_HAVE_NCCL)
/// Runs body(r) on one thread per GPU r < ranks (device r current); rethrows the first
/// exception once every thread has finished.
template <class Body>
void on_every_gpu(std::size_t ranks, Body&& body) {
  std::vector<std::exception_ptr> errors(ranks);
  std::vector<std::thread> threads;
  for (std::size_t r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      try {
        SQUEEZE_CUDA_TRY(cudaSetDevice(static_cast<int>(r)));
        body(r);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

/// Milliseconds of `call` on every GPU at once (one thread per rank, the slowest rank's median).
template <class Call>
double time_on_all(const std::vector<cudaStream_t>& streams, const core::timing_options& timing,
                   Call&& call) {
  std::vector<double> ms(streams.size());
  on_every_gpu(streams.size(), [&](std::size_t r) {
    ms[r] = core::time_region(streams[r], timing, [&] { call(r); }).median_ms;
  });
  return *std::max_element(ms.begin(), ms.end());
}

/// Milliseconds of `a` and of `b` on every GPU at once, their calls alternating (a, b, a,
/// b, ...) so both meet the same moments of the link: the slowest rank's medians.
template <class A, class B>
std::pair<double, double> time_pair_on_all(const std::vector<cudaStream_t>& streams,
                                           const core::timing_options& timing, A&& a, B&& b) {
  std::vector<double> ma(streams.size()), mb(streams.size());
  on_every_gpu(streams.size(), [&](std::size_t r) {
    core::event_timer t{streams[r]};
    auto once = [&](auto& call) {
      t.start();
      call(r);
      t.stop();
      return static_cast<double>(t.elapsed_ms());
    };
    std::vector<double> sa, sb;
    for (int i = 0; i < timing.warmup + timing.repeats; ++i) {
      const double x = once(a), y = once(b);
      if (i < timing.warmup) continue;
      sa.push_back(x);
      sb.push_back(y);
    }
    ma[r] = core::summarize(sa).median_ms;
    mb[r] = core::summarize(sb).median_ms;
  });
  return {*std::max_element(ma.begin(), ma.end()), *std::max_element(mb.begin(), mb.end())};
}
#endif

#if defined(SQUEEZE_HAVE_NCCL)
/// link_study's medians (milliseconds, the slowest GPU's) for one size.
struct link_times {
  int ranks = 0;
  std::size_t bytes = 0;
  double native = 0, ring16 = 0, rd16 = 0, ring8 = 0, rd8 = 0;
  double selector = 0, native_paired = 0;  // timed in alternation
  std::string selector_choice;
  double busbw() const { return static_cast<double>(bytes) / (native * 1e6) * 2.0 * (ranks - 1) / ranks; }
};

/// Allreduces of each of `sizes_n` floats on every GPU of this process (one thread a GPU,
/// one communicator over them all), for the link as NCCL finds it: ncclAllReduce, ring and
/// recursive doubling with frsz2_16 and frsz2_8, each timed in a block of its own calls, and
/// the selector with its default options, its calls alternating with ncclAllReduce's; one
/// link_times a size appended to `out`. The first
/// call of each variant is checked against ncclAllReduce's result (within the codec's bound,
/// every rank holding the same bits); verification_error if not.
inline void link_study(const std::vector<std::size_t>& sizes_n, int devices,
                       std::vector<link_times>& out) {
  const int ranks = std::min(devices, 8);
  std::vector<ncclComm_t> comms(static_cast<std::size_t>(ranks));
  std::vector<int> list(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r) list[static_cast<std::size_t>(r)] = r;
  SQUEEZE_NCCL_TRY(nullptr, ncclCommInitAll(comms.data(), ranks, list.data()));
  using f16 = frsz2::wire_codec<16>;
  using f8 = frsz2::wire_codec<8>;
  struct rank_state {
    std::unique_ptr<coll::nccl_transport> t;
    std::unique_ptr<core::stream> s;
    std::unique_ptr<core::device_buffer<float>> x, y, ref;
    std::unique_ptr<coll::allreducer<coll::nccl_transport, f16>> a16;
    std::unique_ptr<coll::allreducer<coll::nccl_transport, f8>> a8;
    std::unique_ptr<coll::selector<coll::nccl_transport, f16>> sel;
  };
  const std::size_t most = *std::max_element(sizes_n.begin(), sizes_n.end());
  std::vector<rank_state> st(static_cast<std::size_t>(ranks));
  std::vector<cudaStream_t> streams;
  for (int r = 0; r < ranks; ++r) {
    SQUEEZE_CUDA_TRY(cudaSetDevice(r));
    auto& x = st[static_cast<std::size_t>(r)];
    x.t = std::make_unique<coll::nccl_transport>(comms[static_cast<std::size_t>(r)]);
    x.s = std::make_unique<core::stream>();
    x.x = std::make_unique<core::device_buffer<float>>(most);
    x.y = std::make_unique<core::device_buffer<float>>(most);
    x.ref = std::make_unique<core::device_buffer<float>>(most);
    fill_normal(x.x->data(), most, 100 + static_cast<std::uint64_t>(r), 1e-2, *x.s);
    x.a16 = std::make_unique<coll::allreducer<coll::nccl_transport, f16>>(*x.t);
    x.a8 = std::make_unique<coll::allreducer<coll::nccl_transport, f8>>(*x.t);
    x.sel = std::make_unique<coll::selector<coll::nccl_transport, f16>>(*x.t);
    streams.push_back(*x.s);
  }
  time_on_all(streams, {.warmup = 0, .repeats = 1},
              [&](std::size_t r) { st[r].sel->template calibrate<float>(*st[r].s); });
  const core::timing_options timing{.warmup = 3, .repeats = 11};
  const auto sum = coll::reduce_op::sum;
  using A = coll::algorithm;
  for (std::size_t n : sizes_n) {
    // every variant reads x and writes y; checked once against ncclAllReduce first
    time_on_all(streams, {.warmup = 0, .repeats = 1}, [&](std::size_t r) {
      st[r].t->native_allreduce(st[r].x->data(), st[r].ref->data(), n, sum, *st[r].s);
    });
    auto variant = [&](const char* name, double bits, auto&& call) {
      time_on_all(streams, {.warmup = 0, .repeats = 1}, [&](std::size_t r) { call(r); });
      std::vector<comparison> c(static_cast<std::size_t>(ranks));
      for (int r = 0; r < ranks; ++r) {
        SQUEEZE_CUDA_TRY(cudaSetDevice(r));
        const auto ri = static_cast<std::size_t>(r);
        c[ri] = compare(st[ri].y->data(), st[ri].ref->data(), n, *st[ri].s);
      }
      const double allowed = bits == 0 ? 1e-5 * c[0].max_abs_ref * ranks
                                       : (ranks + 2) * std::ldexp(1.0, 2 - static_cast<int>(bits)) *
                                             c[0].max_abs_ref;
      for (const auto& x : c) {
        if (!(x.max_abs_diff <= allowed) || (bits > 0 && x.checksum != c[0].checksum)) {
          throw verification_error{std::string{"coll: "} + name + " at " +
                                   std::to_string(n * 4) + " bytes: error " +
                                   std::to_string(x.max_abs_diff) + " (allowed " +
                                   std::to_string(allowed) + ") or ranks differ"};
        }
      }
      return time_on_all(streams, timing, [&](std::size_t r) { call(r); });
    };
    link_times t;
    t.ranks = ranks;
    t.bytes = n * sizeof(float);
    t.native = variant("ncclAllReduce", 0, [&](std::size_t r) {
      st[r].t->native_allreduce(st[r].x->data(), st[r].y->data(), n, sum, *st[r].s);
    });
    t.ring16 = variant("ring+frsz2_16", 16.5, [&](std::size_t r) {
      (*st[r].a16)(st[r].x->data(), st[r].y->data(), n, sum, *st[r].s, {.algorithm = A::ring});
    });
    t.rd16 = variant("rd+frsz2_16", 16.5, [&](std::size_t r) {
      (*st[r].a16)(st[r].x->data(), st[r].y->data(), n, sum, *st[r].s,
                   {.algorithm = A::recursive_doubling});
    });
    t.ring8 = variant("ring+frsz2_8", 8.5, [&](std::size_t r) {
      (*st[r].a8)(st[r].x->data(), st[r].y->data(), n, sum, *st[r].s, {.algorithm = A::ring});
    });
    t.rd8 = variant("rd+frsz2_8", 8.5, [&](std::size_t r) {
      (*st[r].a8)(st[r].x->data(), st[r].y->data(), n, sum, *st[r].s,
                  {.algorithm = A::recursive_doubling});
    });
    auto selector = [&](std::size_t r) {
      (*st[r].sel)(st[r].x->data(), st[r].y->data(), n, sum, *st[r].s);
    };
    variant("selector(frsz2_16)", 16.5, selector);  // checked
    std::tie(t.selector, t.native_paired) = time_pair_on_all(
        streams, timing, selector, [&](std::size_t r) {
          st[r].t->native_allreduce(st[r].x->data(), st[r].y->data(), n, sum, *st[r].s);
        });
    t.selector_choice = coll::name(st[0].sel->choose(n * sizeof(float)));
    out.push_back(t);
  }
  st.clear();
  for (auto c : comms) ncclCommDestroy(c);
}

/// The child process of the tour's coll section: link_study at 64 MiB under the link
/// setting its environment holds, one line on stdout. Returns the exit status.
inline int link_child_main() {
  try {
    int devices = 0;
    SQUEEZE_CUDA_TRY(cudaGetDeviceCount(&devices));
    std::vector<link_times> t;
    link_study({std::size_t{16} << 20}, devices, t);
    std::printf("coll-link-child: %d %.6f %.6f %.6f %.6f %.6f\n", t[0].ranks, t[0].native,
                t[0].ring16, t[0].rd16, t[0].ring8, t[0].rd8);
    return 0;
  } catch (const verification_error& e) {
    std::printf("coll-link-child: WRONG RESULT: %s\n", e.what());
    return 3;
  } catch (const std::exception& e) {
    std::printf("coll-link-child: error: %s\n", e.what());
    return 1;
  }
}

/// Runs this program again with `extra_env` added and `argument` as its only argument;
/// returns its standard output (empty when it could not start).
inline std::string run_child(const std::vector<std::string>& extra_env, const char* argument,
                             int& status) {
  std::vector<std::string> env_text(extra_env);
  for (char** e = environ; *e != nullptr; ++e) env_text.emplace_back(*e);
  std::vector<char*> envp;
  for (auto& e : env_text) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::string self = "/proc/self/exe", arg = argument;
  char* argv[] = {self.data(), arg.data(), nullptr};
  int fd[2];
  status = -1;
  if (pipe(fd) != 0) return {};
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fd[1], 1);
  posix_spawn_file_actions_addclose(&actions, fd[0]);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, self.c_str(), &actions, nullptr, argv, envp.data());
  posix_spawn_file_actions_destroy(&actions);
  close(fd[1]);
  std::string text;
  if (rc == 0) {
    char buffer[4096];
    for (ssize_t got; (got = read(fd[0], buffer, sizeof buffer)) > 0;) text.append(buffer, static_cast<std::size_t>(got));
    int wstatus = 0;
    waitpid(pid, &wstatus, 0);
    status = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1;
  }
  close(fd[0]);
  return text;
}
#endif

/// The tour's coll section: the codec's rates on this GPU (any GPU); with two GPUs or more,
/// allreduces of float over NCCL, one thread per GPU: on the link as configured (NVLink by
/// default) the selector against ncclAllReduce at 512 KiB and 64 MiB, their calls alternating
/// (target: within 3 %),
/// and in a child process with NCCL_P2P_DISABLE=1 (through shared host memory, ~27 GB/s) the
/// best of ring and recursive doubling with frsz2_16 and frsz2_8 at 64 MiB (targets 1.6x and
/// 2.5x).
inline void tour_section(report_table& table, const tour_context& context) {
  if (!context.has_gpu()) {
    table.add_note("coll: no GPU, nothing to run (the schedules are covered by the host tests)");
    return;
  }
  core::stream s;
  const auto r16 = study_codec<frsz2::wire_codec<16>, float>(std::size_t{16} << 20, 10, s);
  table.add({.family = "coll",
             .measurement = "frsz2_16 float: encode (decode+reduce as baseline), GB/s of values",
             .value = r16.encode_gbs,
             .baseline = r16.decode_reduce_gbs,
             .unit = "GB/s",
             .min_ratio = std::nullopt});
#if defined(SQUEEZE_HAVE_NCCL)
  int devices = 0;
  SQUEEZE_CUDA_TRY(cudaGetDeviceCount(&devices));
  if (devices < 2) {
    table.add_note("coll: one GPU: the allreduce rows need two (NCCL allows one rank per GPU)");
    return;
  }
  std::vector<link_times> here;
  link_study({std::size_t{128} << 10, std::size_t{16} << 20}, devices, here);
  for (const auto& t : here) {
    table.add({.family = "coll",
               .measurement = "allreduce " +
                              (t.bytes < (1u << 20) ? std::to_string(t.bytes >> 10) + " KiB"
                                                    : std::to_string(t.bytes >> 20) + " MiB") +
                              " float, " +
                              std::to_string(t.ranks) + " GPUs, link as set: selector (picks " +
                              t.selector_choice + ") vs ncclAllReduce, alternating",
               .value = 1.0 / t.selector,
               .baseline = 1.0 / t.native_paired,
               .unit = "1/ms",
               .min_ratio = 0.97});
  }
  table.add_note("coll: ncclAllReduce reached " + std::to_string(here.back().busbw()).substr(0, 6) +
                 " GB/s busbw at 64 MiB on the link as set");
  int status = 0;
  const std::string text = run_child({"NCCL_P2P_DISABLE=1"}, "--coll-link-child", status);
  const auto at = text.find("coll-link-child: ");
  int ranks = 0;
  double native = 0, ring16 = 0, rd16 = 0, ring8 = 0, rd8 = 0;
  if (at == std::string::npos ||
      std::sscanf(text.c_str() + at, "coll-link-child: %d %lf %lf %lf %lf %lf", &ranks, &native,
                  &ring16, &rd16, &ring8, &rd8) != 6) {
    const std::string why = at == std::string::npos ? "no output" : text.substr(at);
    if (text.find("WRONG RESULT") != std::string::npos) throw verification_error{why};
    table.add_note("coll: the NCCL_P2P_DISABLE=1 run failed (exit " + std::to_string(status) +
                   "): " + why);
    return;
  }
  const double best16 = std::min(ring16, rd16), best8 = std::min(ring8, rd8);
  table.add({.family = "coll",
             .measurement = "allreduce 64 MiB float, " + std::to_string(ranks) +
                            " GPUs, NCCL_P2P_DISABLE=1: best of ring/rd + frsz2_16 vs ncclAllReduce",
             .value = 1.0 / best16,
             .baseline = 1.0 / native,
             .unit = "1/ms",
             .min_ratio = 1.6});
  table.add({.family = "coll",
             .measurement = "same link, best of ring/rd + frsz2_8 vs ncclAllReduce",
             .value = 1.0 / best8,
             .baseline = 1.0 / native,
             .unit = "1/ms",
             .min_ratio = 2.5});
  table.add_note("coll: with NCCL_P2P_DISABLE=1 ncclAllReduce reached " +
                 std::to_string(64.0 * 1.048576 / native * 2.0 * (ranks - 1) / ranks).substr(0, 5) +
                 " GB/s busbw at 64 MiB (a child process: NCCL reads the setting once)");
#else
  table.add_note("coll: built without NCCL: the allreduce rows are not run");
#endif
}

}  // namespace squeeze::bench::coll_study
