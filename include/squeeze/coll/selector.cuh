// SPDX-License-Identifier: Apache-2.0
// squeeze/coll/selector.cuh: picks, per message size, the transport's own allreduce
// (ncclAllReduce, MPI_Allreduce), ring or recursive doubling, raw or compressed, from
// timings of every candidate taken on this communicator's link.
//
//   coll::selector<coll::nccl_transport, frsz2::wire_codec<16>> sel{net};
//   sel.calibrate<float>(stream);        // collective: every rank, once
//   sel(d_send, d_recv, count, coll::reduce_op::sum, stream);
//
// calibrate() times each candidate at a ladder of message sizes (by default 256 KiB to
// 64 MiB, x4), out of place (what costs squeeze's schedules most: they copy before a raw
// reduction), median of `repeats` calls after a warm-up, each started by every rank
// together (a max_all before it; the transport's own allreduce both first and last at each
// size, the faster kept), and takes the slowest rank's time
// (max_all), so every rank holds the same table and makes the same choice: a choice that
// differed between ranks would deadlock. A size between two rungs is predicted by linear
// interpolation in bytes, above the top rung in proportion to the top rung's times.
// A compressed or squeeze-scheduled candidate wins only when predicted `margin` (5 %)
// faster than the transport's own allreduce; below the ladder the transport's own
// allreduce is always used. So on a fast link (NVLink) the selector passes through to
// NCCL, and on a slow one it switches to compression where that pays.
//
// A codec whose messages shrink with the data (ibp::wire_codec: variable size) is only
// worth its time on data that compresses, which the selector cannot know from synthetic
// values. Such a codec's candidates are timed on, and chosen for, the caller's data only:
// pass a sample to calibrate (for example the first step's gradients,
// `sel.calibrate<float>(stream, grads)`); calibrated without one, the selector never picks
// them. A fixed-rate codec (FRSZ2) costs the same on any data and is timed on synthetic
// values.
//
// Each call is checked across the ranks as allreducer's calls are (selector_options::
// verify, coll::verification): by default the first call of each (count, value type, op),
// and never again; a repeated call then costs what the chosen candidate costs.
//
// The link enters through the measurements, which describe it better than a datasheet
// bandwidth; link_busbw() reports what the native allreduce reached at the top rung.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "squeeze/coll/allreduce.cuh"
#include "squeeze/coll/codec.hpp"
#include "squeeze/coll/transport.hpp"
#include "squeeze/core/buffer.hpp"
#include "squeeze/core/cuda_error.hpp"
#include "squeeze/core/error.hpp"
#include "squeeze/core/timer.hpp"

namespace squeeze::coll {

/// A transport with its own allreduce (both of squeeze's have one).
template <class T>
concept native_allreduce_transport =
    transport<T> && requires(T& t, const float* s, float* r, std::size_t n, reduce_op op,
                             cudaStream_t st) { t.native_allreduce(s, r, n, op, st); };

/// The candidates a selector chooses among.
enum class path : std::uint8_t {
  native,                   ///< the transport's own allreduce
  ring,                     ///< squeeze's ring, raw
  recursive_doubling,       ///< squeeze's recursive doubling, raw
  ring_compressed,          ///< ring with the codec
  recursive_doubling_compressed,
};
inline constexpr int path_count = 5;  ///< the number of candidates

/// The candidate's name ("native", "ring", ..., "recursive_doubling+codec").
[[nodiscard]] inline const char* name(path p) noexcept {
  switch (p) {
    case path::native: return "native";
    case path::ring: return "ring";
    case path::recursive_doubling: return "recursive_doubling";
    case path::ring_compressed: return "ring+codec";
    case path::recursive_doubling_compressed: return "recursive_doubling+codec";
  }
  return "?";
}

/// How a selector calibrates and chooses.
struct selector_options {
  /// Message sizes (bytes) timed by calibrate(), ascending.
  std::vector<std::size_t> ladder{256u << 10, 1u << 20, 4u << 20, 16u << 20, 64u << 20};
  int warmup = 3;   ///< untimed calls per candidate and size
  int repeats = 7;  ///< timed calls per candidate and size (their median counts)
  /// A candidate other than `native` must be predicted this much faster to be chosen.
  double margin = 0.05;
  /// As allreduce_options::verify: when a call's arguments are checked across the ranks.
  verification verify = verification::first_call;
};

/// See the file comment.
template <native_allreduce_transport Transport, class Codec>
class selector {
 public:
  /// A selector over `t` (which must outlive it); uncalibrated, it always picks native.
  explicit selector(Transport& t, Codec codec = {}, selector_options options = {})
      : transport_{&t}, raw_{t}, compressed_{t, std::move(codec)}, options_{std::move(options)} {
    SQUEEZE_EXPECTS(!options_.ladder.empty() &&
                        std::is_sorted(options_.ladder.begin(), options_.ladder.end()),
                    "coll::selector: the calibration ladder must be non-empty and ascending");
    SQUEEZE_EXPECTS(options_.repeats >= 1, "coll::selector: repeats must be >= 1");
  }

