// Owns a run's phases on one rank, in order; each phase is its own file.
#include "train/trainer.h"

#include <fmt/format.h>

#include <memory>

#include "common/host_memory.h"
#include "model/network.h"
#include "obs/run_stats.h"
#include "train/data_plan.h"
#include "train/lr_schedule.h"
#include "train/run_context.h"
#include "train/run_directory.h"
#include "train/run_header.h"
#include "train/run_outputs.h"
#include "train/start_point.h"
#include "train/training_loop.h"
#include "util/versions.h"

namespace ringtrain::train {
namespace {

// What the network may take on this rank: the host's available memory shared by the node's ranks, less the data
// loaders' queues; on a GPU its free memory, less the convolution workspace cuDNN may still ask for.
model::MemoryBudget memory_budget(const RunContext& run, const DataPlan& data) {
  const double available = static_cast<double>(run.backend.memory_available());
  if (available <= 0) return {};
  if (!run.backend.allocates_host_memory()) {
    const double workspace = run.job.gpu.workspace_mb * (1 << 20);
    return {available - workspace, fmt::format("what the GPU has free ({}) less the convolution workspace ({})",
                                               byte_size_text(available), byte_size_text(workspace))};
  }
  const double loaders = data.loader_queue_bytes();
  const int ranks = run.world.local_size();
  // Host copies of the parameters (initialisation, broadcast) and of parameters and momentum (a checkpoint).
  const double copies_per_parameter = 3 * sizeof(float);
  return {available / ranks - loaders,
          fmt::format("this rank's share of the host's {} available ({} rank{} on {}), less {} for the data loaders,",
                      byte_size_text(available), ranks, ranks == 1 ? "" : "s", run.world.host(),
                      byte_size_text(loaders)),
          copies_per_parameter};
}

// Collective: the model for this data, or an agreed error (too big for the memory, a shape it cannot take).
std::unique_ptr<model::Network> build_network(const RunContext& run, const DataPlan& data) {
  std::unique_ptr<model::Network> net;
  run.world.all_succeed([&] {
    net = std::make_unique<model::Network>(run.job.model.layers, run.backend, data.input(), data.meta().num_classes,
                                           true, memory_budget(run, data));
  });
  return net;
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
  DataPlan data(run);
  const auto net = build_network(run, data);
  const EpochPlan& plan = data.epoch();
  const LearningRateSchedule lr(job_.optimizer, plan.global_batch, plan.steps, job_.train.epochs);
  const StartPoint start = start_run(run, *net, plan, lr);
  RunOutputs outputs(run);  // run.dir is claimed only now, with data, model and checkpoint accepted

  const RunSetup setup{*net, data, lr, start};
  const util::VersionList versions = util::library_versions();
  print_header(run, setup, versions);
  for (const std::string& line : outputs.claim_lines()) run.say(line);
  outputs.open(versions, start.epoch);
  for (const std::string& line : outputs.open_lines()) run.say(line);
  outputs.record(job_record(run, setup, outputs.run_id()));

  TrainingLoop loop(run, setup, outputs, reducer_, baseline, util::versions_json(versions));
  return loop.run();
}

}  // namespace ringtrain::train
