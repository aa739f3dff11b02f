// Owns main() for GoogleTest binaries run under mpirun: initialises MPI, silences GoogleTest's printer on
// ranks other than 0, and fails the process if any rank failed (so CTest sees one verdict). MPI starts with
// ringtrain's own Open MPI defaults, so collectives are tested as ringtrain runs them.
#include <gtest/gtest.h>
#include <mpi.h>

#include "dist/open_mpi_defaults.h"

int main(int argc, char** argv) {
  ringtrain::dist::apply_open_mpi_defaults();
  int provided = 0;  // as ringtrain itself (dist/world.cpp): communication threads may call MPI
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  ::testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  int local_failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  int any_failed = 0;
  MPI_Allreduce(&local_failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0 && any_failed && !local_failed) std::fprintf(stderr, "a rank other than 0 failed\n");
  MPI_Finalize();
  return any_failed;
}
