// Owns the training job's control flow on one rank.
#include "train/trainer.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <optional>

#include "dist/gradient_sync.h"
#include "dist/mpi_check.h"
#include "dist/open_mpi_defaults.h"
#include "dist/watchdog.h"
#include "common/host_memory.h"
#include "io/checkpoint_file.h"
#include "io/partition.h"
#include "io/shard_reader.h"
#include "model/layer_profile.h"
#include "model/network.h"
#include "obs/gpu_monitor.h"
#include "obs/phase.h"
#include "obs/run_stats.h"
#include "obs/tensorboard_writer.h"
#include "obs/trace.h"
#include "train/batch_loader.h"
#include "train/loader_work.h"
#include "train/fault_injection.h"
#include "train/lr_schedule.h"
#include "train/metrics_log.h"
#include "train/progress.h"
#include "train/run_directory.h"
#include "train/sample_order.h"
#include "train/step_runner.h"
#include "train/stop_request.h"
#include "util/checksum.h"
#include "util/clock.h"
#include "util/versions.h"

namespace ringtrain::train {
namespace {

namespace fs = std::filesystem;

struct Totals {
  double loss_sum = 0, correct = 0, samples = 0;
};

// A run.dir file written whole or not at all (a temporary name, then renamed).
void write_file(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp);
    out << text;
    if (!out.flush())
      throw JobFileError(fmt::format("'{}' cannot be written: {}; free space on its file system or pick another "
                                     "run.dir with --set run.dir=...",
                                     tmp.string(), std::strerror(errno)));
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) throw JobFileError(fmt::format("'{}' cannot be written: {}", path.string(), ec.message()));
}

// What the network may take on this rank: the host's available memory shared by the node's ranks, less the data
// loaders' queues; on a GPU its free memory, less the convolution workspace cuDNN may still ask for.
model::MemoryBudget memory_budget(const config::JobConfig& job, const model::Backend& backend, const dist::World& world,
                                  const model::Shape& input) {
  const double available = static_cast<double>(backend.memory_available());
  if (available <= 0) return {};
  if (!backend.allocates_host_memory()) {
    const double workspace = job.gpu.workspace_mb * (1 << 20);
    return {available - workspace, fmt::format("what the GPU has free ({}) less the convolution workspace ({})",
                                               byte_size_text(available), byte_size_text(workspace))};
  }
  const double loaders = 2.0 * (job.data.prefetch_batches + 1) * input.n * (static_cast<double>(input.per_sample()) * 4 + 4);
  const int ranks = world.local_size();
  // Host copies of the parameters (initialisation, broadcast) and of parameters and momentum (a checkpoint).
  const double copies_per_parameter = 3 * sizeof(float);
  return {available / ranks - loaders,
          fmt::format("this rank's share of the host's {} available ({} rank{} on {}), less {} for the data loaders,",
                      byte_size_text(available), ranks, ranks == 1 ? "" : "s", world.host(), byte_size_text(loaders)),
          copies_per_parameter};
}

// The first difference between a checkpoint's parameter layout and this model's, or "" when they match.
std::string layout_mismatch(const io::CheckpointData& c, const model::Network& net) {
  const auto& tensors = net.param_tensors();
  const size_t n = std::min(tensors.size(), c.tensor_names.size());
  for (size_t i = 0; i < n; ++i)
    if (tensors[i].name != c.tensor_names[i] || tensors[i].count != c.tensor_sizes[i])
      return fmt::format("parameter tensor {} is '{}' with {} values in the checkpoint but '{}' with {} values in "
                         "this model",
                         i, c.tensor_names[i], c.tensor_sizes[i], tensors[i].name, tensors[i].count);
  if (tensors.size() != c.tensor_names.size())
    return fmt::format("the checkpoint has {} parameter tensors, this model {}", c.tensor_names.size(), tensors.size());
  if (static_cast<int64_t>(c.params.size()) != net.param_count() || c.state_count != net.state_count())
    return fmt::format("the checkpoint holds {} parameters and {} batch-norm statistics, this model {} and {}",
                       c.params.size(), c.state_count, net.param_count(), net.state_count());
  return "";
}

io::SplitIndex open_checked(const fs::path& dir, const char* key) {
  try {
    return io::open_split(dir);
  } catch (const DataError& e) {
    throw DataError(fmt::format("{} (from {})", e.what(), key));
  }
}

}  // namespace

Trainer::Trainer(const config::JobConfig& job, dist::World& world, model::Backend& backend,
                 dist::GradientReducer& reducer, bool resume)
    : job_(job), world_(world), backend_(backend), reducer_(reducer), resume_(resume) {}