  /// Times every candidate at every rung (collective: every rank calls it) on synthetic
  /// values, out of place (two buffers of the top rung's size, freed on return). A codec of
  /// variable size is not timed and never chosen.
  template <class T>
  requires codec_for<Codec, T>
  void calibrate(cudaStream_t stream) {
    calibrate_on<T>({}, stream);
  }

  /// As calibrate(stream), on copies of `sample` (device memory, this rank's own data, the
  /// same count on every rank; repeated to fill the top rung): a codec of variable size is
  /// timed, and chosen where it pays, on data like this.
  template <class T>
  requires codec_for<Codec, T>
  void calibrate(cudaStream_t stream, std::span<const T> sample) {
    SQUEEZE_EXPECTS(!sample.empty() && sample.data() != nullptr,
                    "coll::selector::calibrate: an empty sample");
    calibrate_on<T>(sample, stream);
  }

  /// Whether the codec's candidates take part in choose(): a fixed-size codec's always, a
  /// variable-size codec's after a calibration on a sample.
  [[nodiscard]] bool codec_candidates() const noexcept { return codec_timed_; }

  /// Whether calibrate() or set_measurements() has run.
  [[nodiscard]] bool calibrated() const noexcept { return !ms_.empty(); }

  /// The measurements: [rung][candidate] milliseconds, rungs as options().ladder.
  [[nodiscard]] const std::vector<std::array<double, path_count>>& measurements() const noexcept {
    return ms_;
  }
  /// Takes measurements saved from an earlier calibrate() on the same ladder (every rank
  /// must pass the same table, or choices differ between ranks). `codec_candidates`: whether
  /// the codec's columns count (for a variable-size codec: timed on a sample).
  void set_measurements(std::vector<std::array<double, path_count>> ms,
                        bool codec_candidates = !data_dependent) {
    SQUEEZE_EXPECTS(ms.size() == options_.ladder.size(),
                    "coll::selector::set_measurements: one row per rung of the ladder");
    ms_ = std::move(ms);
    codec_timed_ = codec_candidates;
  }
  /// The options it was built with.
  [[nodiscard]] const selector_options& options() const noexcept { return options_; }

  /// The candidate for a message of `bytes` (native until calibrated).
  [[nodiscard]] path choose(std::size_t bytes) const {
    if (!calibrated() || bytes < options_.ladder.front()) return path::native;
    const double native_ms = predict(path::native, bytes);
    path best = path::native;
    double best_ms = native_ms * (1.0 - options_.margin);
    for (int c = 1; c < path_count; ++c) {
      if (!codec_timed_ && compressed(static_cast<path>(c))) continue;
      const double ms = predict(static_cast<path>(c), bytes);
      if (ms < best_ms) {
        best_ms = ms;
        best = static_cast<path>(c);
      }
    }
    return best;
  }

