// Proves the rank bookkeeping and the setup-error agreement: one rank failing makes every rank throw the same
// error, with the failing rank's message and exit code.
#include <fmt/format.h>
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
    // Each rank prints its own label beside the message, so the error says which rank met it.
    EXPECT_NE(e.origin().find(fmt::format("; 1 of {} ranks failed: {}", size, culprit)), std::string::npos)
        << e.origin();
  }
}

TEST(World, LowestFailingRankSpeaks) {
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  try {
    dist::agree_on_errors(MPI_COMM_WORLD, [&] {
      if (rank >= 1) throw JobFileError("rank " + std::to_string(rank));
    });
    FAIL() << "every rank must throw";
  } catch (const AgreedError& e) {
    EXPECT_EQ(e.code(), ExitCode::job_file);
    EXPECT_STREQ(e.what(), "rank 1");
    std::string failing = "1";
    for (int r = 2; r < size; ++r) failing += fmt::format(", {}", r);
    EXPECT_NE(e.origin().find(fmt::format("; {} of {} ranks failed: {}", size - 1, size, failing)), std::string::npos)
        << e.origin();
  }
}

TEST(World, AnErrorEveryRankMetNamesNoOrigin) {
  try {
    dist::agree_on_errors(MPI_COMM_WORLD, [] { throw JobFileError("unknown key 'trian.epochs'"); });
    FAIL() << "every rank must throw";
  } catch (const AgreedError& e) {
    EXPECT_STREQ(e.what(), "unknown key 'trian.epochs'");
    EXPECT_EQ(e.origin(), "");
  }
}

// A rank that fails early waits in the step's closing agreement; the others meet it in one inside the step (as the
// node-shared reducer does before a window collective) and leave the step with its error, which the closing
// agreement passes on without another collective that the failed rank would never join.
TEST(World, AnAgreementInsideTheStepMeetsARankThatFailedBeforeIt) {
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int culprit = size - 1;
  bool went_on = false;
  try {
    dist::agree_on_errors(MPI_COMM_WORLD, [&] {
      if (rank == culprit) throw JobFileError("the model needs more than rank " + std::to_string(rank) + " has");
      dist::agree_on_errors(MPI_COMM_WORLD, [] {});
      went_on = true;
    });
    FAIL() << "every rank must throw";
  } catch (const AgreedError& e) {
    EXPECT_EQ(e.code(), ExitCode::job_file);
    EXPECT_EQ(std::string(e.what()), "the model needs more than rank " + std::to_string(culprit) + " has");
  }
  EXPECT_FALSE(went_on);
  int after = 1;  // every rank is back in step: a collective after the agreement meets all of them
  MPI_Allreduce(MPI_IN_PLACE, &after, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  EXPECT_EQ(after, size);
}

TEST(World, NoErrorNoThrow) {
  int calls = 0;
  EXPECT_NO_THROW(dist::agree_on_errors(MPI_COMM_WORLD, [&] { ++calls; }));
  EXPECT_EQ(calls, 1);
}

}  // namespace
