// Owns the model description as the user writes it in the job file: a Keras-Sequential-like list of layers,
// with residual blocks holding their own body and shortcut lists.
#pragma once
#include <string>
#include <vector>

namespace ringtrain::config {

enum class LayerKind { conv2d, batchnorm, relu, maxpool, avgpool, global_avgpool, flatten, dense, dropout, residual };

struct LayerSpec {
  LayerKind kind = LayerKind::relu;
  std::string where;  // "model.layers[3]" or "model.layers[5].body[1]", for error messages
  std::string name;   // optional user label
  // conv2d
  int filters = 0, kernel = 0, stride = 1, padding = 0;
  bool bias = true;
  // maxpool / avgpool (window = size; stride defaults to size)
  int size = 0;
  // dense
  int units = 0;
  // dropout
  double rate = 0;
  // batchnorm; init_scale is gamma's initial value (0: a residual block's last batch norm starts the block as the
  // identity, Goyal et al. 2017)
  double momentum = 0.1, epsilon = 1e-5, init_scale = 1;
  // residual: out = activation(body(x) + shortcut(x)); an empty shortcut is the identity
  std::vector<LayerSpec> body, shortcut;
  bool activation_relu = true;
};

const char* layer_kind_name(LayerKind kind);

}  // namespace ringtrain::config
