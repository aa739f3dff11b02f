// Owns the core tests' shorthand for layer specs as a job file would give them: one call per layer, with the
// few numbers each type needs (checked and completed by the type's own declaration), and residual blocks from their
// body and shortcut.
#pragma once
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "config/layer_types.h"

namespace ringtrain::test_specs {

using config::LayerSpec;

// conv2d: a = filters; dense: a = units; max/avg pooling: a = window (stride defaults to the window); dropout: rate 0.
inline LayerSpec layer(std::string_view type, int a = 0, int kernel = 0, int stride = 1, int padding = 0) {
  if (type == config::kResidual) return {.type = std::string(type), .where = "test"};
  std::vector<config::LayerArg> args;
  if (type == "conv2d") args = {{"filters", a}, {"kernel", kernel}, {"stride", stride}, {"padding", padding}};
  if (type == "dense") args = {{"units", a}};
  if (type == "maxpool" || type == "avgpool") args = {{"size", a}, {"stride", stride > 1 ? stride : a}};
  if (type == "dropout") args = {{"rate", 0.0}};
  return config::layer_spec(type, args, "test");
}

inline LayerSpec residual(std::vector<LayerSpec> body, std::vector<LayerSpec> shortcut = {}, bool relu = true) {
  LayerSpec s = layer(config::kResidual);
  s.body = std::move(body), s.shortcut = std::move(shortcut), s.activation_relu = relu;
  return s;
}

}  // namespace ringtrain::test_specs
