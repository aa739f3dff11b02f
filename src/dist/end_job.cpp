// Owns the bounded end of the job; see end_job.h.
#include "dist/end_job.h"

#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace ringtrain::dist {

void end_job(int exit_code, bool use_mpi) {
  std::fflush(stdout);
  std::fflush(stderr);
  if (use_mpi) {
    try {
      std::thread([exit_code] {
        std::this_thread::sleep_for(std::chrono::duration<double>(kAbortWaitS));
        std::fprintf(stderr, "ringtrain: MPI_Abort did not end this rank within %.0f s; it exits by itself\n",
                     kAbortWaitS);
        std::_Exit(exit_code);
      }).detach();
    } catch (...) {  // no thread to be had: abort unbounded rather than not at all
    }
    MPI_Abort(MPI_COMM_WORLD, exit_code);
  }
  std::_Exit(exit_code);
}

}  // namespace ringtrain::dist
