// SPDX-License-Identifier: Apache-2.0
// squeeze/coll/mpi_nccl.hpp: starting NCCL from MPI: where a rank sits on its node, and an
// owned NCCL communicator over an MPI communicator's ranks.
//
//   const auto at = coll::placement_of(MPI_COMM_WORLD);
//   cudaSetDevice(at.local_rank % devices);             // one GPU per rank
//   coll::nccl_communicator comm{MPI_COMM_WORLD};        // rank 0 makes the id, MPI shares it
//   coll::nccl_transport net{comm.get()};
//
// Host-compilable; needs both nccl.h and mpi.h.
#pragma once

#include <mpi.h>
#include <nccl.h>

#include "squeeze/coll/mpi.hpp"
#include "squeeze/coll/nccl.hpp"

namespace squeeze::coll {

/// This process among the ranks of a communicator, and among those on its node.
struct placement {
  int rank = 0;        ///< in `comm`
  int size = 1;        ///< ranks of `comm`
  int local_rank = 0;  ///< among the ranks of `comm` that share this node
  int local_size = 1;  ///< ranks of `comm` on this node
};

/// Where this process sits in `comm` and on its node (collective: every rank calls it).
inline placement placement_of(MPI_Comm comm) {
  placement p;
  SQUEEZE_MPI_TRY(MPI_Comm_rank(comm, &p.rank));
  SQUEEZE_MPI_TRY(MPI_Comm_size(comm, &p.size));
  MPI_Comm node = MPI_COMM_NULL;
  SQUEEZE_MPI_TRY(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, p.rank, MPI_INFO_NULL, &node));
  SQUEEZE_MPI_TRY(MPI_Comm_rank(node, &p.local_rank));
  SQUEEZE_MPI_TRY(MPI_Comm_size(node, &p.local_size));
  SQUEEZE_MPI_TRY(MPI_Comm_free(&node));
  return p;
}

/// An owned NCCL communicator over the ranks of an MPI communicator, rank for rank; each
/// rank's current CUDA device is its GPU (one rank per GPU: NCCL's rule). Collective: every
/// rank of `comm` constructs one.
class nccl_communicator {
 public:
  /// ncclCommInitRank over the ranks of `comm` (rank 0 makes the id, MPI_Bcast shares it).
  explicit nccl_communicator(MPI_Comm comm) {
    int rank = 0, size = 1;
    SQUEEZE_MPI_TRY(MPI_Comm_rank(comm, &rank));
    SQUEEZE_MPI_TRY(MPI_Comm_size(comm, &size));
    ncclUniqueId id{};
    if (rank == 0) SQUEEZE_NCCL_TRY(nullptr, ncclGetUniqueId(&id));
    SQUEEZE_MPI_TRY(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, comm));
    SQUEEZE_NCCL_TRY(nullptr, ncclCommInitRank(&comm_, size, id, rank));
  }
  nccl_communicator(const nccl_communicator&) = delete;
  nccl_communicator& operator=(const nccl_communicator&) = delete;
  ~nccl_communicator() {
    if (comm_ != nullptr) static_cast<void>(ncclCommDestroy(comm_));
  }
  /// The communicator, for nccl_transport.
  [[nodiscard]] ncclComm_t get() const noexcept { return comm_; }

 private:
  ncclComm_t comm_ = nullptr;
};

}  // namespace squeeze::coll
