// Owns the model as the network runs it: a list of steps, in forward order, over numbered values (tensors).
// A step is a layer (one input) or a residual join (body + shortcut, then optional ReLU). Residual blocks and
// their nesting exist only while the graph is built from the job file's specs; afterwards there are values,
// who produces each and who reads it, which is all the memory plan and the executor need. Building is also the
// fusion pass: a layer that can take on the ReLU after it in its chain (Layer::fuse_relu: batch norm where the
// backend fuses it), and the pool after that (Layer::fuse_pool), becomes one step, and they no step at all; a
// residual body's last layer that can take on the join after it (Layer::fuse_join) runs inside the join's step.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/layer_spec.h"
#include "model/backend.h"
#include "model/layer.h"

namespace ringtrain::model {

// How a step's seed for stochastic layers derives from the forward pass's seed: for each level of nesting,
// seed = (seed ^ xor_with) * 1000003 + index (the position in its chain). A residual block's shortcut chain
// xors with the golden ratio so its layers draw apart from the body's.
struct SeedPath {
  struct Level {
    uint64_t xor_with = 0;
    uint64_t index = 0;
  };
  std::vector<Level> levels;
  uint64_t apply(uint64_t seed) const;
};

struct Value {
  Shape shape;                 // at the setup batch
  int producer = -1;           // the step that writes it; -1: the network's input
  std::vector<int> consumers;  // the steps that read it in forward, in step order
};

// A join with a layer is the body's last layer fused with the join (Layer::fuse_join): its inputs are that layer's
// input, then the shortcut; it runs the layer with the shortcut added before the ReLU.
struct Step {
  enum class Kind { layer, join };
  Kind kind = Kind::layer;
  Layer* layer = nullptr;   // Kind::layer; a fused join's layer
  std::vector<int> inputs;  // one for a layer; body (or the fused layer's input) then shortcut for a join
  int output = -1;
  bool relu = false;        // Kind::join: ReLU after the sum
  SeedPath seed;
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
  // For each top-level spec, the number of steps that run up to and including it (a spec fused into the step
  // before it ends where that step does).
  const std::vector<int>& top_level_step_ends() const { return top_level_ends_; }

 private:
  int add_value(Shape shape, int producer);
  // ends: where given, the step count after each spec (top_level_step_ends()).
  int emit_chain(const std::vector<config::LayerSpec>& specs, int input, const SeedPath& chain_seed,
                 uint64_t chain_xor, Backend& backend, std::vector<int>* ends = nullptr);
  int emit_residual(const config::LayerSpec& spec, int input, const SeedPath& seed, Backend& backend);
  // Lets `layer` (spec i, output value `output`) take on the ReLU after it and a pool after that; returns the
  // index of the last spec it took.
  size_t fuse_following(const std::vector<config::LayerSpec>& specs, size_t i, Layer& layer, int output);
  // Takes the step that writes `body` (the last step emitted) out of the list where its layer takes on the join
  // after it; returns that step (with its input, to become the join's) or nothing.
  std::optional<Step> take_for_join(const config::LayerSpec& spec, int body);

  std::vector<std::unique_ptr<Layer>> owned_;
  std::vector<const Layer*> layer_order_;
  std::vector<Value> values_;
  std::vector<Step> steps_;
  std::vector<int> top_level_ends_;
  int output_ = kInput;
  bool fuse_ = true;
  ElementType activation_type_ = ElementType::f32;
};

}  // namespace ringtrain::model
