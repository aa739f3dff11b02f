// Owns a chain of layers run in order: the model's top level and a residual block's body and shortcut.
#pragma once
#include <memory>
#include <vector>

#include "model/layer.h"

namespace ringtrain::model {

class Sequential final : public Layer {
 public:
  void append(std::unique_ptr<Layer> layer) { layers_.push_back(std::move(layer)); }
  bool empty() const { return layers_.empty(); }
  const std::vector<std::unique_ptr<Layer>>& layers() const { return layers_; }
  // Each layer's input at the setup batch, in order (after setup).
  const std::vector<Shape>& inputs() const { return inputs_; }

  std::string describe() const override;
  Shape setup(const Shape& in) override;
  std::vector<ParamDecl> param_decls() const override;
  std::vector<StateDecl> state_decls() const override;
  void bind(std::span<float* const> params, std::span<float* const> grads, std::span<float* const> states) override;
  Tensor forward(const Tensor& x, Mode mode, const StepContext& ctx) override;
  Tensor backward(const Tensor& dy, bool need_dx, GradientObserver* observer) override;
  double forward_flops_per_sample() const override;
  double backward_flops_per_sample(bool need_dx) const override;
  void collect_leaves(std::vector<const Layer*>& out) const override;
  bool is_composite() const override { return true; }

 private:
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<Shape> inputs_;
};

}  // namespace ringtrain::model
