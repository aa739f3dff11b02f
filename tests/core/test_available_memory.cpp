// Proves available_memory() (common/host_memory.h) on made-up /proc and cgroup trees: the host's MemAvailable,
// a v1 or v2 memory cgroup's limit less its use (page cache counted as reclaimable), the tightest ancestor, a
// container whose group path names the host's hierarchy, and the message naming what binds.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "common/host_memory.h"

namespace ringtrain {
namespace {

namespace fs = std::filesystem;
constexpr uint64_t kMiB = uint64_t{1} << 20, kGiB = uint64_t{1} << 30;

class AvailableMemoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("rt-available-memory-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_ / "proc");
    write("proc/meminfo", "MemTotal: 33554432 kB\nMemFree: 1024 kB\nMemAvailable: 16777216 kB\n");  // 16 GiB
    write("proc/status", "Name: test\nVmSize: 1048576 kB\n");
  }
  void TearDown() override { fs::remove_all(root_); }

  void write(const std::string& relative, const std::string& text) {
    fs::create_directories((root_ / relative).parent_path());
    std::ofstream(root_ / relative) << text;
  }
  // A v2 group's files: its limit ("max" or bytes), its use and its page cache.
  void v2_group(const std::string& dir, const std::string& max, uint64_t current, uint64_t file_cache) {
    write("cg/" + dir + "/memory.max", max + "\n");
    write("cg/" + dir + "/memory.current", std::to_string(current) + "\n");
    write("cg/" + dir + "/memory.stat", "anon 1\nactive_file " + std::to_string(file_cache / 2) +
                                            "\ninactive_file " + std::to_string(file_cache - file_cache / 2) + "\n");
  }
  AvailableMemory read() const {
    return available_memory(MemorySources{(root_ / "proc").string(), (root_ / "proc/meminfo").string(),
                                          (root_ / "cg").string(), false});
  }

  fs::path root_;
};

TEST_F(AvailableMemoryTest, WithoutACgroupLimitTheHostsMemAvailableBinds) {
  write("proc/cgroup", "0::/user.slice/session-1.scope\n");
  write("cg/cgroup.controllers", "cpu memory\n");
  v2_group("user.slice/session-1.scope", "max", 3 * kGiB, 0);
  const AvailableMemory memory = read();
  EXPECT_EQ(memory.bytes, 16 * kGiB);
  EXPECT_EQ(memory.limit, "");
  EXPECT_EQ(memory.text(), "16.0 GiB available");
  EXPECT_EQ(memory.or_remedy(), "");
}

TEST_F(AvailableMemoryTest, ASlurmJobsV2LimitBindsLessItsUseWithThePageCacheReclaimable) {
  write("proc/cgroup", "0::/system.slice/slurmstepd.scope/job_42/step_0/user/task_0\n");
  write("cg/cgroup.controllers", "cpu memory\n");
  v2_group("system.slice/slurmstepd.scope/job_42/step_0/user/task_0", "max", 2 * kGiB, 512 * kMiB);
  v2_group("system.slice/slurmstepd.scope/job_42", std::to_string(4 * kGiB), 3 * kGiB, 1 * kGiB);
  const AvailableMemory memory = read();
  EXPECT_EQ(memory.bytes, 2 * kGiB);  // 4 GiB less (3 GiB used less 1 GiB of page cache)
  EXPECT_NE(memory.limit.find("cgroup /system.slice/slurmstepd.scope/job_42 (memory.max 4.0 GiB, 2.0 GiB in use)"),
            std::string::npos)
      << memory.limit;
  EXPECT_NE(memory.text().find("2.0 GiB available under the memory limit of cgroup"), std::string::npos) << memory.text();
  EXPECT_NE(memory.or_remedy().find("; or ask the batch system for more memory (e.g. sbatch --mem"), std::string::npos);
}

TEST_F(AvailableMemoryTest, TheTightestAncestorBinds) {
  write("proc/cgroup", "0::/a/b\n");
  write("cg/cgroup.controllers", "memory\n");
  v2_group("a/b", std::to_string(8 * kGiB), 1 * kGiB, 0);
  v2_group("a", std::to_string(3 * kGiB), 2 * kGiB, 0);
  const AvailableMemory memory = read();
  EXPECT_EQ(memory.bytes, 1 * kGiB);
  EXPECT_NE(memory.limit.find("cgroup /a ("), std::string::npos) << memory.limit;
}

TEST_F(AvailableMemoryTest, AGroupOverItsLimitHasNothingAvailable) {
  write("proc/cgroup", "0::/job\n");
  write("cg/cgroup.controllers", "memory\n");
  v2_group("job", std::to_string(1 * kGiB), 2 * kGiB, 0);
  EXPECT_EQ(read().bytes, 1u);  // reached: known to be nothing, not unknown (0 would turn the checks off)
}

TEST_F(AvailableMemoryTest, AV2HierarchyOnAHybridSystemIsReadFromUnified) {
  write("proc/cgroup", "4:memory:/\n0::/job_7\n");
  write("cg/unified/cgroup.controllers", "memory\n");
  v2_group("unified/job_7", std::to_string(6 * kGiB), 1 * kGiB, 0);
  EXPECT_EQ(read().bytes, 5 * kGiB);
}

TEST_F(AvailableMemoryTest, AV1MemoryControllerLimitBinds) {
  write("proc/cgroup", "9:name=systemd:/\n4:cpuacct,memory:/slurm/uid_0/job_9\n0::/\n");
  write("cg/memory/slurm/uid_0/job_9/memory.limit_in_bytes", std::to_string(2 * kGiB) + "\n");
  write("cg/memory/slurm/uid_0/job_9/memory.usage_in_bytes", std::to_string(1 * kGiB) + "\n");
  write("cg/memory/slurm/uid_0/job_9/memory.stat",
        "cache 1\ntotal_active_file " + std::to_string(256 * kMiB) + "\ntotal_inactive_file " +
            std::to_string(256 * kMiB) + "\n");
  write("cg/memory/memory.limit_in_bytes", "9223372036854771712\n");  // the root: unlimited
  const AvailableMemory memory = read();
  EXPECT_EQ(memory.bytes, 2 * kGiB - 512 * kMiB);
  EXPECT_NE(memory.limit.find("cgroup /slurm/uid_0/job_9 (memory.limit_in_bytes 2.0 GiB, 512.0 MiB in use)"),
            std::string::npos)
      << memory.limit;
}

// Docker with cgroup v1 and no cgroup namespace: /proc/self/cgroup names the host's path; the mount shows the
// container's own group at its root.
TEST_F(AvailableMemoryTest, AContainersV1GroupIsTheMountsRootWhenItsPathIsNotThere) {
  write("proc/cgroup", "4:memory:/docker/0123abcd\n");
  write("cg/memory/memory.limit_in_bytes", std::to_string(3 * kGiB) + "\n");
  write("cg/memory/memory.usage_in_bytes", std::to_string(1 * kGiB) + "\n");
  write("cg/memory/memory.stat", "total_inactive_file 0\n");
  EXPECT_EQ(read().bytes, 2 * kGiB);
}

TEST_F(AvailableMemoryTest, UnreadableOrOddFilesLeaveTheHostsFigure) {
  write("proc/cgroup", "garbage\n0::/job\n");
  write("cg/cgroup.controllers", "memory\n");
  write("cg/job/memory.max", "not-a-number\n");
  EXPECT_EQ(read().bytes, 16 * kGiB);
}

TEST(AvailableMemory, TheRealSystemGivesAFigure) { EXPECT_GT(available_memory().bytes, 0u); }

}  // namespace
}  // namespace ringtrain
