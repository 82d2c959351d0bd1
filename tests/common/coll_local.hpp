// SPDX-License-Identifier: Apache-2.0
// tests/common/coll_local.hpp: N ranks as threads of one process sharing one GPU, for testing
// coll:: collectives where one GPU is all there is. A test harness, not a product transport.
//
// local_transport keeps NCCL's contract (stream-ordered steps): end() records an event on the
// sender's stream, the receiver's stream waits for it and copies the message with
// cudaMemcpyAsync, and the sender's stream then waits for that copy, so neither side's later
// work can race the transfer. Messages between a pair of ranks match in order, and a size
// that differs from the receiver's expectation throws (a hang in NCCL).
#pragma once

#include <squeeze/coll/allreduce.cuh>
#include <squeeze/coll/transport.hpp>
#include <squeeze/core/reduce_op.hpp>
#include <squeeze/core/cuda_error.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace squeeze::test {

/// What the ranks of one local communicator share.
class local_hub {
 public:
  explicit local_hub(int size) : size_{size}, max_round_(static_cast<std::size_t>(size)) {}
  [[nodiscard]] int size() const noexcept { return size_; }

  struct message {
    const void* data = nullptr;
    std::size_t bytes = 0;
    cudaEvent_t ready = nullptr;  // recorded on the sender's stream
    cudaEvent_t done = nullptr;   // recorded on the receiver's stream after the copy
    bool consumed = false;
    std::string failure;  // set by the receiver when the sizes disagree
  };

  std::shared_ptr<message> post(int from, int to, std::shared_ptr<message> m) {
    std::lock_guard lock{mutex_};
    boxes_[{from, to}].push_back(m);
    changed_.notify_all();
    return m;
  }
  std::shared_ptr<message> take(int from, int to) {
    std::unique_lock lock{mutex_};
    auto& box = boxes_[{from, to}];
    changed_.wait(lock, [&] { return !box.empty(); });
    auto m = box.front();
    box.pop_front();
    return m;
  }
  void consumed(const std::shared_ptr<message>& m) {
    std::lock_guard lock{mutex_};
    m->consumed = true;
    changed_.notify_all();
  }
  void wait_consumed(const std::shared_ptr<message>& m) {
    std::unique_lock lock{mutex_};
    changed_.wait(lock, [&] { return m->consumed; });
  }

  /// Element-wise max of `values` over all ranks (every rank calls it once per round).
  void max_all(int rank, std::span<std::uint64_t> values) {
    std::unique_lock lock{mutex_};
    const std::uint64_t round = round_;
    auto& acc = max_round_;
    if (arrived_ == 0) acc.assign(values.begin(), values.end());
    for (std::size_t i = 0; i < values.size() && i < acc.size(); ++i) {
      acc[i] = std::max(acc[i], values[i]);
    }
    static_cast<void>(rank);
    if (++arrived_ == size_) {
      result_ = acc;
      arrived_ = 0;
      ++round_;
      changed_.notify_all();
    } else {
      changed_.wait(lock, [&] { return round_ != round; });
    }
    std::copy(result_.begin(), result_.begin() + static_cast<long>(values.size()),
              values.begin());
  }

 private:
  int size_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::pair<int, int>, std::deque<std::shared_ptr<message>>> boxes_;
  std::vector<std::uint64_t> max_round_;
  std::vector<std::uint64_t> result_;
  int arrived_ = 0;
  std::uint64_t round_ = 0;
};

/// One rank's transport (see the file comment).
class local_transport {
 public:
  static constexpr bool stream_ordered = true;

  local_transport(local_hub& hub, int rank) : hub_{&hub}, rank_{rank} {}
  [[nodiscard]] int rank() const noexcept { return rank_; }
  [[nodiscard]] int size() const noexcept { return hub_->size(); }

  void begin(cudaStream_t stream) {
    stream_ = stream;
    sends_.clear();
    recvs_.clear();
  }
  void recv(void* buffer, std::size_t bytes, int peer) {
    if (bytes > 0) recvs_.push_back({buffer, bytes, peer});
  }
  void send(const void* buffer, std::size_t bytes, int peer) {
    if (bytes > 0) sends_.push_back({const_cast<void*>(buffer), bytes, peer});
  }
  void end() {
    std::vector<std::shared_ptr<local_hub::message>> posted;
    for (const auto& s : sends_) {
      auto m = std::make_shared<local_hub::message>();
      m->data = s.buffer;
      m->bytes = s.bytes;
      SQUEEZE_CUDA_TRY(cudaEventCreateWithFlags(&m->ready, cudaEventDisableTiming));
      SQUEEZE_CUDA_TRY(cudaEventCreateWithFlags(&m->done, cudaEventDisableTiming));
      SQUEEZE_CUDA_TRY(cudaEventRecord(m->ready, stream_));
      posted.push_back(hub_->post(rank_, s.peer, m));
    }
    std::string failure;
    for (const auto& r : recvs_) {
      auto m = hub_->take(r.peer, rank_);
      if (m->bytes != r.bytes) {
        m->failure = "local_transport: rank " + std::to_string(rank_) + " expected " +
                     std::to_string(r.bytes) + " bytes from rank " + std::to_string(r.peer) +
                     ", got " + std::to_string(m->bytes);
        failure = m->failure;
      } else {
        SQUEEZE_CUDA_TRY(cudaStreamWaitEvent(stream_, m->ready));
        SQUEEZE_CUDA_TRY(
            cudaMemcpyAsync(r.buffer, m->data, r.bytes, cudaMemcpyDeviceToDevice, stream_));
      }
      SQUEEZE_CUDA_TRY(cudaEventRecord(m->done, stream_));
      hub_->consumed(m);
    }
    for (auto& m : posted) {
      hub_->wait_consumed(m);
      SQUEEZE_CUDA_TRY(cudaStreamWaitEvent(stream_, m->done));
      if (failure.empty()) failure = m->failure;
    }
    // Events are destroyed once both sides are done with them (destruction of an event
    // that streams still wait on is deferred by CUDA).
    for (auto& m : posted) {
      static_cast<void>(cudaEventDestroy(m->ready));
      static_cast<void>(cudaEventDestroy(m->done));
    }
    ++steps_;
    if (!failure.empty()) throw std::runtime_error{failure};
  }

