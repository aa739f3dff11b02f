// Owns the making of layers from their specs: one maker per layer kind (each in its own file here) and the
// dispatch by kind. `data` is the element type the network stores activations and their gradients in. Residual blocks are not layers: the network builds them from their body and shortcut.
#pragma once
#include <memory>

#include "config/layer_spec.h"
#include "model/backend.h"
#include "model/layer.h"

namespace ringtrain::model {

std::unique_ptr<Layer> make_layer(const config::LayerSpec& spec, Backend& backend,
                                  ElementType data = ElementType::f32);

std::unique_ptr<Layer> make_conv2d(const config::LayerSpec& spec, Backend& backend, ElementType data);
std::unique_ptr<Layer> make_dense(const config::LayerSpec& spec, Backend& backend, ElementType data);
std::unique_ptr<Layer> make_batchnorm(const config::LayerSpec& spec, Backend& backend, ElementType data);
std::unique_ptr<Layer> make_relu(const config::LayerSpec& spec, Backend& backend, ElementType data);
std::unique_ptr<Layer> make_pool(const config::LayerSpec& spec, Backend& backend, ElementType data);  // max, average, global
std::unique_ptr<Layer> make_flatten(const config::LayerSpec& spec, Backend& backend, ElementType data);
std::unique_ptr<Layer> make_dropout(const config::LayerSpec& spec, Backend& backend, ElementType data);

}  // namespace ringtrain::model
