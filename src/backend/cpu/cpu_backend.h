// Owns the CPU twin of the device backend: host memory and every Backend operation over kernels/cpu. Work runs
// at the call, so its readbacks have landed and its clock marks are dated when they return. Convolutions and
// dense products run on oneDNN (kernels/cpu/dnnl_ops.h) where its rule says so, the rest on our own kernels;
// every tensor stays in the plain layouts the layers and the memory plan know. Reduced-precision products are
// oneDNN's bf16 kernels, or fp32 products of operands rounded to fp16 or bf16 (backend/cpu/rounded_operands.h).
#pragma once
#include <array>
#include <cstddef>
#include <optional>
#include <vector>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/batchnorm.h"
#include "kernels/cpu/conv2d.h"
#include "backend/cpu/fp32_views.h"
#include "backend/cpu/nhwc_staging.h"
#include "backend/cpu/pool_choice.h"
#include "backend/cpu/rounded_operands.h"
#include "kernels/cpu/dnnl_ops.h"
#include "model/backend.h"

namespace ringtrain::backend {

class CpuBackend : public model::Backend {
 public:
  // math: the operand type of the products on oneDNN (DnnlMath::bf16 needs DnnlOps::bf16_available());
  // rounding: what every convolution and dense product rounds its operands to before multiplying in fp32 (the
  // emulation of fp16, and of bf16 where the CPU lacks AVX512_BF16); use one of the two, not both.
  explicit CpuBackend(int threads, kernels::cpu::DnnlMath math = kernels::cpu::DnnlMath::fp32,
                      kernels::cpu::OperandRounding rounding = kernels::cpu::OperandRounding::none);
  std::string name() const override { return "cpu"; }
  // How convolutions on oneDNN meet NHWC activations: staged, the NCHW kernels between reorders (the NCHW run's
  // bits, which the tests compare layouts by), or native: oneDNN reads and writes them as stored, and a pointwise
  // one runs as a matrix product over the positions (run.cpu_layout; no reorders).
  enum class NhwcConvolutions { staged, native };
  // Store 4-D activations NHWC, as a GPU backend stores 16-bit ones; every other operation that reads them by
  // channel runs staged (backend/cpu/nhwc_staging.h) or reads either layout itself.
  void store_nhwc(bool on, NhwcConvolutions convolutions = NhwcConvolutions::staged) {
    nhwc_.enable(on);
    native_nhwc_ = on && convolutions == NhwcConvolutions::native;
  }
  model::ActivationLayout activation_layout(model::ElementType) const override {
    return nhwc_.enabled() ? model::ActivationLayout::nhwc : model::ActivationLayout::nchw;
  }
  void reorder_activation(const kernels::Planes& p, model::ActivationLayout to, const void* x, void* y) override;
  std::string description() const override;

  model::DeviceBuffer allocate(std::size_t bytes) override;
  std::size_t bytes_allocated() const override { return allocated_; }
  std::size_t working_bytes() const override;
  bool allocates_host_memory() const override { return true; }
  std::size_t memory_available() const override;
  void to_device(void* device_dst, const void* host_src, std::size_t bytes) override;
  void to_host(void* host_dst, const void* device_src, std::size_t bytes) override;
  void synchronize() override {}
  std::unique_ptr<model::Readback> make_readback(std::size_t bytes) override;
  std::unique_ptr<model::DeviceClock> make_clock(int capacity) override;

  void zero(void* y, std::size_t bytes) override;
  void fill(int64_t n, float value, float* y) override;
  // fp32, and a 16-bit type whose values the operand rounding keeps as they are (none, or rounding to that type,
  // as train.precision pairs them), so a stored activation is already a product's operand: our kernels and oneDNN's
  // read it in its type, or widened (backend/cpu/fp32_views.h), as a GPU's 16-bit tensors meet fp32 arithmetic
  // inside its kernels.
  bool stores_activations_in(kernels::ElementType type) const override {
    return type == kernels::ElementType::f32 || rounded_.keeps(type);
  }
  void cast(kernels::Elements from, const void* x, kernels::ElementType to, void* y) override;
  void copy(kernels::Elements n, const void* x, void* y) override;
  void add(kernels::Elements n, const void* a, const void* b, void* y) override;
  void accumulate(kernels::Elements n, const void* x, void* y) override;
  void unscale(int64_t n, float factor, float* y, int32_t* nonfinite) override;
  void scale(int64_t n, float factor, float* y) override;
  void sum_squares(int64_t n, const float* x, double* total) override;
  void relu_forward(kernels::Elements n, const void* x, void* y) override;
  void relu_backward(kernels::Elements n, const void* y, const void* dy, void* dx) override;
  void activation_forward(kernels::Activation a, kernels::Elements n, const void* x, void* y) override;
  void activation_backward(kernels::Activation a, kernels::Elements n, const void* x, const void* dy,
                           void* dx) override;
  void dropout_forward(const kernels::Planes& x_planes, float p, const kernels::LayerSeed& seed, const void* x,
                       void* y, uint8_t* mask) override;
  void dropout_backward(kernels::Elements n, float p, const uint8_t* mask, const void* dy, void* dx) override;
  void plane_sums(const kernels::Planes& p, float factor, const void* a, const void* b, float* sums) override;
  void plane_scale(const kernels::Planes& p, const void* x, const float* scale, const float* shift,
                   void* y) override;
  void layer_norm_forward(const kernels::Planes& p, float epsilon, const void* x, const model::LayerNormTensors& t,
                          void* y) override;
  void layer_norm_backward(const kernels::Planes& p, const void* x, const void* dy, const model::LayerNormTensors& t,
                           void* dx, float* dgamma, float* dbeta) override;
  void copy_tokens(const kernels::TokenCopy& c, const void* x, void* y) override;
  void add_token_table(const kernels::TokenSpan& s, const void* x, const float* table, void* y) override;
  void token_table_gradient(const kernels::TokenSpan& s, const void* dy, float* dtable) override;

