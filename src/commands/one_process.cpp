// Owns the one-process check; see one_process.h.
#include "commands/one_process.h"

#include <fmt/format.h>

#include <cstdlib>
#include <string>

#include "common/error.h"

namespace ringtrain::commands {
namespace {

// The process count a launcher gives in `variable`, or 1 where it gives none.
long launched(const char* variable) {
  const char* text = std::getenv(variable);
  if (text == nullptr) return 1;
  char* end = nullptr;
  const long count = std::strtol(text, &end, 10);
  return end != text && count > 0 ? count : 1;
}

}  // namespace

void refuse_several_processes(const char* command) {
  // Open MPI's mpirun (and srun with its PMIx), MPICH's and Intel's Hydra, and a Slurm job step.
  for (const char* variable : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS"})
    if (const long count = launched(variable); count > 1)
      throw UsageError(fmt::format("{} runs as one process, but it was started as {} ({}={}): every copy would write "
                                   "the same outputs at once; run it without mpirun/srun, or with srun -n 1",
                                   command, count, variable, count));
}

}  // namespace ringtrain::commands
