// SPDX-License-Identifier: Apache-2.0
// Links the transports' libraries through squeeze::nccl and squeeze::mpi, where the consumer
// found them, and calls them (neither call needs a GPU or MPI_Init).
#include <gtest/gtest.h>

#if defined(SQUEEZE_CONSUMER_NCCL)
#include <squeeze/coll/nccl.hpp>
#endif
#if defined(SQUEEZE_CONSUMER_MPI)
#include <squeeze/coll/mpi.hpp>
#endif

TEST(Consumer, NcclThroughItsTarget) {
#if defined(SQUEEZE_CONSUMER_NCCL)
  int version = 0;
  ASSERT_EQ(ncclGetVersion(&version), ncclSuccess);
  EXPECT_GT(version, 0);
#else
  GTEST_SKIP() << "no squeeze::nccl here";
#endif
}

TEST(Consumer, MpiThroughItsTarget) {
#if defined(SQUEEZE_CONSUMER_MPI)
  int major = 0;
  int minor = 0;
  ASSERT_EQ(MPI_Get_version(&major, &minor), MPI_SUCCESS);
  EXPECT_GE(major, 1);
#else
  GTEST_SKIP() << "no squeeze::mpi here";
#endif
}
