// Owns the run's epochs on one rank; see training_loop.h.
#include "train/training_loop.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <functional>
#include <limits>
#include <thread>
#include <utility>
#include <vector>

#include "common/stderr_print.h"
#include "data/loader_work.h"
#include "data/sample_order.h"
#include "dist/open_mpi_defaults.h"
#include "model/parameter_memory.h"
#include "obs/phase.h"
#include "obs/run_stats.h"
#include "train/fault_injection.h"
#include "train/stop_request.h"
#include "util/checksum.h"
#include "util/clock.h"

namespace ringtrain::train {
namespace {

// The run that fails (non-finite loss, ranks disagreeing, a reduction that timed out) is the one whose last steps
// a user wants to see, so the trace is also written on the way out of an error. Best effort: the error's own
// message must still reach the user, and the write must not throw during unwinding.
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
};

// The training batches from `first_micro` on, in each epoch's order (seeded per epoch and rank).
std::unique_ptr<BatchLoader> training_loader(const RunContext& run, DataPlan& data, int64_t first_micro) {
  const EpochPlan plan = data.epoch();
  const int64_t partition = data.train_range().size(), per_epoch = plan.micro_batches();
  const uint64_t seed = run.job.train.seed;
  const int rank = run.world.rank();
  const bool shuffle = run.job.train.shuffle;
  BatchPlan batch_of = [=, cached_epoch = int64_t{-1}, order = std::vector<int64_t>()](
                           int64_t i, std::vector<int64_t>& out) mutable {
    i += first_micro;
    const int64_t epoch = i / per_epoch, within = i % per_epoch;
    if (epoch != cached_epoch) {
      order = epoch_order(partition, seed, epoch, rank, shuffle);
      cached_epoch = epoch;
    }
    out.assign(order.begin() + within * plan.batch, order.begin() + (within + 1) * plan.batch);
  };
  const int64_t batches = std::max<int64_t>(0, per_epoch * run.job.train.epochs - first_micro);
  return std::make_unique<BatchLoader>(
      data.train_reader(), plan.batch, batches, std::move(batch_of), run.job.data.prefetch_batches,
      training_loader_work(run.job, run.world, batch_form(run.job, run.backend), data.meta(), first_micro,
                           per_epoch));
}

// fp16's loss scaler, carried on from the checkpoint where it has one; none in other precisions.
std::optional<LossScaler> loss_scaler_for(const config::JobConfig& job, const StartPoint& start) {
  if (job.train.precision != config::Precision::fp16) return std::nullopt;
  LossScaler scaler(job.train.loss_scale_init, job.train.loss_scale_growth_interval);
  scaler.restore(start.loss_scale);
  return scaler;
}

}  // namespace

TrainingLoop::TrainingLoop(const RunContext& run, const RunSetup& setup, RunOutputs& outputs,
                           dist::GradientReducer& reducer, dist::Watchdog& watchdog, const MemoryBaseline& baseline,
                           const std::string& versions_json)
    : run_(run),
      net_(setup.net),
      data_(setup.data),
      plan_(setup.data.epoch()),
      lr_(setup.lr),
      outputs_(outputs),
      baseline_(baseline),
      batch_(run.backend, setup.data.input(), batch_form(run.job, run.backend)),
      sync_(setup.net, reducer, run.job.dist.bucket_mb),
      runner_(setup.net, sync_, setup.optimizer, plan_.global_batch, plan_.accumulate, run.job.train.label_smoothing,
              loss_scaler_for(run.job, setup.start)),
      evaluator_(run, setup.net, setup.data.test(), plan_.batch, batch_, setup.data.model_norm()),
      watchdog_(watchdog),
      checkpointer_(run, setup.net, setup.optimizer, plan_, outputs.run_id(), versions_json, setup.start.resumed_from,
                    watchdog_, nullptr),
      ema_(setup.ema),
      loader_(training_loader(run, setup.data, setup.start.first_micro_batch(plan_))),
      decode_ahead_(loader_->form() == BatchForm::jpegs
                        ? std::make_unique<DecodeAhead>(run.backend, *loader_, setup.data.input())
                        : nullptr),
      progress_(run.job.run.progress_every_s, plan_.steps * run.job.train.epochs, run.job.train.epochs, run.root()),
      start_epoch_(setup.start.epoch),
      start_step_(setup.start.step),
      start_epoch_train_(setup.start.epoch_train),
      global_step_(setup.start.global_step),
      start_global_step_(setup.start.global_step),
      train_time_s_(setup.start.train_time_s),
      samples_done_(setup.start.train_samples),
      last_line_{setup.start.train_samples, setup.start.train_time_s} {
  if (run.world.size() > 1)
    runner_.agree_graphs_with([&world = run.world](uint64_t mine) {
      // 32 bits of each rank's fingerprint: their sum is exact in 64, and any one's change moves it.
      int64_t sum = static_cast<int64_t>(mine & 0xffffffffULL);
      world.sum_across(&sum, 1);
      return static_cast<uint64_t>(sum);
    });
  if (run.job.run.trace) {
    trace_.emplace(run.world.rank(), run.job.run.trace_steps);
    runner_.set_trace(&*trace_);
    checkpointer_.set_trace(&*trace_);
    watchdog_.on_timeout([this] { write_trace(); });  // a hung step is the one whose trace is wanted most
  }
  checkpointer_.set_loss_scaler(runner_.loss_scaler());
  runner_.continue_after_updates(setup.start.optimizer_updates);
  checkpointer_.set_weight_average(setup.ema);
  runner_.average_weights(setup.ema);
  runner_.clip_gradients_to(run.job.optimizer.clip_global_norm);
  watchdog_.end_stuck_collective_on_termination(&termination_requested);
  sync_.watch_with(&watchdog_);
  say_setup();
  run.world.all_succeed([&] {
    corruption_ = param_corruption_from_env();
    if (setup.start.resumed_from.empty()) awaited_stop_ = awaited_stop_from_env();
  });
}