  /// Predicted milliseconds of candidate `p` for a message of `bytes`.
  [[nodiscard]] double predict(path p, std::size_t bytes) const {
    SQUEEZE_EXPECTS(calibrated(), "coll::selector::predict: calibrate() first");
    const auto& l = options_.ladder;
    const auto c = static_cast<std::size_t>(p);
    // Above the top rung (or with one rung), in proportion to its time: the candidates keep the
    // ratios measured there. (A line through the last two rungs would carry their noise,
    // and the difference of two latencies, to sizes 10x larger.)
    if (l.size() == 1 || bytes >= l.back()) {
      return ms_.back()[c] * static_cast<double>(bytes) / static_cast<double>(l.back());
    }
    std::size_t k = 1;
    while (k + 1 < l.size() && l[k] < bytes) ++k;  // [l[k-1], l[k]] holds bytes, or the top
    const double x0 = static_cast<double>(l[k - 1]), x1 = static_cast<double>(l[k]);
    const double y0 = ms_[k - 1][c], y1 = ms_[k][c];
    return y0 + (y1 - y0) * (static_cast<double>(bytes) - x0) / (x1 - x0);
  }

  /// What the native allreduce reached at the top rung: busbw in GB/s (nccl-tests' busbw).
  [[nodiscard]] double link_busbw() const {
    if (!calibrated()) return 0;
    const double n = transport_->size();
    const double bytes = static_cast<double>(options_.ladder.back());
    return bytes / (ms_.back()[0] * 1e-3) * 2 * (n - 1) / n * 1e-9;
  }

  /// recv = allreduce(send) through the candidate chosen for this size.
  template <class T>
  requires codec_for<Codec, T>
  void operator()(const T* send, T* recv, std::size_t count, reduce_op op,
                  cudaStream_t stream) {
    verify_call<T>(count, op, stream);
    last_ = choose(count * sizeof(T));
    run(last_, send, recv, count, op, stream, verification::off);
  }

  /// The candidate the last call took.
  [[nodiscard]] path last_choice() const noexcept { return last_; }

  /// The call signatures checked so far (what verification::first_call skips).
  [[nodiscard]] const agreed_calls& agreed() const noexcept { return agreed_; }

 private:
  static constexpr bool data_dependent = !is_identity_codec<Codec> && !Codec::fixed_size;

