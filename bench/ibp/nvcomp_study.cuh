// SPDX-License-Identifier: Apache-2.0
// bench/ibp/nvcomp_study.cuh: IBP against nvCOMP's batched ("low-level") codecs, the
// compressors users would pick instead. Used by squeeze_bench_nvcomp
// (bench/ibp/nvcomp_bench.cu, which documents the options and the JSON it writes).
//
// One data set's bytes are cut into rows of S bytes (S = 256 B, 1 KiB, 4 KiB; the tail that
// fills no whole row is dropped), then for each codec:
//   ratio         uncompressed bytes / compressed bytes (per-row or per-chunk offsets and
//                 sizes, which both sides keep, are not counted)
//   compress      IBP: ibp::compress_condensed by the host clock (it synchronizes and
//                 allocates its output), the preprocessing (bit counts + the 17-threshold
//                 sweep, ibp::sweep_threshold_on_gpu) timed apart; nvCOMP: CUDA events
//                 around nvcompBatched<Codec>CompressAsync into preallocated buffers
//   decompress    the whole set, compressed data already in device memory, into a device
//                 tensor (IBP: ibp::gather_rows in order; nvCOMP: one batched call)
//   delivered     the job IBP exists for: a random batch of rows (distinct, random order)
//                 from pinned, mapped host memory into a dense device tensor [B, S]:
//                   plain   xfer::gather_rows of the uncompressed rows (the baseline)
//                   ibp     ibp::gather_rows of the compressed rows, decoded in flight
//                   nvCOMP  (1) the batch's compressed chunks gathered over PCIe into device
//                           slots through squeeze's xfer layer, (2) one batched decompress,
//                           (3) with 64 KiB chunks, xfer::gather_rows of the batch rows out
//                           of the decompressed chunks. Step (1) two ways, both measured,
//                           the faster reported:
//                             exact   one warp per chunk, xfer::warp_copy of exactly its
//                                     compressed bytes from a packed store
//                             slots   xfer::gather_rows (8 rows in flight a warp) over a
//                                     store of fixed slots (the largest compressed chunk,
//                                     rounded up to 16 B): whole slots cross PCIe
//                           With one chunk per row, the batch's chunks are its rows and
//                           step (2) writes the output tensor directly. Which chunks a batch
//                           needs, and where each row lands, is planned on the host before
//                           the timed region (not timed: that favours nvCOMP).
// Every output is checked byte for byte before it is timed (decompress: against the
// uncompressed set; delivered: against the plain gather's output, itself checked on the
// host), and every nvCOMP per-chunk status after the check run and after the timed runs.
// Times: CUDA events (the host's part of each call included, as a loader pays it), L2
// flushed before each run, median of the timed runs after warm-up runs.
#pragma once

#include <cuda_runtime.h>
#include <nvcomp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "common/l2_flush.hpp"
#include "common/report.hpp"
#include "squeeze/core.hpp"
#include "squeeze/ibp/compress.cuh"
#include "squeeze/ibp/dataset.hpp"
#include "squeeze/ibp/gather.cuh"
#include "squeeze/io/idx.hpp"
#include "squeeze/io/npy.hpp"
#include "squeeze/xfer/copy.cuh"
#include "squeeze/xfer/gather.cuh"
#include "squeeze/xfer/mapped_memory.hpp"

namespace squeeze::bench::nvcomp_study {

/// A data set cannot be loaded (file missing, wrong format): the program stops with advice.
class data_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// ---- data sets ------------------------------------------------------------------------

/// A data set as one byte array; rows of S bytes are cut from it.
struct data_set {
  std::string name;         ///< "fashion-mnist-u8", "normal", ...
  std::string description;  ///< one line for the output
  std::uint32_t element_bytes = 1;
  bool floating = false;  ///< IEEE floats (nvCOMP ANS has a float32 / float16 mode)
  std::vector<std::byte> bytes;
};

/// The uncompressed Fashion-MNIST training images: `given` (the IDX file, or a directory
/// holding train-images-idx3-ubyte), or the first default directory holding them. Throws
/// data_error with advice when there is none (the Debian package ships them gzip-compressed).
inline std::string find_fashion_mnist(const std::string& given) {
  namespace fs = std::filesystem;
  constexpr const char* file = "train-images-idx3-ubyte";
  std::error_code ec;
  const auto in_dir = [&](const fs::path& dir) -> std::optional<std::string> {
    if (fs::is_regular_file(dir / file, ec)) return (dir / file).string();
    return std::nullopt;
  };
  std::vector<fs::path> tried;
  if (!given.empty()) {
    if (fs::is_regular_file(given, ec)) return given;
    tried.emplace_back(given);
  } else {
    tried = {"shared/data/fashion-mnist", "../shared/data/fashion-mnist", ".data/fm",
             "/usr/share/datasets/fashion-mnist"};
  }
  std::string gzipped;
  std::string list;
  for (const fs::path& dir : tried) {
    if (auto path = in_dir(dir)) return *path;
    if (gzipped.empty() && fs::is_regular_file(dir / (std::string{file} + ".gz"), ec))
      gzipped = (dir / (std::string{file} + ".gz")).string();
    list += (list.empty() ? "" : ", ") + dir.string();
  }
  std::string advice = "Fashion-MNIST training images (uncompressed IDX, " + std::string{file} +
                       ") not found in " + list + ".";
  if (!gzipped.empty()) {
    advice += " '" + gzipped +
              "' is gzip-compressed; the IDX reader takes it uncompressed:\n"
              "  mkdir -p /tmp/fm && gunzip -c " +
              gzipped + " > /tmp/fm/" + file + "\nthen pass --fashion-mnist /tmp/fm";
  } else {
    advice +=
        " Install the Debian package dataset-fashion-mnist (gzip IDX files in "
        "/usr/share/datasets/fashion-mnist/), gunzip a copy and pass --fashion-mnist DIR, or "
        "leave the fashion-mnist data sets out (--datasets).";
  }
  throw data_error{advice};
}

/// Fashion-MNIST training images as bytes (uint8 pixels) and as float32 features
/// (pixel / 255, as ibp_study::real_data_sets builds them).
inline std::vector<data_set> fashion_mnist_sets(const std::string& images_path, bool u8, bool f32) {
  io::idx_array images = io::read_idx(images_path);
  if (images.type != 0x08 || images.dims.size() != 3)
    throw data_error{"'" + images_path + "' is not an IDX array of uint8 images"};
  const std::string shape = std::to_string(images.dims[0]) + " x " +
                            std::to_string(images.dims[1]) + " x " + std::to_string(images.dims[2]);
  std::vector<data_set> sets;
  if (f32) {
    data_set d{"fashion-mnist-f32",
               "Fashion-MNIST training images " + shape + ", float32 pixel/255", 4, true,
               std::vector<std::byte>(images.data.size() * 4)};
    for (std::size_t i = 0; i < images.data.size(); ++i) {
      const float v = static_cast<float>(images.data[i]) / 255.0f;
      std::memcpy(d.bytes.data() + 4 * i, &v, 4);
    }
    sets.push_back(std::move(d));
  }
  if (u8) {
    sets.insert(sets.begin(), data_set{"fashion-mnist-u8",
                                       "Fashion-MNIST training images " + shape + ", uint8 pixels",
                                       1, false, std::move(images.data)});
  }
  return sets;
}

/// `bytes` / 4 float32 values: 0 with probability zero_fraction, else N(0, sigma). Filled in
/// slices of 1 Mi values on all host cores; slice k draws from its own generator (seed, k),
/// so the values do not depend on the number of threads.
inline data_set gaussian_floats(std::string name, std::string description, std::size_t bytes,
                                float sigma, double zero_fraction, std::uint64_t seed) {
  data_set d{std::move(name), std::move(description), 4, true,
             std::vector<std::byte>(bytes / 4 * 4)};
  const std::size_t values = bytes / 4;
  constexpr std::size_t slice = std::size_t{1} << 20;
  const std::size_t slices = core::div_ceil(values, slice);
  std::atomic<std::size_t> next{0};
  const auto work = [&] {
    for (std::size_t k = next++; k < slices; k = next++) {
      std::seed_seq seq{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32),
                        static_cast<std::uint32_t>(k), static_cast<std::uint32_t>(k >> 32)};
      std::mt19937_64 rng{seq};
      std::normal_distribution<float> normal{0.0f, sigma};
      std::bernoulli_distribution zero{zero_fraction};
      const std::size_t end = std::min(values, (k + 1) * slice);
      for (std::size_t i = k * slice; i < end; ++i) {
        float v = normal(rng);
        if (zero_fraction > 0.0 && zero(rng)) v = 0.0f;
        std::memcpy(d.bytes.data() + 4 * i, &v, 4);
      }
    }
  };
  const std::size_t threads = std::clamp<std::size_t>(std::thread::hardware_concurrency(), 1,
                                                      std::clamp<std::size_t>(slices, 1, 32));
  std::vector<std::thread> pool;
  for (std::size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& th : pool) th.join();
  return d;
}