  // The host needs no planned scratch: oneDNN and the im2col kernels keep their own.
  model::ScratchBytes conv2d_prepare(const model::Conv2dShape& s) override;
  void conv2d_forward(const model::Conv2dShape& s, const void* x, const float* w, const float* bias, void* y,
                      model::Scratch scratch) override;
  void conv2d_backward(const model::Conv2dShape& s, const void* x, const void* dy, const float* w, void* dx,
                       float* dw, float* dbias, model::Scratch scratch) override;
  // The channel block of oneDNN's preferred layout for y (nChw16c with AVX-512), and for x; 1 where the convolution
  // is not on oneDNN or the layout is not blocked.
  int conv2d_output_block(const model::Conv2dShape& s);
  int conv2d_input_block(const model::Conv2dShape& s);
  std::string conv2d_method(const model::Conv2dShape& s) override;
  void dense_forward(const model::DenseShape& s, const void* x, const float* w, const float* bias,
                     void* y) override;
  void dense_backward(const model::DenseShape& s, const void* x, const float* w, const void* dy, void* dx,
                      float* dw, float* dbias) override;
  void batchnorm_forward_train(const model::BatchNormShape& s, const model::BatchNormSettings& settings,
                               const void* x, const model::BatchNormBuffers& b, void* y) override;
  void batchnorm_forward_infer(const model::BatchNormShape& s, const model::BatchNormSettings& settings,
                               const void* x, const model::BatchNormBuffers& b, void* y) override;
  void batchnorm_backward(const model::BatchNormShape& s, const model::BatchNormSettings& settings, const void* x,
                          const void* y, const void* dy, const model::BatchNormBuffers& b, void* dx, float* dgamma,
                          float* dbeta) override;
  // Training batch norm then runs in two passes each way, the group's sums reduced between them.
  void synchronise_batchnorm(std::shared_ptr<model::BatchStatisticsGroup> group) override;
  // Batch norm takes on the ReLU after it, and the 2x2/2 max pool after that: one pass each way, the ReLU's forward
  // and its mask in backward riding in batch norm's own loops. And the residual join, run as the ops apart
  // (Backend's batchnorm_add_relu_*): no pass saved here, but the step list the CUDA backend's 16-bit path runs, so
  // that the fusion pass is tested on the twin.
  std::vector<model::FusionRule> fusion_rules() const override;
  // oneDNN's blocked layout between a convolution and a batch norm with a fused ReLU and pool, either way round,
  // where our batch-norm kernels have that block (blocks of 8 or 16, NHWC over 32 or 64) and it pays at the shape.
  int chain_block(const model::LayerOperation& producer, const model::LayerOperation& consumer) override;
  std::size_t pool_saved_bytes(const model::PoolShape& s, model::PoolMode mode) const override;
  void pool_forward(const model::PoolShape& s, model::PoolMode mode, const void* x, void* y, void* saved) override;
  void pool_backward(const model::PoolShape& s, model::PoolMode mode, const void* x, const void* y,
                     const void* dy, void* dx, const void* saved) override;

  // On kernels/cpu/attention.h in fp32, 16-bit tokens widened, or, for the shapes DnnlOps::runs_attention names, on
  // oneDNN's batched bf16 products. Both read the tokens as stored: the operand rounding that emulates 16-bit products
  // on fp32 tensors does not apply to them. Backward reads the kept T x T probabilities.
  std::size_t attention_kept_bytes(const model::AttentionShape& s) override { return s.probabilities_bytes(); }
  std::string attention_method(const model::AttentionShape& s) override;
  void attention_forward(const model::AttentionShape& s, const void* qkv, void* y, void* probabilities,
                         model::Scratch scratch) override;
  void attention_backward(const model::AttentionShape& s, const void* qkv, const void* y, const void* probabilities,
                          const void* dy, void* dqkv, model::Scratch scratch) override;

