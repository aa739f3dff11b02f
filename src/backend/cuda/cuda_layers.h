// Owns the factory for the CUDA leaf layers (conv2d, batchnorm, relu, pools, flatten, dense, dropout).
#pragma once
#include <memory>

#include "config/layer_spec.h"
#include "model/layer.h"

namespace ringtrain::backend {

class CudaBackend;

// Throws Error(internal) for a residual spec: composites are built by model/, not by backends.
std::unique_ptr<model::Layer> make_cuda_layer(const config::LayerSpec& spec, CudaBackend& backend);

}  // namespace ringtrain::backend