TrainingLoop::~TrainingLoop() {
  if (profile_) model::active_layer_profile() = nullptr;
  watchdog_.on_timeout({});  // its trace goes with the loop
}

void TrainingLoop::say_setup() {
  const auto buckets = sync_.buckets().buckets().size();
  const model::ParameterMemory* shared = net_.parameter_memory();
  run_.say(fmt::format("memory: {}; {:.1f} MiB in all on the {} (parameters, gradients, optimizer state, "
                       "statistics, activations, batches{})",
                       net_.memory_plan().summary(), planned_bytes() / (1 << 20), run_.backend.name(),
                       shared ? fmt::format("; of the parameters, gradients and optimizer state, this rank's share of "
                                            "the {:.1f} MiB its node's {} ranks share",
                                            static_cast<double>(shared->shared_bytes()) / (1 << 20),
                                            shared->sharing_ranks())
                              : std::string()));
  const bool bf16_wire = run_.job.dist.allreduce_dtype == config::WireFormat::bf16;
  run_.say(fmt::format("gradients: {} floats in {} bucket{} of <= {} MiB, reduced with {}{}", net_.param_count(),
                       buckets, buckets == 1 ? "" : "s", run_.job.dist.bucket_mb, sync_.reducer().name(),
                       bf16_wire ? " in bf16 (dist.allreduce_dtype: half the bytes, partial sums rounded to bf16)" : ""));
  if (const LossScaler* scaler = runner_.loss_scaler())
    run_.say(fmt::format("fp16 loss scaling: scale {:g}{}; a step whose gradients overflow is skipped and halves it; "
                         "{}",
                         scaler->scale(), scaler->restored() ? " (from the checkpoint)" : "",
                         run_.job.train.loss_scale_growth_interval > 0
                             ? fmt::format("it doubles after {} finite steps in a row",
                                           run_.job.train.loss_scale_growth_interval)
                             : std::string("it never grows (train.loss_scale_growth_interval = 0)")));
  if (const double clip = run_.job.optimizer.clip_global_norm; clip > 0)
    run_.say(fmt::format("gradient clipping: the reduced gradient scaled to a global L2 norm of at most {:g} before "
                         "each update (the device waits for the norm every step)",
                         clip));
  if (run_.job.gpu.cuda_graphs && run_.backend.step_capturer()) {
    const char* eager = runner_.eager_reason();
    run_.say(eager ? fmt::format("gpu.cuda_graphs: every step runs eagerly: {}", eager)
                   : std::string("gpu.cuda_graphs: the training step is captured as a CUDA graph per slot once its "
                                 "shape settles, then replayed"));
  }
  if (run_.ranks() > 1 && std::string_view(sync_.reducer().name()) == "MPI_Iallreduce")
    run_.say(fmt::format("MPI_Iallreduce: {}", dist::open_mpi_defaults_summary()));
  // One sampler per node (its first rank) watches every GPU there; rank 0's file is gpu.jsonl.
  if (run_.world.local_rank() == 0 && run_.job.run.monitor_every_s > 0) {
    const std::string file = run_.root() ? std::string("gpu.jsonl") : fmt::format("gpu-rank{}.jsonl", run_.world.rank());
    gpu_monitor_.emplace(run_.job.run.dir / file, run_.job.run.monitor_every_s);
    run_.say(gpu_monitor_->status());
  }
}