  template <class T>
  void calibrate_on(std::span<const T> sample, cudaStream_t stream) {
    // Out of place, under sum: the values sent stay the same call after call, and the
    // candidates pay what an out-of-place call costs them (squeeze's raw schedules copy send
    // to recv first; NCCL does not), so an in-place call is never slower than predicted.
    const reduce_op op = reduce_op::sum;
    const std::size_t top = std::max<std::size_t>(options_.ladder.back() / sizeof(T), 1);
    core::device_buffer<T> buffer{top}, result{top};
    if (sample.empty()) {
      // Not zeros (zeros compress and reduce unlike real data): bytes 0x3F3F... read as
      // floats near 0.75, as doubles near 4.8e-4.
      SQUEEZE_CUDA_TRY(cudaMemsetAsync(buffer.data(), 0x3F, buffer.bytes(), stream));
    } else {
      for (std::size_t at = 0; at < buffer.size(); at += sample.size()) {
        const std::size_t n = std::min(sample.size(), buffer.size() - at);
        SQUEEZE_CUDA_TRY(cudaMemcpyAsync(buffer.data() + at, sample.data(), n * sizeof(T),
                                         cudaMemcpyDeviceToDevice, stream));
      }
    }
    const bool time_codec = !data_dependent || !sample.empty();
    ms_.assign(options_.ladder.size(), {});
    core::event start, stop;
    std::vector<std::uint64_t> ns(options_.ladder.size() * path_count);
    // The median of `repeats` calls of candidate c on `count` values, in nanoseconds.
    const auto time = [&](path c, std::size_t count) {
      std::vector<float> samples;
      for (int i = 0; i < options_.warmup + options_.repeats; ++i) {
        // Every rank starts the call together (max_all returns once every rank has
        // joined): a rank that a candidate left behind would otherwise charge its lag to
        // the next candidate's calls on the other ranks.
        std::array<std::uint64_t, 1> together{0};
        transport_->max_all(together, stream);
        start.record(stream);
        run(c, buffer.data(), result.data(), count, op, stream, verification::off);
        stop.record(stream);
        stop.synchronize();
        float ms = 0;
        SQUEEZE_CUDA_TRY(cudaEventElapsedTime(&ms, start.get(), stop.get()));
        if (i >= options_.warmup) samples.push_back(ms);
      }
      std::nth_element(samples.begin(), samples.begin() + samples.size() / 2, samples.end());
      return static_cast<std::uint64_t>(static_cast<double>(samples[samples.size() / 2]) * 1e6);
    };
    for (std::size_t k = 0; k < options_.ladder.size(); ++k) {
      const std::size_t count = std::max<std::size_t>(options_.ladder[k] / sizeof(T), 1);
      for (int c = 0; c < path_count; ++c) {
        if (!time_codec && compressed(static_cast<path>(c))) continue;  // never chosen
        ns[k * path_count + static_cast<std::size_t>(c)] = time(static_cast<path>(c), count);
      }
      // The transport's own allreduce once more, after the others, and the faster of the two
      // kept: its first calls after another candidate's sends and receives can run slower
      // (NCCL's do), which would hand the rung to a candidate that is not faster.
      std::uint64_t& native_ns = ns[k * path_count];
      native_ns = std::min(native_ns, time(path::native, count));
    }
    transport_->max_all(ns, stream);  // the slowest rank's times: the same table everywhere
    for (std::size_t k = 0; k < options_.ladder.size(); ++k) {
      for (int c = 0; c < path_count; ++c) {
        ms_[k][static_cast<std::size_t>(c)] =
            static_cast<double>(ns[k * path_count + static_cast<std::size_t>(c)]) * 1e-6;
      }
    }
    codec_timed_ = time_codec;
  }

  [[nodiscard]] static constexpr bool compressed(path p) noexcept {
    return p == path::ring_compressed || p == path::recursive_doubling_compressed;
  }

  template <class T>
  void run(path p, const T* send, T* recv, std::size_t count, reduce_op op, cudaStream_t stream,
           verification verify) {
    switch (p) {
      case path::native: transport_->native_allreduce(send, recv, count, op, stream); break;
      case path::ring:
        raw_(send, recv, count, op, stream, {.algorithm = algorithm::ring, .verify = verify});
        break;
      case path::recursive_doubling:
        raw_(send, recv, count, op, stream,
             {.algorithm = algorithm::recursive_doubling, .verify = verify});
        break;
      case path::ring_compressed:
        compressed_(send, recv, count, op, stream,
                    {.algorithm = algorithm::ring, .verify = verify});
        break;
      case path::recursive_doubling_compressed:
        compressed_(send, recv, count, op, stream,
                    {.algorithm = algorithm::recursive_doubling, .verify = verify});
        break;
    }
  }

  // One check for the call, whatever the path: the ranks must agree before they choose.
  template <class T>
  void verify_call(std::size_t count, reduce_op op, cudaStream_t stream) {
    const std::array<std::uint64_t, 2> mine{count, sizeof(T) | std::uint64_t(op) << 8};
    if (!agreed_.agree(*transport_, mine, options_.verify, stream)) {
      throw invalid_argument{"coll::selector: the ranks disagree on the call: rank " +
                             std::to_string(transport_->rank()) + " passed count " +
                             std::to_string(count) + ", " + std::to_string(sizeof(T)) +
                             "-byte values, op " + core::to_string(op) +
                             "; every rank must pass the same"};
    }
  }

  Transport* transport_;
  allreducer<Transport, no_compression> raw_;
  allreducer<Transport, Codec> compressed_;
  selector_options options_;
  std::vector<std::array<double, path_count>> ms_;  // [rung][candidate] milliseconds
  bool codec_timed_ = false;
  agreed_calls agreed_;
  path last_ = path::native;
};

}  // namespace squeeze::coll
