// Proves the run's collective phases on their own, with every test rank on the CPU twin: the epoch's sums reach
// every rank field by field (a field moved in the struct cannot land in another's place), each rank's sample is
// gathered at its own index, and a checkpoint written by the Checkpointer brings a fresh network back to the
// same parameters, momentum and running statistics, at the step after the one saved.
#include <gtest/gtest.h>
#include <mpi.h>

#include <filesystem>
#include <limits>
#include <memory>
#include <numeric>
#include <string>

#include <unistd.h>

#include "backend/cpu/cpu_backend.h"
#include "config/layer_types.h"
#include "dist/world.h"
#include "io/checkpoint_file.h"
#include "model/network.h"
#include "model/optimizer.h"
#include "train/checkpointer.h"
#include "train/epoch_summary.h"
#include "train/lr_schedule.h"
#include "train/start_point.h"

using namespace ringtrain;
using config::LayerSpec;

namespace {

dist::World& world() {
  static dist::World w(nullptr, nullptr);  // MPI is the test main's; the World borrows it
  return w;
}

double sum_of_ranks_plus_one() {
  const int n = world().size();
  return n * (n + 1) / 2.0;
}

TEST(EpochSums, EveryFieldIsSummedInItsOwnPlace) {
  const double r = world().rank() + 1;
  train::EpochSums sums;
  sums.train = {1 * r, 2 * r, 3 * r};
  sums.test = {4 * r, 5 * r, 6 * r};
  sums.times.data_wait = 7 * r, sums.times.forward = 8 * r, sums.times.backward = 9 * r;
  sums.times.allreduce = 10 * r, sums.times.optimizer = 11 * r, sums.times.allreduce_total = 12 * r;
  sums.test_classes.samples = {13 * r, 14 * r};
  sums.test_classes.correct = {15 * r, 16 * r};
  sums.sum_across(world());
  const double s = sum_of_ranks_plus_one();
  EXPECT_DOUBLE_EQ(sums.train.loss_sum, 1 * s);
  EXPECT_DOUBLE_EQ(sums.train.correct, 2 * s);
  EXPECT_DOUBLE_EQ(sums.train.samples, 3 * s);
  EXPECT_DOUBLE_EQ(sums.test.loss_sum, 4 * s);
  EXPECT_DOUBLE_EQ(sums.test.correct, 5 * s);
  EXPECT_DOUBLE_EQ(sums.test.samples, 6 * s);
  EXPECT_DOUBLE_EQ(sums.times.data_wait, 7 * s);
  EXPECT_DOUBLE_EQ(sums.times.forward, 8 * s);
  EXPECT_DOUBLE_EQ(sums.times.backward, 9 * s);
  EXPECT_DOUBLE_EQ(sums.times.allreduce, 10 * s);
  EXPECT_DOUBLE_EQ(sums.times.optimizer, 11 * s);
  EXPECT_DOUBLE_EQ(sums.times.allreduce_total, 12 * s);
  EXPECT_EQ(sums.test_classes.samples, (std::vector<double>{13 * s, 14 * s}));
  EXPECT_EQ(sums.test_classes.correct, (std::vector<double>{15 * s, 16 * s}));
}

TEST(EpochSums, EachRanksSampleArrivesAtItsIndex) {
  const double r = world().rank();
  const auto all = train::gather_samples(world(), {0.1 * r, 100 + r, 200 + r, 300 + r});
  ASSERT_EQ(static_cast<int>(all.size()), world().size());
  for (int i = 0; i < world().size(); ++i) {
    EXPECT_DOUBLE_EQ(all[static_cast<size_t>(i)].step_s, 0.1 * i);
    EXPECT_DOUBLE_EQ(all[static_cast<size_t>(i)].peak_rss_mb, 100 + i);
    EXPECT_DOUBLE_EQ(all[static_cast<size_t>(i)].device_mb, 200 + i);
    EXPECT_DOUBLE_EQ(all[static_cast<size_t>(i)].device_allocated_peak_mb, 300 + i);
  }
}

std::vector<LayerSpec> model_with_statistics() {
  using config::layer_spec;
  return {layer_spec("conv2d", {{"filters", 2}, {"kernel", 3}, {"padding", 1}}), layer_spec("batchnorm"),
          layer_spec("relu"), layer_spec("flatten"), layer_spec("dense", {{"units", 3}})};
}

// Values that differ per element, per buffer and per rank (running statistics are each rank's own).
std::vector<float> pattern(size_t n, float base) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = base + 0.25f * static_cast<float>(i);
  return v;
}

