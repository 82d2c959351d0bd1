// SPDX-License-Identifier: Apache-2.0
// The GPU decoders under corrupt and truncated input. Each campaign starts from a valid
// compressed set or message made by the library's own encoder, corrupts it with fixed seeds,
// runs the GPU decoder into a poisoned output that lies between canary bytes, and holds the
// result to the host reference decoder given the same bytes:
//
//   ibp::warp_decoder    condensed, in-place and clustered sets; bit flips and random bytes in
//   ibp::gather_rows     the data, offsets that move, leave the data, decrease or make a row
//                        empty, truncated data, tampered participation bits, raw bits and
//                        cluster ids, indices past the rows. A user kernel (a warp per row)
//                        gets a status per row: ok exactly for the rows the host decoder
//                        accepts, with the host's bytes. A gather reports ok exactly when the
//                        host accepts every row it asks for, else a status that one of the
//                        refused rows calls for (gather.cuh); each refused row alone is
//                        reported; accepted rows get the host's bytes; rows refused for their
//                        index, offsets or cluster id stay untouched.
//   ibp::wire_codec      every truncation of three small messages, bit flips in the header,
//                        the sections and the payload, headers whose wrong sizes carry a valid
//                        check word, wrong value counts and types: check() throws exactly when
//                        ibp::wire_decode finds a fault (naming the same fault when it is the
//                        header's), and without one the values are the host's.
//   frsz2::wire_codec    corrupt exponent words, payload and padding: every block that the
//                        format's rules accept decodes (and decode_reduces) to the host's bits.
//                        FRSZ2 is fixed-rate and its decoder reports no status: blocks that
//                        break the rules decode to unspecified values, inside dst. Messages of
//                        the wrong size are refused before any launch.
//
// No decoder may write outside its output (canary bytes before and after it, and between
// output rows) or read outside its input. Every input lies either in its own exact-size
// device allocation, where compute-sanitizer memcheck (tools/sanitize.sh) sees a read past
// it, or at the very end of mapped host memory followed by an inaccessible page, where such
// a read faults on any run. Reads before an input's first byte, and past the end of the
// device copies, are seen by the sanitizer alone.
#include <squeeze/core/buffer.hpp>
#include <squeeze/core/cuda_error.hpp>
#include <squeeze/core/error.hpp>
#include <squeeze/core/reduce_op.hpp>
#include <squeeze/core/status.hpp>
#include <squeeze/frsz2/compress.cuh>
#include <squeeze/frsz2/format.hpp>
#include <squeeze/frsz2/wire.cuh>
#include <squeeze/ibp/cluster.hpp>
#include <squeeze/ibp/dataset.hpp>
#include <squeeze/ibp/decode.cuh>
#include <squeeze/ibp/gather.cuh>
#include <squeeze/ibp/wire.cuh>
#include <squeeze/ibp/wire_format.hpp>
#include <squeeze/xfer/bounds.hpp>
#include <squeeze/xfer/mapped_memory.hpp>

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "common/frsz2_test.hpp"
#include "common/gpu_test.hpp"
#include "common/ibp_test.hpp"

namespace core = squeeze::core;
namespace frsz2 = squeeze::frsz2;
namespace ibp = squeeze::ibp;
using squeeze::status;

// Named, not anonymous: SQUEEZE_KERNEL gives kernels hidden visibility, which needs
// external linkage.
namespace corrupt_input_test {

using squeeze::test::first_mismatch;
using squeeze::test::poison;

/// Canary bytes on either side of every output.
constexpr std::size_t guard_bytes = 256;
constexpr std::byte canary{0x3C};

bool has_failure() {
  return ::testing::Test::HasFailure();
}

// ---- where inputs and outputs lie ----------------------------------------------------

/// Anonymous pages whose last page is inaccessible (PROT_NONE); unmapped on destruction.
class guard_paged_memory {
 public:
  /// At least `bytes` usable bytes (whole pages, one at least), then the guard page.
  explicit guard_paged_memory(std::size_t bytes) {
    const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
    usable_ = std::max<std::size_t>(1, (bytes + page - 1) / page) * page;
    total_ = usable_ + page;
    void* p = ::mmap(nullptr, total_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::runtime_error{"guard_paged_memory: mmap failed"};
    base_ = static_cast<std::byte*>(p);
    if (::mprotect(base_ + usable_, page, PROT_NONE) != 0) {
      static_cast<void>(::munmap(base_, total_));
      throw std::runtime_error{"guard_paged_memory: mprotect failed"};
    }
  }
  ~guard_paged_memory() { static_cast<void>(::munmap(base_, total_)); }
  guard_paged_memory(const guard_paged_memory&) = delete;
  guard_paged_memory& operator=(const guard_paged_memory&) = delete;

  [[nodiscard]] std::byte* base() const noexcept { return base_; }
  [[nodiscard]] std::size_t usable() const noexcept { return usable_; }

 private:
  std::byte* base_ = nullptr;
  std::size_t usable_ = 0;
  std::size_t total_ = 0;
};

/// Bytes at the very end of mapped host memory (xfer::host_registration) whose next page
/// is inaccessible and not registered: a GPU read past the last byte faults, with or without
/// the sanitizer. The bytes before them on their first page are canary bytes.
class guarded_host_bytes {
 public:
  explicit guarded_host_bytes(const std::vector<std::byte>& bytes) : pages_{bytes.size()} {
    const std::size_t before = pages_.usable() - bytes.size();
    std::fill_n(pages_.base(), before, canary);
    std::copy(bytes.begin(), bytes.end(), pages_.base() + before);
    registration_ = squeeze::xfer::host_registration{pages_.base(), pages_.usable()};
    data_ = static_cast<const std::byte*>(registration_.device_data()) + before;
  }

  /// The device pointer of the first byte.
  [[nodiscard]] const std::byte* data() const noexcept { return data_; }

 private:
  guard_paged_memory pages_;
  squeeze::xfer::host_registration registration_;  // (unregistered before pages_ is unmapped)
  const std::byte* data_ = nullptr;
};

enum class placement { device, guarded_host };

/// An input where a decoder reads it: its own exact-size device allocation (16 canary bytes
/// when empty, so the pointer is valid and aligned), or the end of guarded host memory.
class placed_input {
 public:
  placed_input(placement where, const std::vector<std::byte>& bytes, cudaStream_t s) {
    if (where == placement::guarded_host) {
      host_ = std::make_unique<guarded_host_bytes>(bytes);
      data_ = host_->data();
      return;
    }
    device_ = core::device_buffer<std::byte>{bytes.empty() ? 16 : bytes.size()};
    if (bytes.empty()) {
      device_.fill_bytes(static_cast<int>(canary), s);
    } else {
      device_.copy_from(std::span<const std::byte>{bytes}, s);
    }
    data_ = device_.data();
  }

  [[nodiscard]] const std::byte* data() const noexcept { return data_; }

 private:
  core::device_buffer<std::byte> device_;
  std::unique_ptr<guarded_host_bytes> host_;
  const std::byte* data_ = nullptr;
};

/// An output of `bytes` bytes, poisoned, `shift` bytes past a 256-byte boundary, between
/// two guards of canary bytes that no decoder may touch.
class guarded_output {
 public:
  guarded_output(std::size_t bytes, std::size_t shift, cudaStream_t s)
      : bytes_{bytes}, front_{guard_bytes + shift}, buffer_{front_ + bytes + guard_bytes} {
    buffer_.fill_bytes(static_cast<int>(canary), s);
    if (bytes != 0) {
      SQUEEZE_CUDA_TRY(cudaMemsetAsync(data(), static_cast<int>(poison), bytes, s));
    }
  }

  /// Replaces the poison with v (bytes() long): the operands of a reduction.
  void fill(const std::vector<std::byte>& v, cudaStream_t s) {
    if (bytes_ != 0) {
      SQUEEZE_CUDA_TRY(cudaMemcpyAsync(data(), v.data(), bytes_, cudaMemcpyHostToDevice, s));
    }
  }

  [[nodiscard]] std::byte* data() const noexcept { return buffer_.data() + front_; }

  /// The output once the work on s is done; canaries_ok: every guard byte is intact.
  std::vector<std::byte> fetch(cudaStream_t s, bool& canaries_ok) const {
    std::vector<std::byte> all(buffer_.size());
    buffer_.copy_to(std::span<std::byte>{all}, s);
    SQUEEZE_CUDA_TRY(cudaStreamSynchronize(s));
    const auto is_canary = [](std::byte b) { return b == canary; };
    const auto out = all.begin() + static_cast<std::ptrdiff_t>(front_);
    const auto tail = out + static_cast<std::ptrdiff_t>(bytes_);
    canaries_ok =
        std::all_of(all.begin(), out, is_canary) && std::all_of(tail, all.end(), is_canary);
    return std::vector<std::byte>(out, tail);
  }

