// Owns the factory of CPU leaf layers (one class per layer kind, in cpu_layers.cpp).
#pragma once
#include <memory>

#include "config/layer_spec.h"
#include "model/backend.h"

namespace ringtrain::backend {

std::unique_ptr<model::Layer> make_cpu_layer(const config::LayerSpec& spec, model::Backend& backend);

}  // namespace ringtrain::backend