  std::uint64_t exchange_size(std::uint64_t mine, int send_peer, int recv_peer, cudaStream_t) {
    if (send_peer >= 0) {
      auto m = std::make_shared<local_hub::message>();
      m->bytes = mine;
      hub_->post(rank_, send_peer + size() * 1000, m);  // a separate box for sizes
    }
    std::uint64_t theirs = 0;
    if (recv_peer >= 0) theirs = hub_->take(recv_peer, rank_ + size() * 1000)->bytes;
    ++exchanges_;
    return theirs;
  }

  void max_all(std::span<std::uint64_t> values, cudaStream_t) { hub_->max_all(rank_, values); }

  /// The "transport's own allreduce" for selector tests: squeeze's raw ring, unverified.
  template <class T>
  void native_allreduce(const T* send, T* recv, std::size_t count, core::reduce_op op,
                        cudaStream_t stream);

  [[nodiscard]] int steps_taken() const noexcept { return steps_; }
  [[nodiscard]] int size_exchanges() const noexcept { return exchanges_; }

 private:
  struct op {
    void* buffer;
    std::size_t bytes;
    int peer;
  };
  local_hub* hub_;
  int rank_;
  cudaStream_t stream_ = nullptr;
  std::vector<op> sends_, recvs_;
  int steps_ = 0;
  int exchanges_ = 0;
};

static_assert(coll::transport<local_transport>);
static_assert(!coll::gathering_transport<local_transport>);

/// local_transport that also gathers in place (coll::gathering_transport), as the NCCL
/// transport does: the collectives then exchange through it where two ranks run. Each
/// gather is one step (one begin/end) of sends to and receives from every other rank.
class local_gathering_transport : public local_transport {
 public:
  using local_transport::local_transport;
  void gather_in_place(void* buffer, std::size_t bytes, cudaStream_t stream) {
    if (bytes == 0) return;
    auto* base = static_cast<std::byte*>(buffer);
    begin(stream);
    for (int p = 0; p < size(); ++p) {
      if (p == rank()) continue;
      recv(base + static_cast<std::size_t>(p) * bytes, bytes, p);
      send(base + static_cast<std::size_t>(rank()) * bytes, bytes, p);
    }
    end();
    ++gathers_;
  }
  [[nodiscard]] int gathers() const noexcept { return gathers_; }

 private:
  int gathers_ = 0;
};

static_assert(coll::gathering_transport<local_gathering_transport>);

template <class T>
void local_transport::native_allreduce(const T* send, T* recv, std::size_t count,
                                       core::reduce_op op, cudaStream_t stream) {
  coll::allreducer<local_transport> ring{*this};
  ring(send, recv, count, op, stream, {.verify = coll::verification::off});
}

/// Runs body(rank) on `size` threads (device 0 current on each); rethrows the first exception
/// after every thread has finished.
inline void run_ranks(int size, const std::function<void(int)>& body) {
  std::vector<std::thread> threads;
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(size));
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      try {
        SQUEEZE_CUDA_TRY(cudaSetDevice(0));
        body(r);
      } catch (...) {
        errors[static_cast<std::size_t>(r)] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

/// As run_ranks, for tests of failures that must not hang: when the ranks have not all
/// returned within `limit`, the process ends with a message naming `what` (a failed test
/// instead of a stuck one).
inline void run_ranks_within(int size, std::chrono::seconds limit, const char* what,
                             const std::function<void(int)>& body) {
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  std::thread watchdog{[&] {
    std::unique_lock lock{m};
    if (!cv.wait_for(lock, limit, [&] { return done; })) {
      std::fprintf(stderr, "%s: the ranks did not all return within %lld s (a hang)\n", what,
                   static_cast<long long>(limit.count()));
      std::abort();
    }
  }};
  std::exception_ptr error;
  try {
    run_ranks(size, body);
  } catch (...) {
    error = std::current_exception();
  }
  {
    std::lock_guard lock{m};
    done = true;
  }
  cv.notify_all();
  watchdog.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace squeeze::test
