// Owns backward's memory plan: which layers write their input gradient into buffers shared along a chain.
#pragma once
#include <vector>

#include "model/backend.h"
#include "model/sequential.h"

namespace ringtrain::model {

// A chain's backward needs only two input-gradient buffers, used in turn: layer i reads its dy from the one
// layer i+1 wrote and writes its dx into the other, which nothing reads any more. Layers that accept
// (Layer::accepts_shared_dx) get them alternately, never the one their dy can be in (a layer that may return
// dy itself leaves that where it is); others keep their own. Chains of the same role at the same nesting depth
// (all residual bodies at depth d; all shortcuts at depth d) share one pair, sized for the largest input among
// them, and residual blocks at one depth share one scratch buffer (see the .cpp for why that is safe).
// Returns the buffers, which must outlive the layers' backward.
std::vector<DeviceBuffer> share_gradient_buffers(Sequential& chain, Backend& backend);

// For every Sequential in the tree: a layer that can run in place (ReLU) does so when the layer before it in
// the same chain allows its output to be overwritten (Layer::output_may_be_overwritten). A chain's first layer
// never does: its input comes from outside the chain and may have other readers (a residual block's input
// also feeds the shortcut).
void run_activations_in_place(Sequential& chain);

}  // namespace ringtrain::model
