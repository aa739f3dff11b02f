// Owns the communicator a synchronised batch norm reduces its per-channel sums over (dist.sync_batchnorm_group):
// groups of consecutive ranks of the world, split once at setup.
#pragma once
#include <mpi.h>

#include <span>

#include "model/backend.h"

namespace ringtrain::dist {

class MpiBatchStatisticsGroup final : public model::BatchStatisticsGroup {
 public:
  // Collective over `world`: ranks r with the same r / group_size form a group; group_size divides the world's size.
  MpiBatchStatisticsGroup(MPI_Comm world, int group_size);
  ~MpiBatchStatisticsGroup() override;
  MpiBatchStatisticsGroup(const MpiBatchStatisticsGroup&) = delete;
  MpiBatchStatisticsGroup& operator=(const MpiBatchStatisticsGroup&) = delete;
  // A blocking sum in double: batch norm's next pass needs the group's statistics before it can start.
  void all_reduce(std::span<double> sums) override;

 private:
  MPI_Comm group_ = MPI_COMM_NULL;
};

}  // namespace ringtrain::dist
