// Proves the rank bookkeeping and the setup-error agreement: one rank failing makes every rank throw the same
// error, with the failing rank's message and exit code.
#include <gtest/gtest.h>
#include <mpi.h>

#include "common/error.h"
#include "dist/world.h"

using namespace ringtrain;

namespace {

// The World is created once (MPI is initialised by the test main; World's own init must tolerate that).
TEST(World, LocalRankComesFromTheNode) {
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm local;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local);
  int local_size = 0;
  MPI_Comm_size(local, &local_size);
  MPI_Comm_free(&local);
  EXPECT_EQ(local_size, size);  // all test ranks share this machine
}

TEST(World, OneFailingRankFailsEveryRankAlike) {
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int culprit = size - 1;
  try {
    dist::agree_on_errors(MPI_COMM_WORLD, [&] {
      if (rank == culprit) throw DataError("shard 7 is truncated");
    });
    FAIL() << "every rank must throw";
  } catch (const AgreedError& e) {
    EXPECT_EQ(e.code(), ExitCode::data);
    EXPECT_STREQ(e.what(), "shard 7 is truncated");
  }
}

TEST(World, LowestFailingRankSpeaks) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  try {
    dist::agree_on_errors(MPI_COMM_WORLD, [&] {
      if (rank >= 1) throw JobFileError("rank " + std::to_string(rank));
    });
    FAIL() << "every rank must throw";
  } catch (const AgreedError& e) {
    EXPECT_EQ(e.code(), ExitCode::job_file);
    EXPECT_STREQ(e.what(), "rank 1");
  }
}

TEST(World, NoErrorNoThrow) {
  int calls = 0;
  EXPECT_NO_THROW(dist::agree_on_errors(MPI_COMM_WORLD, [&] { ++calls; }));
  EXPECT_EQ(calls, 1);
}

}  // namespace
