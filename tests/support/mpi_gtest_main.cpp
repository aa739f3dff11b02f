// Owns main() for GoogleTest binaries run under mpirun: initialises MPI, silences GoogleTest's printer on
// ranks other than 0, and gives CTest one verdict for all ranks: failed if any rank failed, skipped (exit 77,
// CTest's SKIP_RETURN_CODE) if no rank ran a test to its end, as where every test skips without a GPU, so a
// binary that ran nothing never shows as passed. MPI starts with ringtrain's own Open MPI defaults, so
// collectives are tested as ringtrain runs them.
#include <gtest/gtest.h>
#include <mpi.h>

#include "dist/open_mpi_defaults.h"

namespace {

constexpr int kSkipped = 77;

// 1 if this rank failed, 0 if it passed a test, kSkipped if it ran none to its end; the worst over all ranks.
int agreed_verdict(int tests_failed) {
  const ::testing::UnitTest& unit = *::testing::UnitTest::GetInstance();
  const bool listing = GTEST_FLAG_GET(list_tests);  // --gtest_list_tests runs nothing by design
  const int mine = tests_failed ? 2 : unit.successful_test_count() > 0 || listing ? 0 : 1;
  int worst = 0;
  MPI_Allreduce(&mine, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0 && worst == 2 && !tests_failed) std::fprintf(stderr, "a rank other than 0 failed\n");
  if (rank == 0 && worst == 1)
    std::fprintf(stderr, "no test ran to its end (%d skipped, %d selected): reported as skipped\n",
                 unit.skipped_test_count(), unit.test_to_run_count());
  return worst == 2 ? 1 : worst == 1 ? kSkipped : 0;
}

}  // namespace

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
  const int verdict = agreed_verdict(RUN_ALL_TESTS() != 0 ? 1 : 0);
  MPI_Finalize();
  return verdict;
}
