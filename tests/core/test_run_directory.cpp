// Proves a run's hold on its run.dir (train/run_directory.h) and its metrics log (train/metrics_log.h): a second
// claim is refused naming the holder; replacing moves the earlier run's files aside and gives a new identity,
// resuming keeps it; --resume trims records past the checkpoint and a torn line, and leaves a sound file alone;
// an append that cannot be written is held, not dropped, and the end of the run says so with the records.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/error.h"
#include "config/job_config.h"
#include "train/metrics_log.h"
#include "train/run_directory.h"

namespace fs = std::filesystem;
using namespace ringtrain;

namespace {

class RunDirectoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("rt_run_directory_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    job_.run.dir = dir_ / "run";
    job_.source = "job.toml";
  }
  void TearDown() override { fs::remove_all(dir_); }
  static std::string read(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }
  static void write(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }
  fs::path dir_;
  config::JobConfig job_;
};

TEST_F(RunDirectoryTest, ASecondClaimIsRefusedNamingTheHolder) {
  train::RunDirectory first(job_, false);
  EXPECT_TRUE(first.unlocked_because().empty()) << first.unlocked_because();
  try {
    train::RunDirectory second(job_, true);
    FAIL() << "expected JobFileError";
  } catch (const JobFileError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("is in use by another run (host "), std::string::npos) << message;
    EXPECT_NE(message.find("pid " + std::to_string(::getpid())), std::string::npos) << message;
  }
}

TEST_F(RunDirectoryTest, ReplacingMovesTheEarlierRunAsideAndResumingKeepsTheIdentity) {
  std::string earlier;
  {
    train::RunDirectory run(job_, false);
    earlier = run.run_id();
    write(job_.run.dir / "metrics.jsonl", "{\"kind\":\"job\"}\n");
    write(job_.run.dir / "checkpoints" / "ckpt-s000000001.h5", "x");
    write(job_.run.dir / "notes.txt", "the user's own file");
  }
  EXPECT_EQ(train::RunDirectory::recorded_run_id(job_.run.dir), earlier);
  EXPECT_FALSE(fs::exists(job_.run.dir / ".ringtrain.lock")) << "the lock file goes with the run";
  job_.run.overwrite = true;
  EXPECT_NO_THROW(train::RunDirectory::check_usable(job_, false));
  std::string replacing;
  {
    train::RunDirectory run(job_, false);
    replacing = run.run_id();
    EXPECT_EQ(run.moved_aside(), job_.run.dir / ("replaced-" + earlier));
  }
  const fs::path aside = job_.run.dir / ("replaced-" + earlier);
  EXPECT_EQ(read(aside / "metrics.jsonl"), "{\"kind\":\"job\"}\n");
  EXPECT_TRUE(fs::exists(aside / "checkpoints" / "ckpt-s000000001.h5"));
  EXPECT_TRUE(fs::is_empty(job_.run.dir / "checkpoints"));
  EXPECT_TRUE(fs::exists(job_.run.dir / "notes.txt")) << "only the run's own files move";
  EXPECT_NE(replacing, earlier);
  train::RunDirectory resumed(job_, true);
  EXPECT_EQ(resumed.run_id(), replacing);
}

TEST_F(RunDirectoryTest, AnEarlierRunWithoutOverwriteIsRefusedBeforeAnythingIsWritten) {
  fs::create_directories(job_.run.dir);
  write(job_.run.dir / "metrics.jsonl", "{}\n");
  EXPECT_THROW(train::RunDirectory::check_usable(job_, false), JobFileError);
  EXPECT_NO_THROW(train::RunDirectory::check_usable(job_, true));
  job_.run.dir = dir_ / "run" / "metrics.jsonl";  // a file where the folder should be
  EXPECT_THROW(train::RunDirectory::check_usable(job_, false), JobFileError);
}

std::string epoch_line(int epoch) { return nlohmann::ordered_json{{"kind", "epoch"}, {"epoch", epoch}}.dump() + "\n"; }

TEST_F(RunDirectoryTest, ResumeKeepsTheCheckpointsEpochsAndDropsTheRest) {
  fs::create_directories(dir_);
  const fs::path file = dir_ / "metrics.jsonl";
  const std::string job_line = "{\"kind\":\"job\"}\n";
  write(file, job_line + epoch_line(1) + epoch_line(2) + job_line + epoch_line(3) + "{\"kind\":\"epo");
  {
    auto log = train::MetricsLog::resume(file, 2);
    EXPECT_EQ(log.dropped(), 2);
    log.append(nlohmann::ordered_json{{"kind", "job"}});
  }
  EXPECT_EQ(read(file), job_line + epoch_line(1) + epoch_line(2) + job_line + job_line);
  const auto before = fs::last_write_time(file);
  {
    auto log = train::MetricsLog::resume(file, 5);
    EXPECT_EQ(log.dropped(), 0);
  }
  EXPECT_EQ(fs::last_write_time(file), before) << "a sound file is left as it is";
}

TEST_F(RunDirectoryTest, AnAppendThatCannotBeWrittenIsHeldAndTheEndSaysSoWithTheRecords) {
  auto log = train::MetricsLog::start("/dev/full");  // every write: ENOSPC
  log.append(nlohmann::ordered_json{{"kind", "epoch"}, {"epoch", 1}});
  log.append(nlohmann::ordered_json{{"kind", "epoch"}, {"epoch", 2}});
  EXPECT_EQ(log.held(), 2);
  try {
    log.finish();
    FAIL() << "expected JobFileError";
  } catch (const JobFileError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("No space left on device"), std::string::npos) << message;
    EXPECT_NE(message.find("2 record(s) of this run are not in it"), std::string::npos) << message;
    EXPECT_NE(message.find(epoch_line(2).substr(0, epoch_line(2).size() - 1)), std::string::npos) << message;
  }
}

}  // namespace

// A run that ends between check_usable and the claim (another job's start-up, say) is a run all the same: without
// run.overwrite the claim refuses it rather than moving it aside.
TEST_F(RunDirectoryTest, TheClaimRefusesARunThatAppearedAfterTheCheck) {
  fs::create_directories(job_.run.dir);
  EXPECT_NO_THROW(train::RunDirectory::check_usable(job_, false));
  write(job_.run.dir / "metrics.jsonl", "{\"kind\":\"job\"}\n");
  EXPECT_THROW(train::RunDirectory(job_, false), JobFileError);
  EXPECT_EQ(read(job_.run.dir / "metrics.jsonl"), "{\"kind\":\"job\"}\n");
  EXPECT_FALSE(fs::exists(job_.run.dir / "run.json")) << "nothing of the refused run is written";
}

// A fresh run can go elsewhere; a resume cannot (its checkpoints are here), so each is told its own way out.
TEST_F(RunDirectoryTest, AnUnusableRunDirAdvisesAResumeToMakeItUsable) {
  fs::create_directories(dir_);
  write(job_.run.dir, "a file where the run's folder should be");
  for (const bool resume : {false, true}) {
    try {
      train::RunDirectory::check_usable(job_, resume);
      FAIL() << "expected JobFileError";
    } catch (const JobFileError& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find(resume ? "then --resume again" : "pick a writable folder with --set run.dir="),
                std::string::npos)
          << message;
    }
  }
}
