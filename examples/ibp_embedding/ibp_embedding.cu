// SPDX-License-Identifier: Apache-2.0
// ibp_embedding: a DLRM server's embedding lookups through a compressed GPU cache.
//
// An embedding table of N rows stays in host memory; a GPU cache of a fixed byte budget
// holds the hottest rows. Lookups follow a Zipf distribution over the ids (a few rows are
// asked for most of the time). Three ways to serve a batch, timed on the same batches:
//
//   plain        every row read from host memory (xfer::gather_rows), no cache
//   cache        the budget filled with raw rows; misses read raw from host memory
//   ibp cache    the budget filled with IBP-compressed rows (more of them fit); misses read
//                compressed from host memory; hits and misses decoded by the warp decoder
//
//   ibp_embedding [rows] [dim] [batch] [cache %] [zipf alpha]
//   ibp_embedding table.npy [batch] [cache %] [zipf alpha]
//   defaults: 2000000 rows of 128 float32 (512 B, the DLRM rows of Kamath et al., EuroSys
//   2026), batches of 16384 lookups, a cache of 10 % of the table, alpha 1.05
//
// A .npy table (2-d, any dtype: a row is shape[1] items) replaces the synthetic one, whose
// rows are N(0, 0.05) floats, like trained embedding weights. Preprocessing and
// compression run on the GPU straight from host memory. The program checks that the
// three ways deliver the same bytes and prints hit rates and time per batch.
#include <squeeze/core.hpp>
#include <squeeze/ibp/cache.cuh>
#include <squeeze/ibp/compress.cuh>
#include <squeeze/ibp/gather.cuh>
#include <squeeze/io/npy.hpp>
#include <squeeze/xfer.cuh>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "common/gpu.hpp"

namespace core = squeeze::core;
namespace ibp = squeeze::ibp;
namespace xfer = squeeze::xfer;

namespace {

struct table {
  bool from_npy = false;
  std::size_t rows = 0;
  std::uint32_t row_bytes = 0;
  core::pinned_buffer<std::byte> bytes;  // mapped host memory
};

table load_table(int argc, char** argv) {
  table t;
  const std::string first = argc > 1 ? argv[1] : "";
  if (first.size() > 4 && first.substr(first.size() - 4) == ".npy") {
    const auto npy = squeeze::io::read_npy(first);
    t.from_npy = true;
    SQUEEZE_EXPECTS(npy.shape.size() == 2, "ibp_embedding: the .npy table must be 2-d");
    t.rows = npy.rows();
    t.row_bytes = static_cast<std::uint32_t>(npy.row_bytes());
    t.bytes = xfer::allocate_mapped<std::byte>(npy.data.size());
    std::copy(npy.data.begin(), npy.data.end(), t.bytes.data());
    std::printf("table: %s, %zu rows of %u B (%s)\n", first.c_str(), t.rows, t.row_bytes,
                npy.descr.c_str());
    return t;
  }
  t.rows = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 2'000'000;
  const std::size_t dim = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 128;
  t.row_bytes = static_cast<std::uint32_t>(dim * sizeof(float));
  t.bytes = xfer::allocate_mapped<std::byte>(t.rows * t.row_bytes);
  std::mt19937_64 rng{11};
  std::normal_distribution<float> normal{0.0f, 0.05f};
  for (std::size_t i = 0; i < t.rows * dim; ++i) {
    const float v = normal(rng);
    std::memcpy(t.bytes.data() + 4 * i, &v, 4);
  }
  std::printf("table: synthetic, %zu rows of %zu float32 N(0, 0.05)\n", t.rows, dim);
  return t;
}

/// Zipf(alpha) ids over `rows`: rank k (0 = hottest) maps to a fixed random id.
class zipf_ids {
 public:
  zipf_ids(std::size_t rows, double alpha, std::uint64_t seed) : cdf_(rows), id_of_rank_(rows) {
    double sum = 0;
    for (std::size_t k = 0; k < rows; ++k) cdf_[k] = sum += std::pow(double(k + 1), -alpha);
    for (double& c : cdf_) c /= sum;
    std::iota(id_of_rank_.begin(), id_of_rank_.end(), std::uint64_t{0});
    std::shuffle(id_of_rank_.begin(), id_of_rank_.end(), std::mt19937_64{seed});
  }
  template <class Rng>
  std::int64_t operator()(Rng& rng) {
    const double u = std::uniform_real_distribution<double>{0.0, 1.0}(rng);
    const auto k =
        static_cast<std::size_t>(std::lower_bound(cdf_.begin(), cdf_.end(), u) - cdf_.begin());
    return static_cast<std::int64_t>(id_of_rank_[std::min(k, cdf_.size() - 1)]);
  }
  /// Ids from the hottest down.
  [[nodiscard]] const std::vector<std::uint64_t>& by_heat() const { return id_of_rank_; }