 private:
  std::size_t bytes_;
  std::size_t front_;
  core::device_buffer<std::byte> buffer_;
};

/// Whether every byte of [first, first + n) is poison.
bool all_poison(const std::byte* first, std::size_t n) {
  return std::all_of(first, first + n, [](std::byte b) { return b == poison; });
}

/// Bit-equal, or both NaN (reductions may pass either NaN on).
template <class T>
bool same_value(T a, T b) {
  if (std::isnan(a) && std::isnan(b)) return true;
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

template <class T>
T value_at(const std::vector<std::byte>& bytes, std::size_t i) {
  T v;
  std::memcpy(&v, bytes.data() + i * sizeof(T), sizeof(T));
  return v;
}

/// A bit flip of byte `at` of v.
void flip_bit(std::vector<std::byte>& v, std::size_t at, unsigned bit) {
  v[at] ^= static_cast<std::byte>(1u << bit);
}

// ---- ibp: compressed sets -------------------------------------------------------------

struct ibp_shape {
  ibp::layout kind;
  std::uint32_t chunk;
  std::size_t row_bytes;
  std::size_t rows;
};

std::string name(const ibp_shape& s, bool clustered) {
  return std::string{s.kind == ibp::layout::in_place ? "in place" : "condensed"} +
         (clustered ? ", clustered" : "") + ", C = " + std::to_string(s.chunk) +
         ", L = " + std::to_string(s.row_bytes) + ", " + std::to_string(s.rows) + " rows";
}

/// A valid set made by the library's encoder, and the codebooks its rows decode with.
struct ibp_base {
  ibp_shape shape{};
  bool clustered = false;
  std::vector<std::byte> data;  ///< [rows, L] the rows
  ibp::codebook book;           ///< not clustered
  ibp::cluster_set clusters;    ///< clustered: a codebook per cluster
  ibp::compressed_set set;
};

ibp_base make_base(const ibp_shape& shape, bool clustered, std::uint64_t seed) {
  ibp_base b;
  b.shape = shape;
  b.clustered = clustered;
  const auto l = static_cast<std::uint32_t>(shape.row_bytes);
  if (clustered) {
    b.data = squeeze::test::grouped_rows(shape.rows, shape.row_bytes, 5, seed);
    ibp::cluster_options opt;
    opt.clusters = 5;
    opt.seed = seed;
    b.clusters = ibp::make_clusters(b.data, shape.rows, l, shape.chunk, opt);
    b.set = ibp::compress(b.data, shape.rows, b.clusters, shape.kind);
  } else {
    b.data = squeeze::test::mixed_rows(shape.rows, shape.row_bytes, seed);
    b.book = squeeze::test::best_codebook(b.data, shape.rows, shape.row_bytes, shape.chunk);
    b.set = ibp::compress(b.data, shape.rows, b.book, shape.kind);
  }
  return b;
}

/// A corrupted copy of a base set.
struct ibp_variant {
  ibp::compressed_set set;          ///< condensed: raw bits as the rows' sizes say
  std::vector<std::uint32_t> ids;   ///< clustered: the packed ids the decoders read
  std::vector<std::int64_t> batch;  ///< the rows one gather asks for
  std::string what;                 ///< the corruptions, for messages
};

/// Why the host refuses an entry: not (none), its index, what the gather checks before it
/// decodes (offsets, cluster id: the output row stays untouched), or its stream.
enum class refusal { none, index, locate, stream };

/// Statuses a gather may report for an entry refused so (ibp/gather.cuh).
unsigned allowed_statuses(refusal why) {
  const auto bit = [](status s) { return 1u << static_cast<unsigned>(s); };
  switch (why) {
    case refusal::none: return 0;
    case refusal::index: return bit(status::out_of_bounds);
    case refusal::locate: return bit(status::corrupt);
    case refusal::stream: return bit(status::truncated) | bit(status::corrupt);
  }
  return 0;
}

/// The host reference decoder's verdict on every row of a variant.
struct host_rows {
  std::vector<refusal> why;        ///< [rows]
  std::vector<std::byte> decoded;  ///< [rows, L]: the rows it accepts, decoded (else poison)

  [[nodiscard]] refusal of(std::int64_t index) const {
    if (index < 0 || static_cast<std::uint64_t>(index) >= why.size()) return refusal::index;
    return why[static_cast<std::size_t>(index)];
  }
};

/// Runs ibp::decompress_row on every row of v (condensed raw bits follow the rows' sizes:
/// the GPU reads no raw bitmask of a condensed set, where a row as long as L is raw).
host_rows host_verdicts(const ibp_base& b, const ibp_variant& v) {
  const std::size_t l = b.shape.row_bytes;
  ibp::cluster_set cs;
  if (b.clustered) {
    cs = b.clusters;
    cs.ids = v.ids;
  }
  host_rows h;
  h.why.assign(v.set.rows, refusal::none);
  h.decoded.assign(v.set.rows * l, poison);
  for (std::uint64_t r = 0; r < v.set.rows; ++r) {
    const std::span<std::byte> out{h.decoded.data() + r * l, l};
    try {
      if (b.clustered) {
        ibp::decompress_row(v.set, cs, r, out);
      } else {
        ibp::decompress_row(v.set, b.book, r, out);
      }
    } catch (const squeeze::format_error&) {
      bool located = true;  // what the gather checks before it decodes
      if (b.clustered && cs.unchecked_cluster_of(r) >= cs.clusters) {
        located = false;
      } else if (v.set.kind == ibp::layout::condensed) {
        const std::uint64_t lo = v.set.offsets[r];
        const std::uint64_t hi = v.set.offsets[r + 1];
        located = lo < hi && hi <= v.set.data.size() && hi - lo <= l;
      }
      h.why[r] = located ? refusal::stream : refusal::locate;
    }
  }
  return h;
}

/// Every row once in random order, then random rows up to `count` entries.
std::vector<std::int64_t> batch_of(std::size_t rows, std::size_t count, std::mt19937_64& rng) {
  std::vector<std::int64_t> v(rows);
  std::iota(v.begin(), v.end(), std::int64_t{0});
  std::shuffle(v.begin(), v.end(), rng);
  while (v.size() < count) v.push_back(static_cast<std::int64_t>(rng() % rows));
  return v;
}

/// One to three corruptions of v, a copy of b's set, each noted in v.what.
void corrupt(const ibp_base& b, ibp_variant& v, std::mt19937_64& rng) {
  const auto pick = [&rng](std::uint64_t n) { return n == 0 ? std::uint64_t{0} : rng() % n; };
  const auto note = [&v](const std::string& s) { v.what += (v.what.empty() ? "" : ", ") + s; };
  ibp::compressed_set& set = v.set;
  const std::size_t l = b.shape.row_bytes;
  const auto flip_data = [&] {
    if (set.data.empty()) return;
    const std::uint64_t at = pick(set.data.size());
    const auto bit = static_cast<unsigned>(pick(8));
    flip_bit(set.data, at, bit);
    note("bit " + std::to_string(bit) + " of data byte " + std::to_string(at));
  };
  const auto random_byte = [&] {
    if (set.data.empty()) return;
    const std::uint64_t at = pick(set.data.size());
    set.data[at] = static_cast<std::byte>(rng());
    note("data byte " + std::to_string(at) + " random");
  };
  const auto bad_index = [&] {
    const std::uint64_t j = pick(v.batch.size());
    v.batch[j] = rng() % 2 == 0 ? static_cast<std::int64_t>(set.rows + pick(3))
                                : -1 - static_cast<std::int64_t>(pick(3));
    note("entry " + std::to_string(j) + " asks for row " + std::to_string(v.batch[j]));
  };
  const auto flip_id = [&] {  // the row may name another cluster, or none
    const std::uint64_t r = pick(b.set.rows);
    const std::uint64_t at = r * b.clusters.id_bits + pick(b.clusters.id_bits);
    v.ids[at / 32] ^= 1u << (at % 32);
    note("bit " + std::to_string(at) + " of the cluster ids (row " + std::to_string(r) + ")");
  };
  // Participation bits: the first byte of a stored row set to all zeros or all ones.
  const auto participation = [&](std::uint64_t at) {
    if (at >= set.data.size()) return;
    set.data[at] = rng() % 2 == 0 ? std::byte{0x00} : std::byte{0xFF};
    note("participation byte " + std::to_string(at) + " = " +
         std::to_string(static_cast<unsigned>(set.data[at])));
  };
  const int count = 1 + static_cast<int>(pick(3));
  for (int m = 0; m < count; ++m) {
    if (set.kind == ibp::layout::condensed) {
      std::vector<std::uint64_t>& off = set.offsets;
      const std::uint64_t rows = set.rows;
      switch (pick(12)) {
        case 0:
        case 1: flip_data(); break;
        case 2: random_byte(); break;
        case 3: {  // a boundary between two rows moves by 1 to 3 bytes
          const std::uint64_t i = 1 + pick(rows - 1);
          const std::uint64_t d = 1 + pick(3);
          off[i] = rng() % 2 == 0 ? off[i] + d : off[i] - d;
          note("offset " + std::to_string(i) + " moved to " + std::to_string(off[i]));
          break;
        }
        case 4: {  // anywhere in the data, or a little past it
          const std::uint64_t i = pick(rows + 1);
          off[i] = pick(set.data.size() + 64);
          note("offset " + std::to_string(i) + " = " + std::to_string(off[i]));
          break;
        }
        case 5: {  // far past the data
          const std::uint64_t i = pick(rows + 1);
          const std::uint64_t far[] = {set.data.size() + 1 + pick(4096),
                                       ~std::uint64_t{0} - pick(16), std::uint64_t{1} << 63,
                                       off[i] + (std::uint64_t{1} << 32)};
          off[i] = far[pick(4)];
          note("offset " + std::to_string(i) + " = " + std::to_string(off[i]));
          break;
        }
        case 6: {  // decreasing offsets
          const std::uint64_t i = pick(rows);
          std::swap(off[i], off[i + 1]);
          note("offsets " + std::to_string(i) + " and " + std::to_string(i + 1) + " swapped");
          break;
        }
        case 7: {  // an empty row
          const std::uint64_t i = pick(rows);
          off[i + 1] = off[i];
          note("row " + std::to_string(i) + " empty");
          break;
        }
        case 8: {  // the data cut short, mostly inside its last rows
          const std::size_t size = set.data.size();
          if (size == 0) break;
          const std::size_t keep =
              rng() % 4 == 0 ? pick(size) : size - 1 - pick(std::min(size, 2 * l));
          set.data.resize(keep);
          note("data cut to " + std::to_string(keep) + " of " + std::to_string(size) + " bytes");
          break;
        }
        case 9: participation(off[pick(rows)]); break;
        case 10: bad_index(); break;
        default:
          if (b.clustered) {
            flip_id();
          } else {
            flip_data();
          }
          break;
      }
    } else {
      const std::uint64_t chunks = (l + b.shape.chunk - 1) / b.shape.chunk;
      switch (pick(9)) {
        case 0:
        case 1:
        case 2: flip_data(); break;
        case 3: random_byte(); break;
        case 4:
          if (set.rows != 0) participation(pick(set.rows) * l + pick((chunks + 7) / 8));
          break;
        case 5:
          if (set.rows != 0) {
            const std::uint64_t r = pick(set.rows);
            set.raw[r / 32] ^= 1u << (r % 32);
            note("raw bit of row " + std::to_string(r) + " flipped");
          }
          break;
        case 6: bad_index(); break;
        case 7:
          if (!b.clustered) {  // the data cut to fewer whole rows: a smaller set
            const std::uint64_t rows = pick(set.rows);
            set.rows = rows;
            set.data.resize(rows * l);
            set.raw.resize(ibp::raw_words(rows));
            note("cut to " + std::to_string(rows) + " rows");
          } else {
            flip_data();
          }
          break;
        default:
          if (b.clustered) {
            flip_id();
          } else {
            flip_data();
          }
          break;
      }
    }
  }
  if (set.kind == ibp::layout::condensed) {
    std::fill(set.raw.begin(), set.raw.end(), 0u);
    for (std::uint64_t r = 0; r < set.rows; ++r) {
      const std::uint64_t lo = set.offsets[r];
      const std::uint64_t hi = set.offsets[r + 1];
      if (hi >= lo && hi - lo == l) set.raw[r / 32] |= 1u << (r % 32);
    }
  }
}

/// A variant where the GPU reads it: the stored rows placed as asked, offsets, raw bitmask
/// and cluster ids in exact-size device allocations.
class device_variant {
 public:
  device_variant(const ibp_base& b, const ibp_variant& v, const ibp::codebook_ref& book,
                 placement where, cudaStream_t s)
      : data_{where, v.set.data, s}, offsets_{v.set.offsets.size()}, raw_{v.set.raw.size()} {
    if (!v.set.offsets.empty())
      offsets_.copy_from(std::span<const std::uint64_t>{v.set.offsets}, s);
    if (!v.set.raw.empty()) raw_.copy_from(std::span<const std::uint32_t>{v.set.raw}, s);
    args_.kind = v.set.kind;
    args_.data = data_.data();
    args_.data_bytes = v.set.data.size();
    args_.rows = v.set.rows;
    if (v.set.kind == ibp::layout::condensed) {
      args_.offsets = offsets_.data();
    } else {
      args_.raw = raw_.data();
    }
    if (b.clustered) {
      clusters_.emplace(b.clusters, v.ids);  // synchronizes the device
      args_.clusters = clusters_->ref;
    } else {
      args_.codebook = book;
    }
  }

  /// The set's fields of a gather's arguments.
  [[nodiscard]] const ibp::gather_args<std::int64_t>& args() const noexcept { return args_; }

 private:
  placed_input data_;
  core::device_buffer<std::uint64_t> offsets_;
  core::device_buffer<std::uint32_t> raw_;
  std::optional<squeeze::test::device_clusters> clusters_;
  ibp::gather_args<std::int64_t> args_;
};

/// A warp per row, as a user's kernel decodes a set with ibp::warp_decoder: a condensed row
/// with decode() once its offsets lie in the data (the decoder trusts that [src, src +
/// stored) lies in `readable`; the kernel reports out_of_bounds otherwise), an in-place row
/// with load_in_place; clustered rows with their cluster's codebook (corrupt for an id past
/// the clusters). Row r's status goes to row_status[r], its bytes to out + r · out_stride.
SQUEEZE_KERNEL(32)
void decode_each_row(ibp::gather_args<std::int64_t> a, std::byte* out, std::size_t out_stride,
                     status* row_status) {
  __shared__ ibp::warp_decoder<>::TempStorage storage;
  ibp::warp_decoder<> dec{storage, a.codebook};
  const bool clustered = a.clusters.clusters != 0;
  const std::uint32_t l = clustered ? a.clusters.tensor_bytes : a.codebook.tensor_bytes;
  const auto readable = squeeze::xfer::readable_range::of(a.data, a.data_bytes);
  for (std::uint64_t r = blockIdx.x; r < a.rows; r += gridDim.x) {
    status st = status::ok;
    if (clustered) {
      const std::uint32_t c = a.clusters.unchecked_cluster_of(r);
      if (c < a.clusters.clusters) {
        dec.rebind(a.clusters.unchecked_book(c));
      } else {
        st = status::corrupt;
      }
    }
    std::byte* dst = out + r * out_stride;
    if (st == status::ok && a.kind == ibp::layout::in_place) {
      const bool raw = ((a.raw[r / 32] >> (r % 32)) & 1u) != 0;
      dec.load_in_place(a.data + r * l, raw, readable);
      st = dec.decode_loaded(dst);
    } else if (st == status::ok) {
      const std::uint64_t lo = a.offsets[r];
      const std::uint64_t hi = a.offsets[r + 1];
      if (lo > hi || hi > a.data_bytes) {
        st = status::out_of_bounds;
      } else {
        st = dec.decode(dst, a.data + lo, static_cast<std::uint32_t>(hi - lo), readable);
      }
    }
    if (threadIdx.x == 0) row_status[r] = st;
    __syncwarp();  // every lane is done with the workspace before the next row lands
  }
}

/// Counts over a campaign, so it can show that it met each kind of outcome.
struct ibp_tally {
  std::size_t accepted = 0;
  std::size_t accepted_changed = 0;  ///< accepted rows that decode to other bytes than the data
  std::size_t refused_locate = 0;
  std::size_t refused_stream = 0;
  std::size_t refused_index = 0;
};

/// The user kernel's verdicts: ok exactly for the rows the host accepts, with its bytes.
void check_user_kernel(const device_variant& dv, const host_rows& h, std::size_t l,
                       const std::string& what, cudaStream_t s) {
  const std::size_t rows = h.why.size();
  guarded_output out{rows * l, 0, s};
  core::device_buffer<status> st{std::max<std::size_t>(rows, 1)};
  st.fill_bytes(0xFF, s);  // no status
  if (rows != 0) {
    const auto blocks = static_cast<unsigned>(std::min<std::size_t>(rows, 128));
    decode_each_row<<<blocks, 32, 0, s>>>(dv.args(), out.data(), l, st.data());
    SQUEEZE_CHECK_LAUNCH();
  }
  std::vector<status> got(rows);
  if (rows != 0) st.copy_to(std::span<status>{got}, s);
  bool canaries_ok = false;
  const std::vector<std::byte> bytes = out.fetch(s, canaries_ok);
  EXPECT_TRUE(canaries_ok) << what << ": the user kernel wrote outside its output";
  for (std::size_t r = 0; r < rows; ++r) {
    const bool host_ok = h.why[r] == refusal::none;
    ASSERT_EQ(got[r] == status::ok, host_ok)
        << what << ": row " << r << " is " << squeeze::to_string(got[r]) << " on the GPU, "
        << (host_ok ? "accepted" : "refused") << " by the host";
    if (host_ok) {
      const long long bad = first_mismatch(bytes.data() + r * l, h.decoded.data() + r * l, l);
      ASSERT_EQ(bad, -1) << what << ": row " << r << " byte " << bad;
    }
  }
}

struct gathered {
  std::vector<std::byte> out;
  status st = status::ok;
  bool canaries_ok = false;
};

/// ibp::gather_rows of `indices` into a poisoned output of rows `stride` bytes apart.
gathered gather(const device_variant& dv, const std::vector<std::int64_t>& indices,
                std::size_t stride, std::size_t shift, cudaStream_t s) {
  core::device_buffer<std::int64_t> idx{indices.size()};
  idx.copy_from(std::span<const std::int64_t>{indices}, s);
  guarded_output dst{indices.size() * stride, shift, s};
  core::device_buffer<status> st{1};
  st.fill_bytes(0, s);
  ibp::gather_args<std::int64_t> a = dv.args();
  a.dst = dst.data();
  a.dst_stride = stride;
  a.indices = idx.data();
  a.count = indices.size();
  a.status_out = st.data();
  ibp::gather_rows(a, s);
  gathered g;
  SQUEEZE_CUDA_TRY(cudaMemcpyAsync(&g.st, st.data(), sizeof(status), cudaMemcpyDeviceToHost, s));
  g.out = dst.fetch(s, g.canaries_ok);
  return g;
}

/// A gather's outcome against the host's verdicts: ok exactly when every entry is
/// accepted, else a status some refused entry allows; accepted entries hold the host's
/// bytes, entries refused before decoding stay poisoned, and no byte past an output row's
/// tensor_bytes (nor outside the output) is written.
void expect_gathered(const gathered& g, const std::vector<std::int64_t>& indices,
                     const host_rows& h, std::size_t l, std::size_t stride,
                     const std::string& what) {
  EXPECT_TRUE(g.canaries_ok) << what << ": the gather wrote outside its output";
  unsigned allowed = 0;
  for (const std::int64_t i : indices) allowed |= allowed_statuses(h.of(i));
  if (allowed == 0) {
    ASSERT_EQ(g.st, status::ok) << what << ": reported " << squeeze::to_string(g.st);
  } else {
    ASSERT_NE(g.st, status::ok) << what << ": a refused row was not reported";
    ASSERT_NE(allowed & (1u << static_cast<unsigned>(g.st)), 0u)
        << what << ": reported " << squeeze::to_string(g.st);
  }
  for (std::size_t i = 0; i < indices.size(); ++i) {
    const std::byte* row = g.out.data() + i * stride;
    const refusal why = h.of(indices[i]);
    if (why == refusal::none) {
      const long long bad =
          first_mismatch(row, h.decoded.data() + static_cast<std::size_t>(indices[i]) * l, l);
      ASSERT_EQ(bad, -1) << what << ": entry " << i << " (row " << indices[i] << ") byte " << bad;
    } else if (why != refusal::stream) {
      ASSERT_TRUE(all_poison(row, l))
          << what << ": entry " << i << " (row " << indices[i] << ") refused, but written";
    }
    ASSERT_TRUE(all_poison(row + l, stride - l))
        << what << ": entry " << i << " wrote past its row's tensor_bytes";
  }
}

/// One variant: the user kernel, a gather of the batch, a gather of its accepted entries
/// alone, and a gather of each of up to two refused rows alone.
void check_variant(const ibp_base& b, const ibp_variant& v, const ibp::codebook_ref& book,
                   placement where, std::size_t stride, std::size_t shift, cudaStream_t s,
                   std::mt19937_64& rng, ibp_tally& tally) {
  const std::size_t l = b.shape.row_bytes;
  const host_rows h = host_verdicts(b, v);
  for (std::size_t r = 0; r < h.why.size(); ++r) {
    switch (h.why[r]) {
      case refusal::none:
        ++tally.accepted;
        if (first_mismatch(h.decoded.data() + r * l, b.data.data() + r * l, l) != -1) {
          ++tally.accepted_changed;
        }
        break;
      case refusal::locate: ++tally.refused_locate; break;
      default: ++tally.refused_stream; break;
    }
  }
  for (const std::int64_t i : v.batch) tally.refused_index += h.of(i) == refusal::index ? 1 : 0;

  const device_variant dv{b, v, book, where, s};
  check_user_kernel(dv, h, l, v.what + " (user kernel)", s);
  if (has_failure()) return;

  const gathered all = gather(dv, v.batch, stride, shift, s);
  expect_gathered(all, v.batch, h, l, stride,
                  v.what + " (gather of " + std::to_string(v.batch.size()) + " entries)");
  if (has_failure()) return;

  std::vector<std::int64_t> accepted;
  std::vector<std::int64_t> refused;
  for (const std::int64_t i : v.batch) {
    if (h.of(i) == refusal::none) {
      accepted.push_back(i);
    } else if (std::find(refused.begin(), refused.end(), i) == refused.end()) {
      refused.push_back(i);
    }
  }
  if (!accepted.empty()) {
    const gathered good = gather(dv, accepted, stride, shift, s);
    expect_gathered(good, accepted, h, l, stride, v.what + " (gather of the accepted entries)");
    if (has_failure()) return;
  }
  std::shuffle(refused.begin(), refused.end(), rng);
  for (std::size_t k = 0; k < std::min<std::size_t>(2, refused.size()); ++k) {
    const std::vector<std::int64_t> one{refused[k]};
    const gathered alone = gather(dv, one, l + 3, 1, s);
    expect_gathered(alone, one, h, l, l + 3,
                    v.what + " (gather of row " + std::to_string(refused[k]) + " alone)");
    if (has_failure()) return;
  }
}

/// `variants` corruptions of a set of `shape` (the first one left intact), each checked
/// by check_variant, alternating device and guarded host memory, aligned and misaligned
/// outputs, and gathers of a few and of thousands of entries (several rows per warp).
void ibp_campaign(const ibp_shape& shape, bool clustered, int variants, std::uint64_t seed) {
  SCOPED_TRACE(name(shape, clustered));
  const ibp_base b = make_base(shape, clustered, seed);
  std::size_t raw = 0;
  for (std::uint64_t r = 0; r < shape.rows; ++r) raw += b.set.is_raw(r) ? 1 : 0;
  ASSERT_GT(raw, 0u);          // the set holds raw rows
  ASSERT_LT(raw, shape.rows);  // and compressed ones
  core::stream s;
  std::optional<ibp::device_codebook> dcb;
  if (!clustered) dcb.emplace(b.book, s);
  const ibp::codebook_ref book = clustered ? ibp::codebook_ref{} : dcb->ref();
  const std::size_t l = shape.row_bytes;
  std::mt19937_64 rng{seed * 7919 + 1};
  ibp_tally tally;
  for (int k = 0; k < variants && !has_failure(); ++k) {
    ibp_variant v;
    v.set = b.set;
    v.ids = b.clusters.ids;
    const std::size_t entries = k % 4 == 0 && l <= 1024 ? 3000 : shape.rows + shape.rows / 2;
    v.batch = batch_of(shape.rows, entries, rng);
    if (k == 0) {
      v.what = "no corruption";
    } else {
      corrupt(b, v, rng);
    }
    v.what = "variant " + std::to_string(k) + ": " + v.what;
    const placement where = k % 2 == 0 ? placement::device : placement::guarded_host;
    const std::size_t stride = l + (k % 3 == 1 ? 5 : 0);
    const std::size_t shift = k % 4 == 3 ? 3 : 0;
    check_variant(b, v, book, where, stride, shift, s, rng, tally);
  }
  if (has_failure()) return;
  // The campaign met rows that decode to other bytes, and refusals of every kind it makes.
  EXPECT_GT(tally.accepted_changed, 0u);
  EXPECT_GT(tally.refused_stream, 0u);
  EXPECT_GT(tally.refused_index, 0u);
  if (shape.kind == ibp::layout::condensed || clustered) {
    EXPECT_GT(tally.refused_locate, 0u);
  }
}

// ---- ibp: wire messages ---------------------------------------------------------------

/// Where low_entropy_values puts no raw row.
constexpr std::size_t no_raw_row = ~std::size_t{0} / ibp::wire_max_row_bytes;

/// n values of T as bytes: k / 8 for random k in [lo, lo + count) (few exponents, short
/// significands: rows that compress well), with the 512-byte row `raw_row` (when the values
/// reach it) of random bits, which the encoder stores raw.
template <class T>
std::vector<std::byte> low_entropy_values(std::size_t n, int lo, int count, std::size_t raw_row,
                                          std::uint64_t seed) {
  std::mt19937_64 rng{seed};
  std::vector<std::byte> v(n * sizeof(T));
  for (std::size_t i = 0; i < n; ++i) {
    const int k = lo + static_cast<int>(rng() % static_cast<std::uint64_t>(count));
    const T x = static_cast<T>(k) / T{8};
    std::memcpy(v.data() + i * sizeof(T), &x, sizeof(T));
  }
  const std::size_t row = ibp::wire_max_row_bytes;
  if (raw_row < v.size() / row + 1) {
    for (std::size_t at = raw_row * row; at < std::min(v.size(), (raw_row + 1) * row); ++at) {
      v[at] = static_cast<std::byte>(rng());
    }
  }
  return v;
}

/// The message the GPU encoder makes of `data` (values of T).
template <class T>
std::vector<std::byte> encode_on_gpu(ibp::wire_codec& codec, const std::vector<std::byte>& data,
                                     cudaStream_t s) {
  const std::size_t n = data.size() / sizeof(T);
  core::device_buffer<std::byte> src{std::max<std::size_t>(data.size(), 16)};
  src.fill_bytes(0, s);
  src.copy_from(std::span<const std::byte>{data}, s);
  core::device_buffer<std::byte> wire{ibp::wire_codec::max_wire_bytes<T>(n)};
  wire.fill_bytes(static_cast<int>(poison), s);
  core::device_buffer<std::uint64_t> size{1};
  size.fill_bytes(0, s);
  codec.encode(reinterpret_cast<const T*>(src.data()), n, wire.data(), size.data(), s);
  std::uint64_t bytes = 0;
  SQUEEZE_CUDA_TRY(cudaMemcpyAsync(&bytes, size.data(), sizeof bytes, cudaMemcpyDeviceToHost, s));
  SQUEEZE_CUDA_TRY(cudaStreamSynchronize(s));
  if (bytes > wire.bytes()) return {};
  std::vector<std::byte> m(bytes);
  wire.copy_to(std::span<std::byte>{m}, s);
  SQUEEZE_CUDA_TRY(cudaStreamSynchronize(s));
  return m;
}

ibp::wire_header header_of(const std::vector<std::byte>& m) {
  ibp::wire_header h;
  std::memcpy(&h, m.data(), sizeof h);
  return h;
}

/// Whether check_wire_header finds f (the GPU then finds it too, in one place; faults of
/// the sections and rows are found by many warps at once, and the first one recorded wins).
bool header_fault(ibp::wire_fault f) {
  switch (f) {
    case ibp::wire_fault::short_message:
    case ibp::wire_fault::magic:
    case ibp::wire_fault::version:
    case ibp::wire_fault::check_word:
    case ibp::wire_fault::kind:
    case ibp::wire_fault::value_bytes:
    case ibp::wire_fault::values:
    case ibp::wire_fault::chunk_bytes:
    case ibp::wire_fault::row_bytes:
    case ibp::wire_fault::rows:
    case ibp::wire_fault::reserved:
    case ibp::wire_fault::total_bytes:
    case ibp::wire_fault::payload_bytes: return true;
    default: return false;
  }
}

/// The operands decode_reduce meets in dst: small values of either sign, a NaN, infinities.
template <class T>
std::vector<std::byte> reduce_operands(std::size_t n) {
  std::vector<std::byte> v(n * sizeof(T));
  for (std::size_t i = 0; i < n; ++i) {
    T x = static_cast<T>(static_cast<int>(i % 13) - 6) * T{0.75};
    if (i % 101 == 7) x = std::numeric_limits<T>::quiet_NaN();
    if (i % 101 == 8) x = -std::numeric_limits<T>::infinity();
    std::memcpy(v.data() + i * sizeof(T), &x, sizeof(T));
  }
  return v;
}

/// Decodes (or max-reduces into reduce_operands) the first `bytes` bytes of `buffer`, which
/// lies as asked, as n values of T on the GPU, and holds the outcome to ibp::wire_decode on
/// the same bytes: check() throws exactly when the host finds a fault, naming it when it is
/// the header's; without one the values are the host's. Returns the host's fault.
template <class T>
ibp::wire_fault check_wire_decode(ibp::wire_codec& codec, const std::vector<std::byte>& buffer,
                                  std::size_t bytes, std::size_t n, placement where, bool reduce,
                                  const std::string& what, cudaStream_t s) {
  constexpr std::size_t v = sizeof(T);
  std::vector<std::byte> want(n * v, poison);
  const ibp::wire_fault f =
      ibp::wire_decode(std::span<const std::byte>{buffer.data(), bytes}, n, v, want);
  // The codec wants 16-byte aligned messages: at a page's end only whole granules can be.
  if (buffer.empty() || buffer.size() % 16 != 0) where = placement::device;
  const placed_input in{where, buffer, s};
  guarded_output dst{n * v, 0, s};
  const std::vector<std::byte> operands = reduce_operands<T>(n);
  if (reduce) {
    dst.fill(operands, s);
    codec.decode_reduce(in.data(), bytes, n, reinterpret_cast<T*>(dst.data()), core::reduce_op::max,
                        s);
  } else {
    codec.decode(in.data(), bytes, n, reinterpret_cast<T*>(dst.data()), s);
  }
  bool threw = false;
  std::string message;
  try {
    codec.check(s);
  } catch (const squeeze::format_error& e) {
    threw = true;
    message = e.what();
  }
  bool canaries_ok = false;
  const std::vector<std::byte> got = dst.fetch(s, canaries_ok);
  const std::string how = what + (reduce ? " (decode_reduce)" : " (decode)");
  EXPECT_TRUE(canaries_ok) << how << ": the decoder wrote outside dst";
  EXPECT_EQ(threw, f != ibp::wire_fault::none)
      << how << ": the host finds " << ibp::to_string(f) << "; the GPU "
      << (threw ? message : std::string{"nothing"});
  if (threw && header_fault(f)) {
    EXPECT_NE(message.find(ibp::to_string(f)), std::string::npos)
        << how << ": the host finds " << ibp::to_string(f) << "; the GPU: " << message;
  }
  if (!threw && f == ibp::wire_fault::none) {
    if (!reduce) {
      const long long bad = first_mismatch(got.data(), want.data(), want.size());
      EXPECT_EQ(bad, -1) << how << ": byte " << bad;
    } else {
      for (std::size_t i = 0; i < n; ++i) {
        const T expect =
            core::apply(core::reduce_op::max, value_at<T>(operands, i), value_at<T>(want, i));
        if (!same_value(value_at<T>(got, i), expect)) {
          ADD_FAILURE() << how << ": value " << i << " is " << value_at<T>(got, i) << ", want "
                        << expect;
          break;
        }
      }
    }
  }
  return f;
}

/// Every length of buffer, from none to 40 bytes past the message (which then runs on into
/// other bytes): every cut is a fault, every longer buffer decodes.
template <class T>
void every_truncation(ibp::wire_codec& codec, const std::vector<std::byte>& m, std::size_t n,
                      cudaStream_t s) {
  for (std::size_t b = 0; b <= m.size() + 40 && !has_failure(); ++b) {
    std::vector<std::byte> buffer(m.begin(),
                                  m.begin() + static_cast<std::ptrdiff_t>(std::min(b, m.size())));
    buffer.resize(b, std::byte{0x5A});
    const placement where = b % 32 == 0 ? placement::guarded_host : placement::device;
    const std::string what =
        std::to_string(b) + " bytes of a message of " + std::to_string(m.size());
    const ibp::wire_fault f = check_wire_decode<T>(codec, buffer, b, n, where, b % 8 == 5, what, s);
    EXPECT_EQ(f == ibp::wire_fault::none, b >= m.size()) << what;
  }
}

/// The compressed message the GPU encodes of n low_entropy_values, checked against the host
/// reference encoder.
template <class T>
std::vector<std::byte> compressed_message(ibp::wire_codec& codec, std::size_t n, int lo, int count,
                                          std::size_t raw_row, std::uint64_t seed, cudaStream_t s) {
  const std::vector<std::byte> data = low_entropy_values<T>(n, lo, count, raw_row, seed);
  std::vector<std::byte> m = encode_on_gpu<T>(codec, data, s);
  EXPECT_EQ(m, ibp::wire_encode(data, sizeof(T)));
  if (m.size() < ibp::wire_header_bytes) {
    ADD_FAILURE() << "no message";
    return {};
  }
  EXPECT_EQ(header_of(m).kind, ibp::wire_compressed);
  return m;
}

/// The message's rows stored raw and compressed (from its sizes section).
std::pair<std::size_t, std::size_t> raw_and_compressed_rows(const std::vector<std::byte>& m,
                                                            std::size_t n, std::uint32_t v) {
  const ibp::wire_layout w = ibp::wire_layout_for(n, v);
  std::size_t raw = 0;
  for (std::uint64_t r = 0; r < w.rows; ++r) {
    std::uint16_t size = 0;
    std::memcpy(&size, m.data() + w.sizes + 2 * r, 2);
    raw += size == w.row_length(r) ? 1 : 0;
  }
  return {raw, w.rows - raw};
}

/// `variants` copies of m with 1 to 3 bits flipped in [lo, hi) of each, decoded (every
/// third with decode_reduce, every other placed at a guarded page end, padded to whole
/// granules with other bytes); returns how many the host refused.
template <class T>
int flip_campaign(ibp::wire_codec& codec, const std::vector<std::byte>& m, std::size_t n,
                  std::size_t lo, std::size_t hi, int variants, const std::string& region,
                  std::mt19937_64& rng, cudaStream_t s) {
  int refused = 0;
  for (int k = 0; k < variants && !has_failure(); ++k) {
    std::vector<std::byte> bad = m;
    std::string what = region + " variant " + std::to_string(k) + ": bits";
    std::vector<std::size_t> flipped;  // distinct bits: two flips of one bit would cancel
    for (int flips = 1 + static_cast<int>(rng() % 3); flips > 0; --flips) {
      const std::size_t at = lo + rng() % (hi - lo);
      const auto bit = static_cast<unsigned>(rng() % 8);
      if (std::find(flipped.begin(), flipped.end(), 8 * at + bit) != flipped.end()) continue;
      flipped.push_back(8 * at + bit);
      flip_bit(bad, at, bit);
      // (appended piece by piece: a chain of + trips g++ 12's -Wrestrict at -O3)
      what += ' ';
      what += std::to_string(at);
      what += '.';
      what += std::to_string(bit);
    }
    const placement where = k % 2 == 0 ? placement::device : placement::guarded_host;
    if (where == placement::guarded_host) bad.resize((bad.size() + 15) / 16 * 16, std::byte{0x5A});
    const ibp::wire_fault f =
        check_wire_decode<T>(codec, bad, bad.size(), n, where, k % 3 == 2, what, s);
    refused += f != ibp::wire_fault::none ? 1 : 0;
  }
  return refused;
}

/// m with 1 or 2 header fields changed and the check word made valid again, so that only
/// the fields' agreement with each other, the buffer and the caller can reveal the change;
/// the buffer sometimes runs on past the message (so larger claims may fit).
template <class T>
std::vector<std::byte> lying_header(const std::vector<std::byte>& m, std::size_t n,
                                    std::mt19937_64& rng, std::string& what) {
  constexpr std::uint32_t v = sizeof(T);
  const auto pick = [&rng](std::uint64_t k) { return k == 0 ? std::uint64_t{0} : rng() % k; };
  ibp::wire_header h = header_of(m);
  std::size_t buffer = m.size();
  if (pick(3) == 0) buffer += pick(n * v + 64);
  for (int changes = 1 + static_cast<int>(pick(2)); changes > 0; --changes) {
    switch (pick(9)) {
      case 0: {  // another row length, with the row count, payload and total its layout calls for
        const auto l = static_cast<std::uint32_t>(v * (1 + pick(ibp::wire_max_row_bytes / v)));
        const ibp::wire_layout w = ibp::wire_layout::of(n, v, l);
        h.row_bytes = l;
        h.rows = w.rows;
        h.payload_bytes = w.rows;
        if (w.payload + w.rows <= buffer) {
          const std::uint64_t most = std::min<std::uint64_t>(buffer - w.payload, w.data_bytes);
          h.payload_bytes = w.rows + pick(most - w.rows + 1);
        }
        h.total_bytes = w.payload + h.payload_bytes;
        what += " row_bytes " + std::to_string(l) + ", payload " + std::to_string(h.payload_bytes);
        break;
      }
      case 1:
        h.rows = pick(2) == 0 ? h.rows + 1 : h.rows - 1;
        what += " rows " + std::to_string(h.rows);
        break;
      case 2: {  // payload and total moved together
        const std::uint64_t d = 1 + pick(8);
        h.payload_bytes = pick(2) == 0 ? h.payload_bytes + d : h.payload_bytes - d;
        h.total_bytes = pick(2) == 0 ? h.total_bytes + d : h.total_bytes - d;
        what += " payload " + std::to_string(h.payload_bytes) + ", total " +
                std::to_string(h.total_bytes);
        break;
      }
      case 3:
        h.total_bytes = pick(buffer + 64);
        what += " total " + std::to_string(h.total_bytes);
        break;
      case 4:
        h.values = pick(2 * n + 1);
        what += " values " + std::to_string(h.values);
        break;
      case 5:  // a raw message of the same values
        h.kind = ibp::wire_raw;
        h.chunk_bytes = 0;
        h.row_bytes = 0;
        h.rows = 0;
        h.threshold_percent = 0;
        h.payload_bytes = n * v;
        h.total_bytes = ibp::wire_header_bytes + n * v;
        if (pick(2) == 0) buffer = std::max<std::size_t>(buffer, h.total_bytes + pick(16));
        what += " raw kind";
        break;
      case 6:
        h.threshold_percent = static_cast<std::uint16_t>(pick(128));
        what += " threshold " + std::to_string(h.threshold_percent);
        break;
      case 7:
        h.reserved = pick(2) == 0 ? 0 : rng();
        what += " reserved " + std::to_string(h.reserved);
        break;
      default:
        if (pick(2) == 0) {
          h.chunk_bytes = static_cast<std::uint8_t>(12 - h.chunk_bytes);
        } else {
          h.value_bytes = static_cast<std::uint8_t>(12 - h.value_bytes);
        }
        what +=
            " chunk " + std::to_string(h.chunk_bytes) + ", value " + std::to_string(h.value_bytes);
        break;
    }
  }
  h.check = ibp::wire_check_word(h);
  std::vector<std::byte> out = m;
  out.resize(buffer, std::byte{0x5A});
  std::memcpy(out.data(), &h, sizeof h);
  what += ", " + std::to_string(buffer) + " bytes";
  return out;
}

template <class T>
void ibp_wire_bit_flips(std::uint64_t seed) {
  SCOPED_TRACE(sizeof(T) == 4 ? "float" : "double");
  core::stream s;
  ibp::wire_codec codec;
  const std::size_t n = 4160 / sizeof(T);  // 8 rows of 512 bytes and one of 64
  const std::vector<std::byte> m = compressed_message<T>(codec, n, -32, 64, 3, seed, s);
  ASSERT_FALSE(m.empty());
  const auto [raw, compressed] = raw_and_compressed_rows(m, n, sizeof(T));
  ASSERT_GT(raw, 0u);
  ASSERT_GT(compressed, 0u);
  const ibp::wire_layout w = ibp::wire_layout_for(n, sizeof(T));
  std::mt19937_64 rng{seed};
  // Every header flip breaks the check word.
  EXPECT_EQ(flip_campaign<T>(codec, m, n, 0, ibp::wire_header_bytes, 120, "header", rng, s), 120);
  const int sections =
      flip_campaign<T>(codec, m, n, ibp::wire_header_bytes, w.payload, 160, "sections", rng, s);
  const int payload = flip_campaign<T>(codec, m, n, w.payload, m.size(), 160, "payload", rng, s);
  const int anywhere = flip_campaign<T>(codec, m, n, 0, m.size(), 100, "anywhere", rng, s);
  if (has_failure()) return;
  // Both verdicts occur: flips that are found, and flips that decode to other values.
  EXPECT_GT(sections, 0);
  EXPECT_LT(sections, 160);  // a mask or bitval bit may decode to other values
  EXPECT_GT(payload, 0);
  EXPECT_LT(payload, 160);
  EXPECT_GT(anywhere, 0);
}

template <class T>
void ibp_wire_lying_headers(std::uint64_t seed) {
  SCOPED_TRACE(sizeof(T) == 4 ? "float" : "double");
  core::stream s;
  ibp::wire_codec codec;
  const std::size_t n = 4160 / sizeof(T);
  const std::vector<std::byte> m = compressed_message<T>(codec, n, -32, 64, 3, seed, s);
  ASSERT_FALSE(m.empty());
  std::mt19937_64 rng{seed};
  int refused = 0;
  const int variants = 200;
  for (int k = 0; k < variants && !has_failure(); ++k) {
    std::string what = "variant " + std::to_string(k) + ":";
    const std::vector<std::byte> bad = lying_header<T>(m, n, rng, what);
    const placement where = k % 2 == 0 ? placement::device : placement::guarded_host;
    refused += check_wire_decode<T>(codec, bad, bad.size(), n, where, k % 3 == 2, what, s) !=
                       ibp::wire_fault::none
                   ? 1
                   : 0;
  }
  EXPECT_GT(refused, 0);
  EXPECT_LT(refused, variants);  // some lies agree with everything (a raw kind, a threshold)
}

// ---- frsz2: wire messages -------------------------------------------------------------

/// The message the GPU encoder makes of x with frsz2::wire_codec<Bits>, checked against
/// the host reference encoder (payload words, then exponent words, then zero padding).
template <int Bits, class T>
std::vector<std::byte> frsz2_message(const std::vector<T>& x, cudaStream_t s) {
  using codec_type = frsz2::wire_codec<Bits>;
  using F = typename codec_type::template format_for<T>;
  const std::size_t n = x.size();
  const std::size_t bytes = codec_type::template max_wire_bytes<T>(n);
  core::device_buffer<T> src{n};
  src.copy_from(std::span<const T>{x}, s);
  core::device_buffer<std::byte> wire{bytes};
  wire.fill_bytes(0, s);
  codec_type{}.encode(src.data(), n, wire.data(), nullptr, s);
  std::vector<std::byte> m(bytes);
  wire.copy_to(std::span<std::byte>{m}, s);
  SQUEEZE_CUDA_TRY(cudaStreamSynchronize(s));
  const frsz2::host_vector<F> ref = frsz2::encode<F>(std::span<const T>{x});
  const std::size_t payload = ref.payload.size() * 4;
  EXPECT_EQ(std::memcmp(m.data(), ref.payload.data(), payload), 0);
  EXPECT_EQ(std::memcmp(m.data() + payload, ref.exponents.data(), ref.exponents.size() * 2), 0);
  return m;
}

/// `variants` corruptions of an FRSZ2 message (exponent words: a bit, random, the edges of
/// the range, reserved and nonfinite bits; payload: a bit, a random word, a code past the
/// vector's end; the padding), each decoded and max-reduced on the GPU, from device memory
/// and from a guarded page end. Every block the format's rules accept (check_block) holds
/// the bits of the host decoder (decode_value of read_code, the reference decode's values)
/// on both paths; the others are unspecified but stay inside dst.
template <int Bits, class T>
void frsz2_campaign(int variants, std::uint64_t seed) {
  using codec_type = frsz2::wire_codec<Bits>;
  using F = typename codec_type::template format_for<T>;
  SCOPED_TRACE("frsz2::wire_codec<" + std::to_string(Bits) + ">, " +
               (sizeof(T) == 4 ? "float" : "double"));
  constexpr std::size_t n = 1013;  // 31 whole blocks and one of 21 values
  constexpr std::size_t blocks = F::blocks(n);
  constexpr std::size_t payload = F::payload_words(n) * 4;
  constexpr std::size_t wpb = F::words_per_block;
  const std::size_t bytes = codec_type::template max_wire_bytes<T>(n);
  core::stream s;
  const codec_type codec;
  const std::vector<T> x = squeeze::test::frsz2_values<T>(n, seed, true);
  const std::vector<std::byte> message = frsz2_message<Bits, T>(x, s);
  ASSERT_EQ(message.size(), bytes);
  const std::vector<T> y = squeeze::test::frsz2_values<T>(n, seed + 1, false);
  std::vector<std::byte> operands(n * sizeof(T));
  std::memcpy(operands.data(), y.data(), operands.size());

  std::mt19937_64 rng{seed};
  const auto pick = [&rng](std::uint64_t k) { return k == 0 ? std::uint64_t{0} : rng() % k; };
  std::size_t changed_good = 0;  // blocks changed by a corruption that the rules accept
  std::size_t broken = 0;        // blocks that break them
  for (int k = 0; k < variants && !has_failure(); ++k) {
    std::vector<std::byte> m = message;
    std::string what = "variant " + std::to_string(k) + ":";
    const auto exponent = [&](std::size_t b) {
      std::uint16_t w = 0;
      std::memcpy(&w, m.data() + payload + 2 * b, 2);
      return w;
    };
    const auto set_exponent = [&](std::size_t b, std::uint16_t w) {
      std::memcpy(m.data() + payload + 2 * b, &w, 2);
      what += " exponent " + std::to_string(b) + " = " + std::to_string(w);
    };
    for (int c = 1 + static_cast<int>(pick(4)); c > 0; --c) {
      const std::size_t b = pick(blocks);
      switch (pick(8)) {
        case 0: set_exponent(b, static_cast<std::uint16_t>(exponent(b) ^ (1u << pick(16)))); break;
        case 1: set_exponent(b, static_cast<std::uint16_t>(rng())); break;
        case 2: {
          const std::uint32_t top = F::exponent_all_ones;
          const std::uint32_t eb[] = {0, 1, top - 1, top, top + 1, 0x0fff};
          const std::uint32_t flags[] = {0, F::nonfinite_flag, 0x1000, 0x4000};
          set_exponent(b, static_cast<std::uint16_t>(eb[pick(6)] | flags[pick(4)]));
          break;
        }
        case 3:
        case 4: {
          const std::size_t at = pick(payload);
          const auto bit = static_cast<unsigned>(pick(8));
          flip_bit(m, at, bit);
          what += " payload bit " + std::to_string(at) + "." + std::to_string(bit);
          break;
        }
        case 5: {
          const std::size_t word = pick(payload / 4);
          const auto r = static_cast<std::uint32_t>(rng());
          std::memcpy(m.data() + 4 * word, &r, 4);
          what += " payload word " + std::to_string(word);
          break;
        }
        case 6: {  // a code of the last block past the vector's end: read by nobody
          const std::size_t first = n % F::block_size;
          const std::size_t code = first + pick(F::block_size - first);
          const std::size_t bit = (blocks - 1) * wpb * 32 + code * Bits + pick(Bits);
          flip_bit(m, bit / 8, static_cast<unsigned>(bit % 8));
          what += " bit " + std::to_string(bit % Bits) + " of code " + std::to_string(code) +
                  " of the last block";
          break;
        }
        default: {  // the padding after the exponents
          const std::size_t used = payload + 2 * blocks;
          if (used == bytes) break;
          const std::size_t at = used + pick(bytes - used);
          flip_bit(m, at, static_cast<unsigned>(pick(8)));
          what += " padding byte " + std::to_string(at);
          break;
        }
      }
    }
    // The host's reading of the same words.
    std::vector<std::uint32_t> words(payload / 4);
    std::memcpy(words.data(), m.data(), payload);
    std::vector<bool> good(blocks);
    for (std::size_t b = 0; b < blocks; ++b) {
      const int count =
          static_cast<int>(std::min<std::size_t>(F::block_size, n - b * F::block_size));
      good[b] = frsz2::check_block<F>(exponent(b), words.data() + b * wpb, count) ==
                frsz2::block_fault::none;
      const bool changed =
          std::memcmp(m.data() + b * wpb * 4, message.data() + b * wpb * 4, wpb * 4) != 0 ||
          std::memcmp(m.data() + payload + 2 * b, message.data() + payload + 2 * b, 2) != 0;
      if (!good[b]) {
        ++broken;
      } else if (changed) {
        ++changed_good;
      }
    }

    const placement where = k % 2 == 0 ? placement::device : placement::guarded_host;
    const placed_input in{where, m, s};
    guarded_output dec{n * sizeof(T), 0, s};
    guarded_output red{n * sizeof(T), 0, s};
    red.fill(operands, s);
    codec.decode(in.data(), bytes, n, reinterpret_cast<T*>(dec.data()), s);
    codec.decode_reduce(in.data(), bytes, n, reinterpret_cast<T*>(red.data()), core::reduce_op::max,
                        s);
    bool dec_ok = false;
    bool red_ok = false;
    const std::vector<std::byte> got = dec.fetch(s, dec_ok);
    const std::vector<std::byte> reduced = red.fetch(s, red_ok);
    EXPECT_TRUE(dec_ok) << what << ": decode wrote outside dst";
    EXPECT_TRUE(red_ok) << what << ": decode_reduce wrote outside dst";
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t b = i / F::block_size;
      if (!good[b]) continue;
      const T want =
          frsz2::decode_value<F>(frsz2::read_code<F>(words.data() + b * wpb,
                                                     static_cast<std::uint32_t>(i % F::block_size)),
                                 exponent(b));
      const T value = value_at<T>(got, i);
      if (std::memcmp(&value, &want, sizeof(T)) != 0) {
        ADD_FAILURE() << what << ": value " << i << " decodes to " << value << ", the host to "
                      << want;
        break;
      }
      const T expect = core::apply(core::reduce_op::max, y[i], want);
      if (!same_value(value_at<T>(reduced, i), expect)) {
        ADD_FAILURE() << what << ": value " << i << " reduces to " << value_at<T>(reduced, i)
                      << ", the host to " << expect;
        break;
      }
    }
  }
  if (has_failure()) return;
  EXPECT_GT(changed_good, 0u);
  EXPECT_GT(broken, 0u);
}

/// frsz2::wire_codec refuses a message of another size than n values take (format_error,
/// before any launch: dst stays poisoned), and decodes the first n' values of a message
/// whose size n' values take as well.
template <int Bits, class T>
void frsz2_sizes(std::uint64_t seed) {
  using codec_type = frsz2::wire_codec<Bits>;
  using F = typename codec_type::template format_for<T>;
  SCOPED_TRACE("frsz2::wire_codec<" + std::to_string(Bits) + ">, " +
               (sizeof(T) == 4 ? "float" : "double"));
  constexpr std::size_t n = 1013;
  const std::size_t bytes = codec_type::template max_wire_bytes<T>(n);
  core::stream s;
  const codec_type codec;
  const std::vector<T> x = squeeze::test::frsz2_values<T>(n, seed, true);
  const std::vector<std::byte> m = frsz2_message<Bits, T>(x, s);
  const placed_input in{placement::guarded_host, m, s};
  for (const std::size_t wrong :
       {std::size_t{0}, bytes - 16, bytes - 1, bytes + 1, bytes + 16, 2 * bytes}) {
    SCOPED_TRACE(std::to_string(wrong) + " bytes for " + std::to_string(bytes));
    guarded_output dst{n * sizeof(T), 0, s};
    EXPECT_THROW(codec.decode(in.data(), wrong, n, reinterpret_cast<T*>(dst.data()), s),
                 squeeze::format_error);
    EXPECT_THROW(codec.decode_reduce(in.data(), wrong, n, reinterpret_cast<T*>(dst.data()),
                                     core::reduce_op::sum, s),
                 squeeze::format_error);
    bool ok = false;
    const std::vector<std::byte> got = dst.fetch(s, ok);
    EXPECT_TRUE(ok);
    EXPECT_TRUE(all_poison(got.data(), got.size()));
  }
  // 1000 values fill the same 32 blocks: their message has the same size.
  constexpr std::size_t fewer = 1000;
  ASSERT_EQ(codec_type::template max_wire_bytes<T>(fewer), bytes);
  guarded_output dst{fewer * sizeof(T), 0, s};
  codec.decode(in.data(), bytes, fewer, reinterpret_cast<T*>(dst.data()), s);
  bool ok = false;
  const std::vector<std::byte> got = dst.fetch(s, ok);
  EXPECT_TRUE(ok) << "decode of " << fewer << " values wrote outside them";
  const std::vector<T> want = frsz2::decode(frsz2::encode<F>(std::span<const T>{x}));
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size()), 0);
  // No values, no bytes: nothing to do, nothing touched.
  guarded_output none{0, 0, s};
  EXPECT_NO_THROW(codec.decode(in.data(), 0, 0, reinterpret_cast<T*>(none.data()), s));
  none.fetch(s, ok);
  EXPECT_TRUE(ok);
}

}  // namespace corrupt_input_test

