// Owns refusing a launch of several processes for the commands that run as one (prepare synthetic, fashion-mnist and
// arrays, export, import): started under mpirun or srun -n N, every copy would write the same files at once.
#pragma once

namespace ringtrain::commands {

// Throws UsageError naming `command` when the launcher (Open MPI, a PMI launcher, srun) started more than one
// process of this job step.
void refuse_several_processes(const char* command);

}  // namespace ringtrain::commands
