// Owns the arithmetic order of one optimizer step.
#include "train/step_runner.h"

#include "obs/phase.h"

namespace ringtrain::train {

StepRunner::StepRunner(model::Network& network, dist::GradientSync& sync, const config::JobConfig::Optimizer& optimizer,
                       int64_t global_batch)
    : net_(network), sync_(sync), optimizer_(optimizer), grad_scale_(1.0f / static_cast<float>(global_batch)) {
  dlogits_ = net_.backend().allocate(sizeof(float) * static_cast<size_t>(net_.output_shape().elements()));
}

void StepRunner::begin() { net_.backend().fill(net_.param_count(), 0.0f, net_.grads()); }

model::LossSums StepRunner::micro_batch(const float* images, const int32_t* labels, int count, uint64_t seed, bool last,
                                        StepTimes& times) {
  obs::Phase forward(trace_, "forward", &times.forward);
  const model::Tensor logits = net_.forward({const_cast<float*>(images), net_.input_shape().with_batch(count)},
                                            model::Mode::train, {seed});
  const model::LossSums loss = net_.backend().softmax_cross_entropy(count, net_.classes(), logits.data, labels,
                                                                    grad_scale_, dlogits_.as<float>());
  forward.end();
  obs::Phase backward(trace_, "backward", &times.backward);
  if (last) sync_.begin();
  net_.backward({dlogits_.as<float>(), logits.shape}, last ? &sync_ : nullptr);
  // A GPU backend only queues the work: wait for it so backward time is compute time, and the all-reduce
  // wait that follows is only the reduction's exposed tail (the reduction streams are not waited for here).
  net_.backend().synchronize();
  return loss;
}

void StepRunner::apply(float lr, StepTimes& times) {
  {
    obs::Phase wait(trace_, "allreduce_wait", &times.allreduce);
    sync_.finish();
  }
  for (const auto& span : sync_.reducer().last_spans()) {
    times.allreduce_total += span.end_s - span.begin_s;
    if (trace_)
      trace_->add("allreduce", span.begin_s, span.end_s, obs::Trace::kBucketTrack + span.bucket,
                  span.floats * static_cast<int64_t>(sizeof(float)));
  }
  obs::Phase optimizer(trace_, "optimizer", &times.optimizer);
  auto& backend = net_.backend();
  for (const auto& p : net_.param_tensors())
    backend.sgd_update(p.count, lr, static_cast<float>(optimizer_.momentum),
                       p.decl.decay ? static_cast<float>(optimizer_.weight_decay) : 0.0f, net_.grads() + p.offset,
                       net_.velocity() + p.offset, net_.params() + p.offset);
  backend.synchronize();
}

}  // namespace ringtrain::train