TEST(Checkpointer, ASavedStateComesBackWhereTheRunStopped) {
  // Rank 0's name, so that runs of this test with other rank counts at the same time keep apart.
  const std::filesystem::path dir = world().broadcast_string(
      (std::filesystem::temp_directory_path() / ("ringtrain-test-run-phases-" + std::to_string(getpid()))).string());
  if (world().is_root()) std::filesystem::create_directories(dir / "checkpoints");  // as RunDirectory makes it
  config::JobConfig job;
  job.run.dir = dir;
  job.run.keep_checkpoints = 2;
  job.optimizer.base_lr = 0.1, job.optimizer.base_batch = 8;
  job.optimizer.kind = config::OptimizerKind::adamw;  // two state arrays, each saved and restored by name
  job.train.epochs = 3;
  backend::CpuBackend cpu(1);
  const model::Shape input{2, 1, 4, 4};
  model::Network saved(model_with_statistics(), cpu, input, 3);
  const auto saved_optimizer = model::make_optimizer(job.optimizer, saved);
  model::NetworkState state;
  state.params = pattern(static_cast<size_t>(saved.param_count()), 1.0f);
  state.states = pattern(static_cast<size_t>(saved.state_count()), 10.0f * static_cast<float>(world().rank() + 1));
  saved.load_state(state);
  const auto count = static_cast<size_t>(saved.param_count());
  const model::OptimizerState moments{"adamw", {{"adam_m", pattern(count, -3.0f)}, {"adam_v", pattern(count, 7.0f)}}};
  saved_optimizer->load_state(moments);

  const train::RunContext saving{job, world(), cpu, false};
  train::EpochPlan plan;
  plan.batch = 2, plan.accumulate = 1, plan.per_step = 2, plan.steps = 5, plan.global_batch = 2 * world().size();
  dist::Watchdog watchdog(world().comm(), 60, static_cast<int>(ExitCode::fault));
  train::Checkpointer checkpointer(saving, saved, *saved_optimizer, plan, "test-run", "{}", "", watchdog, nullptr);
  EXPECT_EQ(checkpointer.last(), "none");
  const uint64_t checksum = checkpointer.agreed_checksum("in the test", 6);
  // Each rank's training totals of the epoch so far: the checkpoint holds their sum over the ranks. The gradient
  // norms and skipped steps are every rank's alike: it holds rank 0's.
  checkpointer.save({1, 2, 12.5, 800, train::Totals{1.5, 3, 4}, train::GradNormStats{7.5, 4, 3}, 1}, 6);
  EXPECT_NE(checkpointer.last().find("ckpt-s000000007.h5"), std::string::npos) << checkpointer.last();

  model::Network resumed(model_with_statistics(), cpu, input, 3);
  const auto resumed_optimizer = model::make_optimizer(job.optimizer, resumed);
  const train::RunContext resuming{job, world(), cpu, true};
  const train::LearningRateSchedule lr(job.optimizer, plan.global_batch, plan.steps, job.train.epochs);
  const train::StartPoint start = train::start_run(resuming, resumed, *resumed_optimizer, plan, lr);
  EXPECT_EQ(start.epoch, 1);
  EXPECT_EQ(start.step, 2);
  EXPECT_EQ(start.global_step, 7);
  EXPECT_DOUBLE_EQ(start.train_time_s, 12.5);
  EXPECT_DOUBLE_EQ(start.train_samples, 800);
  const auto ranks = static_cast<double>(world().size());
  EXPECT_TRUE(start.epoch_train.known);
  EXPECT_DOUBLE_EQ(start.epoch_train.loss_sum, 1.5 * ranks);
  EXPECT_DOUBLE_EQ(start.epoch_train.correct, 3 * ranks);
  EXPECT_DOUBLE_EQ(start.epoch_train.samples, 4 * ranks);
  EXPECT_DOUBLE_EQ(start.epoch_train.grad_norm_sum, 7.5);
  EXPECT_DOUBLE_EQ(start.epoch_train.grad_norm_max, 4);
  EXPECT_EQ(start.epoch_train.grad_norm_steps, 3);
  EXPECT_EQ(start.epoch_train.skipped_steps, 1);
  EXPECT_EQ(start.resumed_from, checkpointer.last());
  ASSERT_EQ(start.notes.size(), 1u);  // the same world: no re-partitioning note
  const model::NetworkState back = resumed.read_state();
  EXPECT_EQ(back.params, state.params);
  EXPECT_EQ(back.states, state.states);
  const model::OptimizerState moments_back = resumed_optimizer->read_state();
  EXPECT_EQ(moments_back.optimizer, "adamw");
  ASSERT_EQ(moments_back.arrays.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(moments_back.arrays[i].name, moments.arrays[i].name);
    EXPECT_EQ(moments_back.arrays[i].values, moments.arrays[i].values);
  }
  train::Checkpointer after(resuming, resumed, *resumed_optimizer, plan, "test-run", "{}", start.resumed_from, watchdog,
                            nullptr);
  EXPECT_EQ(after.agreed_checksum("after resuming", 7), checksum);

  // A checkpoint after an epoch's last step, resumed on a plan of other steps: only the epoch's evaluation and record
  // are left, so the run starts after the new plan's last step of that epoch, not over at its first.
  checkpointer.save({1, plan.steps, 20.0, 1000, train::Totals{2.5, 5, 8}, train::GradNormStats{}, 0, 10}, 9);
  train::EpochPlan other_plan = plan;
  other_plan.steps = 3;
  const train::StartPoint trained = train::start_run(resuming, resumed, *resumed_optimizer, other_plan, lr);
  EXPECT_EQ(trained.epoch, 1);
  EXPECT_EQ(trained.step, 3);
  EXPECT_EQ(trained.global_step, 6);
  EXPECT_TRUE(trained.epoch_train.known);
  EXPECT_DOUBLE_EQ(trained.epoch_train.samples, 8 * ranks);

  // Parameters a step left non-finite (its loss finite, its gradients not) are neither saved nor recorded.
  model::Network broken(model_with_statistics(), cpu, input, 3);
  model::NetworkState nan_state = state;
  nan_state.params[1] = std::numeric_limits<float>::quiet_NaN();
  broken.load_state(nan_state);
  const auto broken_optimizer = model::make_optimizer(job.optimizer, broken);
  train::Checkpointer refusing(resuming, broken, *broken_optimizer, plan, "test-run", "{}", "", watchdog, nullptr);
  try {
    (void)refusing.agreed_checksum("before the checkpoint after optimizer step 12", 11);
    ADD_FAILURE() << "non-finite parameters were agreed on";
  } catch (const AgreedError& e) {
    EXPECT_EQ(e.code(), ExitCode::fault);
    EXPECT_NE(std::string(e.what()).find("non-finite training parameters before the checkpoint after optimizer step "
                                         "12: the parameters hold 1 non-finite value"),
              std::string::npos)
        << e.what();
  }

  // An optimizer state a step left non-finite (Adam's v overflowing while the update and the loss stay finite) is
  // not written: no resume could read it, and the rotation would delete an older, good checkpoint for it.
  model::OptimizerState overflowed = moments;
  overflowed.arrays[1].values[2] = std::numeric_limits<float>::infinity();
  saved_optimizer->load_state(overflowed);
  const size_t before = world().is_root() ? io::list_checkpoints(dir / "checkpoints").size() : 0;
  try {
    checkpointer.save({1, 3, 30.0, 1200, train::Totals{}, train::GradNormStats{}, 0, 12}, 10);
    ADD_FAILURE() << "a non-finite optimizer state was written";
  } catch (const AgreedError& e) {
    EXPECT_EQ(e.code(), ExitCode::fault);
    EXPECT_NE(std::string(e.what()).find("non-finite training state at optimizer step 11: 'adam_v' holds 1 "
                                         "non-finite (NaN/Inf) values of"),
              std::string::npos)
        << e.what();
  }
  if (world().is_root()) {
    EXPECT_EQ(io::list_checkpoints(dir / "checkpoints").size(), before);
  }
  saved_optimizer->load_state(moments);

  // The same checkpoint under another optimizer: refused on every rank, naming both.
  config::JobConfig lars_job = job;
  lars_job.optimizer.kind = config::OptimizerKind::lars;
  model::Network other(model_with_statistics(), cpu, input, 3);
  const auto lars = model::make_optimizer(lars_job.optimizer, other);
  const train::RunContext other_run{lars_job, world(), cpu, true};
  try {
    (void)train::start_run(other_run, other, *lars, plan, lr);
    ADD_FAILURE() << "a checkpoint of adamw resumed under lars";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::checkpoint);
    EXPECT_NE(std::string(e.what()).find("optimizer 'adamw' but the job asks for 'lars'"), std::string::npos) << e.what();
  }
  watchdog.finish();
  MPI_Barrier(world().comm());
  if (world().is_root()) std::filesystem::remove_all(dir);
}

}  // namespace
