// Owns the default core count of a rank; see rank_cores.h.
#include "dist/rank_cores.h"

#include <fmt/format.h>
#include <sched.h>

#include <algorithm>
#include <thread>
#include <vector>

#include "dist/mpi_check.h"

namespace ringtrain::dist {

RankCores cores_of_this_rank(MPI_Comm node) {
  const int node_cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
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
  return fmt::format("the launcher bound this rank to {} of the node's {} cores, and the node's {} rank{} use {} in "
                     "all: the rest stay idle (Open MPI binds each of 2 or fewer ranks to one core); give ranks more "
                     "with `mpirun --bind-to none` or `--map-by slot:PE=N`, or srun --cpus-per-task",
                     cores.bound_to, cores.node_cores, node_ranks, node_ranks == 1 ? "" : "s", cores.cores * node_ranks);
}

}  // namespace ringtrain::dist
