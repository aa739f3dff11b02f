// Owns how many CPU cores a rank takes for its threads by default: the CPUs its affinity mask allows (what the
// launcher bound it to: srun --cpus-per-task, mpirun --bind-to, a job's cgroup), divided among the node's ranks
// that were given the same mask. std::thread::hardware_concurrency counts the whole node and ignores the binding:
// 16 threads a rank on one bound core each under srun.
#pragma once
#include <mpi.h>

#include <string>

namespace ringtrain::dist {

struct RankCores {
  int cores = 1;       // what this rank's threads default to, at least 1
  int bound_to = 1;    // the CPUs its affinity mask allows
  // The node's cores the job may use: std::thread::hardware_concurrency's count, less where Slurm allocated fewer
  // (SLURM_CPUS_ON_NODE) or the job's cpuset cgroup allows fewer (a shared node).
  int node_cores = 1;
};

// The count of CPUs in a Linux CPU list ("0-3,8,10-11"), 0 for text that is none.
int cpu_list_count(const std::string& list);

// Collective over `node` (the node's ranks, MPI_COMM_TYPE_SHARED).
RankCores cores_of_this_rank(MPI_Comm node);

// "" or a warning for the run header where the launcher's binding leaves most of the node's cores to no rank
// (Open MPI binds each of 2 or fewer ranks to one core unless told otherwise).
std::string idle_cores_warning(const RankCores& cores, int node_ranks);

}  // namespace ringtrain::dist
