// Owns the residual block: out = act(body(x) + shortcut(x)), the shortcut being the identity when empty.
// Backend-agnostic: the add and the activation go through the Backend's element-wise operations.
#pragma once
#include <string>

#include "model/backend.h"
#include "model/sequential.h"

namespace ringtrain::model {

class Residual final : public Layer {
 public:
  Residual(Backend& backend, std::string where, bool relu) : backend_(backend), where_(std::move(where)), relu_(relu) {}
  Sequential& body() { return body_; }
  Sequential& shortcut() { return shortcut_; }

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
  // The memory plan: its input gradient into the chain's shared buffer, and the gradient through its
  // activation into a scratch buffer shared by the blocks at its depth (on backends that plan memory).
  bool accepts_shared_dx() const override { return backend_.plans_memory(); }
  void use_shared_dx(float* buffer) override { shared_dx_ = buffer; }
  int64_t scratch_floats() const { return relu_ ? out_.elements() : 0; }
  void use_shared_scratch(float* buffer) { shared_dsum_ = buffer; }

 private:
  Backend& backend_;
  std::string where_;
  bool relu_;
  Sequential body_, shortcut_;
  Shape in_, out_;
  DeviceBuffer y_, dsum_, dx_;
  float *shared_dx_ = nullptr, *shared_dsum_ = nullptr;
  Tensor x_;
  float* dsum();
  float* dx();
};

}  // namespace ringtrain::model
