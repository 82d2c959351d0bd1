// SPDX-License-Identifier: Apache-2.0
// What the snippet harnesses share to run their README blocks on a GPU and check what the
// README says they do: the tests skip where there is no GPU (CI), where the blocks are only
// compiled and linked.
#pragma once

#include <gtest/gtest.h>

#include <squeeze/core/buffer.hpp>
#include <squeeze/core/device.hpp>
#include <squeeze/core/status.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

/// Skips the calling test where no GPU is visible.
#define SNIPPET_REQUIRE_GPU()                                                \
  do {                                                                       \
    const squeeze::core::device_presence presence = squeeze::core::detect_devices(); \
    if (!presence.present()) GTEST_SKIP() << presence.message();            \
  } while (0)

namespace snippet_checks {

/// `host` in new device memory.
template <class T>
squeeze::core::device_buffer<T> upload(const std::vector<T>& host, cudaStream_t stream) {
  squeeze::core::device_buffer<T> d{host.size()};
  d.copy_from(std::span<const T>{host}, stream);
  return d;
}

/// The device buffer's values on the host (waits for the stream).
template <class T>
std::vector<T> download(const squeeze::core::device_buffer<T>& d, cudaStream_t stream) {
  std::vector<T> host(d.size());
  d.copy_to(std::span<T>{host}, stream);
  SQUEEZE_CUDA_TRY(cudaStreamSynchronize(stream));
  return host;
}

/// Runs gather(ids, status) (device pointers) on 8 ids of `rows` rows, one of them the last
/// row, then -1, then `rows`, and expects the status ok for the first and out_of_bounds for
/// the others: what the README says of its gathers.
template <class Gather>
void expect_only_bad_indices_reported(std::int64_t rows, Gather&& gather) {
  squeeze::core::stream stream;
  squeeze::core::device_buffer<squeeze::status> status{1};
  for (const std::int64_t probe : {rows - 1, std::int64_t{-1}, rows}) {
    const std::vector<std::int64_t> ids{0, 5, rows / 2, probe, 7, 7, rows - 1, 1};
    const auto d_ids = upload(ids, stream);
    status.fill_bytes(0, stream);
    gather(d_ids.data(), status.data(), static_cast<cudaStream_t>(stream));
    const squeeze::status got = download(status, stream)[0];
    EXPECT_EQ(got, probe >= 0 && probe < rows ? squeeze::status::ok
                                              : squeeze::status::out_of_bounds)
        << "index " << probe;
  }
}

}  // namespace snippet_checks