/// A .npy file the user passes: its bytes, element size and kind as read.
inline data_set npy_set(const std::string& path) {
  io::npy_array a = io::read_npy(path);
  std::string shape;
  for (const std::size_t s : a.shape) shape += (shape.empty() ? "" : " x ") + std::to_string(s);
  return data_set{"npy:" + std::filesystem::path{path}.filename().string(),
                  path + " (" + a.descr + ", " + shape + ")",
                  static_cast<std::uint32_t>(a.item_bytes), a.kind == 'f', std::move(a.data)};
}

// ---- host-side planning -----------------------------------------------------------------

/// `count` distinct rows of [0, n) in random order: the first `count` of a shuffled
/// permutation.
inline std::vector<std::uint32_t> random_batch(std::size_t n, std::size_t count,
                                               std::uint64_t seed) {
  SQUEEZE_EXPECTS(count <= n && n <= std::size_t{UINT32_MAX}, "random_batch: count > n");
  std::vector<std::uint32_t> all(n);
  std::iota(all.begin(), all.end(), 0u);
  std::mt19937_64 rng{seed};
  for (std::size_t i = 0; i < count; ++i) {  // partial Fisher-Yates
    std::uniform_int_distribution<std::size_t> pick{i, n - 1};
    std::swap(all[i], all[pick(rng)]);
  }
  all.resize(count);
  return all;
}

/// Chunks of `rows_per_chunk` consecutive rows that a batch touches (sorted, each once),
/// and each batch row's place once chunk k has been decompressed into rows [k·rows_per_chunk,
/// (k+1)·rows_per_chunk) of a staging tensor.
struct chunk_plan {
  std::vector<std::uint32_t> chunks;  ///< [jobs] chunk ids
  std::vector<std::uint32_t> staged;  ///< [batch] row of the staging tensor
};

inline chunk_plan plan_chunks(std::span<const std::uint32_t> batch, std::size_t rows_per_chunk) {
  chunk_plan p;
  p.chunks.reserve(batch.size());
  for (const std::uint32_t r : batch)
    p.chunks.push_back(static_cast<std::uint32_t>(r / rows_per_chunk));
  std::sort(p.chunks.begin(), p.chunks.end());
  p.chunks.erase(std::unique(p.chunks.begin(), p.chunks.end()), p.chunks.end());
  p.staged.reserve(batch.size());
  for (const std::uint32_t r : batch) {
    const auto chunk = static_cast<std::uint32_t>(r / rows_per_chunk);
    const auto k = static_cast<std::size_t>(
        std::lower_bound(p.chunks.begin(), p.chunks.end(), chunk) - p.chunks.begin());
    p.staged.push_back(static_cast<std::uint32_t>(k * rows_per_chunk + r % rows_per_chunk));
  }
  return p;
}

// ---- nvCOMP's batched API, one interface over its codecs ---------------------------------

/// An nvCOMP call returned an error status, or some chunks of a batch failed.
class nvcomp_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

inline std::string status_text(nvcompStatus_t s) {
  const char* text = nvcompGetStatusString(s);
  return std::string{text != nullptr ? text : "unknown"} + " (" +
         std::to_string(static_cast<int>(s)) + ")";
}

inline void nvcomp_check(nvcompStatus_t s, const std::string& call) {
  if (s != nvcompSuccess) throw nvcomp_error{call + " returned " + status_text(s)};
}

struct alignments {
  std::size_t input = 1, output = 1, temp = 1;
};

/// The device arrays of one batched compress call ([chunks] each).
struct compress_call {
  const void* const* uncompressed_ptrs = nullptr;
  const std::size_t* uncompressed_bytes = nullptr;
  std::size_t max_uncompressed_bytes = 0;
  std::size_t chunks = 0;
  void* temp = nullptr;
  std::size_t temp_bytes = 0;
  void* const* compressed_ptrs = nullptr;
  std::size_t* compressed_bytes = nullptr;  ///< written
  nvcompStatus_t* statuses = nullptr;       ///< written
};

/// The device arrays of one batched decompress call ([chunks] each).
struct decompress_call {
  const void* const* compressed_ptrs = nullptr;
  const std::size_t* compressed_bytes = nullptr;
  const std::size_t* buffer_bytes = nullptr;  ///< room at each output pointer
  std::size_t* uncompressed_bytes = nullptr;  ///< written
  std::size_t chunks = 0;
  void* temp = nullptr;
  std::size_t temp_bytes = 0;
  void* const* uncompressed_ptrs = nullptr;
  nvcompStatus_t* statuses = nullptr;  ///< written
};

/// One nvCOMP codec with its options. Every call checks nvCOMP's returned status (throws
/// nvcomp_error); per-chunk statuses are the caller's to read.
class codec {
 public:
  codec(std::string name, std::string options)
      : name_{std::move(name)}, options_{std::move(options)} {}
  virtual ~codec() = default;
  codec(const codec&) = delete;
  codec& operator=(const codec&) = delete;

  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  [[nodiscard]] const std::string& options() const noexcept { return options_; }

  [[nodiscard]] virtual std::size_t max_compressed_bytes(std::size_t chunk_bytes) const = 0;
  [[nodiscard]] virtual alignments compress_alignments() const = 0;
  [[nodiscard]] virtual alignments decompress_alignments() const = 0;
  [[nodiscard]] virtual std::size_t compress_temp_bytes(std::size_t chunks, std::size_t max_chunk,
                                                        std::size_t total,
                                                        cudaStream_t stream) const = 0;
  [[nodiscard]] virtual std::size_t decompress_temp_bytes(std::size_t chunks, std::size_t max_chunk,
                                                          std::size_t total,
                                                          cudaStream_t stream) const = 0;
  virtual void compress(const compress_call& c, cudaStream_t stream) const = 0;
  virtual void decompress(const decompress_call& c, cudaStream_t stream) const = 0;

 private:
  std::string name_;
  std::string options_;
};

/// The codec of one nvCOMP API (Api: the option types and the batched functions, below).
template <class Api>
class batched_codec final : public codec {
 public:
  using compress_opts = typename Api::compress_opts;
  using decompress_opts = typename Api::decompress_opts;