int TrainingLoop::run() {
  const TraceOnError trace_on_error{[this] { write_trace(); }};
  const int epochs = run_.job.train.epochs;
  for (int epoch = start_epoch_; epoch < epochs; ++epoch) {
    EpochTally tally(global_step_, run_.job.run.timing_warmup_steps, util::now_s(), data_.meta().num_classes,
                     run_.world.rank());
    tally.graph_steps_before = runner_.action_counts();
    // fp16: the scale the epoch starts from, which its record keeps where no step follows (a resume after its last).
    if (const LossScaler* scaler = runner_.loss_scaler()) tally.loss_scale = scaler->scale();
    // The steps the checkpoint holds count in the record once, on rank 0: the epoch's totals are summed over ranks.
    if (epoch == start_epoch_ && run_.root())
      tally.train = {start_epoch_train_.loss_sum, start_epoch_train_.correct, start_epoch_train_.samples};
    // The norms and skips before the checkpoint are every rank's alike: each rank goes on from them.
    if (epoch == start_epoch_) {
      tally.grad_norm = {start_epoch_train_.grad_norm_sum, start_epoch_train_.grad_norm_max,
                         start_epoch_train_.grad_norm_steps};
      tally.skipped_steps = start_epoch_train_.skipped_steps;
    }
    if (!train_epoch(epoch, tally)) return static_cast<int>(ExitCode::preempted);
    finish_epoch(epoch, tally);
  }
  write_trace();
  outputs_.finish();
  run_.say(fmt::format("done: {} epochs, {:.0f} training samples/s over the job, results in {}", epochs,
                       samples_done_ / std::max(train_time_s_, 1e-9), (run_.job.run.dir / "metrics.jsonl").string()));
  return 0;
}

bool TrainingLoop::train_epoch(int epoch, EpochTally& tally) {
  const int64_t first = epoch == start_epoch_ ? start_step_ : 0;
  if (run_.job.run.profile_layers && epoch == start_epoch_) open_profile(first);
  for (int64_t step = first; step < plan_.steps; ++step) {
    if (profile_ && step == profile_window_.from_step) start_profile(tally);
    if (!run_step(epoch, step, tally)) return false;
    ++global_step_, ++tally.steps_run;
  }
  return true;
}

bool TrainingLoop::run_step(int epoch, int64_t step, EpochTally& tally) {
  watchdog_.begin_step(global_step_);
  if (global_step_ == start_global_step_) stall_if_asked("step", run_.world.rank());
  if (awaited_stop_ && awaited_stop_->epoch == epoch && awaited_stop_->step == step) await_stop();
  if (trace_) trace_->begin_step(global_step_);
  runner_.begin(global_step_);
  for (int micro = 0; micro < plan_.accumulate; ++micro) feed(micro, tally);
  const auto rate = static_cast<float>(lr_.at(global_step_));
  {
    dist::Watchdog::Scope guard(&watchdog_, "gradient all-reduce", global_step_);
    runner_.apply(rate);
    tally.take(runner_.finished(1));  // the step before this one: the device works on this one meanwhile
  }
  const long long agreed = agree_on_step(tally);
  const bool stop_agreed = (agreed & 1) != 0;
  const int64_t every = run_.job.run.checkpoint_every_steps;
  // An epoch's last step takes its step checkpoint only where no checkpoint follows the epoch.
  const bool checkpoint_due =
      every > 0 && (global_step_ + 1) % every == 0 && (step + 1 < plan_.steps || !checkpoints_after(epoch));
  // Before a checkpoint, an evaluation or a stop, every queued step is collected and its loss agreed on, so
  // none of them ever saves or evaluates parameters a non-finite loss has reached.
  if (stop_agreed || checkpoint_due || step + 1 == plan_.steps) drain(tally);
  watchdog_.end_step();  // what follows (the checksum, a checkpoint, the stop's) is between steps
  if (stop_agreed) {
    stop(epoch, step, tally);
    return false;
  }
  after_step(epoch, step, checkpoint_due, tally);
  show_progress(epoch, step, rate, tally);
  return true;
}

