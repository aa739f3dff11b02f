// Owns backward's memory plan; see gradient_buffer_plan.h.
#include "model/gradient_buffer_plan.h"

#include <algorithm>

#include "model/residual.h"

namespace ringtrain::model {

std::vector<DeviceBuffer> share_gradient_buffers(Sequential& chain, Backend& backend) {
  std::vector<DeviceBuffer> owned;
  const auto& layers = chain.layers();
  for (const auto& layer : layers)
    if (auto* block = dynamic_cast<Residual*>(layer.get())) {
      for (auto& b : share_gradient_buffers(block->body(), backend)) owned.push_back(std::move(b));
      for (auto& b : share_gradient_buffers(block->shortcut(), backend)) owned.push_back(std::move(b));
    }

  int64_t largest = 0;
  int accepting = 0;
  for (size_t i = 0; i < layers.size(); ++i)
    if (layers[i]->accepts_shared_dx()) {
      largest = std::max(largest, chain.inputs()[i].elements());
      ++accepting;
    }
  if (accepting < 2) return owned;  // one buffer of its own per layer is then no more memory
  DeviceBuffer slots[2] = {backend.allocate(sizeof(float) * static_cast<size_t>(largest)),
                           backend.allocate(sizeof(float) * static_cast<size_t>(largest))};
  // Backward runs last to first. `holding` is the slot the current gradient may be in (-1: neither).
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
  owned.push_back(std::move(slots[0]));
  owned.push_back(std::move(slots[1]));
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