  batched_codec(std::string name, std::string options, compress_opts c, decompress_opts d)
      : codec{std::move(name), std::move(options)}, c_{c}, d_{d} {}

  [[nodiscard]] std::size_t max_compressed_bytes(std::size_t chunk_bytes) const override {
    std::size_t out = 0;
    nvcomp_check(Api::max_output(chunk_bytes, c_, &out), call("CompressGetMaxOutputChunkSize"));
    return out;
  }
  [[nodiscard]] alignments compress_alignments() const override {
    nvcompAlignmentRequirements_t a{};
    nvcomp_check(Api::compress_alignments(c_, &a), call("CompressGetRequiredAlignments"));
    return {a.input, a.output, a.temp};
  }
  [[nodiscard]] alignments decompress_alignments() const override {
    nvcompAlignmentRequirements_t a{};
    nvcomp_check(Api::decompress_alignments(d_, &a), call("DecompressGetRequiredAlignments"));
    return {a.input, a.output, a.temp};
  }
  [[nodiscard]] std::size_t compress_temp_bytes(std::size_t chunks, std::size_t max_chunk,
                                                std::size_t total,
                                                cudaStream_t stream) const override {
    std::size_t bytes = 0;
    nvcomp_check(Api::compress_temp(chunks, max_chunk, c_, &bytes, total, stream),
                 call("CompressGetTempSize"));
    return bytes;
  }
  [[nodiscard]] std::size_t decompress_temp_bytes(std::size_t chunks, std::size_t max_chunk,
                                                  std::size_t total,
                                                  cudaStream_t stream) const override {
    std::size_t bytes = 0;
    nvcomp_check(Api::decompress_temp(chunks, max_chunk, d_, &bytes, total, stream),
                 call("DecompressGetTempSize"));
    return bytes;
  }
  void compress(const compress_call& a, cudaStream_t stream) const override {
    nvcomp_check(Api::compress(a.uncompressed_ptrs, a.uncompressed_bytes, a.max_uncompressed_bytes,
                               a.chunks, a.temp, a.temp_bytes, a.compressed_ptrs,
                               a.compressed_bytes, c_, a.statuses, stream),
                 call("CompressAsync"));
  }
  void decompress(const decompress_call& a, cudaStream_t stream) const override {
    nvcomp_check(Api::decompress(a.compressed_ptrs, a.compressed_bytes, a.buffer_bytes,
                                 a.uncompressed_bytes, a.chunks, a.temp, a.temp_bytes,
                                 a.uncompressed_ptrs, d_, a.statuses, stream),
                 call("DecompressAsync"));
  }

 private:
  static std::string call(const char* what) {
    return std::string{"nvcompBatched"} + Api::name + what;
  }
  compress_opts c_;
  decompress_opts d_;
};

// The batched functions of each nvCOMP 6 API, named alike (nvcomp/<codec>.h):
// nvcompBatched<Codec>CompressAsync and so on, so one macro spells each table.
#define SQUEEZE_NVCOMP_API(type, Codec)                                                      \
  struct type {                                                                              \
    static constexpr const char* name = #Codec;                                              \
    using compress_opts = nvcompBatched##Codec##CompressOpts_t;                              \
    using decompress_opts = nvcompBatched##Codec##DecompressOpts_t;                          \
    static constexpr auto compress_alignments =                                              \
        &nvcompBatched##Codec##CompressGetRequiredAlignments;                                \
    static constexpr auto decompress_alignments =                                            \
        &nvcompBatched##Codec##DecompressGetRequiredAlignments;                              \
    static constexpr auto max_output = &nvcompBatched##Codec##CompressGetMaxOutputChunkSize; \
    static constexpr auto compress_temp = &nvcompBatched##Codec##CompressGetTempSize;        \
    static constexpr auto decompress_temp = &nvcompBatched##Codec##DecompressGetTempSize;    \
    static constexpr auto compress = &nvcompBatched##Codec##CompressAsync;                   \
    static constexpr auto decompress = &nvcompBatched##Codec##DecompressAsync;               \
  };
SQUEEZE_NVCOMP_API(lz4_api, LZ4)
SQUEEZE_NVCOMP_API(gdeflate_api, Gdeflate)
SQUEEZE_NVCOMP_API(zstd_api, Zstd)
SQUEEZE_NVCOMP_API(ans_api, ANS)
SQUEEZE_NVCOMP_API(bitcomp_api, Bitcomp)
SQUEEZE_NVCOMP_API(cascaded_api, Cascaded)
#undef SQUEEZE_NVCOMP_API

/// The nvCOMP codecs measured, in order (nvcomp_codec makes them).
inline const std::vector<std::string>& nvcomp_codec_names() {
  static const std::vector<std::string> names{
      "bitcomp", "bitcomp-sparse", "cascaded", "cascaded-max", "ans", "lz4", "gdeflate", "zstd"};
  return names;
}

/// nvCOMP's unsigned integer type of an element size (the lossless integer view Bitcomp
/// and Cascaded take; floats are compressed as their bit patterns).
inline std::pair<nvcompType_t, const char*> integer_type(std::uint32_t element_bytes) {
  switch (element_bytes) {
    case 2: return {NVCOMP_TYPE_USHORT, "uint16"};
    case 4: return {NVCOMP_TYPE_UINT, "uint32"};
    case 8: return {NVCOMP_TYPE_ULONGLONG, "uint64"};
    default: return {NVCOMP_TYPE_UCHAR, "uint8"};
  }
}

/// The codec `name` (one of nvcomp_codec_names()) set up for data set d. Options are
/// nvCOMP's defaults except: the element type where the codec takes one; ANS's interleaved
/// states named on both sides (2, what its "auto" picks) so decompression may use its
/// specialized kernel; Cascaded's decompression told the mode and type it was compressed
/// with (its default, "unspecified", trades speed for generality).
inline std::unique_ptr<codec> nvcomp_codec(std::string_view name, const data_set& d) {
  const auto [int_type, int_name] = integer_type(d.element_bytes);
  if (name == "bitcomp" || name == "bitcomp-sparse") {
    auto c = nvcompBatchedBitcompCompressDefaultOpts;
    c.algorithm = name == "bitcomp" ? 0 : 1;
    c.data_type = int_type;
    c.mode = BITCOMP_LOSSLESS;
    return std::make_unique<batched_codec<bitcomp_api>>(
        std::string{name},
        std::string{"algorithm="} + (c.algorithm == 0 ? "0 (default)" : "1 (sparse)") +
            ", lossless, data_type=" + int_name,
        c, nvcompBatchedBitcompDecompressDefaultOpts);
  }
  if (name == "cascaded" || name == "cascaded-max") {
    auto c = nvcompBatchedCascadedCompressDefaultOpts;
    c.common_opts.data_type = int_type;
    c.common_opts.mode = NVCOMP_CASCADED_MODE_ASYMMETRIC;
    c.fine_grained_encoding_flags = NVCOMP_CASCADED_FINE_GRAINED_ENCODING_ALL;
    c.compression_level = name == "cascaded" ? 3 : 7;
    auto dd = nvcompBatchedCascadedDecompressDefaultOpts;
    dd.common_opts = c.common_opts;
    return std::make_unique<batched_codec<cascaded_api>>(
        std::string{name},
        std::string{"asymmetric mode (adaptive: delta/RLE/FOR + bitpack chosen per chunk), "
                    "compression_level="} +
            std::to_string(c.compression_level) +
            (name == "cascaded" ? " (default)" : " (highest)") + ", data_type=" + int_name,
        c, dd);
  }
  if (name == "ans") {
    auto c = nvcompBatchedANSCompressDefaultOpts;
    auto dd = nvcompBatchedANSDecompressDefaultOpts;
    const char* type = "char";
    if (d.floating && d.element_bytes == 4) {
      c.data_type = NVCOMP_TYPE_FLOAT32;
      type = "float32";
    } else if (d.floating && d.element_bytes == 2) {
      c.data_type = NVCOMP_TYPE_FLOAT16;
      type = "float16";
    } else {
      c.data_type = NVCOMP_TYPE_CHAR;
    }
    c.states_per_lane = 2;
    dd.data_type = c.data_type;
    dd.states_per_lane = 2;
    return std::make_unique<batched_codec<ans_api>>(
        "ans", std::string{"rANS, data_type="} + type + ", states_per_lane=2", c, dd);
  }
  if (name == "lz4") {
    return std::make_unique<batched_codec<lz4_api>>(
        "lz4", "defaults (data_type=char, no bitshuffle)", nvcompBatchedLZ4CompressDefaultOpts,
        nvcompBatchedLZ4DecompressDefaultOpts);
  }
  if (name == "gdeflate") {
    return std::make_unique<batched_codec<gdeflate_api>>(
        "gdeflate", "algorithm=1 (default: high throughput)",
        nvcompBatchedGdeflateCompressDefaultOpts, nvcompBatchedGdeflateDecompressDefaultOpts);
  }
  if (name == "zstd") {
    return std::make_unique<batched_codec<zstd_api>>("zstd", "defaults",
                                                     nvcompBatchedZstdCompressDefaultOpts,
                                                     nvcompBatchedZstdDecompressDefaultOpts);
  }
  throw std::invalid_argument{"unknown nvCOMP codec '" + std::string{name} + "'"};
}

