// Owns the model as the network runs it: a list of steps, in forward order, over numbered values (tensors).
// A step is a layer (one input) or a residual join (body + shortcut, then optional ReLU). Residual blocks and
// their nesting exist only while the graph is built from the job file's specs; afterwards there are values,
// who produces each and who reads it, which is all the memory plan and the executor need. Built with fusion on, the
// graph then goes through the fusion pass (model/fusion_pass.h): a layer that takes on the ReLU after it in its
// chain, and the pool after that, becomes one step, and they no step at all; a residual body's last layer that takes
// on the join after it runs inside the join's step.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "config/layer_spec.h"
#include "kernels/layer_seed.h"
#include "model/backend.h"
#include "model/layer.h"

namespace ringtrain::model {

struct Value {
  Shape shape;                 // at the setup batch
  int producer = -1;           // the step that writes it; -1: the network's input
  std::vector<int> consumers;  // the steps that read it in forward, in step order
};

// A join with a layer is the body's last layer fused with the join (FusedTail::join): its inputs are that layer's
// input, then the shortcut; it runs the layer with the shortcut added before the ReLU.
struct Step {
  enum class Kind { layer, join };
  Kind kind = Kind::layer;
  Layer* layer = nullptr;   // Kind::layer; a fused join's layer
  std::vector<int> inputs;  // one for a layer; body (or the fused layer's input) then shortcut for a join
  int output = -1;
  bool relu = false;        // Kind::join: ReLU after the sum
  // Where its stochastic layers draw: a level per nesting, (chain xor, position in the chain); a residual block's
  // shortcut chain xors with the golden ratio so its layers draw apart from the body's (kernels/layer_seed.h; the
  // pass's seed is set by each forward pass).
  kernels::LayerSeed seed;
  // A layer's own (a fused join's too); an unfused join reads its output when it has a ReLU, may add in place.
  MemoryUse memory_use() const;
  // Whether backward reads input `value` (a fused join's shortcut it never reads).
  bool backward_reads(int value) const { return memory_use().backward_reads_input && value == inputs[0]; }
};

class Graph {
 public:
  // Makes every layer (model/layers/) and sets it up for `input` (the largest batch). Throws JobFileError
  // naming the layer when a shape cannot work, or the residual block whose body and shortcut disagree.
  // fuse: run the fusion pass (false keeps every layer a step of its own, to show fusion changes no number).
  // activations: the element type of every value and its gradient.
  Graph(const std::vector<config::LayerSpec>& specs, Backend& backend, Shape input, bool fuse = true,
        ElementType activations = ElementType::f32);

  const std::vector<Value>& values() const { return values_; }
  const std::vector<Step>& steps() const { return steps_; }
  static constexpr int kInput = 0;  // the network's input value
  int output() const { return output_; }
  ElementType activation_type() const { return activation_type_; }
  // The layers in step order, which is the order of their parameters in the flat buffers.
  const std::vector<const Layer*>& layers() const { return layer_order_; }
  // For each top-level spec, the number of steps that run up to and including it, after fusion (a spec fused into
  // the step before it ends where that step does).
  const std::vector<int>& top_level_step_ends() const { return top_level_ends_; }

 private:
  int add_value(Shape shape, int producer);
  // ends: where given, the step count after each spec (before fusion).
  int emit_chain(const std::vector<config::LayerSpec>& specs, int input, const kernels::LayerSeed& chain_seed,
                 uint64_t chain_xor, Backend& backend, std::vector<int>* ends = nullptr);
  // The top-level spec each layer comes from, from the unfused graph's step count after each.
  std::map<const Layer*, int> top_level_of_layers(const std::vector<int>& unfused_ends) const;
  void count_top_level_ends(const std::map<const Layer*, int>& top_level, size_t specs);
  int emit_residual(const config::LayerSpec& spec, int input, const kernels::LayerSeed& seed, Backend& backend);

  std::vector<std::unique_ptr<Layer>> owned_;
  std::vector<const Layer*> layer_order_;
  std::vector<Value> values_;
  std::vector<Step> steps_;
  std::vector<const config::LayerSpec*> step_specs_;  // each step's, while the graph is built (a join's: its block's)
  std::vector<int> top_level_ends_;
  int output_ = kInput;
  ElementType activation_type_ = ElementType::f32;
};

}  // namespace ringtrain::model
