// Owns the arithmetic order of one optimizer step and collecting finished steps' loss sums and phase times.
#include "train/step_runner.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <utility>

#include "common/error.h"
#include "obs/phase.h"

namespace ringtrain::train {
namespace {

// Clock marks of one step: per micro-batch m its forward's start and end and its backward's end, then the
// moment the reduced gradients are ordered before the update, then the update's end.
constexpr int kForwardBegin = 0, kForwardEnd = 1, kBackwardEnd = 2, kMarksPerMicroBatch = 3;

}  // namespace

StepTimes& StepTimes::operator+=(const StepTimes& o) {
  data_wait += o.data_wait, forward += o.forward, backward += o.backward;
  allreduce += o.allreduce, optimizer += o.optimizer, allreduce_total += o.allreduce_total;
  batch_load += o.batch_load;
  return *this;
}

StepRunner::StepRunner(model::Network& network, dist::GradientSync& sync, model::Optimizer& optimizer,
                       int64_t global_batch, int accumulate, double label_smoothing,
                       std::optional<LossScaler> loss_scaler)
    : net_(network),
      sync_(sync),
      optimizer_(optimizer),
      loss_{1.0f / static_cast<float>(global_batch), static_cast<float>(label_smoothing)},
      accumulate_(accumulate),
      marks_per_step_(kMarksPerMicroBatch * accumulate + 2),
      loss_scaler_(std::move(loss_scaler)) {
  model::Backend& backend = net_.backend();
  dlogits_ = backend.allocate(sizeof(float) * static_cast<size_t>(net_.output_shape().elements()));
  for (Slot& slot : slots_) {
    slot.totals = backend.allocate(sizeof(model::LossTotals));
    slot.readback = backend.make_readback(sizeof(model::LossTotals));
  }
  clock_ = backend.make_clock(kSlots * marks_per_step_);
  if (loss_scaler_) {
    nonfinite_ = backend.allocate(sizeof(int32_t));
    nonfinite_readback_ = backend.make_readback(sizeof(int32_t));
  }
  capturer_ = backend.step_capturer();
  if (capturer_) graph_plan_.emplace(kSlots, kGraphWarmupSteps);
}

const char* StepRunner::eager_reason() const {
  if (!capturer_) return nullptr;
  if (accumulate_ > 1) return "several micro-batches per step (train.accumulate_steps) load into one batch buffer";
  if (loss_scaler_) return "fp16's loss scaling decides on the host whether the update runs";
  if (clip_norm_ > 0) return "gradient clipping (optimizer.clip_global_norm) reads the gradient's norm on the host";
  return nullptr;
}

int StepRunner::in_flight() const {
  int queued = 0;
  for (const Slot& slot : slots_) queued += slot.queued ? 1 : 0;
  return queued;
}

void StepRunner::begin(int64_t step) {
  const int next = static_cast<int>(queued_count_ % kSlots);
  Slot& slot = slots_[static_cast<size_t>(next)];
  if (slot.queued)
    throw Error(ExitCode::internal, fmt::format("step {} begun while step {} was still in flight; collect it with "
                                                "finished() first",
                                                step, slot.step));
  current_ = next;
  slot.step = step;
  slot.micro_batches = 0;
  slot.samples = 0;
  slot.loss_scale = loss_scaler_ ? loss_scaler_->scale() : 0.0f;
  slot.skipped = false;
  slot.grad_norm = -1;
  model::Backend& backend = net_.backend();
  // Ahead of a graphed step's work too: a graph holds the same work every step, and this runs only now and then.
  if (!grads_zero_) backend.fill(net_.param_count(), 0.0f, net_.grads());
  grads_zero_ = false;
  if (!graphed()) backend.zero(slot.totals.as<void>(), sizeof(model::LossTotals));
}

void StepRunner::micro_batch(const float* images, const int32_t* labels, int count, uint64_t seed, bool last,
                             const float* targets) {
  Slot& slot = slots_[static_cast<size_t>(current_)];
  if (slot.micro_batches >= accumulate_)
    throw Error(ExitCode::internal, fmt::format("more than {} micro-batches in one step", accumulate_));
  const MicroBatch batch{images, labels, targets, count, seed};
  if (graphed())
    pending_ = batch;  // accumulate_ is 1: this is the step's last
  else
    queue_micro_batch(slot, slot.micro_batches, batch, last);
  ++slot.micro_batches;
  slot.samples += count;
}

void StepRunner::queue_micro_batch(Slot& slot, int micro, const MicroBatch& batch, bool last) {
  const int mark = micro * kMarksPerMicroBatch;
  model::Backend& backend = net_.backend();
  const int count = batch.count;
  {
    obs::Phase range(nullptr, "forward");  // an NVTX range around the queueing; the time comes from the clock
    clock_->mark(mark_id(current_, mark + kForwardBegin));
    const model::Tensor logits = net_.forward(
        {const_cast<float*>(batch.images), net_.input_shape().with_batch(count)}, model::Mode::train, batch.seed);
    kernels::LossSettings loss = loss_;
    if (loss_scaler_) loss.grad_scale *= slot.loss_scale;  // the loss sums are not scaled, only its gradient
    if (batch.targets)
      backend.soft_target_cross_entropy(count, net_.classes(), logits.as<float>(), batch.targets, loss,
                                        dlogits_.as<float>(), slot.totals.as<model::LossTotals>());
    else
      backend.softmax_cross_entropy(count, net_.classes(), logits.as<float>(), batch.labels, loss,
                                    dlogits_.as<float>(), slot.totals.as<model::LossTotals>());
    if (last) slot.readback->start(slot.totals.as<void>());  // the step's sums are complete: bring them home
    clock_->mark(mark_id(current_, mark + kForwardEnd));
  }
  {
    obs::Phase range(nullptr, "backward");
    if (last) sync_.begin(slot.step);
    net_.backward({dlogits_.as<float>(), net_.output_shape().with_batch(count)}, last ? &sync_ : nullptr);
    clock_->mark(mark_id(current_, mark + kBackwardEnd));
  }
}

void StepRunner::apply(float lr) {
  Slot& slot = slots_[static_cast<size_t>(current_)];
  if (graphed())
    run_graphed(slot, lr);
  else
    queue_update(slot, lr);
  action_counts_.add(graphed() ? last_action_ : StepAction::eager);
  if (!slot.skipped) ++updates_done_;
  grads_zero_ = true;  // the update consumed them (model/backend.h), or the skip dropped them
  slot.queued = true;
  ++queued_count_;
  unreported_steps_.push_back(slot.step);
}

void StepRunner::queue_update(Slot& slot, float lr) {
  const int after_micro_batches = accumulate_ * kMarksPerMicroBatch;
  {
    obs::Phase range(nullptr, "allreduce_wait");
    sync_.finish();
    clock_->mark(mark_id(current_, after_micro_batches));
  }
  obs::Phase range(nullptr, "optimizer");
  if (loss_scaler_) {
    const bool finite = unscale_gradients();
    slot.skipped = !finite;
    loss_scaler_->after_step(finite, slot.step);
  }
  if (slot.skipped) {
    net_.backend().fill(net_.param_count(), 0.0f, net_.grads());  // dropped: the next step starts from zero
  } else {
    if (clip_norm_ > 0) slot.grad_norm = clip_gradients();
    optimizer_.update(lr, updates_done_, sync_.update_slice());
  }
  sync_.updated();
  if (ema_ && !slot.skipped) ema_->update();
  clock_->mark(mark_id(current_, after_micro_batches + 1));
}

namespace {

// The update calls between its construction and its end take their numbers through the capturer's table.
class ScalarsPass {
 public:
  ScalarsPass(model::StepCapturer& capturer, int slot, model::StepCapturer::ScalarsPass pass) : capturer_(capturer) {
    capturer_.begin_scalars(slot, pass);
  }
  ~ScalarsPass() { capturer_.end_scalars(); }
  ScalarsPass(const ScalarsPass&) = delete;
  ScalarsPass& operator=(const ScalarsPass&) = delete;