// ---- kernels ----------------------------------------------------------------------------

namespace detail {

/// Job j (a warp each): chunk chunk_ids[j] of a packed store, bytes [offsets[c],
/// offsets[c + 1]), copied to stage + j · slot_bytes by xfer::warp_copy (exactly its bytes
/// from the store: whole edge granules only inside it); its length into stage_bytes[j].
SQUEEZE_KERNEL(256)
void gather_chunks_kernel(const std::byte* store, std::uint64_t store_bytes,
                          const std::uint64_t* offsets, const std::uint32_t* chunk_ids,
                          std::size_t jobs, std::byte* stage, std::size_t slot_bytes,
                          std::size_t* stage_bytes) {
  const std::size_t warp = (std::size_t{blockIdx.x} * blockDim.x + threadIdx.x) / warp_threads;
  const std::size_t warps = std::size_t{gridDim.x} * blockDim.x / warp_threads;
  const xfer::readable_range readable = xfer::readable_range::of(store, store_bytes);
  for (std::size_t j = warp; j < jobs; j += warps) {
    const std::uint32_t c = chunk_ids[j];
    const std::uint64_t begin = offsets[c];
    const std::uint64_t n = offsets[c + 1] - begin;
    xfer::warp_copy(stage + j * slot_bytes, store + begin, n, readable);
    if (threadIdx.x % warp_threads == 0) stage_bytes[j] = n;
  }
}

/// Job j (a warp each): bytes[j] bytes from src + j · src_stride to dst + dst_offsets[j]
/// (or dst + j · dst_stride when dst_offsets is null). Packs compressed chunks.
SQUEEZE_KERNEL(256)
void copy_chunks_kernel(std::byte* dst, const std::uint64_t* dst_offsets, std::size_t dst_stride,
                        const std::byte* src, std::size_t src_stride, const std::size_t* bytes,
                        std::size_t jobs) {
  const std::size_t warp = (std::size_t{blockIdx.x} * blockDim.x + threadIdx.x) / warp_threads;
  const std::size_t warps = std::size_t{gridDim.x} * blockDim.x / warp_threads;
  for (std::size_t j = warp; j < jobs; j += warps) {
    std::byte* to = dst + (dst_offsets != nullptr ? dst_offsets[j] : j * dst_stride);
    xfer::warp_copy(to, src + j * src_stride, bytes[j]);
  }
}

/// atomicMin of the first byte where a and b ([n], 16-byte aligned) differ into *first.
SQUEEZE_KERNEL(256)
void first_difference_kernel(const std::byte* a, const std::byte* b, std::size_t n,
                             unsigned long long* first) {
  const std::size_t granules = n / 16;
  const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
  const auto* ga = reinterpret_cast<const uint4*>(a);
  const auto* gb = reinterpret_cast<const uint4*>(b);
  for (std::size_t i = std::size_t{blockIdx.x} * blockDim.x + threadIdx.x; i < granules;
       i += stride) {
    const uint4 x = ga[i];
    const uint4 y = gb[i];
    if (x.x != y.x || x.y != y.y || x.z != y.z || x.w != y.w) {
      std::size_t k = 16 * i;
      while (a[k] == b[k]) ++k;
      atomicMin(first, static_cast<unsigned long long>(k));
    }
  }
  for (std::size_t k = 16 * granules + std::size_t{blockIdx.x} * blockDim.x + threadIdx.x; k < n;
       k += stride) {
    if (a[k] != b[k]) atomicMin(first, static_cast<unsigned long long>(k));
  }
}

inline unsigned warp_grid(std::size_t jobs) {
  return static_cast<unsigned>(
      std::clamp<std::size_t>(core::div_ceil<std::size_t>(jobs, 8), 1, std::size_t{1} << 20));
}

}  // namespace detail

// ---- results ----------------------------------------------------------------------------

/// One data set x row size x codec x chunking (the JSON record; see nvcomp_bench.cu).
struct record {
  std::string dataset;
  std::uint32_t element_bytes = 0;
  std::size_t row_bytes = 0;
  std::size_t rows = 0;
  std::size_t batch_rows = 0;
  std::string library;   ///< "squeeze" or "nvcomp"
  std::string codec;     ///< "ibp", "lz4", ...
  std::string chunking;  ///< "row" (one chunk per row) or "64KiB"
  std::size_t chunk_bytes = 0;
  std::optional<std::uint32_t> ibp_chunk_bytes;
  std::string options;
  std::string status = "ok";  ///< ok | error | wrong | skipped
  std::string message;
  std::optional<double> ratio;
  std::optional<std::uint64_t> compressed_bytes;
  std::optional<double> preprocess_gbps;
  std::optional<double> compress_gbps;
  std::optional<double> decompress_gbps;
  std::optional<double> delivered_gbps;
  std::optional<double> delivered_exact_gbps;
  std::optional<double> delivered_slots_gbps;
  std::string transport;
  std::optional<std::uint64_t> batch_chunks;
  std::optional<std::uint64_t> batch_fetched_bytes;
  std::optional<std::uint64_t> batch_slot_bytes;
  double plain_gbps = 0.0;
  std::optional<double> ratio_vs_ibp;
  std::optional<double> delivered_vs_ibp;
  std::optional<bool> wins_end_to_end;
  std::string gpu;

  [[nodiscard]] bool ok() const noexcept { return status == "ok"; }
  [[nodiscard]] std::string label() const {
    if (ibp_chunk_bytes) return codec + " C=" + std::to_string(*ibp_chunk_bytes);
    return codec + "/" + chunking;
  }
};

// ---- the study --------------------------------------------------------------------------

struct settings {
  std::vector<std::size_t> row_sizes{256, 1024, 4096};
  std::vector<std::uint32_t> ibp_chunks{1, 2, 4, 8};
  std::vector<std::string> nvcomp_codecs = nvcomp_codec_names();
  bool chunk_per_row = true;
  bool chunk_64k = true;
  bool ibp = true;
  std::size_t batch_rows = 0;  ///< 0: batch_bytes / S
  std::size_t batch_bytes = 32u << 20;
  core::timing_options timing{.warmup = 2, .repeats = 10};
  core::timing_options compress_timing{.warmup = 0, .repeats = 3};
  int sweep_steps = 16;  ///< thresholds - 1 (the sweep of Kamath et al.)
  std::uint64_t seed = 1;
};

