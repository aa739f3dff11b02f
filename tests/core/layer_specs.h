// Owns the core tests' shorthand for layer specs as a job file would give them: one call per layer, with the
// few numbers each kind needs, and residual blocks from their body and shortcut.
#pragma once
#include <utility>
#include <vector>

#include "config/layer_spec.h"

namespace ringtrain::test_specs {

using config::LayerKind;
using config::LayerSpec;

// conv2d: a = filters; dense: a = units; max/avg pooling: a = window (stride defaults to the window).
inline LayerSpec layer(LayerKind kind, int a = 0, int kernel = 0, int stride = 1, int padding = 0) {
  LayerSpec s;
  s.kind = kind;
  s.where = "test";
  if (kind == LayerKind::conv2d) s.filters = a, s.kernel = kernel, s.stride = stride, s.padding = padding;
  if (kind == LayerKind::dense) s.units = a;
  if (kind == LayerKind::maxpool || kind == LayerKind::avgpool) s.size = a, s.stride = stride > 1 ? stride : a;
  return s;
}

inline LayerSpec residual(std::vector<LayerSpec> body, std::vector<LayerSpec> shortcut = {}, bool relu = true) {
  LayerSpec s = layer(LayerKind::residual);
  s.body = std::move(body), s.shortcut = std::move(shortcut), s.activation_relu = relu;
  return s;
}

}  // namespace ringtrain::test_specs
