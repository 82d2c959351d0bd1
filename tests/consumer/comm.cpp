// SPDX-License-Identifier: Apache-2.0
// Links the transports' libraries through squeeze::nccl and squeeze::mpi, where the consumer
// found them, and reports their versions (neither call needs a GPU or MPI_Init).
#include <cstdio>

#if defined(SQUEEZE_CONSUMER_NCCL)
#include <squeeze/coll/nccl.hpp>
#endif
#if defined(SQUEEZE_CONSUMER_MPI)
#include <squeeze/coll/mpi.hpp>
#endif

bool report_transports() {
#if defined(SQUEEZE_CONSUMER_NCCL)
  int version = 0;
  if (ncclGetVersion(&version) != ncclSuccess || version <= 0) {
    std::printf("consumer: ncclGetVersion failed\n");
    return false;
  }
  std::printf("consumer: squeeze::nccl links NCCL %d\n", version);
#else
  std::printf("consumer: no squeeze::nccl\n");
#endif
#if defined(SQUEEZE_CONSUMER_MPI)
  int major = 0, minor = 0;
  if (MPI_Get_version(&major, &minor) != MPI_SUCCESS || major <= 0) {
    std::printf("consumer: MPI_Get_version failed\n");
    return false;
  }
  std::printf("consumer: squeeze::mpi links MPI %d.%d\n", major, minor);
#else
  std::printf("consumer: no squeeze::mpi\n");
#endif
  return true;
}