using namespace corrupt_input_test;

// ---- ibp::warp_decoder and ibp::gather_rows -------------------------------------------

TEST(CorruptIbpGather, CondensedSets) {
  SQUEEZE_REQUIRE_GPU();
  // Rows of every chunk size, a short last chunk (L = 1003, C = 8), and rows stored in more
  // than the decoder's 4 KiB workspace (L = 5003: streamed).
  const ibp_shape shapes[] = {{ibp::layout::condensed, 4, 256, 64},
                              {ibp::layout::condensed, 1, 29, 64},
                              {ibp::layout::condensed, 8, 1003, 48},
                              {ibp::layout::condensed, 2, 5003, 12}};
  std::uint64_t seed = 101;
  for (const ibp_shape& shape : shapes) ibp_campaign(shape, false, 80, seed++);
}

TEST(CorruptIbpGather, InPlaceSets) {
  SQUEEZE_REQUIRE_GPU();
  const ibp_shape shapes[] = {{ibp::layout::in_place, 4, 256, 64},
                              {ibp::layout::in_place, 1, 29, 64},
                              {ibp::layout::in_place, 8, 1003, 48},
                              {ibp::layout::in_place, 2, 5003, 12}};
  std::uint64_t seed = 201;
  for (const ibp_shape& shape : shapes) ibp_campaign(shape, false, 80, seed++);
}