// With the device decoding ahead, data_wait is the wait for the decode thread, and batch_load only the hand-over.
void TrainingLoop::load_batch(EpochTally& tally) {
  obs::Trace* const tracer = trace_ ? &*trace_ : nullptr;
  if (decode_ahead_) {
    auto decoded = obs::timed(tracer, "data_wait", [&] { return decode_ahead_->next(&tally.times.data_wait); });
    const obs::Phase to_device(tracer, "batch_load", &tally.times.batch_load);
    decode_ahead_->load(batch_, std::move(decoded));
    return;
  }
  auto host = obs::timed(tracer, "data_wait", [&] { return loader_->next(&tally.times.data_wait); });
  {
    const obs::Phase to_device(tracer, "batch_load", &tally.times.batch_load);
    batch_.load(*host);
  }
  loader_->recycle(std::move(host));
}

// A data error this rank meets alone (a sample that fails its CRC or does not decode) is held for the step's
// agreement: the rank still runs the step, on the batch it holds (the last one, or zeros), so that no other rank
// waits for it in the step's collectives, and no later batch is asked of its loader.
void TrainingLoop::feed(int micro, EpochTally& tally) {
  if (!tally.data_failure) {
    try {
      load_batch(tally);
    } catch (const AgreedError&) {
      throw;
    } catch (const std::exception&) {  // a loader's own failures too (threads it could not start, memory)
      tally.data_failure = std::current_exception();
    }
  }
  // Distinct per (seed, micro-batch, rank): dropout masks are reproducible yet differ across ranks, and no rank's
  // micro-batch takes another's seed on any world size (the ranks counted by the world's size, not a fixed bound).
  const uint64_t seed = (run_.job.train.seed * 0x100000001b3ull +
                         static_cast<uint64_t>(global_step_ * plan_.accumulate + micro)) *
                            static_cast<uint64_t>(run_.world.size()) +
                        static_cast<uint64_t>(run_.world.rank());
  runner_.micro_batch(batch_.images(), batch_.labels(), plan_.batch, seed, micro + 1 == plan_.accumulate,
                      batch_.targets());
}

// One tiny reduction per step lets every rank act on the same step: bit 1 a stop signal, bit 2 a non-finite
// loss (seen one step late, as steps are collected a step behind), bit 4 a data error on some rank. The data error
// comes first: the rank that met it ran its step on a batch it had already trained on.
long long TrainingLoop::agree_on_step(EpochTally& tally) {
  dist::Watchdog::Scope guard(&watchdog_, "step agreement", global_step_);
  const long long agreed = run_.world.max_across((stop_requested() ? 1 : 0) | (tally.nonfinite_step >= 0 ? 2 : 0) |
                                                 (tally.data_failure ? 4 : 0));
  if (agreed & 4) throw_data_failure(tally);
  if (agreed & 2) throw nonfinite_error(tally);
  return agreed;
}

void TrainingLoop::drain(EpochTally& tally) {
  dist::Watchdog::Scope guard(&watchdog_, "step agreement", global_step_);
  tally.take(runner_.finished(0));
  const long long agreed = run_.world.max_across((tally.nonfinite_step >= 0 ? 1 : 0) | (tally.data_failure ? 2 : 0));
  if (agreed & 2) throw_data_failure(tally);
  if (agreed & 1) throw nonfinite_error(tally);
}

// Collective, once some rank holds a data error: every rank throws the lowest failing rank's, naming that rank.
void TrainingLoop::throw_data_failure(const EpochTally& tally) const {
  run_.world.all_succeed([&] {
    if (tally.data_failure) std::rethrow_exception(tally.data_failure);
  });
  throw Error(ExitCode::internal, "a data error was agreed on, but no rank held one");
}

// Collective, once a rank has reported one: every rank names the first step any rank saw.
AgreedError TrainingLoop::nonfinite_error(const EpochTally& tally) const {
  const int64_t first = run_.world.min_across(tally.nonfinite_step >= 0 ? tally.nonfinite_step
                                                                        : std::numeric_limits<long long>::max());
  return AgreedError(ExitCode::fault,
                     fmt::format("non-finite training loss at epoch {} step {} (optimizer step {}); last good "
                                 "checkpoint: {}; lower optimizer.base_lr or lengthen optimizer.warmup_epochs, then "
                                 "--resume or start again",
                                 first / plan_.steps + 1, first % plan_.steps + 1, first + 1, checkpointer_.last()));
}

