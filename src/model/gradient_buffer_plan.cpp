// Owns backward's memory plan; see gradient_buffer_plan.h.
//
// Why buffers can be shared across chains: backward visits the tree depth first, one residual block at a time.
// While block B (in a chain at depth d) runs backward, its body (depth d+1) runs to the end and its result
// must then survive its shortcut's backward; after that both are done and the next block at depth d starts.
// So all bodies at one depth can share one pair of buffers, all shortcuts at one depth another pair, and all
// blocks at one depth one scratch buffer for the gradient through their activation.
#include "model/gradient_buffer_plan.h"

#include <algorithm>
#include <map>
#include <utility>

#include "model/residual.h"

namespace ringtrain::model {
namespace {

enum class Role { trunk, body, shortcut };  // trunk: the model's own chain

struct Pools {
  std::map<std::pair<int, Role>, int64_t> pair_floats;  // per (depth, role): the larger of a chain's two buffers
  std::map<int, int64_t> scratch_floats;                 // per depth: residual blocks' activation gradient
  std::map<std::pair<int, Role>, DeviceBuffer[2]> pairs;
  std::map<int, DeviceBuffer> scratch;
};

bool has_accepting(const Sequential& chain) {
  return std::any_of(chain.layers().begin(), chain.layers().end(),
                     [](const auto& l) { return l->accepts_shared_dx(); });
}

// First pass: how large each shared buffer must be.
void measure(const Sequential& chain, int depth, Role role, Pools& pools) {
  const auto& layers = chain.layers();
  for (size_t i = 0; i < layers.size(); ++i) {
    if (layers[i]->accepts_shared_dx()) {
      auto& need = pools.pair_floats[{depth, role}];
      need = std::max(need, chain.inputs()[i].elements());
    }
    if (auto* block = dynamic_cast<Residual*>(layers[i].get())) {
      if (block->accepts_shared_dx() && block->scratch_floats() > 0) {
        auto& need = pools.scratch_floats[depth];
        need = std::max(need, block->scratch_floats());
      }
      measure(block->body(), depth + 1, Role::body, pools);
      measure(block->shortcut(), depth + 1, Role::shortcut, pools);
    }
  }
}

// Second pass: hand the buffers out. Within a chain, backward runs last to first, and a layer's buffer is never
// the one its dy may be in (`holding`: -1 when that is neither).
void assign(Sequential& chain, int depth, Role role, Pools& pools) {
  const auto& layers = chain.layers();
  for (const auto& layer : layers)
    if (auto* block = dynamic_cast<Residual*>(layer.get())) {
      if (block->accepts_shared_dx() && block->scratch_floats() > 0)
        block->use_shared_scratch(pools.scratch.at(depth).as<float>());
      assign(block->body(), depth + 1, Role::body, pools);
      assign(block->shortcut(), depth + 1, Role::shortcut, pools);
    }
  if (!has_accepting(chain)) return;
  auto& slots = pools.pairs.at({depth, role});
  int holding = -1;
  for (size_t i = layers.size(); i-- > 0;) {
    Layer& layer = *layers[i];
    if (layer.may_return_dy()) continue;  // its dx may be its dy, still in `holding`
    if (!layer.accepts_shared_dx()) {
      holding = -1;  // its own buffer
      continue;
    }
    const int slot = holding == 0 ? 1 : 0;
    layer.use_shared_dx(slots[slot].as<float>());
    holding = slot;
  }
}

}  // namespace

std::vector<DeviceBuffer> share_gradient_buffers(Sequential& chain, Backend& backend) {
  Pools pools;
  measure(chain, 0, Role::trunk, pools);
  for (const auto& [key, floats] : pools.pair_floats)
    for (auto& slot : pools.pairs[key]) slot = backend.allocate(sizeof(float) * static_cast<size_t>(floats));
  for (const auto& [depth, floats] : pools.scratch_floats)
    pools.scratch[depth] = backend.allocate(sizeof(float) * static_cast<size_t>(floats));
  assign(chain, 0, Role::trunk, pools);
  std::vector<DeviceBuffer> owned;
  for (auto& [key, slots] : pools.pairs)
    for (auto& slot : slots) owned.push_back(std::move(slot));
  for (auto& [depth, buffer] : pools.scratch) owned.push_back(std::move(buffer));
  return owned;
}

void run_activations_in_place(Sequential& chain) {
  const auto& layers = chain.layers();
  for (size_t i = 0; i < layers.size(); ++i) {
    if (auto* block = dynamic_cast<Residual*>(layers[i].get())) {
      run_activations_in_place(block->body());
      run_activations_in_place(block->shortcut());
    }
    if (i > 0 && layers[i]->can_run_in_place() && layers[i - 1]->output_may_be_overwritten()) layers[i]->run_in_place();
  }
}

}  // namespace ringtrain::model
