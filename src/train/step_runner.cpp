// Owns the arithmetic order of one optimizer step.
#include "train/step_runner.h"

#include "util/clock.h"

namespace ringtrain::train {

StepRunner::StepRunner(model::Network& network, dist::GradientSync& sync, const config::JobConfig::Optimizer& optimizer,
                       int64_t global_batch)
    : net_(network), sync_(sync), optimizer_(optimizer), grad_scale_(1.0f / static_cast<float>(global_batch)) {
  dlogits_ = net_.backend().allocate(sizeof(float) * static_cast<size_t>(net_.output_shape().elements()));
}

void StepRunner::begin() { net_.backend().fill(net_.param_count(), 0.0f, net_.grads()); }

model::LossSums StepRunner::micro_batch(const float* images, const int32_t* labels, int count, uint64_t seed, bool last,
                                        StepTimes& times) {
  double t = util::now_s();
  const model::Tensor logits = net_.forward({const_cast<float*>(images), net_.input_shape().with_batch(count)},
                                            model::Mode::train, {seed});
  const model::LossSums loss = net_.backend().softmax_cross_entropy(count, net_.classes(), logits.data, labels,
                                                                    grad_scale_, dlogits_.as<float>());
  const double t2 = util::now_s();
  times.forward += t2 - t;
  if (last) sync_.begin();
  net_.backward({dlogits_.as<float>(), logits.shape}, last ? &sync_ : nullptr);
  // A GPU backend only queues the work: wait for it so backward time is compute time, and the all-reduce
  // wait that follows is only the reduction's exposed tail (the reduction streams are not waited for here).
  net_.backend().synchronize();
  times.backward += util::now_s() - t2;
  return loss;
}

void StepRunner::apply(float lr, StepTimes& times) {
  double t = util::now_s();
  sync_.finish();
  const double t2 = util::now_s();
  times.allreduce += t2 - t;
  auto& backend = net_.backend();
  for (const auto& p : net_.param_tensors())
    backend.sgd_update(p.count, lr, static_cast<float>(optimizer_.momentum),
                       p.decl.decay ? static_cast<float>(optimizer_.weight_decay) : 0.0f, net_.grads() + p.offset,
                       net_.velocity() + p.offset, net_.params() + p.offset);
  backend.synchronize();
  times.optimizer += util::now_s() - t2;
}

}  // namespace ringtrain::train
