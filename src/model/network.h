// Owns the model as built from the job file on one backend: its graph of steps (model/graph.h), the memory
// plan's arena that every activation and gradient lives in (model/memory_plan.h), and the flat parameter,
// gradient and state buffers that every parameter tensor is a view into (one buffer so the optimizer, the
// gradient buckets, checkpoints and checksums each see one contiguous range). Runs forward and backward. The
// optimizer's own state (momentum, moments) belongs to the optimizer (model/optimizer.h).
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
#include "model/parameter_memory.h"

namespace ringtrain::model {

struct ParamTensor {
  std::string name;  // "conv2d 5x5x32 s1 p2.weight"
  const Layer* layer = nullptr;
  int64_t offset = 0, count = 0;
  ParamDecl decl;
};

// What the network allocates, in bytes, known before it allocates any of it.
struct MemoryNeed {
  double activations = 0;  // the plan's arena: activations and gradients
  double parameters = 0;   // parameters, gradients, running statistics, the decay mask, the caller's per-parameter
                           // share (optimizer state, host copies)
  double kept = 0;         // what layers keep from forward to backward (Layer::kept_bytes)
  double total() const { return activations + parameters + kept; }
};

// What the network owns that a run carries over: parameters and running statistics.
struct NetworkState {
  std::vector<float> params, states;
};

// The memory a network may take on this rank, and where that figure comes from (for the message).
struct MemoryBudget {
  double bytes = 0;  // 0: unchecked
  std::string source;  // "this rank's share (2 ranks on n1) of the 22.1 GiB available, ..."
  // Bytes per parameter the caller will hold in the same memory besides the network's own: the optimizer's
  // state, and host copies for initialisation and checkpoints where the device is the host.
  double caller_bytes_per_parameter = 0;
  std::string or_remedy;  // "; or ask the batch system for more memory ..." where a limit other than the host's binds
};

// How a network is built: options that change memory or kernels, and the element type its activations are
// stored in, which changes the numbers (mixed precision).
struct NetworkOptions {
  bool share_memory = true;  // false: every activation and gradient its own buffer
  bool fuse = true;          // false: no fusion (model/graph.h), every layer a step of its own
  MemoryBudget budget;       // checked before anything is allocated
  // Every activation and activation gradient inside the network; the input, the logits and their gradient stay
  // fp32 at its boundary (forward and backward convert).
  ElementType activations = ElementType::f32;
  // Where the parameters, their gradients and the optimizer's state live; null: memory of the network's backend.
  ParameterMemory* parameter_memory = nullptr;
  // Fine-tuning: the `name` of the top-level layer that ends the frozen part ("": none). Frozen layers run as in
  // evaluation in every forward pass, and backward stops after the first trained step, so their gradients stay zero.
  std::string freeze_through = {};
};

class Network {
 public:
  // `input` is one batch at its largest (N = max batch). Throws JobFileError if the layers do not fit the
  // input, the output is not `classes` logits, or the network would need more memory than the budget (checked
  // before anything is allocated). Tests turn sharing and fusion off to show they change no number.
  Network(const std::vector<config::LayerSpec>& layers, Backend& backend, Shape input, int classes,
          const NetworkOptions& options = {});

  // x and the logits are fp32; the logits live in the network's memory until the next forward. `seed` makes
  // dropout masks reproducible.
  Tensor forward(const Tensor& x, Mode mode, uint64_t seed);
  // dlogits is fp32. Parameter gradients accumulate into grads(); `observer` hears of each layer's as they become
  // final.
  void backward(const Tensor& dlogits, GradientObserver* observer);

  Backend& backend() { return backend_; }
  Shape input_shape() const { return input_; }
  ElementType activation_type() const { return graph_.activation_type(); }
  Shape output_shape() const { return output_; }
  int classes() const { return classes_; }

  int64_t param_count() const { return param_count_; }
  int64_t state_count() const { return state_count_; }
  float* params() { return params_.as<float>(); }
  float* grads() { return grads_.as<float>(); }
  float* states() { return states_.as<float>(); }
  ParameterMemory* parameter_memory() const { return parameter_memory_; }
  // Device memory: bit i set where weight decay applies to parameter i (kernels/optimizer_step.h).
  const uint32_t* decay_mask() const { return decay_mask_.as<uint32_t>(); }
  const std::vector<ParamTensor>& param_tensors() const { return tensors_; }
  // [offset, offset+count) of a layer's parameters in the flat buffers.
  std::pair<int64_t, int64_t> layer_param_range(const Layer& layer) const;
  // The frozen layers' parameters: [0, this) of the flat buffers (NetworkOptions::freeze_through; 0: none).
  int64_t frozen_param_count() const { return frozen_params_; }
  // The last layer that has parameters (the classifier), for its own learning rate; null where none has.
  const Layer* head() const;
  const MemoryPlan& memory_plan() const { return plan_; }
  const MemoryNeed& memory_need() const { return need_; }

  // Copies of the device's buffers (waits for the device), and back; load_state leaves out an empty part.
  NetworkState read_state();
  void load_state(const NetworkState& state);

  // Deterministic from the seed alone: rank 0 calls these and broadcasts, so any rank count gives the same
  // starting point.
  std::vector<float> initial_params(uint64_t seed) const;
  std::vector<float> initial_states() const;

  double forward_flops_per_sample() const;
  double train_flops_per_sample() const;
  std::string summary() const;
  // How the backend runs each layer that has something to tell (Layer::method), identical lines counted once.
  std::string methods() const;

 private:
  MemoryNeed count_memory(double caller_bytes_per_parameter) const;
  void lay_out_parameters();
  void freeze_through(const std::vector<config::LayerSpec>& layers, const std::string& name);
  void* activation(int value, const Tensor& input) const;
  void* gradient_buffer(int buffer, const Tensor& dlogits) const;
  Scratch scratch(int buffer) const;  // the plan's buffer for a step's scratch (its whole size), or none
  void* in_arena(int buffer) const;  // where the plan placed a buffer
  void run_backward_step(int k, const Tensor& dlogits, GradientObserver* observer);
  // x in the activation type: itself, or converted into boundary_.input.
  Tensor inside(const Tensor& x, const DeviceBuffer& converted);
  Tensor stored_input(const Tensor& x_f32);
  Elements elements(const Shape& shape) const { return {shape.elements(), activation_type()}; }

  Backend& backend_;
  Shape input_, output_;
  int classes_;
  ParameterMemory* parameter_memory_ = nullptr;
  Graph graph_;
  MemoryPlan plan_;
  MemoryNeed need_;
  DeviceBuffer arena_;
  std::vector<ParamTensor> tensors_;
  std::vector<StateDecl> state_decls_;
  std::map<const Layer*, std::pair<int64_t, int64_t>> layer_ranges_;
  int64_t param_count_ = 0, state_count_ = 0;
  int frozen_steps_ = 0;       // steps [0, this) are frozen
  int64_t frozen_params_ = 0;  // and own parameters [0, this)
  DeviceBuffer params_, grads_, states_, decay_mask_;
  // Where the fp32 boundary meets 16-bit activations: the input and the logits' gradient converted in, the logits
  // converted out (empty for fp32 activations).
  struct Boundary {
    DeviceBuffer input, logits, dlogits;
    DeviceBuffer reordered_input;  // the input in the backend's layout, where that is not NCHW
  } boundary_;
  // The last forward's input (in the activation type) and batch, which backward's steps read.
  Tensor last_input_;
};

}  // namespace ringtrain::model