/// Page-locked, mapped host memory reused across measurements (grows when needed).
class mapped_arena {
 public:
  std::byte* reserve(std::size_t bytes) {
    if (bytes > buffer_.size()) {
      buffer_ = {};
      buffer_ = xfer::allocate_mapped<std::byte>(std::max<std::size_t>(bytes + bytes / 8, 1));
    }
    return buffer_.data();
  }
  [[nodiscard]] std::byte* host() const noexcept { return buffer_.data(); }
  [[nodiscard]] const std::byte* device() const noexcept { return buffer_.device_data(); }

 private:
  core::pinned_buffer<std::byte> buffer_;
};

/// Uploads a host vector into a new device buffer on `stream`.
template <class T>
core::device_buffer<T> upload(const std::vector<T>& host, cudaStream_t stream) {
  core::device_buffer<T> d{std::max<std::size_t>(host.size(), 1)};
  if (!host.empty()) d.copy_from(std::span<const T>{host}, stream);
  return d;
}

/// Throws nvcomp_error naming the first failed chunk when any of the n statuses is not
/// nvcompSuccess. Synchronizes.
inline void check_statuses(const nvcompStatus_t* statuses, std::size_t n, const std::string& what,
                           cudaStream_t stream) {
  std::vector<nvcompStatus_t> host(n);
  SQUEEZE_CUDA_TRY(cudaMemcpyAsync(host.data(), statuses, n * sizeof(nvcompStatus_t),
                                   cudaMemcpyDeviceToHost, stream));
  SQUEEZE_CUDA_TRY(cudaStreamSynchronize(stream));
  std::size_t failed = 0;
  std::size_t first = n;
  for (std::size_t i = 0; i < n; ++i) {
    if (host[i] != nvcompSuccess) {
      ++failed;
      if (first == n) first = i;
    }
  }
  if (failed > 0) {
    throw nvcomp_error{what + ": " + std::to_string(failed) + " of " + std::to_string(n) +
                       " chunks failed; chunk " + std::to_string(first) + ": " +
                       status_text(host[first])};
  }
}

class study {
 public:
  explicit study(settings s) : s_{std::move(s)}, gpu_{core::query_device().name} {}

  [[nodiscard]] const std::string& gpu() const noexcept { return gpu_; }
  /// Whether some output differed from its reference (the program exits non-zero).
  [[nodiscard]] bool wrong() const noexcept { return wrong_; }

  /// Measures every row size x codec x chunking of `d`; `emit` gets each record as it is
  /// done (IBP's first, so the nvCOMP records carry their comparison with IBP).
  void run(const data_set& d, const std::function<void(const record&)>& emit) {
    core::device_buffer<std::byte> flat{std::max<std::size_t>(d.bytes.size(), 16)};
    flat.copy_from(std::span<const std::byte>{d.bytes}, stream_);
    std::byte* plain_host = plain_.reserve(d.bytes.size());
    std::memcpy(plain_host, d.bytes.data(), d.bytes.size());
    full_ = core::device_buffer<std::byte>{std::max<std::size_t>(d.bytes.size(), 16)};
    stream_.synchronize();
    for (const std::size_t s : s_.row_sizes) run_row_size(d, flat, s, emit);
    full_ = {};
  }

 private:
  struct case_data {
    const data_set* d = nullptr;
    const std::byte* rows = nullptr;  ///< device [n, s]
    std::size_t s = 0;
    std::size_t n = 0;
    std::size_t batch = 0;
    std::vector<std::uint32_t> indices;
    core::device_buffer<std::uint32_t> d_indices;
    core::device_buffer<std::byte> out;       ///< [batch, s]
    core::device_buffer<std::byte> expected;  ///< [batch, s], the plain gather's output
    double plain_gbps = 0.0;
    [[nodiscard]] std::size_t bytes() const noexcept { return n * s; }
    [[nodiscard]] std::size_t batch_bytes() const noexcept { return batch * s; }
  };

  record base(const case_data& c) const {
    record r;
    r.dataset = c.d->name;
    r.element_bytes = c.d->element_bytes;
    r.row_bytes = c.s;
    r.rows = c.n;
    r.batch_rows = c.batch;
    r.plain_gbps = c.plain_gbps;
    r.gpu = gpu_;
    return r;
  }

  /// Median ms of `work` (enqueued on stream_), L2 flushed before each run.
  template <class Work>
  double median_ms(core::timing_options t, Work&& work) {
    core::event_timer timer{stream_};
    return core::collect(t,
                         [&] {
                           l2_.flush(stream_);
                           timer.start();
                           work();
                           timer.stop();
                           return static_cast<double>(timer.elapsed_ms());
                         })
        .median_ms;
  }

  /// Throws verification_error when device buffers a and b ([n]) differ.
  void expect_equal(const std::byte* got, const std::byte* want, std::size_t n,
                    std::size_t row_bytes, const std::string& what) {
    SQUEEZE_CUDA_TRY(cudaMemsetAsync(first_.data(), 0xff, sizeof(unsigned long long), stream_));
    const auto blocks = static_cast<unsigned>(
        std::clamp<std::size_t>(core::div_ceil<std::size_t>(n / 16 + 1, 256), 1, 4096));
    detail::first_difference_kernel<<<blocks, 256, 0, stream_>>>(got, want, n, first_.data());
    SQUEEZE_CHECK_LAUNCH();
    unsigned long long first = 0;
    SQUEEZE_CUDA_TRY(
        cudaMemcpyAsync(&first, first_.data(), sizeof first, cudaMemcpyDeviceToHost, stream_));
    stream_.synchronize();
    if (first != ~0ull) {
      throw verification_error{what + ": byte " + std::to_string(first) + " (row " +
                               std::to_string(first / row_bytes) + ") differs"};
    }
  }

  void expect_ok(const core::device_buffer<status>& st, const std::string& what) {
    status host{};
    SQUEEZE_CUDA_TRY(
        cudaMemcpyAsync(&host, st.data(), sizeof host, cudaMemcpyDeviceToHost, stream_));
    stream_.synchronize();
    if (host != status::ok) throw verification_error{what + " reported " + to_string(host)};
  }

