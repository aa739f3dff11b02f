// Owns the MPI side of synchronised batch norm: the group's communicator and its all-reduce.
#include "dist/batch_statistics_group.h"

#include "dist/collective_watch.h"
#include "dist/mpi_check.h"

namespace ringtrain::dist {

// Both collectives are timed by the command's watchdog (collective_watch.h): the all-reduce runs inside each
// training step's forward and backward, where a stalled peer would otherwise hold this rank for ever.
MpiBatchStatisticsGroup::MpiBatchStatisticsGroup(MPI_Comm world, int group_size) {
  const CollectiveWait wait("setting up the synchronised batch-norm groups");
  int rank = 0;
  MPI_CHECK(MPI_Comm_rank(world, &rank));
  // Keyed by world rank, so a group's ranks keep their order (the sum's order is MPI's either way).
  MPI_CHECK(MPI_Comm_split(world, rank / group_size, rank, &group_));
}

MpiBatchStatisticsGroup::~MpiBatchStatisticsGroup() {
  if (group_ != MPI_COMM_NULL) MPI_Comm_free(&group_);
}

void MpiBatchStatisticsGroup::all_reduce(std::span<double> sums) {
  const CollectiveWait wait("synchronised batch-norm statistics", /*sigterm_ends_wait=*/true);
  MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, sums.data(), static_cast<int>(sums.size()), MPI_DOUBLE, MPI_SUM, group_));
}

}  // namespace ringtrain::dist
