// Owns the fully connected layer: y = x W^T + b over each sample's C*H*W values, W stored out x in.
#include <fmt/format.h>

#include <limits>

#include "model/layers/layers.h"
#include "model/layers/leaf_layer.h"

namespace ringtrain::model {
namespace {

class Dense final : public LeafLayer {
 public:
  using LeafLayer::LeafLayer;
  std::string describe() const override { return fmt::format("dense {}", spec_.units); }
  Shape setup(const Shape& in) override {
    in_ = in;
    if (in.per_sample() > std::numeric_limits<int>::max())
      shape_error(in, fmt::format("{} inputs per sample are more than a dense layer takes (2^31 - 1)", in.per_sample()));
    out_ = {in.n, spec_.units, 1, 1};
    return out_;
  }
  MemoryUse memory_use() const override { return {.backward_reads_input = true}; }  // the weight gradient
  std::vector<ParamDecl> param_decls() const override {
    return params_.decls(spec_.units, in_.per_sample(), spec_.bias);
  }
  void bind(std::span<float* const> p, std::span<float* const> g, std::span<float* const>) override {
    params_.bind(p, g);
  }
  void forward(const ForwardPass& pass) override {
    backend_.dense_forward(shape_at(pass.x.shape.n), pass.x.data, params_.weight(), params_.bias(), pass.y);
  }
  void backward(const BackwardPass& pass) override {
    backend_.dense_backward(shape_at(pass.dy.shape.n), pass.x.data, params_.weight(), pass.dy.data, pass.dx,
                            params_.weight_grad(), params_.bias_grad());
  }
  double forward_flops_per_sample() const override { return shape_at(1).forward_flops(); }

 private:
  DenseShape shape_at(int batch) const { return {batch, static_cast<int>(in_.per_sample()), spec_.units, data_}; }
  WeightAndBias params_;
};

}  // namespace

std::unique_ptr<Layer> make_dense(const config::LayerSpec& spec, Backend& backend, ElementType data) {
  return std::make_unique<Dense>(spec, backend, data);
}

}  // namespace ringtrain::model