  void run_row_size(const data_set& d, const core::device_buffer<std::byte>& flat, std::size_t s,
                    const std::function<void(const record&)>& emit) {
    case_data c;
    c.d = &d;
    c.rows = flat.data();
    c.s = s;
    c.n = d.bytes.size() / s;
    if (s % d.element_bytes != 0 || s % 16 != 0 || c.n < 2 || c.n > UINT32_MAX) {
      record r = base(c);
      r.library = "-";
      r.codec = "-";
      r.status = "skipped";
      r.message = "rows of " + std::to_string(s) + " B: need a multiple of 16 B and of the " +
                  std::to_string(d.element_bytes) + "-byte element, and 2 to 2^32 - 1 rows (" +
                  std::to_string(c.n) + ")";
      emit(r);
      return;
    }
    c.batch = std::min(
        c.n, s_.batch_rows > 0 ? s_.batch_rows : std::max<std::size_t>(1, s_.batch_bytes / s));
    c.indices = random_batch(c.n, c.batch, s_.seed * 1000003u + s);
    c.d_indices = upload(c.indices, stream_);
    c.out = core::device_buffer<std::byte>{c.batch_bytes()};
    c.expected = core::device_buffer<std::byte>{c.batch_bytes()};

    record plain = base(c);
    plain.library = "squeeze";
    plain.codec = "plain";
    plain.chunking = "row";
    plain.chunk_bytes = c.s;
    plain.transport = "xfer";
    plain.options = "uncompressed rows, xfer::gather_rows";
    guarded(plain, "plain gather", [&] { measure_plain(c); });
    if (plain.ok()) {
      plain.plain_gbps = c.plain_gbps;
      plain.ratio = 1.0;
      plain.compressed_bytes = c.bytes();
      plain.delivered_gbps = c.plain_gbps;
      plain.batch_chunks = c.batch;
      plain.batch_fetched_bytes = c.batch_bytes();
    }
    emit(plain);
    if (!plain.ok()) return;  // no reference for the others
    std::vector<record> ibp_records;
    if (s_.ibp) {
      for (const std::uint32_t chunk : s_.ibp_chunks) {
        record r = measure_ibp(c, chunk);
        ibp_records.push_back(r);
        emit(r);
      }
    }
    // IBP's reference for the nvCOMP records: its fastest delivery among the chunk sizes
    // that compress at all, and its best ratio.
    const record* best = nullptr;
    std::optional<double> best_ratio;
    for (const record& r : ibp_records) {
      if (!r.ok() || !r.ratio || *r.ratio <= 1.0) continue;
      if (best == nullptr || *r.delivered_gbps > *best->delivered_gbps) best = &r;
      best_ratio = std::max(best_ratio.value_or(0.0), *r.ratio);
    }
    for (const std::string& name : s_.nvcomp_codecs) {
      for (const bool per_row : {true, false}) {
        if (per_row ? !s_.chunk_per_row : !s_.chunk_64k) continue;
        record r = measure_nvcomp(c, name, per_row);
        if (r.ok() && best != nullptr) {
          r.ratio_vs_ibp = *r.ratio / *best_ratio;
          r.delivered_vs_ibp = *r.delivered_gbps / *best->delivered_gbps;
          if (*r.ratio_vs_ibp >= 1.5) r.wins_end_to_end = *r.delivered_vs_ibp > 1.0;
        }
        emit(r);
      }
    }
  }

  /// The baseline: xfer::gather_rows of the uncompressed rows from mapped host memory,
  /// checked on the host against the source rows; its output is every later reference.
  void measure_plain(case_data& c) {
    core::device_buffer<status> st{1};
    xfer::gather_args<std::uint32_t> a;
    a.dst = c.out.data();
    a.dst_stride = c.s;
    a.src = plain_.device();
    a.src_stride = c.s;
    a.src_rows = c.n;
    a.row_bytes = c.s;
    a.indices = c.d_indices.data();
    a.count = c.batch;
    a.status_out = st.data();
    SQUEEZE_CUDA_TRY(cudaMemsetAsync(st.data(), 0, sizeof(status), stream_));
    c.out.fill_bytes(0xA5, stream_);
    xfer::gather_rows(a, stream_);
    std::vector<std::byte> got(c.batch_bytes());
    c.out.copy_to(std::span<std::byte>{got}, stream_);
    expect_ok(st, "plain gather");
    for (std::size_t i = 0; i < c.batch; ++i) {
      if (std::memcmp(got.data() + i * c.s, c.d->bytes.data() + std::size_t{c.indices[i]} * c.s,
                      c.s) != 0) {
        throw verification_error{"plain gather: output row " + std::to_string(i) +
                                 " differs from source row " + std::to_string(c.indices[i])};
      }
    }
    SQUEEZE_CUDA_TRY(cudaMemcpyAsync(c.expected.data(), c.out.data(), c.batch_bytes(),
                                     cudaMemcpyDeviceToDevice, stream_));
    const double ms = median_ms(s_.timing, [&] { xfer::gather_rows(a, stream_); });
    expect_ok(st, "plain gather (timed runs)");
    c.plain_gbps = static_cast<double>(c.batch_bytes()) / (ms * 1e6);
  }

  /// Runs `body`, turning its failure into the record's status: verification_error ->
  /// wrong (and the program's exit status), anything else -> error.
  template <class Body>
  void guarded(record& r, const char* stage, Body&& body) {
    try {
      body();
    } catch (const verification_error& e) {
      r.status = "wrong";
      r.message = std::string{stage} + ": " + e.what();
      wrong_ = true;
    } catch (const std::exception& e) {
      r.status = "error";
      r.message = std::string{stage} + ": " + e.what();
      static_cast<void>(cudaStreamSynchronize(stream_));
      static_cast<void>(cudaGetLastError());
    }
  }

  record measure_ibp(case_data& c, std::uint32_t chunk) {
    record r = base(c);
    r.library = "squeeze";
    r.codec = "ibp";
    r.chunking = "row";
    r.chunk_bytes = c.s;
    r.ibp_chunk_bytes = chunk;
    r.transport = "ibp";
    const double bytes = static_cast<double>(c.bytes());
    guarded(r, "ibp", [&] {
      ibp::sweep_result sweep;
      const double pre_ms =
          core::time_host({.warmup = 1, .repeats = 3}, [&] {
            const auto counts =
                ibp::count_set_bits(c.rows, c.n, static_cast<std::uint32_t>(c.s), stream_);
            sweep =
                ibp::sweep_threshold_on_gpu(c.rows, c.n, counts, chunk, s_.sweep_steps, stream_);
          }).median_ms;
      r.preprocess_gbps = bytes / (pre_ms * 1e6);
      r.options = "C=" + std::to_string(chunk) + ", T=" + std::to_string(sweep.threshold) + " of " +
                  std::to_string(c.n) + " rows (sweep of " + std::to_string(s_.sweep_steps + 1) +
                  " thresholds)";
      const ibp::device_codebook cb{sweep.best, stream_};
      ibp::device_set set;
      const double comp_ms =
          core::time_host({.warmup = 1, .repeats = s_.compress_timing.repeats}, [&] {
            set = ibp::compress_condensed(c.rows, c.n, cb.ref(), stream_);
            stream_.synchronize();
          }).median_ms;
      r.compress_gbps = bytes / (comp_ms * 1e6);
      r.compressed_bytes = set.data_bytes;
      r.ratio = bytes / static_cast<double>(std::max<std::uint64_t>(set.data_bytes, 1));

      core::device_buffer<status> st{1};
      ibp::gather_args<std::uint32_t> a;
      a.dst_stride = c.s;
      a.data_bytes = set.data_bytes;
      a.offsets = set.offsets.data();
      a.rows = c.n;
      a.codebook = cb.ref();
      a.status_out = st.data();
      const auto verified = [&](const char* what, core::device_buffer<std::byte>& out,
                                const std::byte* want, std::size_t n) {
        SQUEEZE_CUDA_TRY(cudaMemsetAsync(st.data(), 0, sizeof(status), stream_));
        out.fill_bytes(0xA5, stream_);
        ibp::gather_rows(a, stream_);
        expect_ok(st, what);
        expect_equal(out.data(), want, n, c.s, what);
      };

      // Decompression of the whole set, compressed data in device memory.
      std::vector<std::uint32_t> order(c.n);
      std::iota(order.begin(), order.end(), 0u);
      const auto all = upload(order, stream_);
      a.dst = full_.data();
      a.data = set.data.data();
      a.indices = all.data();
      a.count = c.n;
      verified("ibp decompress (device-resident)", full_, c.rows, c.bytes());
      r.decompress_gbps =
          bytes / (median_ms(s_.timing, [&] { ibp::gather_rows(a, stream_); }) * 1e6);
      expect_ok(st, "ibp decompress (timed runs)");

      // Delivery of the batch from mapped host memory.
      std::byte* store = ibp_store_.reserve(set.data_bytes);
      SQUEEZE_CUDA_TRY(
          cudaMemcpyAsync(store, set.data.data(), set.data_bytes, cudaMemcpyDeviceToHost, stream_));
      std::vector<std::uint64_t> offsets(c.n + 1);
      set.offsets.copy_to(std::span<std::uint64_t>{offsets}, stream_);
      stream_.synchronize();
      std::uint64_t fetched = 0;
      for (const std::uint32_t i : c.indices) fetched += offsets[i + 1] - offsets[i];
      r.batch_chunks = c.batch;
      r.batch_fetched_bytes = fetched;
      a.dst = c.out.data();
      a.data = ibp_store_.device();
      a.indices = c.d_indices.data();
      a.count = c.batch;
      verified("ibp delivery", c.out, c.expected.data(), c.batch_bytes());
      r.delivered_gbps = static_cast<double>(c.batch_bytes()) /
                         (median_ms(s_.timing, [&] { ibp::gather_rows(a, stream_); }) * 1e6);
      expect_ok(st, "ibp delivery (timed runs)");
    });
    return r;
  }