TEST(CorruptIbpGather, ClusteredSets) {
  SQUEEZE_REQUIRE_GPU();
  ibp_campaign({ibp::layout::condensed, 4, 300, 200}, true, 100, 301);
  ibp_campaign({ibp::layout::in_place, 4, 300, 200}, true, 100, 302);
}

// An in-place set whose data cannot hold its rows is refused on the host: no launch, the
// output and status untouched.
TEST(CorruptIbpGather, ShortInPlaceDataIsRefusedBeforeAnyLaunch) {
  SQUEEZE_REQUIRE_GPU();
  const ibp_base b = make_base({ibp::layout::in_place, 4, 256, 64}, false, 401);
  core::stream s;
  const ibp::device_codebook dcb{b.book, s};
  for (const std::size_t cut : {std::size_t{1}, std::size_t{255}, std::size_t{256 * 63}}) {
    ibp_variant v;
    v.set = b.set;
    v.set.data.resize(v.set.data.size() - cut);
    const device_variant dv{b, v, dcb.ref(), placement::guarded_host, s};
    const std::vector<std::int64_t> indices{0, 1, 2};
    core::device_buffer<std::int64_t> idx{indices.size()};
    idx.copy_from(std::span<const std::int64_t>{indices}, s);
    guarded_output dst{indices.size() * 256, 0, s};
    core::device_buffer<status> st{1};
    st.fill_bytes(0, s);
    ibp::gather_args<std::int64_t> a = dv.args();
    a.rows = b.set.rows;  // more rows than the data holds
    a.dst = dst.data();
    a.dst_stride = 256;
    a.indices = idx.data();
    a.count = indices.size();
    a.status_out = st.data();
    EXPECT_THROW(ibp::gather_rows(a, s), squeeze::invalid_argument) << cut;
    status got = status::ok;
    SQUEEZE_CUDA_TRY(cudaMemcpyAsync(&got, st.data(), sizeof got, cudaMemcpyDeviceToHost, s));
    bool ok = false;
    const std::vector<std::byte> out = dst.fetch(s, ok);
    EXPECT_TRUE(ok);
    EXPECT_TRUE(all_poison(out.data(), out.size()));
    EXPECT_EQ(got, status::ok);
  }
}

