// Owns the exponential moving average of a network's parameters (train.ema_decay): one more flat buffer the size
// of the parameters, in the backend's memory, updated after every optimizer step as timm's ModelEmaV3 does. It
// averages the parameters only. Batch-norm running statistics are copied as they are, not averaged (timm's
// ModelEmaV3 with exclude_buffers): here they are per-rank state, each rank's own until the checkpoint averages
// them, so averaging them would give ranks different averages; and they are already a moving average of their
// own. Evaluating the average therefore uses the network's running statistics of the moment.
#pragma once
#include <vector>

#include "kernels/optimizer_step.h"
#include "model/network.h"

namespace ringtrain::model {

class WeightAverage {
 public:
  // Starts at the network's current parameters, as timm copies the model when it creates the average.
  WeightAverage(Network& net, double decay);
  double decay() const { return decay_; }
  // ema += (1 - decay) * (params - ema) over every parameter, queued after the update it follows.
  void update();
  // The average restarts at the network's current parameters (a fresh start, or a resume from a checkpoint
  // without one).
  void restart();
  // Copies of the average (waits for the device), and back; load() takes exactly param_count() values.
  std::vector<float> read();
  void load(const std::vector<float>& values);
  const float* data() const { return ema_.as<float>(); }
  // Exchanges the average with the network's parameters, bit for bit: the network then holds the average (to
  // evaluate it), and a second call restores both. The spare buffer the exchange goes through is made at the
  // first call and kept.
  void exchange_with_parameters();

 private:
  Network& net_;
  double decay_;
  EmaStep step_;
  DeviceBuffer ema_, spare_;
};

}  // namespace ringtrain::model
