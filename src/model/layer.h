// Owns the Layer contract that every backend's layers implement and the composites rely on: set up for a
// maximum batch, declare parameters and state, forward with cached inputs, backward into accumulating
// parameter gradients.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "model/tensor.h"

namespace ringtrain::model {

enum class Mode { train, eval };

enum class ParamInit { he_normal, zeros, ones };

struct ParamDecl {
  std::string name;  // "weight", "bias", "gamma", "beta"
  int64_t count = 0;
  ParamInit init = ParamInit::zeros;
  int64_t fan_in = 1;  // for he_normal: std = sqrt(2 / fan_in)
  bool decay = false;  // weight decay applies (weights yes; biases and batch-norm no)
};

struct StateDecl {
  std::string name;  // "running_mean", "running_var": averaged across ranks, not trained
  int64_t count = 0;
  ParamInit init = ParamInit::zeros;
};

// What a step needs to know besides its input: a seed for stochastic layers (dropout), unique per
// (job seed, step, rank, layer) so masks are reproducible.
struct StepContext {
  uint64_t seed = 0;
};

class Layer;

// Told by composites after a leaf layer's parameter gradients are final for this backward pass; the
// gradient reducer uses it to start reducing a bucket while backward goes on.
class GradientObserver {
 public:
  virtual void gradients_ready(const Layer& leaf) = 0;

 protected:
  ~GradientObserver() = default;
};

class Layer {
 public:
  virtual ~Layer() = default;
  virtual std::string describe() const = 0;  // "conv2d 5x5x32 s1 p2"

  // `in` carries the maximum batch; returns the output shape at that batch and allocates buffers for it.
  // Throws JobFileError naming the layer when the shape cannot work (window larger than input, ...).
  virtual Shape setup(const Shape& in) = 0;
  virtual std::vector<ParamDecl> param_decls() const { return {}; }
  virtual std::vector<StateDecl> state_decls() const { return {}; }
  // Pointers into the network's flat buffers, one per declaration, in declaration order.
  virtual void bind(std::span<float* const> params, std::span<float* const> grads, std::span<float* const> states) {
    (void)params, (void)grads, (void)states;
  }

  // Batch may be smaller than at setup (the last evaluation batch).
  virtual Tensor forward(const Tensor& x, Mode mode, const StepContext& ctx) = 0;
  // Parameter gradients accumulate; the returned input gradient is valid until the next backward.
  // need_dx=false lets the first layer skip its input gradient. Composites notify `observer` for each leaf.
  virtual Tensor backward(const Tensor& dy, bool need_dx, GradientObserver* observer) = 0;

  virtual double forward_flops_per_sample() const { return 0; }   // after setup
  virtual double backward_flops_per_sample(bool need_dx) const { return 2 * forward_flops_per_sample() * (need_dx ? 1 : 0.5); }

  // Backward's memory plan (model/gradient_buffer_plan.h). A layer that accepts writes its input gradient into
  // a buffer the plan hands it after setup, shared with other layers of its chain, instead of one of its own;
  // the buffer holds the setup batch's input. A layer whose backward may return dy itself as the input
  // gradient (flatten; dropout at rate 0) says so, so the plan never gives the layer before it the same buffer.
  virtual bool accepts_shared_dx() const { return false; }
  virtual void use_shared_dx(float* buffer) { (void)buffer; }
  virtual bool may_return_dy() const { return false; }
  // In-place activation: a layer that can write its output over its input (ReLU) may be told to by the plan,
  // when the layer before it in the chain owns that buffer and its backward never reads its own output.
  virtual bool can_run_in_place() const { return false; }
  virtual void run_in_place() {}
  virtual bool output_may_be_overwritten() const { return false; }

  // Composites list their leaves (depth first, in parameter order); a leaf lists itself.
  virtual void collect_leaves(std::vector<const Layer*>& out) const { out.push_back(this); }
  virtual bool is_composite() const { return false; }
};

}  // namespace ringtrain::model
