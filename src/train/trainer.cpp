// Owns a run's phases on one rank, in order; each phase is its own file.
#include "train/trainer.h"

#include <fmt/format.h>

#include <memory>

#include "backend/device_setup.h"
#include "data/data_plan.h"
#include "model/network.h"
#include "obs/run_stats.h"
#include "train/lr_schedule.h"
#include "train/network_setup.h"
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
  auto ema = std::make_unique<model::WeightAverage>(net, static_cast<float>(run.job.train.ema_decay));
  if (!start.ema_params.empty()) ema->load(start.ema_params);
  return ema;
}

}  // namespace

Trainer::Trainer(const config::JobConfig& job, dist::World& world, model::Backend& backend,
                 dist::GradientReducer& reducer, bool resume)
    : job_(job), world_(world), backend_(backend), reducer_(reducer), resume_(resume) {}

int Trainer::run() {
  const MemoryBaseline baseline{obs::current_rss_mb(),
                                static_cast<double>(backend_.device_bytes_in_use()) / (1 << 20)};
  const RunContext run{job_, world_, backend_, resume_};
  world_.all_succeed([&] {
    if (run.root()) RunDirectory::check_usable(job_, resume_);
  });
  DataPlan data(run.job, run.world, run.backend);
  const auto net =
      build_network(run, data.input(), data.meta().num_classes, data.loader_queue_bytes(), reducer_.parameter_memory());
  const auto optimizer = build_optimizer(run, *net);
  const EpochPlan& plan = data.epoch();
  const LearningRateSchedule lr(job_.optimizer, plan.global_batch, plan.steps, job_.train.epochs);
  const StartPoint start = start_run(run, *net, *optimizer, plan, lr);
  // Where a node's ranks share one copy of the parameters, each has written the same values into it: none reads
  // them for training before all have.
  if (model::ParameterMemory* shared = reducer_.parameter_memory()) shared->publish();
  const std::unique_ptr<model::WeightAverage> ema = weight_average(run, *net, start);
  RunOutputs outputs(run);  // run.dir is claimed only now, with data, model and checkpoint accepted

  const RunSetup setup{*net, *optimizer, data, lr, start, ema.get()};
  const util::VersionList versions = backend::library_versions();
  print_header(run, setup, versions);
  for (const std::string& line : outputs.claim_lines()) run.say(line);
  outputs.open(versions, start.epoch);
  for (const std::string& line : outputs.open_lines()) run.say(line);
  outputs.record(job_record(run, setup, outputs.run_id()));

  TrainingLoop loop(run, setup, outputs, reducer_, baseline, util::versions_json(versions));
  return loop.run();
}

}  // namespace ringtrain::train
