// Owns the model as built from the job file on one backend: its graph of steps (model/graph.h), the memory
// plan's arena that every activation and gradient lives in (model/memory_plan.h), and the flat parameter,
// gradient, momentum and state buffers that every parameter tensor is a view into (one buffer so the optimizer,
// the gradient buckets, checkpoints and checksums each see one contiguous range). Runs forward and backward.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "config/layer_spec.h"
#include "model/backend.h"
#include "model/graph.h"
#include "model/memory_plan.h"

namespace ringtrain::model {

struct ParamTensor {
  std::string name;  // "conv2d 5x5x32 s1 p2.weight"
  const Layer* layer = nullptr;
  int64_t offset = 0, count = 0;
  ParamDecl decl;
};

class Network {
 public:
  // `input` is one batch at its largest (N = max batch). Throws JobFileError if the layers do not fit the
  // input or the output is not `classes` logits. share_memory = false gives every activation and gradient a
  // buffer of its own (to test that the plan changes no number).
  Network(const std::vector<config::LayerSpec>& layers, Backend& backend, Shape input, int classes,
          bool share_memory = true);

  // The logits live in the plan's arena until the next forward. `seed` makes dropout masks reproducible.
  Tensor forward(const Tensor& x, Mode mode, uint64_t seed);
  // Parameter gradients accumulate into grads(); `observer` hears of each layer's as they become final.
  void backward(const Tensor& dlogits, GradientObserver* observer);

  Backend& backend() { return backend_; }
  Shape input_shape() const { return input_; }
  Shape output_shape() const { return output_; }
  int classes() const { return classes_; }

  int64_t param_count() const { return param_count_; }
  int64_t state_count() const { return state_count_; }
  float* params() { return params_.as<float>(); }
  float* grads() { return grads_.as<float>(); }
  float* velocity() { return velocity_.as<float>(); }
  float* states() { return states_.as<float>(); }
  // Device memory: bit i set where weight decay applies to parameter i (kernels/sgd_step.h).
  const uint32_t* decay_mask() const { return decay_mask_.as<uint32_t>(); }
  const std::vector<ParamTensor>& param_tensors() const { return tensors_; }
  // [offset, offset+count) of a layer's parameters in the flat buffers.
  std::pair<int64_t, int64_t> layer_param_range(const Layer& layer) const;
  const MemoryPlan& memory_plan() const { return plan_; }

  // Deterministic from the seed alone: rank 0 calls these and broadcasts, so any rank count gives the same
  // starting point.
  std::vector<float> initial_params(uint64_t seed) const;
  std::vector<float> initial_states() const;

  double forward_flops_per_sample() const;
  double train_flops_per_sample() const;
  std::string summary() const;

 private:
  void lay_out_parameters();
  float* activation(int value, const Tensor& input) const;
  float* gradient_buffer(int buffer, const Tensor& dlogits) const;
  void run_backward_step(int k, const Tensor& dlogits, GradientObserver* observer);

  Backend& backend_;
  Shape input_, output_;
  int classes_;
  Graph graph_;
  MemoryPlan plan_;
  DeviceBuffer arena_;
  std::vector<ParamTensor> tensors_;
  std::vector<StateDecl> state_decls_;
  std::map<const Layer*, std::pair<int64_t, int64_t>> layer_ranges_;
  int64_t param_count_ = 0, state_count_ = 0;
  DeviceBuffer params_, grads_, velocity_, states_, decay_mask_;
  // The last forward's input and batch, which backward's steps read.
  Tensor last_input_;
};

}  // namespace ringtrain::model