// ---- ibp::wire_codec ------------------------------------------------------------------

TEST(CorruptIbpWire, EveryTruncationIsReported) {
  SQUEEZE_REQUIRE_GPU();
  core::stream s;
  ibp::wire_codec codec;
  // The smallest messages that compress: four rows of few distinct values (the last short).
  const std::vector<std::byte> d = compressed_message<double>(codec, 197, 1, 4, no_raw_row, 501, s);
  ASSERT_FALSE(d.empty());
  const std::vector<std::byte> f = compressed_message<float>(codec, 394, 1, 4, no_raw_row, 502, s);
  ASSERT_FALSE(f.empty());
  every_truncation<double>(codec, d, 197, s);
  every_truncation<float>(codec, f, 394, s);
  // A raw message (random bits do not compress).
  const std::vector<std::byte> data = squeeze::test::random_bytes(40 * 8, 503);
  const std::vector<std::byte> r = encode_on_gpu<double>(codec, data, s);
  ASSERT_EQ(r, ibp::wire_encode(data, 8));
  ASSERT_EQ(header_of(r).kind, ibp::wire_raw);
  every_truncation<double>(codec, r, 40, s);
}

TEST(CorruptIbpWire, BitFlipsAreReportedExactlyWhenTheHostFindsThem) {
  SQUEEZE_REQUIRE_GPU();
  ibp_wire_bit_flips<float>(601);
  ibp_wire_bit_flips<double>(602);
}

