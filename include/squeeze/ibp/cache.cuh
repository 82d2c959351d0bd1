// SPDX-License-Identifier: Apache-2.0
// squeeze/ibp/cache.cuh: a compressed GPU cache of rows of an IBP set (Kamath et al.,
// EuroSys 2026, §5).
//
// A static cache, filled once with the rows expected to be hot (an embedding table's
// frequent ids, a graph's high-degree nodes): their stored bytes, compressed or raw as
// the set holds them, packed back to back into slabs of GPU memory, so the same memory
// holds 1 / (1 - saving) times more rows than an uncompressed cache. A hash map from row
// id to a 64-bit handle (ibp/cache_ref.cuh: the slab, the offset in it, whether the row is
// compressed, and its stored length, so a hit needs no other lookup) finds them. Up to 8
// slabs (one per GPU of a node, or several on one GPU), 1 TiB each, rows up to
// 1 MiB - 1 bytes. The map is open addressing with linear probing, at most half full;
// a warp probes 32 slots per step.
//
//   ibp::compressed_cache cache{slab_bytes};              // one slab on the current GPU
//   cache.insert(host_set, codebook, hot_ids);            // host set: ibp/dataset.hpp
//   cache.gather(args, stream);                           // args: an ibp::gather_args over
//                                                          // the host set (the misses)
//
// cache.gather decodes hits from GPU memory and reads misses from the set `args`
// describes (mapped host memory, usually), with the same warp decoder and status rules as
// ibp::gather_rows; a handle that contradicts the slabs (outside them, a size that does
// not match its flag) is status::corrupt and its row untouched. Slabs on other GPUs are
// read through peer access, which the caller enables.
//
// The handle, the device view and cache_find are in ibp/cache_ref.cuh, the kernel in
// ibp/detail/.
#pragma once

#include <cuda_runtime.h>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "squeeze/core/bits.hpp"
#include "squeeze/core/buffer.hpp"
#include "squeeze/core/cuda_error.hpp"
#include "squeeze/core/device.hpp"
#include "squeeze/core/error.hpp"
#include "squeeze/ibp/cache_ref.cuh"
#include "squeeze/ibp/dataset.hpp"
#include "squeeze/ibp/detail/cache_kernels.cuh"
#include "squeeze/ibp/format.hpp"
#include "squeeze/ibp/gather.cuh"
#include "squeeze/ibp/gather_args.cuh"

namespace squeeze::ibp {

/// Gathers a.count rows like ibp::gather_rows(a, stream), but rows found in `cache` are
/// decoded from GPU memory instead of being read from the set `a` describes. `hits`
/// (optional, device memory) is incremented once per row served from the cache.
/// Asynchronous.
template <gather_policy_like Policy = gather_policy, class Index>
requires std::is_integral_v<Index>
void gather_cached(const gather_args<Index>& a, const compressed_cache_ref& cache,
                   cudaStream_t stream, unsigned long long* hits = nullptr) {
  validate(a);
  SQUEEZE_EXPECTS(cache.capacity == 0 || (core::is_pow2(cache.capacity) && cache.keys != nullptr &&
                                          cache.handles != nullptr),
                  "ibp::gather_cached: the map's capacity must be a power of two with keys and "
                  "handles");
  SQUEEZE_EXPECTS(cache.slab_count <= cache_handle::max_slabs,
                  "ibp::gather_cached: at most 8 slabs");
  if (a.count == 0) return;
  const detail::cache_request<Index> req{a, cache, hits};
  detail::with_kernel_shape<Policy>(row_codebook(a), [&](auto streaming, auto chunk) {
    detail::launch_persistent<Policy,
                              detail::cache_gather_kernel<Policy, decltype(streaming)::value,
                                                          decltype(chunk)::value, Index>>(
        req, a.count, stream);
  });
}

/// A static compressed cache of rows in GPU memory (see the top of this file).
class compressed_cache {
 public:
  /// `slab_bytes` of device memory on each device in `devices` (a device may appear more
  /// than once: several slabs on one GPU); by default one slab on the current device.
  explicit compressed_cache(std::size_t slab_bytes, std::vector<int> devices = {}) {
    if (devices.empty()) {
      int current = 0;
      SQUEEZE_CUDA_TRY(cudaGetDevice(&current));
      devices.push_back(current);
    }
    SQUEEZE_EXPECTS(
        devices.size() <= cache_handle::max_slabs,
        "ibp::compressed_cache: at most 8 slabs, got " + std::to_string(devices.size()));
    SQUEEZE_EXPECTS(slab_bytes > 0 && slab_bytes - 1 <= cache_handle::max_offset,
                    "ibp::compressed_cache: slab_bytes must be 1 B to 1 TiB");
    SQUEEZE_CUDA_TRY(cudaGetDevice(&home_));
    for (const int d : devices) {
      core::device_scope on{d};
      slabs_.emplace_back(slab_bytes);
      // The decoder reads whole 16-byte words, so the bytes after the last row of a slab are
      // read (and ignored): zero them once so that they are defined.
      SQUEEZE_CUDA_TRY(cudaMemset(slabs_.back().data(), 0, slab_bytes));
    }
    used_.assign(devices.size(), 0);
  }