int Trainer::run() {
  const bool root = world_.is_root();
  const int ranks = world_.size();
  const double baseline_rss_mb = obs::current_rss_mb();  // libraries, MPI, the backend: before the run allocates
  // The device's own baseline (GPU: context, library handles, other processes), before the run allocates.
  const double device_baseline_mb = static_cast<double>(backend_.device_bytes_in_use()) / (1 << 20);
  auto say = [&](const std::string& text) {
    if (root) {
      fmt::print("{}\n", text);
      std::fflush(stdout);
    }
  };

  // ---- setup: every failure here is agreed, so all ranks stop with the same message
  world_.all_succeed([&] {
    if (root) RunDirectory::check_usable(job_, resume_);
  });
  std::optional<io::SplitIndex> train_split, test_split;
  world_.all_succeed([&] {
    train_split = open_checked(job_.data.train, "data.train");
    test_split = open_checked(job_.data.test, "data.test");
    if (!(train_split->meta.shape == test_split->meta.shape) ||
        train_split->meta.num_classes != test_split->meta.num_classes)
      throw DataError(fmt::format("data.train '{}' and data.test '{}' disagree on sample shape or class count; "
                                  "prepare both from the same source",
                                  job_.data.train.string(), job_.data.test.string()));
  });
  const io::DatasetMeta& meta = train_split->meta;
  const int batch = job_.train.batch_per_rank;
  const int accumulate = job_.train.accumulate_steps;
  const io::SampleRange train_range = io::rank_range(train_split->total_samples(), world_.rank(), ranks);
  const io::SampleRange test_range = io::rank_range(test_split->total_samples(), world_.rank(), ranks);
  std::unique_ptr<io::ShardReader> train_reader, test_reader;
  world_.all_succeed([&] {
    train_reader = std::make_unique<io::ShardReader>(*train_split, train_range);
    test_reader = std::make_unique<io::ShardReader>(*test_split, test_range);
  });

  // Every rank runs the same number of steps, so no rank ever waits alone in a collective.
  const int64_t per_step = int64_t{batch} * accumulate;
  int64_t steps = world_.min_across(train_range.size() / per_step);
  if (job_.train.max_steps_per_epoch > 0) steps = std::min(steps, job_.train.max_steps_per_epoch);
  world_.all_succeed([&] {
    if (steps == 0)
      throw DataError(fmt::format(
          "data.train '{}' has {} samples: too few for {} ranks x batch_per_rank {} x accumulate_steps {} (= {} per "
          "step); lower train.batch_per_rank, use fewer ranks, or prepare more data",
          job_.data.train.string(), train_split->total_samples(), ranks, batch, accumulate, per_step * ranks));
  });

  std::unique_ptr<model::Network> net;
  const model::Shape input{batch, meta.shape.channels, meta.shape.height, meta.shape.width};
  world_.all_succeed([&] {
    net = std::make_unique<model::Network>(job_.model.layers, backend_, input, meta.num_classes, true,
                                           memory_budget(job_, backend_, world_, input));
  });

  // Rank 0 initialises from the seed and broadcasts: every rank starts bit-identical.
  {
    std::vector<float> params = root ? net->initial_params(job_.train.seed) : std::vector<float>(static_cast<size_t>(net->param_count()));
    world_.broadcast_floats(params.data(), net->param_count());
    backend_.to_device(net->params(), params.data(), params.size() * sizeof(float));
    const auto states = net->initial_states();
    backend_.to_device(net->states(), states.data(), states.size() * sizeof(float));
  }

  // ---- resume: rank 0 reads the latest checkpoint (run.dir may be visible to it alone) and sends it out
  const fs::path checkpoint_dir = job_.run.dir / "checkpoints";
  io::CheckpointData resumed;
  std::string resumed_from;
  if (resume_) {
    world_.all_succeed([&] {
      if (!root) return;
      const auto found = io::list_checkpoints(checkpoint_dir);
      if (found.empty())
        throw CheckpointError(fmt::format("--resume: no checkpoint in '{}'; start without --resume (or point "
                                          "run.dir at the run to continue)",
                                          checkpoint_dir.string()));
      resumed = io::read_checkpoint(found.back());
      resumed_from = found.back().string();
      const std::string recorded = RunDirectory::recorded_run_id(job_.run.dir);
      if (!recorded.empty() && !resumed.run_id.empty() && recorded != resumed.run_id)
        throw CheckpointError(fmt::format("checkpoint '{}' was written by run {}, but run.dir '{}' holds run {} "
                                          "(run.json); resume that run from its own run.dir, or move the checkpoint "
                                          "out of '{}'",
                                          resumed_from, resumed.run_id, job_.run.dir.string(), recorded,
                                          checkpoint_dir.string()));
      if (const std::string why = layout_mismatch(resumed, *net); !why.empty())
        throw CheckpointError(fmt::format("checkpoint '{}' belongs to another model: {}; resume with the job file "
                                          "it was written by, or use another run.dir",
                                          resumed_from, why));
    });
    int64_t head[8] = {resumed.epoch, resumed.step_in_epoch, resumed.global_step, resumed.steps_per_epoch,
                       resumed.ranks, resumed.global_batch, resumed.state_count, 0};
    world_.broadcast(head, sizeof head);
    resumed.epoch = head[0], resumed.step_in_epoch = head[1], resumed.global_step = head[2];
    resumed.steps_per_epoch = head[3], resumed.ranks = head[4], resumed.global_batch = head[5];
    resumed.state_count = head[6];
    double timing[2] = {resumed.train_time_s, resumed.train_samples};
    world_.broadcast(timing, sizeof timing);
    resumed.train_time_s = timing[0], resumed.train_samples = timing[1];
    resumed_from = world_.broadcast_string(resumed_from);
    resumed.params.resize(static_cast<size_t>(net->param_count()));
    resumed.velocity.resize(static_cast<size_t>(net->param_count()));
    world_.broadcast_floats(resumed.params.data(), net->param_count());
    world_.broadcast_floats(resumed.velocity.data(), net->param_count());
    resumed.states.resize(static_cast<size_t>(resumed.ranks * resumed.state_count));
    world_.broadcast_floats(resumed.states.data(), static_cast<long long>(resumed.states.size()));
    backend_.to_device(net->params(), resumed.params.data(), resumed.params.size() * sizeof(float));
    backend_.to_device(net->velocity(), resumed.velocity.data(), resumed.velocity.size() * sizeof(float));
    // Batch-norm statistics: each rank its own row on the same world size; otherwise their mean.
    std::vector<float> states(static_cast<size_t>(net->state_count()), 0.0f);
    for (int64_t r = 0; r < resumed.ranks; ++r) {
      if (resumed.ranks == ranks && r != world_.rank()) continue;
      for (size_t i = 0; i < states.size(); ++i)
        states[i] += resumed.states[static_cast<size_t>(r * resumed.state_count) + i] /
                     static_cast<float>(resumed.ranks == ranks ? 1 : resumed.ranks);
    }
    backend_.to_device(net->states(), states.data(), states.size() * sizeof(float));
  }
  // Only now, with data, model and checkpoint accepted, is run.dir claimed and written: a job refused for bad
  // input leaves it exactly as it was.
  std::optional<RunDirectory> run_dir;
  world_.all_succeed([&] {
    if (root) run_dir.emplace(job_, resume_);
  });

  const int64_t global_batch = per_step * ranks;
  const LearningRateSchedule lr(job_.optimizer, global_batch, steps, job_.train.epochs);
  const auto versions = util::library_versions();
  const double train_flops = net->train_flops_per_sample();
  const int64_t used_per_rank = steps * per_step;

  // Where this run starts. On the world size and step count the checkpoint was written with, exactly where it
  // stopped (bit-identical to an uninterrupted run on the CPU path); otherwise at the start of its epoch,
  // since a partial epoch cannot be carried over to another partition of the data.
  int start_epoch = 0;
  int64_t start_step = 0;
  if (resume_) {
    const bool same_world =
        resumed.ranks == ranks && resumed.steps_per_epoch == steps && resumed.global_batch == global_batch;
    start_epoch = static_cast<int>(resumed.epoch);
    start_step = same_world ? resumed.step_in_epoch : 0;
    say(fmt::format("resumed from {}: epoch {} step {} (after {} optimizer steps)", resumed_from, start_epoch + 1,
                    start_step + 1, resumed.global_step));
    if (!same_world)
      say(fmt::format("resume on {} rank{} (checkpoint written by {}): data re-partitioned, global batch {} (was {}), "
                      "learning rate re-scaled to {:.5g}{}",
                      ranks, ranks == 1 ? "" : "s", resumed.ranks, global_batch, resumed.global_batch, lr.peak(),
                      resumed.step_in_epoch > 0 ? "; the interrupted epoch starts over" : ""));
  }
  const int64_t start_micro = (int64_t{start_epoch} * steps + start_step) * accumulate;

  say(fmt::format("ringtrain: job {} on {} rank{}, backend {}", job_.source.string(), ranks, ranks == 1 ? "" : "s",
                  backend_.description()));
  say(fmt::format("versions:\n{}", util::format_versions(versions)));
  say(fmt::format("model '{}': {} parameters, {:.2f} MFLOP/sample forward, {:.2f} MFLOP/sample training\n{}",
                  job_.model.name, net->param_count(), net->forward_flops_per_sample() / 1e6, train_flops / 1e6,
                  net->summary()));
  say(fmt::format("data: {} train samples in {} shards, {} test samples; {} per rank (rank 0 reads {} file{})",
                  train_split->total_samples(), train_split->shards.size(), test_split->total_samples(),
                  train_range.size(), train_reader->opened_files().size(),
                  train_reader->opened_files().size() == 1 ? "" : "s"));
  say(fmt::format("batch: {} ranks x {} per rank x {} accumulation = global batch {}; lr = {} x {}/{} = {:.5g} "
                  "(warm-up {} steps, then {})",
                  ranks, batch, accumulate, global_batch, job_.optimizer.base_lr, global_batch,
                  job_.optimizer.base_batch, lr.peak(), lr.warmup_steps(),
                  job_.optimizer.schedule == config::LrSchedule::cosine ? "cosine decay" : "constant"));
  say(fmt::format("epoch: {} steps x {} samples per rank = {} of rank 0's {} samples ({} dropped: the last partial "
                  "batch and any surplus of uneven partitions)",
                  steps, per_step, used_per_rank, train_range.size(), train_range.size() - used_per_rank));

  if (root) {
    say(fmt::format("run.dir: run {}{}", run_dir->run_id(),
                    run_dir->moved_aside().empty()
                        ? std::string()
                        : fmt::format("; the earlier run's files were moved to {} (run.overwrite)",
                                      run_dir->moved_aside().string())));
    if (!run_dir->unlocked_because().empty())
      say(fmt::format("warning: run.dir cannot be locked on this file system ({}): nothing stops a second run from "
                      "using it at the same time",
                      run_dir->unlocked_because()));
  }
  std::optional<MetricsLog> metrics;
  world_.all_succeed([&] {
    if (!root) return;
    write_file(job_.run.dir / "job.resolved.toml", job_.resolved_toml);
    write_file(job_.run.dir / "versions.json", util::versions_json(versions) + "\n");
    const fs::path file = job_.run.dir / "metrics.jsonl";
    metrics.emplace(resume_ ? MetricsLog::resume(file, resumed.epoch) : MetricsLog::start(file));
  });
  // Every record reaches metrics.jsonl, or the run ends with an error (every rank alike) that prints them.
  const auto finish_metrics = [&] {
    world_.all_succeed([&] {
      if (root) metrics->finish();
    });
  };
  if (root && metrics->dropped() > 0)
    say(fmt::format("metrics.jsonl: {} record(s) written after the checkpoint this run resumes from were dropped",
                    metrics->dropped()));
  if (root) {
    nlohmann::ordered_json start{{"kind", "job"},
                                 {"job", job_.source.string()},
                                 {"ranks", ranks},
                                 {"batch_per_rank", batch},
                                 {"accumulate_steps", accumulate},
                                 {"global_batch", global_batch},
                                 {"peak_lr", lr.peak()},
                                 {"steps_per_epoch", steps},
                                 {"epochs", job_.train.epochs},
                                 {"params", net->param_count()},
                                 {"forward_flops_per_sample", net->forward_flops_per_sample()},
                                 {"train_flops_per_sample", train_flops},
                                 {"backend", backend_.description()},
                                 {"open_mpi_settings", dist::open_mpi_defaults_summary()},
                                 {"resumed_from", resumed_from},
                                 {"run_id", run_dir->run_id()}};
    metrics->append(start);
  }

  // ---- buffers on the device
  const size_t image_floats = static_cast<size_t>(input.elements());
  model::DeviceBuffer images = backend_.allocate(image_floats * sizeof(float));
  model::DeviceBuffer labels = backend_.allocate(static_cast<size_t>(batch) * sizeof(int32_t));
  model::DeviceBuffer eval_totals = backend_.allocate(sizeof(model::LossTotals));
  dist::GradientSync sync(*net, reducer_, job_.dist.bucket_mb);
  StepRunner runner(*net, sync, job_.optimizer, global_batch, accumulate);
  // What the run needs resident: the backend's host buffers (parameters, gradients, momentum, activations,
  // workspaces; some are made on first use, so this is asked when the epoch is recorded) and two loaders'
  // queues (training, and evaluation while training's stays full).
  const auto needed_mb = [&] {
    return (static_cast<double>(backend_.allocates_host_memory() ? backend_.bytes_allocated() : 0) +
            2.0 * (job_.data.prefetch_batches + 1) * batch * (static_cast<double>(input.per_sample()) * 4 + 4)) /
           (1 << 20);
  };
  std::optional<obs::Trace> trace;
  if (job_.run.trace) trace.emplace(world_.rank(), job_.run.trace_steps);
  obs::Trace* const tracer = trace ? &*trace : nullptr;
  runner.set_trace(tracer);
  std::optional<obs::TensorBoardWriter> tensorboard;  // rank 0's curves for `tensorboard --logdir`
  world_.all_succeed([&] {
    if (root && job_.run.tensorboard) tensorboard.emplace(job_.run.dir);
  });
  // The trace is diagnostics: failing to write it (a full disk) is said, not made the run's outcome.
  const auto write_trace = [&] {
    if (!trace) return;
    try {
      trace->write(job_.run.dir / fmt::format("trace-rank{}.json", world_.rank()));
    } catch (const Error& e) {
      fmt::print(stderr, "ringtrain: warning: {}\n", e.what());
    }
  };
  // The run that fails (non-finite loss, ranks disagreeing, a reduction that timed out) is the one whose last
  // steps a user wants to see, so the trace is also written on the way out of an error. Best effort: the
  // error's own message must still reach the user, and the write must not throw during unwinding.
  struct TraceOnError {
    std::function<void()> write;
    int exceptions_at_start = std::uncaught_exceptions();
    ~TraceOnError() {
      if (std::uncaught_exceptions() <= exceptions_at_start) return;
      try {
        write();
      } catch (...) {  // NOLINT(bugprone-empty-catch): the error being unwound is the one to report
      }
    }
  } const trace_on_error{write_trace};
  say(fmt::format("memory: {}; {:.1f} MiB in all on the {} (parameters, gradients, momentum, statistics, activations, batches)",
                  net->memory_plan().summary(), static_cast<double>(backend_.bytes_allocated()) / (1 << 20),
                  backend_.name()));
  say(fmt::format("gradients: {} floats in {} bucket{} of <= {} MiB, reduced with {}", net->param_count(),
                  sync.buckets().buckets().size(), sync.buckets().buckets().size() == 1 ? "" : "s",
                  job_.dist.bucket_mb, reducer_.name()));
  if (ranks > 1 && std::string_view(reducer_.name()) == "MPI_Iallreduce")
    say(fmt::format("MPI_Iallreduce: {}", dist::open_mpi_defaults_summary()));
  // One sampler per node (its first rank) watches every GPU there; rank 0's file is gpu.jsonl.
  std::optional<obs::GpuMonitor> gpu_monitor;
  if (world_.local_rank() == 0 && job_.run.monitor_every_s > 0) {
    gpu_monitor.emplace(job_.run.dir / (root ? std::string("gpu.jsonl") : fmt::format("gpu-rank{}.jsonl", world_.rank())),
                        job_.run.monitor_every_s);
    say(gpu_monitor->status());
  }

  const int epochs = job_.train.epochs;
  const int64_t micro_per_epoch = steps * accumulate;
  const uint64_t seed = job_.train.seed;
  const int rank = world_.rank();
  const bool shuffle = job_.train.shuffle;
  BatchLoader train_loader(
      *train_reader, batch, std::max<int64_t>(0, micro_per_epoch * epochs - start_micro),
      [&, cached_epoch = int64_t{-1}, order = std::vector<int64_t>()](int64_t i, std::vector<int64_t>& out) mutable {
        i += start_micro;
        const int64_t epoch = i / micro_per_epoch, within = i % micro_per_epoch;
        if (epoch != cached_epoch) {
          order = epoch_order(train_range.size(), seed, epoch, rank, shuffle);
          cached_epoch = epoch;
        }
        out.assign(order.begin() + within * batch, order.begin() + (within + 1) * batch);
      },
      job_.data.prefetch_batches, training_loader_work(job_, world_, train_reader->meta().shape, start_micro, micro_per_epoch));

  Progress progress(job_.run.progress_every_s, steps * epochs, epochs, root);
  double train_time_total = resumed.train_time_s, global_samples_total = resumed.train_samples, last_eval_s = 0;
  int64_t global_step = int64_t{start_epoch} * steps + start_step;
  dist::Watchdog watchdog(world_.comm(), job_.run.collective_timeout_s, static_cast<int>(ExitCode::fault));
  watchdog.end_stuck_collective_on_termination(&termination_requested);
  if (trace) watchdog.on_timeout(write_trace);  // a hung step is the one whose trace is wanted most
  std::string last_checkpoint = resumed_from.empty() ? "none" : resumed_from;
  std::optional<ParamCorruption> corruption;  // test hook only: see train/fault_injection.h
  world_.all_succeed([&] { corruption = param_corruption_from_env(); });

  // Every rank must hold bit-identical parameters; a difference is silent corruption or a non-deterministic
  // reduction, and training on would average diverged models.
  const auto agreed_checksum = [&](const std::string& when) {
    dist::Watchdog::Scope guard(&watchdog, "parameter checksum comparison", global_step);
    std::vector<float> host_params(static_cast<size_t>(net->param_count()));
    backend_.to_host(host_params.data(), net->params(), host_params.size() * sizeof(float));
    const uint64_t checksum = util::fnv1a64(host_params.data(), host_params.size() * sizeof(float));
    std::vector<uint64_t> all(static_cast<size_t>(ranks));
    MPI_CHECK(MPI_Allgather(&checksum, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, world_.comm()));
    // Every rank sees the same table, so every rank throws the same message.
    if (std::any_of(all.begin(), all.end(), [&](uint64_t c) { return c != all[0]; }))
      throw AgreedError(ExitCode::fault,
                        fmt::format("parameters differ between ranks {}: {}; a non-deterministic reduction or memory "
                                    "corruption on the odd rank out (check that node); --resume continues from the "
                                    "last good checkpoint: {}",
                                    when, util::describe_checksum_groups(all), last_checkpoint));
    return checksum;
  };

  // Collective: rank 0 writes <run.dir>/checkpoints/ckpt-s<steps done>.h5 holding everything to continue at
  // (next_epoch, next_step); every rank gets the same error if it fails.
  const auto save_checkpoint = [&](int64_t next_epoch, int64_t next_step, double time_s, double samples) {
    // Rank 0's parameters go into the file, so they are compared first: a checkpoint is then always "good".
    // At an epoch boundary (next_step 0) the after-epoch comparison has just done it.
    if (next_step > 0) (void)agreed_checksum(fmt::format("before the checkpoint after optimizer step {}", global_step + 1));
    dist::Watchdog::Scope guard(&watchdog, "checkpoint", global_step);
    obs::Phase phase(tracer, "checkpoint");
    const double t0 = util::now_s();
    const auto count = static_cast<int>(net->state_count());
    std::vector<float> mine(static_cast<size_t>(count)), all(root ? static_cast<size_t>(count) * ranks : 0);
    backend_.to_host(mine.data(), net->states(), mine.size() * sizeof(float));
    MPI_CHECK(MPI_Gather(mine.data(), count, MPI_FLOAT, all.data(), count, MPI_FLOAT, 0, world_.comm()));
    const int64_t done = next_epoch * steps + next_step;
    const fs::path path = checkpoint_dir / io::checkpoint_name(done);
    world_.all_succeed([&] {
      if (!root) return;
      io::CheckpointData d;
      d.epoch = next_epoch, d.step_in_epoch = next_step, d.global_step = done, d.steps_per_epoch = steps;
      d.ranks = ranks, d.global_batch = global_batch, d.seed = seed;
      d.train_time_s = time_s, d.train_samples = samples;
      for (const auto& t : net->param_tensors()) d.tensor_names.push_back(t.name), d.tensor_sizes.push_back(t.count);
      d.params.resize(static_cast<size_t>(net->param_count()));
      d.velocity.resize(d.params.size());
      backend_.to_host(d.params.data(), net->params(), d.params.size() * sizeof(float));
      backend_.to_host(d.velocity.data(), net->velocity(), d.velocity.size() * sizeof(float));
      d.states = std::move(all);
      d.state_count = count;
      d.run_id = run_dir->run_id();
      d.job_toml = job_.resolved_toml;
      d.versions_json = util::versions_json(versions);
      io::write_checkpoint(path, d);
      auto kept = io::list_checkpoints(checkpoint_dir);
      for (size_t i = 0; i + static_cast<size_t>(job_.run.keep_checkpoints) < kept.size(); ++i) fs::remove(kept[i]);
    });
    last_checkpoint = path.string();
    say(fmt::format("checkpoint: {} ({:.2f} s)", path.string(), util::now_s() - t0));
  };

  for (int epoch = start_epoch; epoch < epochs; ++epoch) {
    StepTimes times;
    Totals train_totals;
    double interval_loss = 0, interval_samples = 0;
    const double epoch_start = util::now_s();
    int64_t steps_run = 0;
    std::optional<model::LayerProfile> profile;
    if (job_.run.profile_layers && epoch == start_epoch) {
      profile.emplace([&] { backend_.synchronize(); });
      model::active_layer_profile() = &*profile;
    }
    // A finished step's sums go into the epoch's and the progress line's; a label outside the class range is this
    // rank's data error, a non-finite loss is remembered for the next agreement.
    int64_t nonfinite_step = -1;
    // Steady state: the steps after the first run.timing_warmup_steps of this epoch, timed by the device from
    // the end of the last warm-up step to the end of the last step (as a benchmark excludes its warm-up).
    const int64_t first_step = global_step, warmup = job_.run.timing_warmup_steps;
    double steady_begin_s = epoch_start, steady_end_s = 0, steady_samples = 0;
    const auto take = [&](const std::vector<FinishedStep>& finished) {
      for (const FinishedStep& f : finished) {
        if (f.step - first_step == warmup - 1) steady_begin_s = f.end_s;
        if (f.step - first_step >= warmup) steady_samples += static_cast<double>(f.samples), steady_end_s = f.end_s;
        if (f.loss.bad_labels > 0)
          throw DataError(fmt::format("{} labels of optimizer step {} lie outside [0, {}) on rank {}; the dataset's "
                                      "labels do not match its class count (re-run `ringtrain prepare`)",
                                      f.loss.bad_labels, f.step + 1, meta.num_classes, rank));
        if (!std::isfinite(f.loss.loss_sum) && nonfinite_step < 0) nonfinite_step = f.step;
        train_totals.loss_sum += f.loss.loss_sum;
        train_totals.correct += static_cast<double>(f.loss.correct);
        train_totals.samples += static_cast<double>(f.samples);
        interval_loss += f.loss.loss_sum;
        interval_samples += static_cast<double>(f.samples);
        times += f.times;
      }
    };
    // Collective, once a rank has reported one: every rank names the first step any rank saw.
    const auto nonfinite_error = [&] {
      const int64_t first = world_.min_across(nonfinite_step >= 0 ? nonfinite_step : std::numeric_limits<long long>::max());
      return AgreedError(ExitCode::fault,
                         fmt::format("non-finite training loss at epoch {} step {} (optimizer step {}); last good "
                                     "checkpoint: {}; lower optimizer.base_lr or lengthen optimizer.warmup_epochs, "
                                     "then --resume or start again",
                                     first / steps + 1, first % steps + 1, first + 1, last_checkpoint));
    };
    for (int64_t step = epoch == start_epoch ? start_step : 0; step < steps; ++step, ++global_step, ++steps_run) {
      if (trace) trace->begin_step(global_step);
      runner.begin(global_step);
      for (int micro = 0; micro < accumulate; ++micro) {
        auto host = obs::timed(tracer, "data_wait", [&] { return train_loader.next(&times.data_wait); });
        backend_.to_device(images.as<float>(), host->images.data(), image_floats * sizeof(float));
        backend_.to_device(labels.as<int32_t>(), host->labels.data(), static_cast<size_t>(batch) * sizeof(int32_t));
        train_loader.recycle(std::move(host));
        // Distinct per (seed, micro-batch, rank): dropout masks are reproducible yet differ across ranks.
        const uint64_t step_seed =
            (seed * 0x100000001b3ull + static_cast<uint64_t>(global_step * accumulate + micro)) * 1024 +
            static_cast<uint64_t>(rank);
        runner.micro_batch(images.as<float>(), labels.as<int32_t>(), batch, step_seed, micro + 1 == accumulate);
      }
      const float rate = static_cast<float>(lr.at(global_step));
      {
        dist::Watchdog::Scope guard(&watchdog, "gradient all-reduce", global_step);
        runner.apply(rate);
        // The step before this one: the device works on this one meanwhile (step_runner.h).
        take(runner.finished(1));
      }
      // One tiny reduction per step lets every rank act on the same step: a stop signal that reached only
      // some ranks, or a non-finite loss on one of them (seen one step late, see above).
      long long agreed = 0;
      {
        dist::Watchdog::Scope guard(&watchdog, "step agreement", global_step);
        agreed = world_.max_across((stop_requested() ? 1 : 0) | (nonfinite_step >= 0 ? 2 : 0));
      }
      if (agreed & 2) throw nonfinite_error();
      // Before a checkpoint, an evaluation or a stop, every queued step is collected and its loss agreed on, so
      // none of them ever saves or evaluates parameters a non-finite loss has reached.
      const bool checkpoint_due = job_.run.checkpoint_every_steps > 0 &&
                                  (global_step + 1) % job_.run.checkpoint_every_steps == 0 && step + 1 < steps;
      if ((agreed & 1) || checkpoint_due || step + 1 == steps) {
        dist::Watchdog::Scope guard(&watchdog, "step agreement", global_step);
        take(runner.finished(0));
        if (world_.max_across(nonfinite_step >= 0 ? 1 : 0)) throw nonfinite_error();
      }
      if (agreed & 1) {
        const double so_far = train_time_total + (util::now_s() - epoch_start);
        const double samples = global_samples_total + static_cast<double>((steps_run + 1) * per_step * ranks);
        progress.finish_line();
        say(fmt::format("stop requested ({} on at least one rank): checkpointing after epoch {} step {}", 
                        stop_signal() ? stop_signal_name() : "signal", epoch + 1, step + 1));
        save_checkpoint(epoch, step + 1, so_far, samples);
        write_trace();
        finish_metrics();
        say(fmt::format("stopped for preemption; continue with --resume (exit {})", static_cast<int>(ExitCode::preempted)));
        watchdog.finish();
        return static_cast<int>(ExitCode::preempted);
      }
      if (corruption && corruption->rank == rank && corruption->after_step == global_step + 1) {
        fmt::print(stderr, "{}: flipping one bit of parameter 0 on rank {} after step {} (test hook)\n",
                   kCorruptParamEnv, rank, global_step + 1);
        flip_lowest_bit(backend_, net->params());
      }
      if (job_.run.consistency_every > 0 && (global_step + 1) % job_.run.consistency_every == 0)
        (void)agreed_checksum(fmt::format("at optimizer step {}", global_step + 1));
      if (checkpoint_due)
        save_checkpoint(epoch, step + 1, train_time_total + (util::now_s() - epoch_start),
                        global_samples_total + static_cast<double>((steps_run + 1) * per_step * ranks));

      const double elapsed = train_time_total + (util::now_s() - epoch_start);
      const double done_samples = global_samples_total + static_cast<double>((step + 1) * per_step * ranks);
      const double per_step_s = elapsed / static_cast<double>(global_step + 1);
      const double eta = per_step_s * static_cast<double>(steps * epochs - global_step - 1) +
                         last_eval_s * (epochs - epoch - (step + 1 == steps ? 1 : 0));
      if (progress.step(epoch, step, steps, global_step, interval_loss / std::max(interval_samples, 1.0), rate,
                        done_samples / elapsed, eta)) {
        if (tensorboard)
          tensorboard->scalars(global_step + 1, {{"train/loss", interval_loss / std::max(interval_samples, 1.0)},
                                                 {"train/lr", rate},
                                                 {"train/samples_per_s", done_samples / elapsed}});
        interval_loss = interval_samples = 0;  // the printed loss is the mean since the previous line
      }
    }
    const double epoch_train_s = util::now_s() - epoch_start;
    // Every rank's steady samples over the ranks' mean steady time; null when the epoch ran no step past warm-up.
    const double steady_s = world_.sum_across(steady_samples > 0 ? steady_end_s - steady_begin_s : 0.0) / ranks;
    const double steady_samples_per_s = steady_samples > 0 && steady_s > 0 ? steady_samples * ranks / steady_s : 0;
    if (profile) {
      model::active_layer_profile() = nullptr;
      say(fmt::format("layer profile, rank 0, epoch {} ({} steps; {:.2f} s in layers of {:.2f} s training):\n{}",
                      epoch + 1, steps_run, profile->total_s(), epoch_train_s, profile->table(25)));
    }
    train_time_total += epoch_train_s;
    global_samples_total += static_cast<double>(steps_run * per_step * ranks);
    progress.finish_line();

    // ---- evaluation on the test split, distributed: each rank its own partition, one reduction of the sums
    const double eval_start = util::now_s();
    obs::Phase eval_phase(tracer, "eval");
    std::optional<dist::Watchdog::Scope> eval_guard(std::in_place, &watchdog, "evaluation", global_step);
    if (net->state_count() > 0 && ranks > 1) {
      // Batch-norm statistics differ per rank (each saw its own samples); average them so every rank evaluates
      // (and later checkpoints) the same model.
      std::vector<float> states(static_cast<size_t>(net->state_count()));
      backend_.to_host(states.data(), net->states(), states.size() * sizeof(float));
      MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, states.data(), static_cast<int>(states.size()), MPI_FLOAT, MPI_SUM,
                              world_.comm()));
      for (auto& s : states) s /= static_cast<float>(ranks);
      backend_.to_device(net->states(), states.data(), states.size() * sizeof(float));
    }
    Totals test_totals;
    {
      backend_.zero(eval_totals.as<void>(), sizeof(model::LossTotals));
      const int64_t n = test_range.size();
      BatchLoader eval_loader(
          *test_reader, batch, (n + batch - 1) / batch,
          [&](int64_t i, std::vector<int64_t>& out) {
            out.clear();
            for (int64_t s = i * batch; s < std::min(n, (i + 1) * batch); ++s) out.push_back(s);
          },
          job_.data.prefetch_batches, LoaderWork{loader_threads(job_, world_), {}});  // never augmented
      for (int64_t i = 0; i < (n + batch - 1) / batch; ++i) {
        auto host = eval_loader.next(nullptr);
        const int count = host->count;
        backend_.to_device(images.as<float>(), host->images.data(), static_cast<size_t>(count) * input.per_sample() * sizeof(float));
        backend_.to_device(labels.as<int32_t>(), host->labels.data(), static_cast<size_t>(count) * sizeof(int32_t));
        eval_loader.recycle(std::move(host));
        const model::Tensor logits = net->forward({images.as<float>(), input.with_batch(count)}, model::Mode::eval, 0);
        backend_.softmax_cross_entropy(count, meta.num_classes, logits.data, labels.as<int32_t>(), 1.0f, nullptr,
                                       eval_totals.as<model::LossTotals>());
        test_totals.samples += count;
      }
      model::LossTotals sums;  // one copy for the whole evaluation
      backend_.to_host(&sums, eval_totals.as<void>(), sizeof sums);
      if (sums.bad_labels > 0)
        throw DataError(fmt::format("{} labels of data.test '{}' lie outside [0, {}) on rank {}; the dataset's labels "
                                    "do not match its class count (re-run `ringtrain prepare`)",
                                    sums.bad_labels, job_.data.test.string(), meta.num_classes, rank));
      test_totals.loss_sum = sums.loss_sum;
      test_totals.correct = static_cast<double>(sums.correct);
    }
    double sums[] = {train_totals.loss_sum, train_totals.correct, train_totals.samples, test_totals.loss_sum,
                     test_totals.correct,   test_totals.samples,  times.data_wait,      times.forward,
                     times.backward,        times.allreduce,      times.optimizer,       times.allreduce_total};
    world_.sum_across(sums, static_cast<int>(std::size(sums)));
    // Each rank's own work per step (all but the all-reduce wait, which evens out wall-clock steps) and memory.
    struct RankSample {
      double step_s, peak_rss_mb, device_mb;
    };
    static_assert(sizeof(RankSample) == 3 * sizeof(double));
    const RankSample own{(times.data_wait + times.forward + times.backward + times.optimizer) /
                             static_cast<double>(std::max<int64_t>(steps_run, 1)),
                         obs::peak_rss_mb(), static_cast<double>(backend_.device_bytes_in_use()) / (1 << 20)};
    std::vector<RankSample> samples_per_rank(static_cast<size_t>(ranks));
    MPI_CHECK(MPI_Allgather(&own, 3, MPI_DOUBLE, samples_per_rank.data(), 3, MPI_DOUBLE, world_.comm()));
    std::vector<double> step_s, rss_mb;
    double device_peak_mb = 0;
    for (const RankSample& r : samples_per_rank) {
      step_s.push_back(r.step_s), rss_mb.push_back(r.peak_rss_mb);
      device_peak_mb = std::max(device_peak_mb, r.device_mb);
    }
    const obs::StepTimeSpread spread = obs::step_time_spread(step_s);
    const double peak_rss = *std::max_element(rss_mb.begin(), rss_mb.end());
    const double needed = needed_mb();
    const double wall_step_s = epoch_train_s / static_cast<double>(std::max<int64_t>(steps_run, 1));
    std::vector<std::string> warnings;
    for (const auto& w : {obs::straggler_warning(spread),
                          obs::starvation_warning(sums[6] / ranks / static_cast<double>(std::max<int64_t>(steps_run, 1)),
                                                  wall_step_s, job_.data.prefetch_batches)})
      if (!w.empty()) warnings.push_back(w), say("warning: " + w);
    last_eval_s = util::now_s() - eval_start;
    eval_phase.end();

    eval_guard.reset();
    const uint64_t checksum = agreed_checksum(fmt::format("after epoch {}", epoch + 1));

    const double mean = 1.0 / ranks;
    const double samples_per_s = global_samples_total / train_time_total;
    const double test_acc = sums[4] / std::max(sums[5], 1.0);
    const double test_loss = sums[3] / std::max(sums[5], 1.0);
    const double train_loss = sums[0] / std::max(sums[2], 1.0);
    say(fmt::format("epoch {}/{}: train loss {:.4f} acc {:.4f} | test loss {:.4f} acc {:.4f} | {:.0f} samples/s | "
                    "per rank: data wait {:.2f}s forward {:.2f}s backward {:.2f}s all-reduce {:.2f}s exposed of "
                    "{:.2f}s optimizer {:.2f}s | eval {:.1f}s | {:.1f} GFLOP/s per rank",
                    epoch + 1, epochs, train_loss, sums[1] / std::max(sums[2], 1.0), test_loss, test_acc,
                    samples_per_s, sums[6] * mean, sums[7] * mean, sums[8] * mean, sums[9] * mean, sums[11] * mean, sums[10] * mean,
                    last_eval_s, train_flops * static_cast<double>(steps_run * per_step) / epoch_train_s / 1e9));
    if (root) {
      nlohmann::ordered_json rec{{"kind", "epoch"},
                                 {"epoch", epoch + 1},
                                 {"ranks", ranks},
                                 {"global_batch", global_batch},
                                 {"steps", steps},
                                 {"lr", lr.at(global_step - 1)},
                                 {"train_loss", train_loss},
                                 {"train_acc", sums[1] / std::max(sums[2], 1.0)},
                                 {"test_loss", test_loss},
                                 {"test_acc", test_acc},
                                 {"samples_per_s", samples_per_s},
                                 {"epoch_samples_per_s", static_cast<double>(steps_run * per_step * ranks) / epoch_train_s},
                                 {"steady_samples_per_s", steady_samples_per_s > 0 ? nlohmann::ordered_json(steady_samples_per_s) : nlohmann::ordered_json()},
                                 {"timing_warmup_steps", warmup},
                                 {"epoch_train_s", epoch_train_s},
                                 {"eval_s", last_eval_s},
                                 {"data_wait_s", sums[6] * mean},
                                 {"forward_s", sums[7] * mean},
                                 {"backward_s", sums[8] * mean},
                                 {"allreduce_s", sums[9] * mean},
                                 {"optimizer_s", sums[10] * mean},
                                 {"allreduce_total_s", sums[11] * mean},
                                 {"data_wait_fraction", sums[6] * mean / epoch_train_s},
                                 {"allreduce_exposed_fraction", sums[9] * mean / epoch_train_s},
                                 {"step_time_min_s", spread.min_s},
                                 {"step_time_median_s", spread.median_s},
                                 {"step_time_max_s", spread.max_s},
                                 {"step_time_max_rank", spread.slowest_rank},
                                 {"straggler_rank", spread.straggler_rank < 0 ? nlohmann::ordered_json() : nlohmann::ordered_json(spread.straggler_rank)},
                                 {"peak_rss_mb", peak_rss},
                                 {"peak_rss_mb_per_rank", rss_mb},
                                 {"baseline_rss_mb", baseline_rss_mb},
                                 {"memory_needed_mb", needed},
                                 {"memory_planned_mb", static_cast<double>(backend_.bytes_allocated()) / (1 << 20)},
                                 {"activation_arena_mb", static_cast<double>(net->memory_plan().arena_bytes()) / (1 << 20)},
                                 {"device_memory_peak_mb", backend_.allocates_host_memory() ? nlohmann::ordered_json() : nlohmann::ordered_json(device_peak_mb)},
                                 {"device_memory_at_start_mb", backend_.allocates_host_memory() ? nlohmann::ordered_json() : nlohmann::ordered_json(device_baseline_mb)},
                                 {"rss_growth_over_needed", needed > 0 ? (peak_rss - baseline_rss_mb) / needed : 0.0},
                                 {"warnings", warnings},
                                 {"flops_per_s_per_rank", train_flops * static_cast<double>(steps_run * per_step) / epoch_train_s},
                                 {"param_checksum", util::hex64(checksum)}};
      metrics->append(rec);
      if (tensorboard)
        tensorboard->scalars(global_step, {{"epoch/train_loss", train_loss},
                                           {"epoch/train_acc", sums[1] / std::max(sums[2], 1.0)},
                                           {"epoch/test_loss", test_loss},
                                           {"epoch/test_acc", test_acc},
                                           {"epoch/samples_per_s", samples_per_s},
                                           {"epoch/lr", lr.at(global_step - 1)}});
    }
    if ((job_.run.checkpoint_every > 0 && (epoch + 1) % job_.run.checkpoint_every == 0) || epoch + 1 == epochs)
      save_checkpoint(epoch + 1, 0, train_time_total, global_samples_total);
  }
  watchdog.finish();
  write_trace();
  finish_metrics();
  say(fmt::format("done: {} epochs, {:.0f} training samples/s over the job, results in {}", epochs,
                  global_samples_total / std::max(train_time_total, 1e-9), (job_.run.dir / "metrics.jsonl").string()));
  return 0;
}

}  // namespace ringtrain::train