  record measure_nvcomp(case_data& c, const std::string& name, bool per_row) {
    record r = base(c);
    r.library = "nvcomp";
    r.codec = name;
    r.chunking = per_row ? "row" : "64KiB";
    const std::size_t rows_per_chunk = per_row ? 1 : std::max<std::size_t>(1, 65536 / c.s);
    r.chunk_bytes = rows_per_chunk * c.s;
    std::unique_ptr<codec> k;
    guarded(r, "setup", [&] {
      k = nvcomp_codec(name, *c.d);
      r.options = k->options();
    });
    if (!k) return r;
    guarded(r, "nvcomp", [&] { measure_codec(c, *k, rows_per_chunk, r); });
    return r;
  }

  void measure_codec(case_data& c, const codec& k, std::size_t rows_per_chunk, record& r) {
    const std::size_t chunk_bytes = rows_per_chunk * c.s;
    const std::size_t total = c.bytes();
    const std::size_t chunks = core::div_ceil(c.n, rows_per_chunk);
    const auto size_of = [&](std::size_t j) {
      return std::min(rows_per_chunk, c.n - j * rows_per_chunk) * c.s;
    };
    const alignments ca = k.compress_alignments();
    const alignments da = k.decompress_alignments();
    if (chunk_bytes % ca.input != 0 || c.s % da.output != 0 || ca.output > 4096 ||
        da.input > 4096) {
      throw nvcomp_error{"alignment: chunks of " + std::to_string(chunk_bytes) +
                         " B cannot meet input " + std::to_string(ca.input) + " / output " +
                         std::to_string(da.output) + " B"};
    }

    // Compression, input and output in device memory.
    const std::size_t max_out = k.max_compressed_bytes(chunk_bytes);
    const std::size_t stride =
        core::align_up<std::size_t>(max_out, std::max({std::size_t{16}, ca.output, da.input}));
    core::device_buffer<std::byte> comp{chunks * stride};
    std::vector<const void*> in_ptrs(chunks);
    std::vector<std::size_t> in_bytes(chunks);
    std::vector<void*> comp_ptrs(chunks);
    for (std::size_t j = 0; j < chunks; ++j) {
      in_ptrs[j] = c.rows + j * chunk_bytes;
      in_bytes[j] = size_of(j);
      comp_ptrs[j] = comp.data() + j * stride;
    }
    const auto d_in_ptrs = upload(in_ptrs, stream_);
    const auto d_in_bytes = upload(in_bytes, stream_);
    const auto d_comp_ptrs = upload(comp_ptrs, stream_);
    core::device_buffer<std::size_t> comp_bytes{chunks};
    core::device_buffer<nvcompStatus_t> statuses{chunks};
    core::device_buffer<std::byte> temp{
        std::max<std::size_t>(k.compress_temp_bytes(chunks, chunk_bytes, total, stream_), 1)};
    compress_call cc;
    cc.uncompressed_ptrs = d_in_ptrs.data();
    cc.uncompressed_bytes = d_in_bytes.data();
    cc.max_uncompressed_bytes = chunk_bytes;
    cc.chunks = chunks;
    cc.temp = temp.data();
    cc.temp_bytes = temp.bytes();
    cc.compressed_ptrs = d_comp_ptrs.data();
    cc.compressed_bytes = comp_bytes.data();
    cc.statuses = statuses.data();
    k.compress(cc, stream_);
    check_statuses(statuses.data(), chunks, "compress", stream_);
    const double comp_ms = median_ms(s_.compress_timing, [&] { k.compress(cc, stream_); });
    check_statuses(statuses.data(), chunks, "compress (timed runs)", stream_);
    r.compress_gbps = static_cast<double>(total) / (comp_ms * 1e6);
    std::vector<std::size_t> sizes(chunks);
    comp_bytes.copy_to(std::span<std::size_t>{sizes}, stream_);
    stream_.synchronize();
    std::vector<std::uint64_t> offsets(chunks + 1, 0);
    for (std::size_t j = 0; j < chunks; ++j) {
      if (sizes[j] > max_out)
        throw nvcomp_error{"compress: chunk " + std::to_string(j) + " reports " +
                           std::to_string(sizes[j]) + " B, above the maximum " +
                           std::to_string(max_out)};
      offsets[j + 1] = offsets[j] + sizes[j];
    }
    const std::uint64_t packed = offsets[chunks];
    const std::size_t largest = *std::max_element(sizes.begin(), sizes.end());
    r.compressed_bytes = packed;
    r.ratio = static_cast<double>(total) / static_cast<double>(std::max<std::uint64_t>(packed, 1));

    // Decompression of the whole set from device memory.
    {
      std::vector<void*> out_ptrs(chunks);
      for (std::size_t j = 0; j < chunks; ++j) out_ptrs[j] = full_.data() + j * chunk_bytes;
      const auto d_out_ptrs = upload(out_ptrs, stream_);
      core::device_buffer<std::size_t> actual{chunks};
      core::device_buffer<std::byte> dtemp{
          std::max<std::size_t>(k.decompress_temp_bytes(chunks, chunk_bytes, total, stream_), 1)};
      decompress_call dc;
      dc.compressed_ptrs = d_comp_ptrs.data();
      dc.compressed_bytes = comp_bytes.data();
      dc.buffer_bytes = d_in_bytes.data();
      dc.uncompressed_bytes = actual.data();
      dc.chunks = chunks;
      dc.temp = dtemp.data();
      dc.temp_bytes = dtemp.bytes();
      dc.uncompressed_ptrs = d_out_ptrs.data();
      dc.statuses = statuses.data();
      full_.fill_bytes(0xA5, stream_);
      k.decompress(dc, stream_);
      check_statuses(statuses.data(), chunks, "decompress", stream_);
      std::vector<std::size_t> got(chunks);
      actual.copy_to(std::span<std::size_t>{got}, stream_);
      stream_.synchronize();
      for (std::size_t j = 0; j < chunks; ++j) {
        if (got[j] != in_bytes[j])
          throw verification_error{"decompress: chunk " + std::to_string(j) + " gave " +
                                   std::to_string(got[j]) + " B of " + std::to_string(in_bytes[j])};
      }
      expect_equal(full_.data(), c.rows, total, c.s, "decompress (device-resident)");
      const double ms = median_ms(s_.timing, [&] { k.decompress(dc, stream_); });
      check_statuses(statuses.data(), chunks, "decompress (timed runs)", stream_);
      r.decompress_gbps = static_cast<double>(total) / (ms * 1e6);
    }

    // The stores in mapped host memory: packed (exact) and in fixed slots.
    const std::size_t slot =
        core::align_up<std::size_t>(largest, std::max<std::size_t>(16, da.input));
    const auto d_offsets = upload(offsets, stream_);
    {
      core::device_buffer<std::byte> staging{
          std::max<std::size_t>(std::max<std::size_t>(packed, chunks * slot), 16)};
      detail::copy_chunks_kernel<<<detail::warp_grid(chunks), 256, 0, stream_>>>(
          staging.data(), d_offsets.data(), 0, comp.data(), stride, comp_bytes.data(), chunks);
      SQUEEZE_CHECK_LAUNCH();
      SQUEEZE_CUDA_TRY(cudaMemcpyAsync(exact_store_.reserve(packed), staging.data(), packed,
                                       cudaMemcpyDeviceToHost, stream_));
      staging.fill_bytes(0, stream_);
      detail::copy_chunks_kernel<<<detail::warp_grid(chunks), 256, 0, stream_>>>(
          staging.data(), nullptr, slot, comp.data(), stride, comp_bytes.data(), chunks);
      SQUEEZE_CHECK_LAUNCH();
      SQUEEZE_CUDA_TRY(cudaMemcpyAsync(slot_store_.reserve(chunks * slot), staging.data(),
                                       chunks * slot, cudaMemcpyDeviceToHost, stream_));
      stream_.synchronize();
    }
    comp = {};

    // Delivery of the batch: the plan (host, untimed), then the timed steps.
    std::vector<std::uint32_t> jobs_chunks;
    std::vector<std::uint32_t> staged;
    if (rows_per_chunk == 1) {
      jobs_chunks = c.indices;
    } else {
      chunk_plan p = plan_chunks(c.indices, rows_per_chunk);
      jobs_chunks = std::move(p.chunks);
      staged = std::move(p.staged);
    }
    const std::size_t jobs = jobs_chunks.size();
    core::device_buffer<std::byte> chunk_out{rows_per_chunk == 1 ? 16 : jobs * chunk_bytes};
    std::vector<void*> stage_ptrs(jobs);
    std::vector<void*> out_ptrs(jobs);
    std::vector<std::size_t> out_bytes(jobs);
    std::vector<std::size_t> known_bytes(jobs);
    std::uint64_t fetched = 0;
    core::device_buffer<std::byte> stage{jobs * slot};
    for (std::size_t j = 0; j < jobs; ++j) {
      stage_ptrs[j] = stage.data() + j * slot;
      out_ptrs[j] =
          rows_per_chunk == 1 ? c.out.data() + j * c.s : chunk_out.data() + j * chunk_bytes;
      out_bytes[j] = size_of(jobs_chunks[j]);
      known_bytes[j] = sizes[jobs_chunks[j]];
      fetched += sizes[jobs_chunks[j]];
    }
    r.batch_chunks = jobs;
    r.batch_fetched_bytes = fetched;
    r.batch_slot_bytes = jobs * slot;
    const auto d_jobs = upload(jobs_chunks, stream_);
    const auto d_staged = upload(staged, stream_);
    const auto d_stage_ptrs = upload(stage_ptrs, stream_);
    const auto d_out_ptrs = upload(out_ptrs, stream_);
    const auto d_out_bytes = upload(out_bytes, stream_);
    const auto d_known_bytes = upload(known_bytes, stream_);
    core::device_buffer<std::size_t> stage_bytes{jobs};
    core::device_buffer<std::size_t> actual{jobs};
    core::device_buffer<nvcompStatus_t> job_statuses{jobs};
    core::device_buffer<status> xst{1};
    const std::size_t batch_total =
        std::accumulate(out_bytes.begin(), out_bytes.end(), std::size_t{0});
    core::device_buffer<std::byte> dtemp{
        std::max<std::size_t>(k.decompress_temp_bytes(jobs, chunk_bytes, batch_total, stream_), 1)};

    for (const bool exact : {true, false}) {
      decompress_call dc;
      dc.compressed_ptrs = d_stage_ptrs.data();
      dc.compressed_bytes = exact ? stage_bytes.data() : d_known_bytes.data();
      dc.buffer_bytes = d_out_bytes.data();
      dc.uncompressed_bytes = actual.data();
      dc.chunks = jobs;
      dc.temp = dtemp.data();
      dc.temp_bytes = dtemp.bytes();
      dc.uncompressed_ptrs = d_out_ptrs.data();
      dc.statuses = job_statuses.data();
      xfer::gather_args<std::uint32_t> slots;
      slots.dst = stage.data();
      slots.dst_stride = slot;
      slots.src = slot_store_.device();
      slots.src_stride = slot;
      slots.src_rows = chunks;
      slots.row_bytes = slot;
      slots.indices = d_jobs.data();
      slots.count = jobs;
      slots.status_out = xst.data();
      xfer::gather_args<std::uint32_t> rows;
      rows.dst = c.out.data();
      rows.dst_stride = c.s;
      rows.src = chunk_out.data();
      rows.src_stride = c.s;
      rows.src_rows = jobs * rows_per_chunk;
      rows.row_bytes = c.s;
      rows.indices = d_staged.data();
      rows.count = c.batch;
      rows.status_out = xst.data();
      const auto deliver = [&] {
        if (exact) {
          detail::gather_chunks_kernel<<<detail::warp_grid(jobs), 256, 0, stream_>>>(
              exact_store_.device(), packed, d_offsets.data(), d_jobs.data(), jobs, stage.data(),
              slot, stage_bytes.data());
          SQUEEZE_CHECK_LAUNCH();
        } else {
          xfer::gather_rows(slots, stream_);
        }
        k.decompress(dc, stream_);
        if (rows_per_chunk > 1) xfer::gather_rows(rows, stream_);
      };
      const std::string what = std::string{"delivery ("} + (exact ? "exact" : "slots") + ")";
      SQUEEZE_CUDA_TRY(cudaMemsetAsync(xst.data(), 0, sizeof(status), stream_));
      stage.fill_bytes(0xA5, stream_);
      c.out.fill_bytes(0xA5, stream_);
      chunk_out.fill_bytes(0xA5, stream_);
      deliver();
      check_statuses(job_statuses.data(), jobs, what, stream_);
      expect_ok(xst, what + " gather");
      expect_equal(c.out.data(), c.expected.data(), c.batch_bytes(), c.s, what);
      const double ms = median_ms(s_.timing, deliver);
      check_statuses(job_statuses.data(), jobs, what + " (timed runs)", stream_);
      expect_ok(xst, what + " gather (timed runs)");
      const double gbps = static_cast<double>(c.batch_bytes()) / (ms * 1e6);
      (exact ? r.delivered_exact_gbps : r.delivered_slots_gbps) = gbps;
    }
    const bool exact_wins = *r.delivered_exact_gbps >= *r.delivered_slots_gbps;
    r.delivered_gbps = exact_wins ? *r.delivered_exact_gbps : *r.delivered_slots_gbps;
    r.transport = exact_wins ? "exact" : "slots";
  }

  settings s_;
  std::string gpu_;
  core::stream stream_;
  l2_flusher l2_;
  mapped_arena plain_;
  mapped_arena ibp_store_;
  mapped_arena exact_store_;
  mapped_arena slot_store_;
  core::device_buffer<std::byte> full_;  ///< decompression of the whole set
  core::device_buffer<unsigned long long> first_{1};
  bool wrong_ = false;
};

}  // namespace squeeze::bench::nvcomp_study
