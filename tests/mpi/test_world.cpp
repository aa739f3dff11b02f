// Proves the rank bookkeeping and the setup-error agreement: one rank failing makes every rank throw the same
// error, with the failing rank's message and exit code.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <mpi.h>
#include <sched.h>

#include "common/error.h"
#include "dist/rank_cores.h"
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

// A rank takes the CPUs its affinity mask allows, split among the node's ranks holding the same mask.
TEST(World, ARanksCoresAreItsBindingSharedWithTheRanksBoundAlike) {
  cpu_set_t mine;
  CPU_ZERO(&mine);
  ASSERT_EQ(sched_getaffinity(0, sizeof mine, &mine), 0);
  const dist::RankCores alone = dist::cores_of_this_rank(MPI_COMM_SELF);
  EXPECT_EQ(alone.bound_to, CPU_COUNT(&mine));
  EXPECT_EQ(alone.cores, CPU_COUNT(&mine));
  // Every test rank runs on this machine; those bound alike split their cores, those bound apart keep theirs.
  const dist::RankCores shared = dist::cores_of_this_rank(MPI_COMM_WORLD);
  EXPECT_GE(shared.cores, 1);
  EXPECT_LE(shared.cores, alone.cores);
}

TEST(World, ABindingThatLeavesMostCoresIdleIsWarnedOf) {
  // Open MPI's default for 2 ranks on a 64-core node: each bound to one core.
  const std::string idle = dist::idle_cores_warning({1, 1, 64}, 2);
  EXPECT_NE(idle.find("bound this rank to 1 of the 64 cores the job may use on this node"), std::string::npos) << idle;
  EXPECT_NE(idle.find("--bind-to none"), std::string::npos) << idle;
  EXPECT_EQ(dist::idle_cores_warning({32, 32, 64}, 2), "");  // bound to half the node each: all in use
  EXPECT_EQ(dist::idle_cores_warning({16, 64, 64}, 4), "");  // unbound, split four ways
}

// The cpuset cgroup's and Slurm's CPU lists, as the kernel writes them.
TEST(World, ACpuListCountsItsCpus) {
  EXPECT_EQ(dist::cpu_list_count("0-3,8,10-11"), 7);
  EXPECT_EQ(dist::cpu_list_count("5"), 1);
  EXPECT_EQ(dist::cpu_list_count("0-63\n"), 64);
  EXPECT_EQ(dist::cpu_list_count(""), 0);
  EXPECT_EQ(dist::cpu_list_count("3-1"), 0);
  EXPECT_EQ(dist::cpu_list_count("x"), 0);
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
