// Owns the default core count of a rank; see rank_cores.h.
#include "dist/rank_cores.h"

#include <fmt/format.h>
#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/cgroup.h"
#include "dist/mpi_check.h"

namespace ringtrain::dist {

int cpu_list_count(const std::string& list) {
  int count = 0;
  std::istringstream ranges(list);
  for (std::string range; std::getline(ranges, range, ',');) {
    int first = 0, last = 0;
    char dash = 0;
    std::istringstream one(range);
    if (!(one >> first)) return 0;
    last = first;
    if (one >> dash && (dash != '-' || !(one >> last) || last < first)) return 0;
    count += last - first + 1;
  }
  return count;
}

namespace {

// The CPUs the process's cpuset cgroup allows (v2's cpuset.cpus.effective, v1's cpuset.effective_cpus), 0 when the
// system does not say.
int cpuset_cgroup_cpus() {
  for (const bool v2 : {true, false}) {
    const std::optional<std::string> path = cgroup_of_process("cpuset", v2);
    if (!path) continue;
    // The group's own file, else the mount's root (a container's own group where the path names the host's).
    for (const std::string& file : {v2 ? "/sys/fs/cgroup" + *path + "/cpuset.cpus.effective"
                                       : "/sys/fs/cgroup/cpuset" + *path + "/cpuset.effective_cpus",
                                    v2 ? std::string("/sys/fs/cgroup/cpuset.cpus.effective")
                                       : std::string("/sys/fs/cgroup/cpuset/cpuset.effective_cpus")}) {
      std::ifstream in(file);
      std::string list;
      if (std::getline(in, list))
        if (const int cpus = cpu_list_count(list); cpus > 0) return cpus;
    }
  }
  return 0;
}

int node_cores_for_the_job() {
  int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (const char* slurm = std::getenv("SLURM_CPUS_ON_NODE"); slurm && std::atoi(slurm) > 0)
    cores = std::min(cores, std::atoi(slurm));
  if (const int cpus = cpuset_cgroup_cpus(); cpus > 0) cores = std::min(cores, cpus);
  return cores;
}

}  // namespace

RankCores cores_of_this_rank(MPI_Comm node) {
  const int node_cores = node_cores_for_the_job();
  cpu_set_t mine;
  CPU_ZERO(&mine);
  if (sched_getaffinity(0, sizeof mine, &mine) != 0)  // no mask to read: every core the node has
    for (int c = 0; c < std::min(node_cores, CPU_SETSIZE); ++c) CPU_SET(c, &mine);
  int ranks = 1;
  MPI_CHECK(MPI_Comm_size(node, &ranks));
  std::vector<cpu_set_t> masks(static_cast<size_t>(ranks));
  MPI_CHECK(MPI_Allgather(&mine, sizeof mine, MPI_BYTE, masks.data(), sizeof mine, MPI_BYTE, node));
  // Ranks bound to cores of their own each keep theirs; ranks left on one shared mask (no binding) split it.
  const auto sharing = std::count_if(masks.begin(), masks.end(), [&](const cpu_set_t& m) { return CPU_EQUAL(&m, &mine); });
  const int bound_to = CPU_COUNT(&mine);
  return {std::max(1, bound_to / static_cast<int>(std::max<std::ptrdiff_t>(1, sharing))), bound_to, node_cores};
}

std::string idle_cores_warning(const RankCores& cores, int node_ranks) {
  if (cores.cores * node_ranks * 2 > cores.node_cores) return "";
  return fmt::format("the launcher bound this rank to {} of the {} cores the job may use on this node, and the "
                     "node's {} rank{} use {} in all: the rest stay idle (Open MPI binds each of 2 or fewer ranks to one core); give ranks more "
                     "with `mpirun --bind-to none` or `--map-by slot:PE=N`, or srun --cpus-per-task",
                     cores.bound_to, cores.node_cores, node_ranks, node_ranks == 1 ? "" : "s", cores.cores * node_ranks);
}

}  // namespace ringtrain::dist
