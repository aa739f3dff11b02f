// Owns one optimizer step on one rank, given micro-batches already on the device: zero gradients, forward,
// loss (scaled by 1/global batch so the cross-rank sum is the mean), backward with bucketed reduction
// overlapped, SGD update. The trainer and the data-parallel equivalence test both drive this class, so the
// test proves the code that trains.
#pragma once
#include <cstdint>

#include "config/job_config.h"
#include "dist/gradient_sync.h"
#include "model/network.h"
#include "obs/trace.h"

namespace ringtrain::train {

// Seconds per phase, summed over steps. allreduce is the exposed wait after backward; allreduce_total the
// reductions' own time (launch to completion), hidden behind backward or not.
struct StepTimes {
  double data_wait = 0, forward = 0, backward = 0, allreduce = 0, optimizer = 0, allreduce_total = 0;
};

class StepRunner {
 public:
  StepRunner(model::Network& network, dist::GradientSync& sync, const config::JobConfig::Optimizer& optimizer,
             int64_t global_batch);

  void begin();  // zero gradients for a new optimizer step
  // Forward and backward of one micro-batch; `last` starts the gradient reduction during its backward.
  model::LossSums micro_batch(const float* images, const int32_t* labels, int count, uint64_t seed, bool last,
                              StepTimes& times);
  void apply(float lr, StepTimes& times);  // wait for the reduction, then update parameters
  void set_trace(obs::Trace* trace) { trace_ = trace; }  // phases and bucket reductions go there (null: none)

 private:
  model::Network& net_;
  dist::GradientSync& sync_;
  config::JobConfig::Optimizer optimizer_;
  float grad_scale_;
  model::DeviceBuffer dlogits_;
  obs::Trace* trace_ = nullptr;
};

}  // namespace ringtrain::train
