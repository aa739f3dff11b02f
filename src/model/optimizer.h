// Owns the optimizer over a network's flat buffers: the update rule (SGD with momentum, AdamW, LARS, LAMB; one
// file each in model/optimizers/), the state it keeps in device memory (momentum, moments), and that state's
// copies by name, which checkpoints save and restore. Every rule runs as a fixed number of passes over the whole
// flat buffer on every backend, never one call per parameter tensor.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config/job_config.h"
#include "model/network.h"

namespace ringtrain::model {

// One array of optimizer state, one value per parameter.
struct OptimizerArray {
  std::string name;  // "velocity", "adam_m", "adam_v"
  std::vector<float> values;
};

// The parameters one rank updates: [begin, begin + count) of the flat buffers. begin is a multiple of
// kSliceAlignment, so the slice starts on a word of the decay mask (kernels/optimizer_step.h).
struct ParamSlice {
  int64_t begin = 0, count = 0;
};
constexpr int64_t kSliceAlignment = 32;

// What a checkpoint holds of the optimizer: its name and its arrays.
struct OptimizerState {
  std::string optimizer;  // "sgd" | "adamw" | "lars" | "lamb"
  std::vector<OptimizerArray> arrays;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  const std::string& name() const { return name_; }
  // One update of the parameters in `slice` from the gradients there in the network's grads(), queued on the
  // backend; it leaves those gradients zero. `updates_done` counts the updates before this one over the whole job
  // (Adam's bias correction uses it). Only the element-wise rules (sgd, adamw) take part of the
  // buffers; the layer-wise ones (lars, lamb) need every gradient of a tensor and take only the whole.
  virtual void update(float lr, int64_t updates_done, ParamSlice slice) = 0;
  // The rule and its hyper-parameters, for the run header.
  virtual std::string describe() const = 0;

  // Copies of the state (waits for the device), and back. load_state() throws CheckpointError when the state
  // is another optimizer's or lacks an array, naming both optimizers.
  OptimizerState read_state();
  void load_state(const OptimizerState& state);

 protected:
  Optimizer(Network& net, std::string name, const std::vector<std::string>& arrays);
  float* array(std::size_t i) { return arrays_[i].as<float>(); }
  // Throws an internal error unless `slice` is every parameter (the layer-wise rules).
  void require_whole(ParamSlice slice) const;
  Network& net_;

 private:
  std::string name_;
  std::vector<std::string> array_names_;
  std::vector<DeviceBuffer> arrays_;
};

// The optimizer the job asks for, over `net`'s buffers.
std::unique_ptr<Optimizer> make_optimizer(const config::JobConfig::Optimizer& spec, Network& net);

// Arrays of one value per parameter that the job's optimizer keeps (for the memory budget, before building it).
int optimizer_state_arrays(config::OptimizerKind kind);
// "sgd", "adamw", ...: the names checkpoints and messages use.
const char* optimizer_name(config::OptimizerKind kind);

// The parameter tensors as ranges of the flat buffer, for the layer-wise rules: `adapt` where weight decay
// applies (weights; not biases or batch norm).
std::vector<kernels::TensorRange> tensor_ranges(const Network& net);

// Those ranges in device memory, copied there once.
struct DeviceTensorRanges {
  int count = 0;
  DeviceBuffer buffer;
  const kernels::TensorRange* data() const { return buffer.as<kernels::TensorRange>(); }
};
DeviceTensorRanges upload_tensor_ranges(Network& net);

// Adam's hyper-parameters for update number updates_done + 1, bias corrections worked out in double (AdamW, LAMB).
kernels::AdamStep adam_step(const config::JobConfig::Optimizer& spec, float lr, int64_t updates_done);

std::unique_ptr<Optimizer> make_sgd(const config::JobConfig::Optimizer& spec, Network& net);
std::unique_ptr<Optimizer> make_adamw(const config::JobConfig::Optimizer& spec, Network& net);
std::unique_ptr<Optimizer> make_lars(const config::JobConfig::Optimizer& spec, Network& net);
std::unique_ptr<Optimizer> make_lamb(const config::JobConfig::Optimizer& spec, Network& net);

}  // namespace ringtrain::model
