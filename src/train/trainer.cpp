// Owns a run's phases on one rank, in order; each phase is its own file.
#include "train/trainer.h"

#include <fmt/format.h>

#include <memory>
#include <optional>
#include <utility>

#include "backend/device_setup.h"
#include "data/data_plan.h"
#include "model/network.h"
#include "obs/run_stats.h"
#include "train/fault_injection.h"
#include "train/lr_schedule.h"
#include "train/membership_record.h"
#include "train/network_setup.h"
#include "train/on_shrink.h"
#include "train/run_context.h"
#include "train/run_directory.h"
#include "train/run_header.h"
#include "train/run_outputs.h"
#include "train/start_point.h"
#include "train/training_loop.h"
#include "util/versions.h"

namespace ringtrain::train {
namespace {

// train.ema_decay's average (null when 0): the checkpoint's where the run resumes from one that holds it, else
// the parameters the run starts from. Made once they are published, so it reads a node's shared copy complete.
std::unique_ptr<model::WeightAverage> weight_average(const RunContext& run, model::Network& net,
                                                     const StartPoint& start) {
  if (run.job.train.ema_decay <= 0) return nullptr;
  auto ema = std::make_unique<model::WeightAverage>(net, run.job.train.ema_decay);
  if (!start.ema_params.empty()) ema->load(start.ema_params);
  return ema;
}

// The resume's world against its checkpoint's, for the membership record.
WorldChange world_change(const RunContext& run, const RunSetup& setup) {
  const CheckpointPosition& from = setup.start.from;
  return {from.ranks,
          run.ranks(),
          from.global_batch,
          setup.data.epoch().global_batch,
          from.global_step,
          setup.data.epoch().accumulate,
          LearningRateSchedule::peak_for(run.job.optimizer, from.global_batch),
          setup.lr.peak(),
          run.job.dist.on_shrink};
}

}  // namespace

Trainer::Trainer(const config::JobConfig& job, dist::World& world, model::Backend& backend,
                 dist::GradientReducer& reducer, dist::Watchdog& watchdog, bool resume, MembershipChange membership)
    : job_(job), world_(world), backend_(backend), reducer_(reducer), watchdog_(watchdog), resume_(resume),
      membership_(std::move(membership)) {}

int device_sync_batchnorm_group(const config::JobConfig& job, int ranks, bool resume,
                                const MembershipChange& membership) {
  return fitted_sync_batchnorm_group(job, ranks, resume, membership.relaunched());
}

int Trainer::run() {
  const MemoryBaseline baseline{obs::current_rss_mb(),
                                static_cast<double>(backend_.device_bytes_in_use()) / (1 << 20)};
  const FittedJob fitted = fit_to_world(job_, world_, resume_, membership_.relaunched());
  const RunContext run{fitted.job, world_, backend_, resume_, membership_};
  world_.all_succeed([&] {
    // The test hooks are read now, so a malformed one is refused before run.dir is claimed.
    (void)param_corruption_from_env();
    stall_if_asked("startup", run.world.rank());
    if (run.root()) RunDirectory::check_usable(run.job, resume_);
  });
  require_same_awaited_stop(world_);
  DataPlan data(run.job, run.world, run.backend);
  const auto net =
      build_network(run, data.input(), data.meta().num_classes, data.input_memory(), reducer_.parameter_memory());
  const auto optimizer = build_optimizer(run, *net);
  const EpochPlan& plan = data.epoch();
  std::optional<LearningRateSchedule> schedule;
  world_.all_succeed(
      [&] { schedule.emplace(run.job.optimizer, plan.global_batch, plan.steps, run.job.train.epochs); });
  const LearningRateSchedule& lr = *schedule;
  const StartPoint start = start_run(run, *net, *optimizer, plan, lr);
  if (start.global_step > 0) watchdog_.resume_after(start.global_step);  // the waits from here on follow its steps
  // Where a node's ranks share one copy of the parameters, each has written the same values into it: none reads
  // them for training before all have.
  if (model::ParameterMemory* shared = reducer_.parameter_memory()) shared->publish();
  const std::unique_ptr<model::WeightAverage> ema = weight_average(run, *net, start);
  RunOutputs outputs(run);  // run.dir is claimed only now, with data, model and checkpoint accepted

  const RunSetup setup{*net, *optimizer, data, lr, start, ema.get()};
  const util::VersionList versions = backend::library_versions();
  print_header(run, setup, versions);
  for (const std::string& note : fitted.notes) run.say(note);
  for (const std::string& line : outputs.claim_lines()) run.say(line);
  outputs.open(versions, start.epoch, start.global_step);
  for (const std::string& line : outputs.open_lines()) run.say(line);
  outputs.record(job_record(run, setup, outputs.run_id()));
  if (const auto membership = membership_record(world_change(run, setup), run.membership)) {
    run.say("membership: " + membership->dump());
    outputs.record(*membership);
  }

  TrainingLoop loop(run, setup, outputs, reducer_, watchdog_, baseline, util::versions_json(versions));
  const int code = loop.run();
  stall_if_asked("end", run.world.rank());
  return code;
}

}  // namespace ringtrain::train
