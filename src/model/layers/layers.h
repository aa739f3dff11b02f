// Owns the making of a layer from its spec, through the registry each layer kind's file registers with
// (model/layer_registry.h). Residual blocks are not layers: the network builds them from their body and shortcut.
#pragma once
#include <memory>

#include "config/layer_spec.h"
#include "model/backend.h"
#include "model/layer.h"

namespace ringtrain::model {

// `data` is the element type the network stores activations and their gradients in.
std::unique_ptr<Layer> make_layer(const config::LayerSpec& spec, Backend& backend,
                                  ElementType data = ElementType::f32);

}  // namespace ringtrain::model