  /// Caches rows `ids` of the host set `set` (either layout; one codebook `cb`), in order,
  /// while they fit: each row's stored bytes go to the first slab with room. Rows already
  /// cached are skipped. Returns how many rows were added. Synchronous.
  std::size_t insert(const compressed_set& set, const codebook& cb,
                     std::span<const std::uint64_t> ids) {
    validate(cb);
    return insert_rows(set, ids, [&](std::uint64_t) { return cb.ref(); });
  }

  /// Caches rows of a clustered set (ibp::cluster_set, or a type like it with rows,
  /// book(cluster_of(r)) and a validate() found by lookup), as insert above.
  template <class Clusters>
  requires requires(const Clusters& c) {
    c.book(c.cluster_of(std::uint64_t{0}));
    validate(c);
    { c.rows } -> std::convertible_to<std::uint64_t>;
  }
  std::size_t insert(const compressed_set& set, const Clusters& clusters,
                     std::span<const std::uint64_t> ids) {
    validate(clusters);  // ids below k, books well formed
    SQUEEZE_EXPECTS(clusters.rows == set.rows,
                    "ibp::compressed_cache::insert: the clusters describe " +
                        std::to_string(clusters.rows) + " rows, the set holds " +
                        std::to_string(set.rows));
    return insert_rows(set, ids,
                       [&](std::uint64_t r) { return clusters.book(clusters.cluster_of(r)); });
  }

  /// gather_cached(a, ref(), stream, hits): the rows found here decoded from GPU memory,
  /// the others read from the set `a` describes. The cache must outlive the work.
  template <gather_policy_like Policy = gather_policy, class Index>
  requires std::is_integral_v<Index>
  void gather(const gather_args<Index>& a, cudaStream_t stream,
              unsigned long long* hits = nullptr) const {
    gather_cached<Policy>(a, ref(), stream, hits);
  }

  /// Whether row `id` is cached.
  [[nodiscard]] bool contains(std::uint64_t id) const {
    if (keys_.empty()) return false;
    const std::uint64_t mask = keys_.size() - 1;
    for (std::uint64_t s = cache_hash(id) & mask;; s = (s + 1) & mask) {
      if (keys_[s] == id) return true;
      if (keys_[s] == compressed_cache_ref::empty_key) return false;
    }
  }

  /// The device view, for user kernels that call cache_find themselves.
  [[nodiscard]] compressed_cache_ref ref() const noexcept {
    compressed_cache_ref c;
    c.keys = keys_d_.data();
    c.handles = handles_d_.data();
    c.capacity = keys_d_.size();
    c.slab_count = static_cast<std::uint32_t>(slabs_.size());
    for (std::size_t s = 0; s < slabs_.size(); ++s) {
      c.slabs[s] = slabs_[s].data();
      c.slab_bytes[s] = slabs_[s].bytes();
    }
    return c;
  }

  /// Rows cached.
  [[nodiscard]] std::size_t rows() const noexcept { return entries_; }
  /// Slab bytes holding rows.
  [[nodiscard]] std::uint64_t bytes_used() const noexcept {
    std::uint64_t b = 0;
    for (const std::uint64_t u : used_) b += u;
    return b;
  }
  /// Slab bytes in all.
  [[nodiscard]] std::uint64_t capacity_bytes() const noexcept {
    return slabs_.empty() ? 0 : slabs_.size() * slabs_.front().bytes();
  }

 private:
  /// The stored bytes of row r of a host set whose shape was checked: its offset range
  /// (condensed), or the prefix of its slot its participation bits describe (in place).
  /// Throws format_error on a malformed row.
  static std::span<const std::byte> stored_of(const compressed_set& set, std::uint64_t r,
                                              const codebook_ref& cb) {
    const std::uint32_t l = cb.tensor_bytes;
    std::span<const std::byte> row = detail::stored_row(set, l, r);
    if (set.kind == layout::in_place && !set.is_raw(r)) {
      const std::uint64_t bytes = (stream_bits(row.data(), cb) + 7) / 8;
      if (bytes >= l) {
        throw format_error{"ibp::compressed_cache: in-place row " + std::to_string(r) +
                           " describes a stream of " + std::to_string(bytes) +
                           " bytes, which does not fit its " + std::to_string(l) + "-byte slot"};
      }
      row = row.first(bytes);
    }
    if (row.empty() || row.size() > l || set.is_raw(r) != (row.size() == l)) {
      throw format_error{"ibp::compressed_cache: row " + std::to_string(r) + " stores " +
                         std::to_string(row.size()) + " bytes, which is not a " +
                         (set.is_raw(r) ? "raw" : "compressed") + " row of a " + std::to_string(l) +
                         "-byte tensor"};
    }
    return row;
  }

