// ringtrain's Open MPI defaults are set only where the user has not chosen, and the run header says which.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "dist/open_mpi_defaults.h"

namespace {

constexpr const char* kVariable = "OMPI_MCA_coll_libnbc_iallreduce_algorithm";

TEST(OpenMpiDefaults, SetTheRingWhereTheUserHasNotChosen) {
  ::unsetenv(kVariable);
  ringtrain::dist::apply_open_mpi_defaults();
  ASSERT_NE(std::getenv(kVariable), nullptr);
  EXPECT_EQ(std::string(std::getenv(kVariable)), "1");
  EXPECT_NE(ringtrain::dist::open_mpi_defaults_summary().find("=1 (ring, ringtrain's default)"), std::string::npos)
      << ringtrain::dist::open_mpi_defaults_summary();
  ::unsetenv(kVariable);
}

TEST(OpenMpiDefaults, LeaveTheUsersChoiceAndSaySo) {
  ::setenv(kVariable, "0", 1);
  ringtrain::dist::apply_open_mpi_defaults();
  EXPECT_EQ(std::string(std::getenv(kVariable)), "0");
  EXPECT_NE(ringtrain::dist::open_mpi_defaults_summary().find("=0 (from your environment)"), std::string::npos)
      << ringtrain::dist::open_mpi_defaults_summary();
  ::unsetenv(kVariable);
}

}  // namespace
