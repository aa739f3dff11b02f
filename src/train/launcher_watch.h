// Owns noticing that the process which launched this rank (mpirun, orted, slurmstepd) is gone: the rank is then
// an orphan that nobody will collect, whose peers are likely gone too, so it ends at once instead of training on
// or writing checkpoints for a job that no longer exists. The last checkpoint written is intact (checkpoints
// are written under a temporary name and renamed).
#pragma once

namespace ringtrain::train {

// Remembers the launcher: call first thing in the process, before MPI start-up (which takes a while).
void remember_launcher() noexcept;
// Starts a thread that checks the parent every quarter second and ends this rank, with a line on stderr, when
// it has changed. For runs of several ranks: a single process started in the background may outlive its shell.
void watch_launcher(int rank);

}  // namespace ringtrain::train
