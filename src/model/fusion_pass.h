// Owns the fusion pass: it rewrites a graph built with every layer and join a step of its own, so that the chains a
// backend's fusion table (Backend::fusion_rules) names run as one step each, and then lets the backend choose the
// layout of each chain link's activations (Backend::chain_block). Layers learn only what they take on
// (Layer::fuse) and the layouts chosen for them (Layer::set_chain_layout).
#pragma once
#include <vector>

#include "config/layer_spec.h"
#include "model/backend.h"
#include "model/graph.h"

namespace ringtrain::model {

// A graph as Graph builds it, every step with the spec it was made from (a join's: its residual block's).
struct UnfusedGraph {
  std::vector<Step>& steps;
  std::vector<Value>& values;
  const std::vector<const config::LayerSpec*>& specs;
  int& output;  // the network's output value
};

// Fuses `graph` in place for `backend`, with activations of `data`; returns the layers others took on, which run no
// more. Values and steps keep their order, those taken on removed, so the graph is the one that building it with the
// fused steps would give.
std::vector<const Layer*> run_fusion_pass(UnfusedGraph graph, Backend& backend, ElementType data);

}  // namespace ringtrain::model
