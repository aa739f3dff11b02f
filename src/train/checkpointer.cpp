// Owns the parameter agreement and writing checkpoints; see checkpointer.h.
#include "train/checkpointer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "dist/mpi_check.h"
#include "io/checkpoint_file.h"
#include "obs/phase.h"
#include "util/checksum.h"
#include "util/clock.h"

namespace ringtrain::train {

Checkpointer::Checkpointer(const RunContext& run, model::Network& net, model::Optimizer& optimizer,
                           const EpochPlan& plan, std::string run_id, std::string versions_json,
                           const std::string& last, dist::Watchdog& watchdog, obs::Trace* trace)
    : run_(run),
      net_(net),
      optimizer_(optimizer),
      plan_(plan),
      run_id_(std::move(run_id)),
      versions_json_(std::move(versions_json)),
      last_(last.empty() ? "none" : last),
      watchdog_(watchdog),
      trace_(trace) {
  run_.world.all_succeed([&] {
    if (!run_.root()) return;
    const auto found = io::list_checkpoints(run_.job.run.dir / "checkpoints");
    if (!found.empty()) highest_name_ = io::checkpoint_number(found.back());
  });
  run_.world.broadcast(&highest_name_, sizeof highest_name_, 0);
}

uint64_t Checkpointer::agreed_checksum(const std::string& when, int64_t global_step) {
  return agreed(net_.params(), "parameters", when, global_step);
}

std::string Checkpointer::agreed_ema_checksum(const std::string& when, int64_t global_step) {
  if (!ema_) return "";
  return util::hex64(agreed(ema_->data(), "weights' moving averages (train.ema_decay)", when, global_step));
}

uint64_t Checkpointer::agreed(const float* values, const char* what, const std::string& when, int64_t global_step) {
  dist::Watchdog::Scope guard(&watchdog_, "parameter checksum comparison", global_step);
  std::vector<float> params(static_cast<size_t>(net_.param_count()));
  run_.backend.to_host(params.data(), values, params.size() * sizeof(float));
  const uint64_t checksum = util::fnv1a64(params.data(), params.size() * sizeof(float));
  std::vector<uint64_t> all(static_cast<size_t>(run_.ranks()));
  MPI_CHECK(MPI_Allgather(&checksum, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, run_.world.comm()));
  // Every rank sees the same table, so every rank throws the same message.
  if (std::any_of(all.begin(), all.end(), [&](uint64_t c) { return c != all[0]; }))
    throw AgreedError(ExitCode::fault,
                      fmt::format("{} differ between ranks {}: {}; a non-deterministic reduction or memory "
                                  "corruption on the odd rank out (check that node); --resume continues from the "
                                  "last good checkpoint: {}",
                                  what, when, util::describe_checksum_groups(all), last_));
  // The same values on every rank, so every rank counts alike. A step whose loss was finite can still have written
  // non-finite parameters (its gradients overflowed): nothing is saved from them.
  if (const auto bad = std::count_if(params.begin(), params.end(), [](float v) { return !std::isfinite(v); }); bad > 0)
    throw AgreedError(ExitCode::fault,
                      fmt::format("non-finite training parameters {}: the {} hold {} non-finite value{} (a step's "
                                  "gradients overflowed though its loss was finite); last good checkpoint: {}; lower "
                                  "optimizer.base_lr, set optimizer.clip_global_norm, or train in fp32, then --resume "
                                  "or start again",
                                  when, what, bad, bad == 1 ? "" : "s", last_));
  return checksum;
}

void Checkpointer::save(const Resumable& next, int64_t global_step) {
  // Rank 0's parameters go into the file, so they are compared first: a checkpoint is then always "good". At an
  // epoch boundary (next_step 0) the after-epoch comparison has just done it.
  if (next.next_step > 0) (void)agreed_checksum(fmt::format("before the checkpoint after optimizer step {}", global_step + 1), global_step);
  // The other ranks wait while rank 0 writes the file, however long that takes: the grace after SIGTERM (a dead peer
  // under srun) does not end their wait, run.collective_timeout_s still does.
  dist::Watchdog::Scope guard(&watchdog_, "checkpoint", global_step, dist::Watchdog::Watch::collective,
                              /*sigterm_ends_wait=*/run_.root());
  obs::Phase phase(trace_, "checkpoint");
  const double t0 = util::now_s();
  const int ranks = run_.ranks();
  const auto count = static_cast<int>(net_.state_count());
  model::NetworkState state;  // rank 0's whole state goes into the file; every rank's statistics are gathered
  model::OptimizerState optimizer;
  std::vector<float> ema;  // rank 0's; every rank holds the same (they average identical parameters)
  if (run_.root()) {
    state = net_.read_state();
    optimizer = optimizer_.read_state();
    if (ema_) ema = ema_->read();
  } else {
    state.states.resize(static_cast<size_t>(count));
    run_.backend.to_host(state.states.data(), net_.states(), state.states.size() * sizeof(float));
  }
  std::vector<float> all_states(run_.root() ? static_cast<size_t>(count) * static_cast<size_t>(ranks) : 0);
  MPI_CHECK(MPI_Gather(state.states.data(), count, MPI_FLOAT, all_states.data(), count, MPI_FLOAT, 0, run_.world.comm()));
  Totals epoch_train = next.epoch_train;
  epoch_train.sum_across(run_.world);
  const int64_t done = next.next_epoch * plan_.steps + next.next_step;
  highest_name_ = std::max(done, highest_name_ + 1);
  const std::filesystem::path dir = run_.job.run.dir / "checkpoints";
  const std::filesystem::path path = dir / io::checkpoint_name(highest_name_);
  run_.world.all_succeed([&] {
    if (!run_.root()) return;
    io::CheckpointData d;
    d.epoch = next.next_epoch, d.step_in_epoch = next.next_step, d.global_step = done, d.steps_per_epoch = plan_.steps;
    d.ranks = ranks, d.global_batch = plan_.global_batch, d.seed = run_.job.train.seed;
    d.train_time_s = next.train_time_s, d.train_samples = next.train_samples;
    d.optimizer_updates = next.optimizer_updates;
    const model::Shape input = net_.input_shape();
    d.sample_shape = {input.c, input.h, input.w};
    d.epoch_train = {epoch_train.loss_sum,         epoch_train.correct,         epoch_train.samples,
                     next.epoch_grad_norm.sum,     next.epoch_grad_norm.max,    next.epoch_grad_norm.steps,
                     next.epoch_skipped_steps,     true};
    for (const auto& t : net_.param_tensors()) d.tensor_names.push_back(t.name), d.tensor_sizes.push_back(t.count);
    d.params = std::move(state.params);
    d.optimizer = optimizer.optimizer;
    for (auto& a : optimizer.arrays) d.optimizer_state.push_back({std::move(a.name), std::move(a.values)});
    d.ema_params = std::move(ema);
    d.states = std::move(all_states);
    d.state_count = count;
    d.run_id = run_id_;
    if (loss_scaler_) {
      const LossScaleState scaling = loss_scaler_->state();
      d.loss_scale = scaling.scale, d.loss_scale_finite_in_a_row = scaling.finite_in_a_row;
      d.loss_scale_skipped_steps = scaling.skipped_steps;
      d.loss_scale_skips_in_a_row = scaling.skips_in_a_row;
    }
    d.job_toml = run_.job.resolved_toml;
    d.versions_json = versions_json_;
    // A state no resume could read (a step's loss finite but its optimizer state or statistics overflowed) is not
    // written, so that no older checkpoint is rotated away for it.
    if (const std::string bad = io::non_finite_array(d); !bad.empty())
      throw Error(ExitCode::fault,
                  fmt::format("non-finite training state at optimizer step {}: {} (a step's gradients overflowed "
                              "though its loss was finite); nothing was written; last good checkpoint: {}; lower "
                              "optimizer.base_lr, set optimizer.clip_global_norm, or train in fp32, then --resume or "
                              "start again",
                              global_step + 1, bad, last_));
    const dist::Watchdog::LocalWork write(&watchdog_);
    io::write_checkpoint(path, d);
    const auto kept = io::list_checkpoints(dir);
    std::error_code ignored;
    for (size_t i = 0; i + static_cast<size_t>(run_.job.run.keep_checkpoints) < kept.size(); ++i)
      std::filesystem::remove(kept[i], ignored);
  });
  last_ = path.string();
  last_write_s_ = util::now_s() - t0;
  run_.say(fmt::format("checkpoint: {} ({:.2f} s)", path.string(), last_write_s_));
}

}  // namespace ringtrain::train