  template <class CodebookOf>
  std::size_t insert_rows(const compressed_set& set, std::span<const std::uint64_t> ids,
                          CodebookOf&& codebook_of) {
    // Every row is checked before the cache changes: a bad one throws and adds nothing.
    std::vector<std::span<const std::byte>> stored(ids.size());
    std::vector<bool> compressed(ids.size());
    for (std::size_t i = 0; i < ids.size(); ++i) {
      const std::uint64_t r = ids[i];
      SQUEEZE_EXPECTS(r < set.rows, "ibp::compressed_cache::insert: row id " + std::to_string(r) +
                                        " is outside the set's " + std::to_string(set.rows) +
                                        " rows");
      const codebook_ref cb = codebook_of(r);
      if (i == 0) detail::check_set_shape(set, cb.tensor_bytes);  // every book has one length
      SQUEEZE_EXPECTS(cb.tensor_bytes <= cache_handle::max_stored,
                      "ibp::compressed_cache: rows must be shorter than 1 MiB");
      stored[i] = stored_of(set, r, cb);
      compressed[i] = stored[i].size() < cb.tensor_bytes;
    }
    std::vector<std::vector<std::byte>> staged(slabs_.size());
    std::size_t added = 0;
    for (std::size_t i = 0; i < ids.size(); ++i) {
      if (contains(ids[i])) continue;
      const std::size_t bytes = stored[i].size();
      std::size_t slab = 0;
      while (slab < slabs_.size() &&
             used_[slab] + staged[slab].size() + bytes > slabs_[slab].bytes()) {
        ++slab;
      }
      if (slab == slabs_.size()) continue;  // full for this row; a shorter one may fit
      const std::uint64_t offset = used_[slab] + staged[slab].size();
      staged[slab].insert(staged[slab].end(), stored[i].begin(), stored[i].end());
      put(ids[i], cache_handle::make(static_cast<std::uint32_t>(slab), offset, compressed[i],
                                     static_cast<std::uint32_t>(bytes)));
      ++added;
    }
    for (std::size_t s = 0; s < slabs_.size(); ++s) {
      if (staged[s].empty()) continue;
      SQUEEZE_CUDA_TRY(cudaMemcpy(slabs_[s].data() + used_[s], staged[s].data(), staged[s].size(),
                                  cudaMemcpyHostToDevice));
      used_[s] += staged[s].size();
    }
    upload();
    return added;
  }

  /// Adds key -> handle, growing the map to keep it at most half full.
  void put(std::uint64_t key, cache_handle h) {
    if (2 * (entries_ + 1) > keys_.size()) {
      std::vector<std::uint64_t> old_keys = std::move(keys_);
      std::vector<std::uint64_t> old_handles = std::move(handles_);
      const std::size_t capacity = old_keys.empty() ? 64 : 2 * old_keys.size();
      keys_.assign(capacity, compressed_cache_ref::empty_key);
      handles_.assign(capacity, 0);
      entries_ = 0;
      for (std::size_t s = 0; s < old_keys.size(); ++s) {
        if (old_keys[s] != compressed_cache_ref::empty_key) place(old_keys[s], old_handles[s]);
      }
    }
    place(key, h.bits);
  }

  void place(std::uint64_t key, std::uint64_t handle) {
    const std::uint64_t mask = keys_.size() - 1;
    std::uint64_t s = cache_hash(key) & mask;
    while (keys_[s] != compressed_cache_ref::empty_key) s = (s + 1) & mask;
    keys_[s] = key;
    handles_[s] = handle;
    ++entries_;
  }

  void upload() {
    core::device_scope on{home_};
    if (keys_d_.size() != keys_.size()) {
      keys_d_ = core::device_buffer<std::uint64_t>{keys_.size()};
      handles_d_ = core::device_buffer<std::uint64_t>{handles_.size()};
    }
    SQUEEZE_CUDA_TRY(
        cudaMemcpy(keys_d_.data(), keys_.data(), keys_d_.bytes(), cudaMemcpyHostToDevice));
    SQUEEZE_CUDA_TRY(
        cudaMemcpy(handles_d_.data(), handles_.data(), handles_d_.bytes(), cudaMemcpyHostToDevice));
  }

  int home_ = 0;  ///< the device the map lives on (current at construction)
  std::vector<core::device_buffer<std::byte>> slabs_;
  std::vector<std::uint64_t> used_;
  std::vector<std::uint64_t> keys_;
  std::vector<std::uint64_t> handles_;
  std::size_t entries_ = 0;
  core::device_buffer<std::uint64_t> keys_d_;
  core::device_buffer<std::uint64_t> handles_d_;
};

}  // namespace squeeze::ibp
