// Owns where a training step's activations and gradients live: one arena per network, with every buffer placed
// by its lifetime on the step's timeline (forward step k at time k, the loss at time S, backward of step k at
// time 2S - k), so buffers whose lifetimes do not overlap share memory, on every backend alike.
//
// What decides a lifetime comes from the layers' MemoryUse: an activation lives from its step until its last
// reader, in forward or (when a layer's backward reads it) in backward; a gradient from the backward step that
// writes it until the one that reads it. Element-wise steps (ReLU, a residual join) run in place when nothing
// reads their input afterwards; views (flatten) share their input's buffer; a value read by two steps (a
// residual block's input) gets its two gradient contributions summed into a buffer of its own. A step's scratch
// (model/scratch.h) lives at that step alone, in forward and in backward, and is placed after every other buffer,
// in the room they leave at that time. Activations and their gradients are sized in the graph's element type.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/graph.h"

namespace ringtrain::model {

class MemoryPlan {
 public:
  // Buffer ids: an index into buffers(), or one of these two outside the arena.
  static constexpr int kNetworkInput = -1;    // the caller's input batch (and views of it)
  static constexpr int kOutputGradient = -2;  // the caller's gradient of the logits (and views of it)

  struct Buffer {
    int64_t bytes = 0;        // at the setup batch (placed at a multiple of kAlignment)
    int first = 0, last = 0;  // live on the timeline from `first` to `last`, inclusive
    int64_t offset = 0;      // bytes into the arena
    bool scratch = false;    // a step's scratch, live at that step only
  };
  // Where step k's forward and backward scratch are (kNoScratch: it asked for none).
  static constexpr int kNoScratch = -4;
  struct StepScratch {
    int forward = kNoScratch, backward = kNoScratch;
  };
  // A value read by several steps (a residual block's input): its gradient `sum` adds the contributions, in the
  // order backward wrote them, computed after the backward of the last step to contribute.
  struct GradientSum {
    int value = -1;
    std::vector<int> addends;
    int sum = -1;
  };

  // share = false gives every buffer its own memory and runs nothing in place (to test that sharing changes
  // no number).
  explicit MemoryPlan(const Graph& graph, bool share = true);

  int activation(int value) const { return activation_[static_cast<size_t>(value)]; }
  // Where a value's final gradient is (read by its producer's backward as dy); -3 when no gradient is needed.
  int gradient(int value) const { return gradient_[static_cast<size_t>(value)]; }
  // Where step k writes the gradient of its input `slot` (0 for layers; 0 and 1 for a join, the same buffer, but
  // for a fused join's layer input).
  int input_gradient(int step, int slot) const;
  static constexpr int kNoGradient = -3;
  const std::vector<GradientSum>& sums_after(int step) const { return sums_after_[static_cast<size_t>(step)]; }
  const StepScratch& scratch(int step) const { return scratch_[static_cast<size_t>(step)]; }
  const std::vector<Buffer>& buffers() const { return buffers_; }

  int64_t arena_bytes() const { return arena_bytes_; }
  int64_t unshared_bytes() const;  // every buffer its own memory
  // "23 buffers for fp32 activations and gradients in 1.2 MiB (4.5 MiB unshared: 73 % saved)"
  std::string summary() const;

  static constexpr int64_t kAlignment = 256;  // whole cache lines; what cuDNN and cuBLAS prefer on the GPU

 private:
  int new_buffer(int64_t bytes);
  int value_buffer(const Value& value);  // for a value or its gradient, in the graph's activation type
  void use(int buffer, int time);
  void plan_activations(const Graph& graph, bool share);
  void plan_gradients(const Graph& graph);
  void plan_scratch(const Graph& graph);
  void place(bool share);

  ElementType element_type_;
  std::vector<Buffer> buffers_;
  std::vector<int> activation_, gradient_;
  std::vector<std::vector<int>> input_gradient_;       // per step, per input slot
  std::vector<std::vector<GradientSum>> sums_after_;  // per step
  std::vector<StepScratch> scratch_;                  // per step
  int64_t arena_bytes_ = 0;
};

}  // namespace ringtrain::model