 private:
  model::StepCapturer& capturer_;
};

}  // namespace

// The update's numbers and the forward pass's seed go to the slot's table first, as a replay needs them and makes
// no call that would pass them; then the step's work is queued, captured, or replayed, as the plan says.
void StepRunner::run_graphed(Slot& slot, float lr) {
  using Pass = model::StepCapturer::ScalarsPass;
  const int index = current_;
  const MicroBatch batch = pending_;
  {
    const ScalarsPass fill(*capturer_, index, Pass::fill);
    optimizer_.update(lr, updates_done_, sync_.update_slice());  // no loss scaling (gpu.cuda_graphs refuses fp16)
    capturer_->fill_pass_seed(index, batch.seed);
  }
  const StepShape shape{{batch.count},
                        batch.targets != nullptr,
                        {batch.images, batch.targets ? static_cast<const void*>(batch.targets) : batch.labels}};
  last_action_ = run_step(*graph_plan_, *capturer_, index, shape, sum_over_ranks_, [&](StepAction action) {
    if (action != StepAction::eager) sync_.capture_into(index);
    const ScalarsPass queue(*capturer_, index, Pass::queue);
    net_.backend().zero(slot.totals.as<void>(), sizeof(model::LossTotals));
    queue_micro_batch(slot, 0, batch, true);
    queue_update(slot, lr);
  });
  if (last_action_ == StepAction::replay) sync_.replayed(slot.step, index);
}

std::vector<FinishedStep> StepRunner::finished(int in_flight) {
  // Bounded: a reduction that never ends (a dead peer) is a FaultError here, not a hang in a readback. The
  // reducer reports each step's buckets once they have ended, in the order the steps were applied.
  for (const dist::StepSpans& spans : sync_.settle(in_flight)) {
    if (unreported_steps_.empty()) throw Error(ExitCode::internal, "the reducer settled a step never applied");
    const int64_t step = unreported_steps_.front();
    unreported_steps_.pop_front();
    double& seconds = reduction_s_[step];
    for (const auto& span : spans) {
      seconds += span.end_s - span.begin_s;
      if (trace_)
        trace_->add_to_step(step, "allreduce", span.begin_s, span.end_s, obs::Trace::kBucketTrack + span.bucket,
                            span.floats * static_cast<int64_t>(sizeof(float)));
    }
  }
  std::vector<FinishedStep> done;
  // Slots in the order they were queued: the oldest is the one after the current, when it is queued.
  for (int i = 1; i <= kSlots && this->in_flight() > in_flight; ++i) {
    const int index = (current_ + i) % kSlots;
    Slot& slot = slots_[static_cast<size_t>(index)];
    if (slot.queued) done.push_back(collect(slot, index));
  }
  return done;
}

bool StepRunner::unscale_gradients() {
  model::Backend& backend = net_.backend();
  backend.zero(nonfinite_.as<void>(), sizeof(int32_t));
  backend.unscale(net_.param_count(), 1.0f / slots_[static_cast<size_t>(current_)].loss_scale, net_.grads(),
                  nonfinite_.as<int32_t>());
  nonfinite_readback_->start(nonfinite_.as<void>());
  int32_t nonfinite = 0;
  std::memcpy(&nonfinite, nonfinite_readback_->wait(), sizeof nonfinite);
  return nonfinite == 0;
}

void StepRunner::clip_gradients_to(double max_norm) {
  clip_norm_ = max_norm;
  if (max_norm <= 0 || squares_readback_) return;
  squares_ = net_.backend().allocate(sizeof(double));
  squares_readback_ = net_.backend().make_readback(sizeof(double));
}

// Each rank sums the squares of the gradients it updates (all of them, or its slice of a shared copy); the
// reducer adds the slices' sums, so the norm is the whole reduced gradient's on every rank.
double StepRunner::clip_gradients() {
  model::Backend& backend = net_.backend();
  const model::ParamSlice slice = sync_.update_slice();
  float* grads = net_.grads() + slice.begin;
  backend.sum_squares(slice.count, grads, squares_.as<double>());
  squares_readback_->start(squares_.as<void>());
  double squares = 0;
  std::memcpy(&squares, squares_readback_->wait(), sizeof squares);
  const double norm = std::sqrt(sync_.sum_over_slices(squares));
  const double factor = clip_norm_ / (norm + 1e-6);
  if (factor < 1.0) backend.scale(slice.count, static_cast<float>(factor), grads);
  return norm;
}

FinishedStep StepRunner::collect(Slot& slot, int index) {
  FinishedStep result;
  result.step = slot.step;
  result.samples = slot.samples;
  result.loss_scale = slot.loss_scale;
  result.skipped = slot.skipped;
  result.grad_norm = slot.grad_norm;
  const void* totals = slot.readback->wait();
  std::memcpy(&result.loss, totals, sizeof result.loss);
  StepTimes& t = result.times;
  const auto span = [&](const char* name, int from, int to) {
    const double seconds = clock_->elapsed(mark_id(index, from), mark_id(index, to));
    if (trace_) {
      const double end = clock_->host_time(mark_id(index, to));
      trace_->add_to_step(slot.step, name, end - seconds, end);
    }
    return seconds;
  };
  int last_backward = 0;
  for (int m = 0; m < slot.micro_batches; ++m) {
    const int base = m * kMarksPerMicroBatch;
    t.forward += span("forward", base + kForwardBegin, base + kForwardEnd);
    t.backward += span("backward", base + kForwardEnd, base + kBackwardEnd);
    last_backward = base + kBackwardEnd;
  }
  const int reduced = accumulate_ * kMarksPerMicroBatch;
  t.allreduce = span("allreduce_wait", last_backward, reduced);
  t.optimizer = span("optimizer", reduced, reduced + 1);
  result.end_s = clock_->host_time(mark_id(index, reduced + 1));
  if (const auto it = reduction_s_.find(slot.step); it != reduction_s_.end()) {
    t.allreduce_total = it->second;
    reduction_s_.erase(it);
  }
  slot.queued = false;
  return result;
}

}  // namespace ringtrain::train