Resumable TrainingLoop::within_epoch(int epoch, int64_t step, const EpochTally& tally) const {
  const double samples = static_cast<double>((tally.steps_run + 1) * plan_.per_step * run_.ranks());
  return {epoch,       step + 1,        train_time_s_ + (util::now_s() - tally.start_s), samples_done_ + samples,
          tally.train, tally.grad_norm, tally.skipped_steps,                            runner_.updates_done()};
}

void TrainingLoop::after_step(int epoch, int64_t step, bool checkpoint_due, const EpochTally& tally) {
  const int64_t done = global_step_ + 1;
  if (corruption_ && corruption_->rank == run_.world.rank() && corruption_->after_step == done) {
    stderr_print("{}: flipping one bit of parameter 0 on rank {} after step {} (test hook)\n", kCorruptParamEnv,
               run_.world.rank(), done);
    flip_lowest_bit(run_.backend, net_.params());
  }
  if (run_.job.run.consistency_every > 0 && done % run_.job.run.consistency_every == 0)
    (void)checkpointer_.agreed_checksum(fmt::format("at optimizer step {}", done), global_step_);
  if (checkpoint_due) checkpointer_.save(within_epoch(epoch, step, tally), global_step_);
}

// Evaluations still to run from `epoch` on, this epoch's included (it follows the epoch's last step).
int TrainingLoop::evaluations_from(int epoch) const {
  const int epochs = run_.job.train.epochs, every = run_.job.train.eval_every_epochs;
  int count = 0;
  for (int e = epoch; e < epochs; ++e) count += ((e + 1) % every == 0 || e + 1 == epochs) ? 1 : 0;
  return count;
}

// Epoch `epoch` (0-based) ends with a checkpoint: every run.checkpoint_every epochs, and the last.
bool TrainingLoop::checkpoints_after(int epoch) const {
  const int every = run_.job.run.checkpoint_every;
  return (every > 0 && (epoch + 1) % every == 0) || epoch + 1 == run_.job.train.epochs;
}

// The checkpoints still to write from `global_step` on (after the steps of epoch `epoch` and the ones after it): at
// the epochs' ends checkpoints_after names, and every run.checkpoint_every_steps steps but at the last step of an
// epoch that one follows.
int TrainingLoop::checkpoints_from(int epoch, int64_t global_step) const {
  const int epochs = run_.job.train.epochs;
  int count = 0;
  for (int e = epoch; e < epochs; ++e) count += checkpoints_after(e) ? 1 : 0;
  if (const int64_t every = run_.job.run.checkpoint_every_steps; every > 0) {
    // The multiples of `every` in (global_step, last), less the epochs' ends that have their own checkpoint.
    const int64_t last = plan_.steps * epochs;
    int64_t steps = (last - 1) / every - global_step / every;
    for (int e = epoch; e < epochs; ++e)
      if (const int64_t end = (e + 1) * plan_.steps; end > global_step && end < last && end % every == 0 && checkpoints_after(e))
        --steps;
    count += static_cast<int>(steps);
  }
  return count;
}

// The last evaluation's time; before the first, its batches at a third of a training step each (a forward pass
// without the backward pass and the update).
double TrainingLoop::evaluation_guess_s(double per_step_s) const {
  if (last_eval_s_ > 0) return last_eval_s_;
  const double per_batch_s = per_step_s * plan_.batch / static_cast<double>(plan_.per_step);
  return per_batch_s / 3.0 * static_cast<double>(evaluator_.batches());
}

