// Owns the dispatch from a layer spec's kind to its maker.
#include <fmt/format.h>

#include "common/error.h"
#include "model/layers/layers.h"

namespace ringtrain::model {

std::unique_ptr<Layer> make_layer(const config::LayerSpec& spec, Backend& backend, ElementType data) {
  using config::LayerKind;
  switch (spec.kind) {
    case LayerKind::conv2d: return make_conv2d(spec, backend, data);
    case LayerKind::dense: return make_dense(spec, backend, data);
    case LayerKind::batchnorm: return make_batchnorm(spec, backend, data);
    case LayerKind::relu: return make_relu(spec, backend, data);
    case LayerKind::maxpool:
    case LayerKind::avgpool:
    case LayerKind::global_avgpool: return make_pool(spec, backend, data);
    case LayerKind::flatten: return make_flatten(spec, backend, data);
    case LayerKind::dropout: return make_dropout(spec, backend, data);
    case LayerKind::residual: break;
  }
  throw Error(ExitCode::internal, fmt::format("{}: a residual block is not a layer", spec.where));
}

}  // namespace ringtrain::model