 private:
  std::vector<double> cdf_;
  std::vector<std::uint64_t> id_of_rank_;
};

}  // namespace

int main(int argc, char** argv) try {
  const auto presence = core::detect_devices();
  if (!presence.present()) return squeeze_examples::exit_without_gpu("ibp_embedding", presence);
  std::printf("GPU: %s\n", core::describe(core::query_device()).c_str());
  table t = load_table(argc, argv);
  // After a .npy table there is no [dim]: the other arguments move up by one.
  const int at = t.from_npy ? 2 : 3;
  const std::size_t batch = argc > at ? std::strtoull(argv[at], nullptr, 10) : 16'384;
  const double cache_percent = argc > at + 1 ? std::strtod(argv[at + 1], nullptr) : 10.0;
  const double alpha = argc > at + 2 ? std::strtod(argv[at + 2], nullptr) : 1.05;
  const std::size_t batches = 100;
  SQUEEZE_EXPECTS(t.rows > 0 && t.row_bytes > 0 && batch > 0, "ibp_embedding: empty table");
  SQUEEZE_EXPECTS(cache_percent > 0 && cache_percent <= 100, "cache % must be in (0, 100]");
  const std::uint32_t l = t.row_bytes;
  const std::size_t table_bytes = t.rows * l;

  // Preprocess and compress once, on the GPU, straight from host memory.
  core::stream stream;
  const std::uint32_t chunk = l % 4 == 0 ? 4 : 1;
  ibp::codebook host_cb;
  ibp::device_codebook on_gpu;
  ibp::device_set compressed;
  ibp::compressed_set host_set;
  const double prep_ms = core::host_ms([&] {
    const auto counts = ibp::count_set_bits(t.bytes.device_data(), t.rows, l, stream);
    host_cb =
        ibp::sweep_threshold_on_gpu(t.bytes.device_data(), t.rows, counts, chunk, 16, stream).best;
    on_gpu = ibp::device_codebook{host_cb, stream};
    compressed = ibp::compress_condensed(t.bytes.device_data(), t.rows, on_gpu.ref(), stream);
    host_set = ibp::to_host(compressed, l, stream);
  });
  const ibp::codebook_ref cb = on_gpu.ref();
  const double saved = 1.0 - double(host_set.data.size()) / double(table_bytes);
  std::printf("preprocessed and compressed %.1f MB in %.0f ms: %.1f %% saved\n",
              double(table_bytes) / 1e6, prep_ms, 100.0 * saved);

  // Misses: the compressed rows in mapped host memory, offsets on the GPU.
  auto host_data = xfer::allocate_mapped<std::byte>(host_set.data.size());
  std::copy(host_set.data.begin(), host_set.data.end(), host_data.data());
  // The raw baseline: the same table seen as a set of raw rows (offsets r * L).
  ibp::compressed_set raw_set;
  raw_set.kind = ibp::layout::condensed;
  raw_set.rows = t.rows;
  raw_set.data.assign(t.bytes.data(), t.bytes.data() + table_bytes);
  raw_set.offsets.resize(t.rows + 1);
  for (std::size_t r = 0; r <= t.rows; ++r) raw_set.offsets[r] = r * l;
  raw_set.raw.assign((t.rows + 31) / 32, ~0u);
  core::device_buffer<std::uint64_t> raw_offsets{t.rows + 1};
  raw_offsets.copy_from(std::span<const std::uint64_t>{raw_set.offsets}, stream);

  // Two caches of the same budget, filled hottest first.
  zipf_ids ids{t.rows, alpha, 5};
  const auto budget = static_cast<std::size_t>(double(table_bytes) * cache_percent / 100.0);
  ibp::compressed_cache raw_cache{budget}, ibp_cache{budget};
  ibp::codebook none;  // all-zero mask: every row raw (the raw set's codebook)
  none.tensor_bytes = l;
  none.chunk_bytes = chunk;
  none.mask.assign(l, std::byte{0});
  none.bitval.assign(l, std::byte{0});
  raw_cache.insert(raw_set, none, ids.by_heat());
  ibp_cache.insert(host_set, host_cb, ids.by_heat());
  std::printf("cache budget %.1f MB (%.0f %% of the table): %zu raw rows, %zu compressed rows\n",
              double(budget) / 1e6, cache_percent, raw_cache.rows(), ibp_cache.rows());
  const ibp::device_codebook none_on_gpu{none, stream};

  // The batches, drawn once.
  std::mt19937_64 rng{9};
  std::vector<std::int64_t> lookups(batches * batch);
  for (auto& x : lookups) x = ids(rng);
  core::device_buffer<std::int64_t> d_lookups{lookups.size()};
  d_lookups.copy_from(std::span<const std::int64_t>{lookups}, stream);

  core::device_buffer<std::byte> out[3] = {core::device_buffer<std::byte>{batch * l},
                                           core::device_buffer<std::byte>{batch * l},
                                           core::device_buffer<std::byte>{batch * l}};
  core::device_buffer<squeeze::status> st{1};
  core::device_buffer<unsigned long long> hits{2};
  SQUEEZE_CUDA_TRY(cudaMemsetAsync(st.data(), 0, sizeof(squeeze::status), stream));
  SQUEEZE_CUDA_TRY(cudaMemsetAsync(hits.data(), 0, hits.bytes(), stream));
  float ms[3] = {0, 0, 0};
  bool same = true;
  for (int pass = 0; pass < 2; ++pass) {  // pass 0 warms up
    for (std::size_t b = 0; b < batches; ++b) {
      const std::int64_t* idx = d_lookups.data() + b * batch;
      xfer::gather_args<std::int64_t> p;
      p.dst = out[0].data();
      p.dst_stride = l;
      p.src = t.bytes.device_data();
      p.src_stride = l;
      p.src_rows = t.rows;
      p.row_bytes = l;
      p.indices = idx;
      p.count = batch;
      p.status_out = st.data();
      ibp::gather_args<std::int64_t> r;  // raw rows through the raw cache
      r.dst = out[1].data();
      r.dst_stride = l;
      r.data = t.bytes.device_data();
      r.data_bytes = table_bytes;
      r.offsets = raw_offsets.data();
      r.rows = t.rows;
      r.indices = idx;
      r.count = batch;
      r.codebook = none_on_gpu.ref();
      r.status_out = st.data();
      ibp::gather_args<std::int64_t> c = r;  // compressed rows through the ibp cache
      c.dst = out[2].data();
      c.data = host_data.device_data();
      c.data_bytes = host_data.size();
      c.offsets = compressed.offsets.data();
      c.codebook = cb;
      core::event_timer timers[3] = {core::event_timer{stream}, core::event_timer{stream},
                                     core::event_timer{stream}};
      timers[0].start();
      xfer::gather_rows(p, stream);
      timers[0].stop();
      timers[1].start();
      raw_cache.gather(r, stream, pass == 1 ? hits.data() : nullptr);
      timers[1].stop();
      timers[2].start();
      ibp_cache.gather(c, stream, pass == 1 ? hits.data() + 1 : nullptr);
      timers[2].stop();
      if (pass == 1) {
        for (int k = 0; k < 3; ++k) ms[k] += timers[k].elapsed_ms();
      }
      if (pass == 0 && b == 0) {  // the three ways deliver the same bytes
        std::vector<std::byte> h[3];
        for (int k = 0; k < 3; ++k) {
          h[k].resize(batch * l);
          out[k].copy_to(std::span<std::byte>{h[k]}, stream);
        }
        stream.synchronize();
        same = h[0] == h[1] && h[0] == h[2];
      }
    }
  }
  squeeze::status status{};
  unsigned long long hit[2] = {0, 0};
  SQUEEZE_CUDA_TRY(
      cudaMemcpyAsync(&status, st.data(), sizeof status, cudaMemcpyDeviceToHost, stream));
  SQUEEZE_CUDA_TRY(cudaMemcpyAsync(hit, hits.data(), sizeof hit, cudaMemcpyDeviceToHost, stream));
  stream.synchronize();
  if (status != squeeze::status::ok || !same) {
    std::printf("MISMATCH (status: %s)\n", squeeze::to_string(status));
    return 1;
  }
  const double lookups_total = double(batches * batch);
  std::printf("%zu batches of %zu lookups (Zipf %.2f), per batch:\n", batches, batch, alpha);
  std::printf("  plain gather from host memory   %7.1f us\n", 1e3 * ms[0] / batches);
  std::printf("  raw cache + raw misses          %7.1f us  (hit rate %.1f %%, %.2fx vs plain)\n",
              1e3 * ms[1] / batches, 100.0 * double(hit[0]) / lookups_total, ms[0] / ms[1]);
  std::printf(
      "  ibp cache + compressed misses   %7.1f us  (hit rate %.1f %%, %.2fx vs plain, "
      "%.2fx vs raw cache)\n",
      1e3 * ms[2] / batches, 100.0 * double(hit[1]) / lookups_total, ms[0] / ms[2], ms[1] / ms[2]);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "ibp_embedding: %s\n", e.what());
  return 1;
}