TEST(CorruptIbpWire, WrongSizesUnderAValidCheckWordAreReportedAsTheHostFindsThem) {
  SQUEEZE_REQUIRE_GPU();
  ibp_wire_lying_headers<float>(701);
  ibp_wire_lying_headers<double>(702);
}

TEST(CorruptIbpWire, WrongCountsAndTypesAreReported) {
  SQUEEZE_REQUIRE_GPU();
  core::stream s;
  ibp::wire_codec codec;
  const std::size_t n = 520;
  const std::vector<std::byte> m = compressed_message<double>(codec, n, -32, 64, 3, 801, s);
  ASSERT_FALSE(m.empty());
  const std::vector<std::byte> padded = [&] {
    std::vector<std::byte> p = m;
    p.resize((m.size() + 15) / 16 * 16, std::byte{0x5A});
    return p;
  }();
  for (const std::size_t count : {n - 1, n + 1, std::size_t{0}, 2 * n}) {
    const std::string what = std::to_string(count) + " values expected";
    EXPECT_EQ(
        check_wire_decode<double>(codec, m, m.size(), count, placement::device, false, what, s),
        ibp::wire_fault::values);
    EXPECT_EQ(check_wire_decode<double>(codec, padded, padded.size(), count,
                                        placement::guarded_host, true, what, s),
              ibp::wire_fault::values);
  }
  for (const std::size_t count : {2 * n, n}) {  // doubles read as floats
    EXPECT_EQ(check_wire_decode<float>(codec, m, m.size(), count, placement::device, false,
                                       std::to_string(count) + " floats", s),
              ibp::wire_fault::value_bytes);
  }
  const std::vector<std::byte> fm = compressed_message<float>(codec, 2 * n, -32, 64, 3, 802, s);
  ASSERT_FALSE(fm.empty());
  EXPECT_EQ(check_wire_decode<double>(codec, fm, fm.size(), n, placement::device, true,
                                      "floats read as doubles", s),
            ibp::wire_fault::value_bytes);
}

// ---- frsz2::wire_codec ----------------------------------------------------------------

TEST(CorruptFrsz2Wire, BlocksTheRulesAcceptDecodeAsOnTheHost) {
  SQUEEZE_REQUIRE_GPU();
  frsz2_campaign<16, float>(150, 901);   // 16-bit codes: one load per code
  frsz2_campaign<32, float>(150, 902);   // a word per code
  frsz2_campaign<21, double>(150, 903);  // codes that straddle words
  frsz2_campaign<40, double>(150, 904);  // codes longer than a word
}

TEST(CorruptFrsz2Wire, MessagesOfTheWrongSizeAreRefusedBeforeAnyLaunch) {
  SQUEEZE_REQUIRE_GPU();
  frsz2_sizes<16, float>(911);
  frsz2_sizes<21, double>(912);
}
