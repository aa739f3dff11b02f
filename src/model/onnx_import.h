// Owns the import pass of `ringtrain import`: an ONNX image classifier's graph as ringtrain's layers, each node
// mapped by the layer kind whose import names its operator (model/layer_registry.h), the graph's forks and Add
// joins as residual blocks (a body, a shortcut that is the identity or a chain of its own, and the join's ReLU
// when one follows it alone), a fork into x * Sigmoid(x) or x * HardSigmoid(x) as silu or hard_swish, and a fork
// joined by Mul(x, gate), the gate computed from x by the other branch, as squeeze_excitation; chains of nodes that
// torch exports for one module (LayerNorm, GELU, a Linear over the channels) as the layer of the kind whose import
// maps the chain, each value's layout kept across the Transposes that permute NCHW's channels last and back. Identity,
// inference Dropout and Constant nodes are looked through, as is the shape arithmetic of torch's
// x.view(x.size(0), -1). Whatever does not fit (an operator no kind maps, a fork that is no residual block, a
// second input) is refused naming the node.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "config/layer_spec.h"
#include "io/onnx_model.h"

namespace ringtrain::model {

struct ImportedModel {
  std::vector<config::LayerSpec> layers;
  // In the order a network built of `layers` lays them out (layer by layer, a residual block's body before its
  // shortcut): every parameter tensor's size, the parameters, and the running statistics.
  std::vector<int64_t> tensor_sizes;
  std::vector<std::string> tensor_sources;  // the node each tensor came from ("ONNX node '/conv1/Conv' (Conv)")
  std::vector<float> params, states;
  std::string input;                // the graph's input
  std::vector<int64_t> input_dims;  // as the file declares it: N x C x H x W, -1 where unnamed
};

// JobFileError (exit 3) naming the node and why, where the graph cannot be mapped.
ImportedModel import_onnx(const io::OnnxModel& model);

}  // namespace ringtrain::model