void TrainingLoop::show_progress(int epoch, int64_t step, float rate, EpochTally& tally) {
  // Steps are collected one behind, so an epoch's first step has none to show yet: a line now would say loss 0.
  if (tally.interval_empty()) return;
  const int epochs = run_.job.train.epochs;
  const Resumable now = within_epoch(epoch, step, tally);
  // The rate since the previous line (training time only), so a slowdown shows; the ETA takes the job's average.
  const double window_s = now.train_time_s - last_line_.seconds;
  const double samples_per_s = window_s > 0 ? (now.train_samples - last_line_.samples) / window_s
                                            : now.train_samples / now.train_time_s;
  const double per_step_s = now.train_time_s / static_cast<double>(global_step_ + 1);
  // Evaluations and checkpoints to come at the last one's time (checkpoints: none counted before the first).
  const double eta = per_step_s * static_cast<double>(plan_.steps * epochs - global_step_ - 1) +
                     evaluation_guess_s(per_step_s) * static_cast<double>(evaluations_from(epoch)) +
                     checkpointer_.last_write_s() * static_cast<double>(checkpoints_from(epoch, global_step_ + 1));
  if (!progress_.step(epoch, step, plan_.steps, global_step_, tally.interval_loss(), rate, samples_per_s, eta)) return;
  outputs_.curves(global_step_ + 1, {{"train/loss", tally.interval_loss()},
                                     {"train/lr", rate},
                                     {"train/samples_per_s", samples_per_s}});
  tally.restart_interval();  // the printed loss is the mean since the previous line
  last_line_ = {now.train_samples, now.train_time_s};
}

