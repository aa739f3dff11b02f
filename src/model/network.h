// Owns the model as built from the job file on one backend: the layer tree, and the flat parameter, gradient,
// momentum and state buffers that every parameter tensor is a view into (one buffer so the optimizer,
// the gradient buckets, checkpoints and checksums each see one contiguous range).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "config/layer_spec.h"
#include "model/backend.h"
#include "model/sequential.h"

namespace ringtrain::model {

struct ParamTensor {
  std::string name;  // "model.layers[0].weight"
  const Layer* leaf = nullptr;
  int64_t offset = 0, count = 0;
  ParamDecl decl;
};

class Network {
 public:
  // `input` is one batch at its largest (N = max batch). Throws JobFileError if the layers do not fit the
  // input or the output is not `classes` logits. `share_gradient_buffers` applies the memory plan
  // (model/gradient_buffer_plan.h: shared input-gradient buffers, in-place activations); off only to test
  // that the plan changes no number.
  Network(const std::vector<config::LayerSpec>& layers, Backend& backend, Shape input, int classes,
          bool share_gradient_buffers = true);

  Tensor forward(const Tensor& x, Mode mode, const StepContext& ctx);
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
  const std::vector<ParamTensor>& param_tensors() const { return tensors_; }
  // [offset, offset+count) of a leaf's parameters in the flat buffers.
  std::pair<int64_t, int64_t> leaf_param_range(const Layer& leaf) const;

  // Deterministic from the seed alone: rank 0 calls these and broadcasts, so any rank count gives the same
  // starting point.
  std::vector<float> initial_params(uint64_t seed) const;
  std::vector<float> initial_states() const;

  double forward_flops_per_sample() const { return root_.forward_flops_per_sample(); }
  double train_flops_per_sample() const {
    return root_.forward_flops_per_sample() + root_.backward_flops_per_sample(false);
  }
  std::string summary() const;

 private:
  Backend& backend_;
  Shape input_, output_;
  int classes_;
  Sequential root_;
  std::vector<ParamTensor> tensors_;
  std::vector<StateDecl> state_decls_;
  std::map<const Layer*, std::pair<int64_t, int64_t>> leaf_ranges_;
  int64_t param_count_ = 0, state_count_ = 0;
  DeviceBuffer params_, grads_, velocity_, states_;
  std::vector<DeviceBuffer> gradient_buffers_;  // backward's shared input-gradient buffers
};

}  // namespace ringtrain::model
