// Owns the communicator a synchronised batch norm reduces its per-channel sums over (dist.sync_batchnorm_group):
// groups of consecutive ranks of the world, split once at setup.
#pragma once
#include <mpi.h>

#include <span>

#include "model/backend.h"

namespace ringtrain::dist {

// A group whose ranks are an MPI communicator's. A backend with a transport of its own makes its communicator over
// the same ranks from it (the CUDA backend's NCCL one, under gpu.candidate_kernels) and adds the sums there, so one
// group serves both ways of adding. Header-only, so a backend recognises one without any symbol of rt_core.
class MpiRankGroup : public model::BatchStatisticsGroup {
 public:
  virtual MPI_Comm comm() const = 0;  // the group's ranks, in world order; owned by the group
};

class MpiBatchStatisticsGroup final : public MpiRankGroup {
 public:
  // Collective over `world`: ranks r with the same r / group_size form a group; group_size divides the world's size.
  MpiBatchStatisticsGroup(MPI_Comm world, int group_size);
  ~MpiBatchStatisticsGroup() override;
  MpiBatchStatisticsGroup(const MpiBatchStatisticsGroup&) = delete;
  MpiBatchStatisticsGroup& operator=(const MpiBatchStatisticsGroup&) = delete;
  // A blocking sum in double: batch norm's next pass needs the group's statistics before it can start.
  void all_reduce(std::span<double> sums) override;
  MPI_Comm comm() const override { return group_; }

 private:
  MPI_Comm group_ = MPI_COMM_NULL;
};

}  // namespace ringtrain::dist
