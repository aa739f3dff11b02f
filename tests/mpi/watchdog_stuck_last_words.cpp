// A stalled collective whose last words (writing the trace) hang too, as on a stalled file system: the
// watchdog must still end the process, with its exit code, a couple of seconds after the timeout.
// Run by watchdog_stuck_last_words.sh under mpirun -np 1 (heartbeats off: the watchdog ends the rank itself).
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "dist/watchdog.h"

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  ringtrain::dist::Watchdog watchdog(MPI_COMM_WORLD, 1.0, 6);
  watchdog.on_timeout([] {
    std::fprintf(stderr, "last words: hanging\n");
    std::this_thread::sleep_for(std::chrono::hours(1));
  });
  ringtrain::dist::Watchdog::Scope stuck(&watchdog, "a collective that never completes", 0);
  std::this_thread::sleep_for(std::chrono::seconds(60));
  std::fprintf(stderr, "the watchdog did not end the process\n");
  return 0;
}
