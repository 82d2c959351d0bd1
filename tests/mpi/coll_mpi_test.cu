// SPDX-License-Identifier: Apache-2.0
// coll:: over CUDA-aware MPI: one process per rank (ctest runs this under mpiexec with 2, 3
// and 4 ranks). Ranks share GPUs round-robin, so it runs on a single GPU too. Every rank
// builds every rank's inputs from one seed, so each checks its own result against the host
// reduction, and rank 0's result is broadcast to check that all ranks hold the same bits.
#include <squeeze/coll/allreduce.cuh>
#include <squeeze/coll/mpi.hpp>
#include <squeeze/core/buffer.hpp>
#include <squeeze/frsz2/wire.cuh>
#include <squeeze/ibp/wire.cuh>

#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/coll_test.hpp"
#include "common/gpu_test.hpp"

namespace coll = squeeze::coll;
namespace core = squeeze::core;
namespace frsz2 = squeeze::frsz2;
namespace test = squeeze::test;

namespace coll_mpi_test {

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int world_size() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

/// Whether every rank reports `ok` (a collective: all ranks call it).
bool all_ranks(bool ok) {
  int mine = ok ? 1 : 0, all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all == 1;
}

template <class Codec, class T>
void check(std::size_t count, coll::algorithm algorithm, core::reduce_op op, bool collective,
           test::data_kind kind, double bound_per_unit,
           coll::mpi_staging staging = coll::mpi_staging::automatic) {
  SCOPED_TRACE(std::string{Codec::name()} + " " + coll::name(algorithm) + " count " +
               std::to_string(count) + " " + core::to_string(op) +
               (collective ? "" : " naive"));
  const int n = world_size(), r = world_rank();
  auto in = test::make_inputs<T>(n, count, kind, 1000 + count);
  const auto want = test::host_reduce(in, op);
  coll::mpi_transport t{MPI_COMM_WORLD, staging};
  core::stream s;
  core::device_buffer<T> send{count}, recv{count};
  send.copy_from(std::span<const T>{in[static_cast<std::size_t>(r)]}, s);
  recv.fill_bytes(0xA5, s);
  coll::allreducer<coll::mpi_transport, Codec> ar{t};
  ar(send.data(), recv.data(), count, op, s, {.algorithm = algorithm, .collective = collective});
  std::vector<T> got(count);
  recv.copy_to(std::span<T>{got}, s);
  s.synchronize();
  const double bound = bound_per_unit * (n + 2) * n * test::max_abs(in);
  const double worst = test::max_abs_difference(got, want);
  EXPECT_LE(worst, bound) << "rank " << r;
  if (bound_per_unit == 0) EXPECT_TRUE(test::same_bits(got, want)) << "rank " << r;
  std::vector<T> root = got;
  if (count > 0) {
    MPI_Bcast(root.data(), static_cast<int>(count * sizeof(T)), MPI_BYTE, 0, MPI_COMM_WORLD);
  }
  if (collective) EXPECT_TRUE(test::same_bits(got, root)) << "rank " << r << " differs from 0";
}

TEST(CollMpi, RawRingAndRecursiveDoubling) {
  SQUEEZE_REQUIRE_GPU();
  for (auto a : {coll::algorithm::ring, coll::algorithm::recursive_doubling}) {
    for (std::size_t count : {std::size_t{0}, std::size_t{1}, std::size_t{1000},
                              std::size_t{1'000'003}}) {
      check<coll::no_compression, float>(count, a, core::reduce_op::sum, true,
                                         test::data_kind::integers, 0);
      check<coll::no_compression, double>(count, a, core::reduce_op::max, true,
                                          test::data_kind::normal, 0);
    }
  }
  EXPECT_TRUE(all_ranks(!HasFailure()));
}

TEST(CollMpi, Frsz2CollectiveAndNaive) {
  SQUEEZE_REQUIRE_GPU();
  for (auto a : {coll::algorithm::ring, coll::algorithm::recursive_doubling}) {
    for (std::size_t count : {std::size_t{33}, std::size_t{4099}, std::size_t{1'000'003}}) {
      check<frsz2::wire_codec<16>, float>(count, a, core::reduce_op::sum, true,
                                          test::data_kind::normal, std::ldexp(1.0, -14));
      check<frsz2::wire_codec<8>, float>(count, a, core::reduce_op::sum, true,
                                         test::data_kind::normal, std::ldexp(1.0, -6));
      check<frsz2::wire_codec<32>, double>(count, a, core::reduce_op::min, true,
                                           test::data_kind::normal, std::ldexp(1.0, -30));
      check<frsz2::wire_codec<16>, float>(count, a, core::reduce_op::sum, false,
                                          test::data_kind::normal, std::ldexp(1.0, -14));
    }
  }
  EXPECT_TRUE(all_ranks(!HasFailure()));
}

TEST(CollMpi, VariableSizeCodecExchangesSizes) {
  SQUEEZE_REQUIRE_GPU();
  for (auto a : {coll::algorithm::ring, coll::algorithm::recursive_doubling}) {
    for (bool collective : {true, false}) {
      check<test::trim_codec, double>(100'003, a, core::reduce_op::sum, collective,
                                      test::data_kind::trailing_zeros, 1e-12);
      check<squeeze::ibp::wire_codec, float>(100'003, a, core::reduce_op::sum, collective,
                                             test::data_kind::normal, 1e-6);
      check<squeeze::ibp::wire_codec, double>(4099, a, core::reduce_op::max, collective,
                                              test::data_kind::normal, 0);
    }
  }
  EXPECT_TRUE(all_ranks(!HasFailure()));
}

// Through pinned host buffers whatever the library can do (the only path where MPI is not
// CUDA-aware; here also where it is).
TEST(CollMpi, StagedThroughHostMemory) {
  SQUEEZE_REQUIRE_GPU();
  for (auto a : {coll::algorithm::ring, coll::algorithm::recursive_doubling}) {
    check<coll::no_compression, float>(1'000'003, a, core::reduce_op::sum, true,
                                       test::data_kind::integers, 0, coll::mpi_staging::host);
    check<frsz2::wire_codec<16>, float>(100'003, a, core::reduce_op::sum, true,
                                        test::data_kind::normal, std::ldexp(1.0, -14),
                                        coll::mpi_staging::host);
    check<test::trim_codec, double>(100'003, a, core::reduce_op::sum, true,
                                    test::data_kind::trailing_zeros, 1e-12,
                                    coll::mpi_staging::host);
  }
  EXPECT_TRUE(all_ranks(!HasFailure()));
}

TEST(CollMpi, NativeAllreduceOnDeviceBuffers) {
  SQUEEZE_REQUIRE_GPU();
  const int n = world_size(), r = world_rank();
  const std::size_t count = 100'000;
  auto in = test::make_inputs<float>(n, count, test::data_kind::integers, 5);
  const auto want = test::host_reduce(in, core::reduce_op::sum);
  for (auto staging : {coll::mpi_staging::automatic, coll::mpi_staging::host}) {
    coll::mpi_transport t{MPI_COMM_WORLD, staging};
    core::stream s;
    core::device_buffer<float> buf{count};
    buf.copy_from(std::span<const float>{in[static_cast<std::size_t>(r)]}, s);
    t.native_allreduce(buf.data(), buf.data(), count, core::reduce_op::sum, s);
    std::vector<float> got(count);
    buf.copy_to(std::span<float>{got}, s);
    s.synchronize();
    EXPECT_TRUE(test::same_bits(got, want)) << (t.staged() ? "staged" : "direct");
  }
  EXPECT_TRUE(all_ranks(!HasFailure()));
}

TEST(CollMpi, MismatchedCountsAreRefusedEverywhere) {
  SQUEEZE_REQUIRE_GPU();
  coll::mpi_transport t{MPI_COMM_WORLD};
  core::stream s;
  core::device_buffer<float> buf{1000};
  buf.fill_bytes(0, s);
  coll::allreducer<coll::mpi_transport, frsz2::wire_codec<16>> ar{t};
  const std::size_t count = world_rank() == world_size() - 1 ? 999 : 1000;
  bool refused = false;
  try {
    ar(buf.data(), buf.data(), count, core::reduce_op::sum, s);
  } catch (const squeeze::invalid_argument& e) {
    refused = std::string{e.what()}.find("disagree") != std::string::npos;
  }
  if (world_size() > 1) EXPECT_TRUE(refused) << "rank " << world_rank();
  EXPECT_TRUE(all_ranks(!HasFailure()));
}

TEST(CollMpi, FailingCallsNameTheCall) {
  SQUEEZE_REQUIRE_GPU();
  coll::mpi_transport t{MPI_COMM_WORLD};
  core::stream s;
  core::device_buffer<std::byte> buf{64};
  t.begin(s);
  try {
    t.send(buf.data(), 64, world_size() + 3);  // no such rank
    t.end();
    ADD_FAILURE() << "MPI_Isend to a rank outside the communicator did not fail";
  } catch (const coll::communication_error& e) {
    EXPECT_NE(std::string{e.what()}.find("MPI_Isend"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(all_ranks(!HasFailure()));
}

}  // namespace coll_mpi_test

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  testing::InitGoogleTest(&argc, argv);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  int devices = 0;
  if (cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0) {
    static_cast<void>(cudaSetDevice(rank % devices));
  }
  if (rank != 0) {  // one rank prints; every rank's failures reach rank 0 through all_ranks
    auto& listeners = testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  const int result = RUN_ALL_TESTS();
  int worst = 0;
  MPI_Allreduce(&result, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return worst;
}
