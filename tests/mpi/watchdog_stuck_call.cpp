// A reducer call that never returns (Open MPI's TCP transport deadlocked inside MPI_Testsome after a
// peer died): the watchdog must end the rank without MPI, 5 s after SIGTERM ("sigterm") or at the collective
// timeout of 1 s without one ("stall"). Run by watchdog_stuck_call.sh under mpirun -np 1.
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "dist/watchdog.h"

namespace {
bool terminating() noexcept { return true; }
}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  const bool sigterm = argc > 1 && std::strcmp(argv[1], "sigterm") == 0;
  ringtrain::dist::Watchdog watchdog(MPI_COMM_WORLD, sigterm ? 60.0 : 1.0, 6);
  if (sigterm) watchdog.end_stuck_collective_on_termination(&terminating);
  watchdog.begin_step(41);  // as the training loop begins each step before its reducer's calls
  ringtrain::dist::Watchdog::Scope stuck(&watchdog, "a progress poll that never returns", 41,
                                        ringtrain::dist::Watchdog::Watch::call);
  std::this_thread::sleep_for(std::chrono::seconds(60));
  std::fprintf(stderr, "the watchdog did not end the process\n");
  return 0;
}
