// Owns the Layer contract that every layer kind implements once, over the Backend's operations: set up for a
// maximum batch, declare parameters and state, say which of its tensors backward reads (all the memory plan
// needs to know), then forward and backward into memory the network hands it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "config/layer_spec.h"
#include "model/scratch.h"
#include "model/tensor.h"

namespace ringtrain::model {

enum class Mode { train, eval };

enum class ParamInit { he_normal, zeros, ones, constant };  // constant: ParamDecl::value

struct ParamDecl {
  std::string name;  // "weight", "bias", "gamma", "beta"
  int64_t count = 0;
  ParamInit init = ParamInit::zeros;
  int64_t fan_in = 1;  // for he_normal: std = sqrt(2 / fan_in)
  bool decay = false;  // weight decay applies (weights yes; biases and batch-norm no)
  float value = 0;     // ParamInit::constant's
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
  uint64_t seed = 0;
  Scratch scratch = {};  // what memory_use().scratch.forward asked for; empty when it asked for nothing
  const void* shortcut = nullptr;  // a fused residual join (Layer::fuse_join): y = relu(output + shortcut)
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

  // Takes on the ReLU that follows it in its chain: applies it to its output in the same operation and its mask
  // in backward, with the numbers a separate ReLU would give. False where the layer or its backend cannot; the
  // graph then keeps the ReLU as a step of its own. Called once, after setup.
  virtual bool fuse_relu() { return false; }
  // Takes on the pooling layer `pool` after its fused ReLU as well; returns its output shape then (at the setup
  // batch), nothing where it cannot, and the graph keeps the pool as a step of its own. Called once, after
  // fuse_relu took the ReLU.
  virtual std::optional<Shape> fuse_pool(const config::LayerSpec& pool) {
    (void)pool;
    return std::nullopt;
  }
  // Takes on the residual join after it, as the last layer of a block's body: the sum with the block's shortcut
  // and the join's ReLU in the same operation (ForwardPass::shortcut), and in backward the shortcut's gradient too
  // (BackwardPass::dshortcut), with the numbers the separate join gives. False where the layer or its backend
  // cannot; the graph then keeps the join a step of its own. Called once, after setup, on a layer that fused nothing.
  virtual bool fuse_join() { return false; }
  // What fusion added to the layer, for the model summary ("+ relu, fused"; "" for nothing).
  virtual std::string fused() const { return ""; }
  // How the backend runs this layer at its setup batch (Backend::conv2d_method), with the input it was set up for;
  // "" for layers with nothing to tell.
  virtual std::string method() const { return ""; }

  // A layer and the next one in its chain may pass the output in a channel-blocked layout (N x C/b x H x W x b)
  // where the producer's kernels can write it and the consumer's read it (a convolution on oneDNN and the batch
  // norm after it; a batch norm with a fused pool and the convolution on oneDNN after it): no reorder on the way,
  // in either direction of the step. The graph asks, after setup and where fusion is on, which blocks each side
  // takes (none: NCHW only), and tells both the largest they share.
  virtual std::vector<int> output_blocks() const { return {}; }
  virtual std::vector<int> input_blocks() const { return {}; }
  virtual void write_output_block(int block) { (void)block; }
  virtual void read_input_block(int block) { (void)block; }

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
