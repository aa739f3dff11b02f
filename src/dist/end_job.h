// Owns ending the whole job from one rank without ever hanging. MPI_Abort is how one rank ends every rank, but
// under some launchers it can wait on a peer or a launcher daemon that is gone (srun with PMIx, after a rank was
// killed); the process then exits by itself after kAbortWaitS, so the scheduler sees it end either way.
#pragma once

namespace ringtrain::dist {

inline constexpr double kAbortWaitS = 3.0;

// Flushes stdout and stderr, then MPI_Abort (when `use_mpi`) bounded by kAbortWaitS, then _Exit(exit_code).
[[noreturn]] void end_job(int exit_code, bool use_mpi);

}  // namespace ringtrain::dist
