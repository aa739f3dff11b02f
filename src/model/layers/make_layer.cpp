// Owns the dispatch from a layer spec's kind to its maker.
#include <fmt/format.h>

#include "common/error.h"
#include "model/layers/layers.h"

namespace ringtrain::model {

std::unique_ptr<Layer> make_layer(const config::LayerSpec& spec, Backend& backend) {
  using config::LayerKind;
  switch (spec.kind) {
    case LayerKind::conv2d: return make_conv2d(spec, backend);
    case LayerKind::dense: return make_dense(spec, backend);
    case LayerKind::batchnorm: return make_batchnorm(spec, backend);
    case LayerKind::relu: return make_relu(spec, backend);
    case LayerKind::maxpool:
    case LayerKind::avgpool:
    case LayerKind::global_avgpool: return make_pool(spec, backend);
    case LayerKind::flatten: return make_flatten(spec, backend);
    case LayerKind::dropout: return make_dropout(spec, backend);
    case LayerKind::residual: break;
  }
  throw Error(ExitCode::internal, fmt::format("{}: a residual block is not a layer", spec.where));
}

}  // namespace ringtrain::model