  void softmax_cross_entropy(int batch, int classes, const float* logits, const int32_t* labels,
                             const model::LossSettings& loss, float* dlogits, model::LossTotals* totals) override;
  void soft_target_cross_entropy(int batch, int classes, const float* logits, const float* targets,
                                 const model::LossSettings& loss, float* dlogits, model::LossTotals* totals) override;
  void sgd_update(int64_t n, const model::SgdStep& step, const uint32_t* decay_mask, float* grad,
                  float* velocity, float* param) override;
  void adamw_update(int64_t n, const model::AdamStep& step, const uint32_t* decay_mask, float* grad, float* m,
                    float* v, float* param) override;
  void lars_update(int tensors, const model::TensorRange* ranges, const model::LarsStep& step, float* grad,
                   float* velocity, float* param) override;
  void lamb_update(int tensors, const model::TensorRange* ranges, const model::AdamStep& step, float* grad,
                   float* m, float* v, float* param) override;
  void ema_update(int64_t n, const model::EmaStep& step, const float* param, float* ema) override;

  void normalize_pixels(const model::PixelShape& s, const uint8_t* x, const float* mean, const float* stddev,
                        float* y) override;
  const uint8_t* decode_jpegs(std::span<const kernels::JpegCrop> samples, const model::Shape& sample) override;
  std::unique_ptr<model::JpegSlots> make_jpeg_slots(int slots) override;

  // Whether s, with activations stored NHWC and convolutions native, runs as a matrix product: over its positions
  // (pointwise) or over its patches (a patch embedding: stride = kernel, unpadded), with no reorder around it.
  static bool runs_as_product(const model::Conv2dShape& s);

 private:
  bool on_dnnl(const model::Conv2dShape& s);
  // s as oneDNN takes it on NHWC tensors as stored (NHWC is the block of every channel: Conv2dShape::in_block,
  // out_block), where the convolutions run native and oneDNN runs s on the stored type.
  std::optional<model::Conv2dShape> on_dnnl_nhwc(const model::Conv2dShape& s);
  // Whether s, where it runs on NHWC tensors (on_dnnl_nhwc), runs as a dense product over its N x H x W positions (a
  // 1x1, stride-1, unpadded, ungrouped convolution: the same numbers as oneDNN's matmul), and that product's shape.
  static bool pointwise(const model::Conv2dShape& s);
  static model::DenseShape pointwise_dense(const model::Conv2dShape& s);
  // Whether s, a pointwise convolution over NCHW planes of a few positions, runs as the dense product over its
  // positions between reorders to NHWC and back.
  bool on_positions(const model::Conv2dShape& s) const;
  // `buffer`, grown to hold p's values.
  static void* grown(std::vector<std::byte>& buffer, const kernels::Planes& p);
  // Whether s runs as the dense product over its patches (native NHWC, as on_dnnl_nhwc; stride = kernel, no
  // padding).
  bool on_patches(const model::Conv2dShape& s) const;
  const void* rounded_activation(int slot, kernels::Elements x, const void* data);
  const float* fp32_operand(int slot, int view_slot, kernels::Elements x, const void* data);
  // A product a layer asks in full precision while the network computes in bf16 or fp16 (squeeze-and-excitation's,
  // whose gate would round): fp32 operands, as the CUDA backend's sgemm reads them, not the 16-bit math's rounded
  // ones.
  bool fp32_beside_16_bit(const model::DenseShape& s) const {
    return s.full_precision && (math_ != kernels::cpu::DnnlMath::fp32 || rounded_.active());
  }
  int threads_;
  kernels::cpu::DnnlMath math_;
  std::unique_ptr<model::JpegSlots> jpeg_slots_;  // decode_jpegs' two, used in turn (jpeg_decode.cpp)
  int next_jpeg_slot_ = 0;
  std::size_t allocated_ = 0;
  // One im2col scratch for every convolution: layers run one at a time, so they never need it at once.
  kernels::cpu::ConvWorkspace conv_workspace_;
  kernels::cpu::BatchNormWorkspace batchnorm_workspace_;
  kernels::cpu::AttentionWorkspace attention_workspace_;
  kernels::cpu::ChannelSumReduce batchnorm_sync_;  // empty: each rank's batch norm on its own batch
  kernels::cpu::DnnlOps dnnl_;
  PoolChoice pool_choice_;
  RoundedOperands rounded_;
  Fp32Views views_;
  NhwcStaging nhwc_;
  bool native_nhwc_ = false;  // see NhwcConvolutions
  // A convolution run as a dense product (on_positions, on_patches): its x, its y or dy, and its dx as the product
  // reads and writes them (NHWC positions, patch rows), in the stored type. Layers run one at a time, so one set.
  struct AsProduct {
    std::vector<std::byte> x, y, dx;
  } as_product_;
};

}  // namespace ringtrain::backend
