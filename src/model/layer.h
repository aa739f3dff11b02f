// Owns the Layer contract that every layer kind implements once, over the Backend's operations: set up for a
// maximum batch, declare parameters and state, say which of its tensors backward reads (all the memory plan
// needs to know), then forward and backward into memory the network hands it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/error.h"
#include "kernels/layer_seed.h"
#include "model/fusion.h"
#include "model/scratch.h"
#include "model/tensor.h"

namespace ringtrain::model {

enum class Mode { train, eval };

// constant: ParamDecl::value; normal: mean 0, standard deviation ParamDecl::value (a ViT's position embedding);
// uniform: U(-value, value), the bound the layer computes (torch's xavier_uniform_ and nn.Linear's default are
// uniform of a bound from the fans).
enum class ParamInit { he_normal, zeros, ones, constant, normal, uniform };

struct ParamDecl {
  std::string name;  // "weight", "bias", "gamma", "beta"
  int64_t count = 0;
  ParamInit init = ParamInit::zeros;
  int64_t fan_in = 1;  // for he_normal: std = sqrt(2 / fan_in)
  bool decay = false;  // weight decay applies (weights yes; biases and batch-norm no)
  // ParamInit::constant's value, ParamInit::normal's standard deviation, ParamInit::uniform's bound
  float value = 0;
};

struct StateDecl {
  std::string name;  // "running_mean", "running_var": averaged across ranks, not trained
  int64_t count = 0;
  ParamInit init = ParamInit::zeros;
};

// Where a layer's output lives relative to its input.
enum class OutputMemory {
  own,                  // a buffer of its own
  may_overwrite_input,  // element-wise (ReLU): the plan may hand it its input's buffer as output
  is_input,             // a view (flatten, dropout at rate 0): the output is the input; backward's dx is dy
};

// What the network's memory plan must know of a layer (model/memory_plan.h): which forward tensors its
// backward reads, so those stay alive until then, and where its output may live.
struct MemoryUse {
  bool backward_reads_input = false;
  bool backward_reads_output = false;
  OutputMemory output = OutputMemory::own;
  ScratchBytes scratch = {};  // device scratch its forward and backward want while they run (model/scratch.h)
};

// One forward call: write the output at `y` (the plan's buffer for it; equal to x.data when the plan runs an
// element-wise layer in place). `seed` is unique per (job seed, micro-batch, rank, layer) for stochastic layers.
struct ForwardPass {
  Tensor x;
  void* y = nullptr;  // in x's element type
  Mode mode = Mode::train;
  kernels::LayerSeed seed = {};
  Scratch scratch = {};  // what memory_use().scratch.forward asked for; empty when it asked for nothing
  const void* shortcut = nullptr;  // a fused residual join (FusedTail::join): y = relu(output + shortcut)
};

// One backward call: the forward's x and y (valid where memory_use() says backward reads them), the output
// gradient dy, and where to write the input gradient (null when none is needed: the network's first layer).
// Parameter gradients accumulate.
struct BackwardPass {
  Tensor x;
  const void* y = nullptr;  // y, dy and dx in x's element type
  Tensor dy;
  void* dx = nullptr;
  Scratch scratch = {};  // what memory_use().scratch.backward asked for
  void* dshortcut = nullptr;  // a fused residual join: where the shortcut's gradient goes (dy through the ReLU)
};

class Layer {
 public:
  virtual ~Layer() = default;
  virtual std::string describe() const = 0;  // "conv2d 5x5x32 s1 p2"

  // `in` carries the maximum batch; returns the output shape at that batch and prepares the backend for it.
  // Throws JobFileError naming the layer when the shape cannot work (window larger than input, ...).
  virtual Shape setup(const Shape& in) = 0;
  virtual MemoryUse memory_use() const { return {}; }
  virtual std::vector<ParamDecl> param_decls() const { return {}; }
  virtual std::vector<StateDecl> state_decls() const { return {}; }
  // Device memory the layer keeps from forward to backward (batch-norm statistics, a dropout mask), at the
  // setup batch; allocated in bind(), so the network can weigh it before anything is allocated.
  virtual std::size_t kept_bytes() const { return 0; }
  // Pointers into the network's flat buffers, one per declaration, in declaration order; the layer allocates
  // what it keeps here.
  virtual void bind(std::span<float* const> params, std::span<float* const> grads, std::span<float* const> states) {
    (void)params, (void)grads, (void)states;
  }

  // Batch may be smaller than at setup (the last evaluation batch).
  virtual void forward(const ForwardPass& pass) = 0;
  virtual void backward(const BackwardPass& pass) = 0;

  // Takes on the layers after it that the fusion pass (model/fusion_pass.h) found its backend's fusion table lets it
  // run in its own operation (FusedTail), with the numbers they give apart; a fused pool's output shape is the
  // pool's. Called at most once, after setup, and only with a tail a rule of the backend names for this layer's
  // type: a layer without a fused form is never asked.
  virtual void fuse(const FusedTail& tail) {
    throw Error(ExitCode::internal, describe() + " has no fused form, yet its backend's fusion table gives it " +
                                        (tail.join ? "a residual join" : "a ReLU"));
  }
  // What fusion added to the layer, for the model summary ("+ relu, fused"; "" for nothing).
  virtual std::string fused() const { return ""; }
  // How the backend runs this layer at its setup batch (Backend::conv2d_method), with the input it was set up for;
  // "" for layers with nothing to tell.
  virtual std::string method() const { return ""; }

  // What it runs, for its backend to choose how the activations it passes the layers beside it in its chain lie
  // (Backend::chain_block), after fusion; monostate for a layer whose activations stay NCHW.
  virtual LayerOperation operation() const { return {}; }
  // The layouts its backend chose for its input and output (a chain link's: the convolution on oneDNN and the batch
  // norm after it, ...): its operations read and write them so from now on. Called once, after fusion, only where
  // one of them is not NCHW.
  virtual void set_chain_layout(const ChainLayout& layout) { (void)layout; }

  virtual double forward_flops_per_sample() const { return 0; }  // after setup
  virtual double backward_flops_per_sample(bool need_dx) const {
    return 2 * forward_flops_per_sample() * (need_dx ? 1 : 0.5);
  }
};

// Told after a layer's parameter gradients are final for this backward pass; the gradient reducer uses it to
// start reducing a bucket while backward goes on.
class GradientObserver {
 public:
  virtual void gradients_ready(const Layer& layer) = 0;

 protected:
  ~GradientObserver() = default;
};

}  // namespace ringtrain::model
