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

// A run of the flat buffers that trains at one rate: [begin, begin + count) at lr_scale x the scheduled rate.
// Fine-tuning makes several (the head at optimizer.head_lr_multiplier x the rate) and leaves the frozen parameters
// (train.freeze) in none; otherwise there is one, every parameter at 1.
struct RateGroup {
  int64_t begin = 0, count = 0;
  float lr_scale = 1;
};

// The part of a rate group inside one update's slice, with the decay mask from its first parameter on.
struct RatePiece {
  int64_t begin = 0, count = 0;
  float lr_scale = 1;
  const uint32_t* decay_mask = nullptr;  // device memory; bit 0 of word 0 is parameter `begin`'s
};

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
  Optimizer(Network& net, std::string name, const std::vector<std::string>& arrays, std::vector<RateGroup> groups);
  float* array(std::size_t i) { return arrays_[i].as<float>(); }
  // Throws an internal error unless `slice` is every parameter (the layer-wise rules).
  void require_whole(ParamSlice slice) const;
  const std::vector<RateGroup>& rate_groups() const { return groups_; }
  // The element-wise rules' work for `slice`: its intersections with the rate groups. A piece that starts inside a
  // word of the network's decay mask gets a mask of its own, made once (a rank's slice stays the same).
  const std::vector<RatePiece>& pieces(ParamSlice slice);
  Network& net_;

 private:
  const uint32_t* decay_mask_from(int64_t begin, int64_t count);

  std::string name_;
  std::vector<std::string> array_names_;
  std::vector<DeviceBuffer> arrays_;
  std::vector<RateGroup> groups_;
  ParamSlice pieces_slice_{-1, -1};
  std::vector<RatePiece> pieces_;
  std::vector<DeviceBuffer> own_masks_;
};

// The job's rate groups over `net`: the parameters after the frozen ones (Network::frozen_param_count) at 1, those
// of the head (Network::head) at spec.head_lr_multiplier; empty groups left out.
std::vector<RateGroup> rate_groups(const config::JobConfig::Optimizer& spec, const Network& net);

// The optimizer the job asks for, over `net`'s buffers.
std::unique_ptr<Optimizer> make_optimizer(const config::JobConfig::Optimizer& spec, Network& net);

// Arrays of one value per parameter that the job's optimizer keeps (for the memory budget, before building it).
int optimizer_state_arrays(config::OptimizerKind kind);
// "sgd", "adamw", ...: the names checkpoints and messages use.
const char* optimizer_name(config::OptimizerKind kind);

// The parameter tensors as ranges of the flat buffer, for the layer-wise rules: `adapt` where weight decay
// applies (weights; not biases or batch norm).
std::vector<kernels::TensorRange> tensor_ranges(const Network& net);

// Those of one rate group in device memory, copied there once, with the group's scale of the rate.
struct DeviceTensorRanges {
  int count = 0;
  float lr_scale = 1;
  DeviceBuffer buffer;
  const kernels::TensorRange* data() const { return buffer.as<kernels::TensorRange>(); }
};
std::vector<DeviceTensorRanges> upload_tensor_ranges(Network& net, const std::vector<RateGroup>& groups);

// Adam's hyper-parameters for update number updates_done + 1, bias corrections worked out in double (AdamW, LAMB).
kernels::AdamStep adam_step(const config::JobConfig::Optimizer& spec, float lr, int64_t updates_done);

std::unique_ptr<Optimizer> make_sgd(const config::JobConfig::Optimizer& spec, Network& net);
std::unique_ptr<Optimizer> make_adamw(const config::JobConfig::Optimizer& spec, Network& net);
std::unique_ptr<Optimizer> make_lars(const config::JobConfig::Optimizer& spec, Network& net);
std::unique_ptr<Optimizer> make_lamb(const config::JobConfig::Optimizer& spec, Network& net);

}  // namespace ringtrain::model