// RINGTRAIN_TEST_AWAIT_STOP (fault_injection.h): the ranks poll together, so they go on together as soon as any one
// of them holds a stop signal, which the step's agreement then acts on.
void TrainingLoop::await_stop() {
  constexpr int kPolls = 12000;  // two minutes of 10 ms
  for (int poll = 0; poll < kPolls; ++poll) {
    {
      dist::Watchdog::Scope guard(&watchdog_, "step agreement", global_step_);
      if (run_.world.max_across(stop_requested() ? 1 : 0) != 0) return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  progress_.finish_line();
  run_.say(fmt::format("{}: no stop signal within two minutes; going on", kAwaitStopEnv));
}

void TrainingLoop::stop(int epoch, int64_t step, const EpochTally& tally) {
  progress_.finish_line();
  run_.say(fmt::format("stop requested ({} on at least one rank): checkpointing after epoch {} step {}",
                       stop_signal() ? stop_signal_name() : "signal", epoch + 1, step + 1));
  checkpointer_.save(within_epoch(epoch, step, tally), global_step_);
  write_trace();
  outputs_.finish();
  run_.say(fmt::format("stopped for preemption; continue with --resume (exit {})",
                       static_cast<int>(ExitCode::preempted)));
}

void TrainingLoop::open_profile(int64_t first_step) {
  profile_.emplace([this] { run_.backend.synchronize(); });
  const int64_t warmup = run_.job.run.timing_warmup_steps;
  const bool steps_after_warmup = plan_.steps - first_step > warmup;
  profile_window_ = {steps_after_warmup ? first_step + warmup : first_step, steps_after_warmup ? warmup : 0};
}

void TrainingLoop::start_profile(const EpochTally& tally) {
  model::active_layer_profile() = &*profile_;
  profile_window_.steps_before = tally.steps_run;
  profile_window_.start_s = util::now_s();
}

void TrainingLoop::say_profile(int epoch, const EpochTally& tally) {
  model::active_layer_profile() = nullptr;
  if (profile_window_.start_s < 0) return;  // the epoch ran no step (a resume at its end)
  const int64_t warmup = profile_window_.warmup_left_out;
  const std::string which = warmup > 0 ? fmt::format(" after {} warm-up step{}", warmup, warmup == 1 ? "" : "s")
                                       : ", warm-up included: the epoch has no steps after run.timing_warmup_steps";
  run_.say(fmt::format("layer profile, rank 0, epoch {} ({} steps{}; {:.2f} s in layers of {:.2f} s training):\n{}",
                       epoch + 1, tally.steps_run - profile_window_.steps_before, which, profile_->total_s(),
                       util::now_s() - profile_window_.start_s, profile_->table(25)));
  if (const std::string methods = net_.methods(); !methods.empty())
    run_.say("how the backend runs them:\n" + methods);
}

void TrainingLoop::finish_epoch(int epoch, EpochTally& tally) {
  const double epoch_train_s = util::now_s() - tally.start_s;
  if (profile_) {
    say_profile(epoch, tally);
    profile_.reset();
  }
  EpochReport report = measure_epoch(epoch, tally, epoch_train_s);
  report.param_checksum =
      util::hex64(checkpointer_.agreed_checksum(fmt::format("after epoch {}", epoch + 1), global_step_));
  report.ema_checksum = checkpointer_.agreed_ema_checksum(fmt::format("after epoch {}", epoch + 1), global_step_);
  run_.say(report.line());
  outputs_.record(report.record());
  outputs_.curves(global_step_, {{"epoch/train_loss", report.sums.train.mean_loss()},
                                 {"epoch/train_acc", report.sums.train.accuracy()},
                                 {"epoch/samples_per_s", report.epoch_samples_per_s()},
                                 {"epoch/lr", report.lr}});
  if (report.evaluated)
    outputs_.curves(global_step_, {{"epoch/test_loss", report.sums.test.mean_loss()},
                                   {"epoch/test_acc", report.sums.test.accuracy()}});
  if (report.ema_test)
    outputs_.curves(global_step_, {{"epoch/ema_test_loss", report.ema_test->mean_loss()},
                                   {"epoch/ema_test_acc", report.ema_test->accuracy()}});
  if (checkpoints_after(epoch))
    checkpointer_.save({epoch + 1, 0, train_time_s_, samples_done_, Totals{}, GradNormStats{}, 0, runner_.updates_done()},
                       global_step_);
}

// The ranks' own batches are their own work, which the watchdog does not time; the agreement after them is a wait
// on the others. A data error one rank meets (a sample that fails its CRC or does not decode) stops every rank there.
Totals TrainingLoop::evaluate_own_part(const BatchSink& sink) {
  Totals t;
  run_.world.all_succeed([&] {
    const dist::Watchdog::LocalWork own_batches(&watchdog_);
    t = evaluator_.run(sink);
  });
  return t;
}

// Where a node's ranks share one copy of the parameters (model/parameter_memory.h), the first rank sharing each
// copy exchanges it, between barriers of the node, so no rank reads the copy mid-exchange; every rank holds the same average
// (ema_checksum), so the one it puts in place stands for all of them.
Totals TrainingLoop::evaluate_weight_average() {
  model::ParameterMemory* shared = net_.parameter_memory();
  const auto exchange = [&] {
    if (shared) shared->publish();
    if (!shared || shared->first_sharer()) ema_->exchange_with_parameters();
    if (shared) shared->publish();
  };
  exchange();
  Totals t = evaluate_own_part();
  exchange();
  t.sum_across(run_.world);
  return t;
}

EpochReport TrainingLoop::measure_epoch(int epoch, const EpochTally& tally, double epoch_train_s) {
  const int ranks = run_.ranks();
  // Every rank's steady samples over the ranks' mean steady time; 0 when the epoch ran no step past warm-up.
  const double steady_s = run_.world.sum_across(tally.steady.seconds()) / ranks;
  train_time_s_ += epoch_train_s;
  samples_done_ += static_cast<double>(tally.steps_run * plan_.per_step * ranks);
  progress_.finish_line();
  const double eval_start = util::now_s();
  obs::Phase phase(trace_ ? &*trace_ : nullptr, "eval");
  // A rank that finishes its evaluation batches first waits here for the others' own work, which the grace after
  // SIGTERM must not end; run.collective_timeout_s still does.
  dist::Watchdog::Scope guard(&watchdog_, "evaluation", global_step_, dist::Watchdog::Watch::collective,
                              /*sigterm_ends_wait=*/false);
  EpochReport r;
  // Every epoch, evaluated or not: the checkpoint after it holds the same statistics on every rank.
  evaluator_.average_running_statistics();
  const io::DatasetMeta& test_meta = data_.test().meta();
  ClassHits hits(test_meta.num_classes);
  const int every = run_.job.train.eval_every_epochs;
  r.evaluated = (epoch + 1) % every == 0 || epoch + 1 == run_.job.train.epochs;
  Totals test;
  if (r.evaluated) test = evaluate_own_part([&](const EvaluatedBatch& b) { hits.add(b); });
  r.sums = {tally.train, test, tally.times, std::move(hits)};
  r.sums.sum_across(run_.world);
  if (r.evaluated && ema_) r.ema_test = evaluate_weight_average();
  r.worst_classes = worst_classes(r.sums.test_classes, test_meta.class_names);
  const auto steps_run = static_cast<double>(std::max<int64_t>(tally.steps_run, 1));
  const StepTimes& own = tally.times;
  const double own_work = own.data_wait + own.batch_load + own.forward + own.backward + own.optimizer;
  r.per_rank = gather_samples(run_.world, {own_work / steps_run,
                                           obs::peak_rss_mb(),
                                           static_cast<double>(run_.backend.device_bytes_in_use()) / (1 << 20),
                                           static_cast<double>(run_.backend.device_bytes_allocated_peak()) / (1 << 20)});
  std::vector<double> step_s;
  for (const RankSample& s : r.per_rank) step_s.push_back(s.step_s);
  r.spread = obs::step_time_spread(step_s);
  for (const auto& w : {obs::straggler_warning(r.spread),
                        obs::starvation_warning(r.sums.times.data_wait / ranks / steps_run, epoch_train_s / steps_run,
                                                run_.job.data.prefetch_batches, loader_load())})
    if (!w.empty()) r.warnings.push_back(w), run_.say("warning: " + w);
  r.eval_s = util::now_s() - eval_start;
  if (r.evaluated) last_eval_s_ = r.eval_s;  // the ETA's guess at the evaluations to come

  r.epoch = epoch + 1, r.epochs = run_.job.train.epochs, r.ranks = ranks;
  r.global_batch = plan_.global_batch, r.steps = plan_.steps, r.steps_run = tally.steps_run;
  r.per_step = plan_.per_step;
  r.lr = lr_.at(global_step_ - 1);
  r.samples_per_s = samples_done_ / train_time_s_;
  r.epoch_train_s = epoch_train_s;
  r.steady_samples_per_s = tally.steady.samples > 0 && steady_s > 0 ? tally.steady.samples * ranks / steady_s : 0;
  r.timing_warmup_steps = run_.job.run.timing_warmup_steps;
  r.train_flops_per_sample = net_.train_flops_per_sample();
  r.baseline_rss_mb = baseline_.rss_mb, r.device_baseline_mb = baseline_.device_mb;
  r.memory_needed_mb = memory_needed_mb();
  r.memory_planned_mb = planned_bytes() / (1 << 20);
  r.arena_mb = static_cast<double>(net_.memory_plan().arena_bytes()) / (1 << 20);
  r.device_is_host = run_.backend.allocates_host_memory();
  r.loss_scale = tally.loss_scale, r.skipped_steps = tally.skipped_steps;
  r.grad_norm = tally.grad_norm;
  if (run_.job.gpu.cuda_graphs) r.graph_steps = runner_.action_counts().since(tally.graph_steps_before);
  return r;
}

// What the run needs resident: the backend's host buffers (parameters, gradients, optimizer state, activations,
// the samples it decodes) and its own working memory (workspaces, staging; made on first use, so this is asked when
// the epoch is recorded), and the loaders' queues.
double TrainingLoop::memory_needed_mb() const {
  const model::Backend& backend = run_.backend;
  const double host =
      backend.allocates_host_memory() ? planned_bytes() + static_cast<double>(backend.working_bytes()) : 0;
  return (host + data_.loader_queue_bytes()) / (1 << 20);
}

obs::LoaderLoad TrainingLoop::loader_load() const {
  const LoaderTimes t = loader_->times();
  const auto batches = static_cast<double>(std::max<int64_t>(t.batches, 1));
  obs::LoaderLoad load{t.read_s / batches, t.convert_s / batches, loader_->threads()};
  load.photos = data_.meta().storage == io::SampleStorage::jpeg;
  if (decode_ahead_) {
    const DecodeTimes d = decode_ahead_->times();
    load.device_decode_s = d.decode_s / static_cast<double>(std::max<int64_t>(d.batches, 1));
  }
  return load;
}

// The backend's buffers, the slots of the samples it decodes (data.decode = gpu), and this rank's share of the
// memory its node's ranks share (the parameters, gradients and optimizer state under dist.reducer = "shared").
double TrainingLoop::planned_bytes() const {
  const model::ParameterMemory* shared = net_.parameter_memory();
  const double share = shared ? static_cast<double>(shared->shared_bytes()) / shared->sharing_ranks() : 0;
  return static_cast<double>(run_.backend.bytes_allocated()) + data_.device_decode_bytes() + share;
}

// The trace is diagnostics: failing to write it (a full disk) is said, not made the run's outcome.
void TrainingLoop::write_trace() {
  if (!trace_) return;
  try {
    trace_->write(run_.job.run.dir / fmt::format("trace-rank{}.json", run_.world.rank()));
  } catch (const Error& e) {
    stderr_print("ringtrain: warning: {}\n", e.what());
  }
}

}  // namespace ringtrain::train
