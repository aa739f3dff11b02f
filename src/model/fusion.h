// Owns what the fusion pass (model/fusion_pass.h), the backends and the layers agree on: a backend's fusion table
// (which layer kinds take on which layers after them), the one description of a fused tail the pass hands a layer,
// and the operations a backend weighs when it chooses how a chain link's activations lie in memory.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "config/layer_spec.h"
#include "kernels/op_shapes.h"
#include "model/tensor.h"

namespace ringtrain::model {

// A 2x2 stride-2 max pool over planes of h x w (an odd last row or column is in no window).
struct FusedMaxPool {
  int h = 0, w = 0;
};

// What a layer takes on from the layers after it, in its own operation and with the numbers they give apart: the
// ReLU (or ReLU6) right after it in its chain, and the 2x2/2 max pool after a ReLU; or, as a residual body's last
// layer, the block's join (the sum with the shortcut, then the join's ReLU: ForwardPass::shortcut).
struct FusedTail {
  bool relu = false;
  bool relu6 = false;  // with relu: the ReLU is a ReLU6, clipping at 6 as well
  std::optional<FusedMaxPool> pool;
  bool join = false;
  bool empty() const { return !relu && !pool && !join; }
  // For the model summary: "+ relu + maxpool 2 s2, fused"; "" for nothing.
  std::string describe() const {
    if (join) return "+ add shortcut + relu, fused";
    if (pool) return "+ relu + maxpool 2 s2, fused";
    if (relu6) return "+ relu6, fused";
    return relu ? "+ relu, fused" : "";
  }
};

// Where a fusion rule would apply: the producer's input at the setup batch and the activations' element type.
struct FusionSite {
  Shape input;
  ElementType data = ElementType::f32;
};

// The layer type a rule absorbs for a residual block's join: it ends a body, and only a join with a ReLU fuses.
inline constexpr std::string_view kJoin = config::kResidual;

// One row of a backend's fusion table: a layer of type `producer` takes on the layers of types `absorbs` right
// after it in its chain, in that order ("relu", "maxpool"), or the join that ends its residual body ({kJoin}),
// where `applies` says so at the site (everywhere when empty). The pass fuses the longest tail a row allows.
struct FusionRule {
  std::string producer;
  std::vector<std::string> absorbs;
  std::function<bool(const FusionSite&)> applies = {};
};

// Batch norm as a backend runs it, with its fused tail.
struct BatchNormOperation {
  kernels::BatchNormShape shape;
  FusedTail tail;
};
// What a layer runs, for its backend to choose how the activations it hands the next layer of its chain lie
// (Backend::chain_block); monostate for layers whose kernels read and write NCHW only.
using LayerOperation = std::variant<std::monostate, kernels::Conv2dShape, BatchNormOperation>;

// The channel blocks (N x C/b x H x W x b; 1: NCHW) a layer's input and output take, as its backend chose them for
// the chain links on either side (Conv2dShape::in_block and out_block, BatchNormShape's).
struct ChainLayout {
  int in_block = 1, out_block = 1;
  bool operator==(const ChainLayout&) const = default;
};

}  // namespace ringtrain::model
