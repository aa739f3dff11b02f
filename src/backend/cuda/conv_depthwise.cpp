// Owns the depthwise convolutions (groups = channels = filters, kernels up to 7x7, stride 1 or 2) that run on our
// kernels (kernels/cuda/depthwise_conv.h) in place of cuDNN's grouped convolution, under gpu.candidate_kernels until
// a GPU has proven them. They read the fp32 weights themselves, so no 16-bit copy is made, and add the filter and
// bias gradients into the fp32 gradients without rounding them to 16 bits first. Their reordered weights and the
// filter gradient's partial sums lie in the step's scratch (the memory plan's, or the backend's own where it gave
// too little).
#include <fmt/format.h>

#include "backend/cuda/cuda_backend_state.h"
#include "kernels/cuda/depthwise_conv.h"

namespace ringtrain::backend {

namespace kc = kernels::cuda;

bool CudaBackend::depthwise_conv(const model::Conv2dShape& s) const {
  return state_->options.candidate_kernels && kc::depthwise_conv_takes(s);
}

model::ScratchBytes CudaBackend::depthwise_conv_scratch_bytes(const model::Conv2dShape& s) const {
  const kc::DepthwiseConvScratch scratch = kc::depthwise_conv_scratch(s, activation_layout(s.data));
  return {scratch.forward, scratch.backward};
}

std::string CudaBackend::depthwise_conv_method(const model::Conv2dShape& s) const {
  const model::ActivationLayout layout = activation_layout(s.data);
  return fmt::format("our depthwise kernels (candidate), {}, filter gradient in {} position chunks",
                     layout == model::ActivationLayout::nhwc ? "NHWC" : "NCHW",
                     kc::depthwise_conv_scratch(s, layout).chunks);
}

void CudaBackend::depthwise_conv_forward(const model::Conv2dShape& s, const void* x, const float* w,
                                         const float* bias, void* y, model::Scratch scratch) {
  const model::ActivationLayout layout = activation_layout(s.data);
  const std::size_t bytes = kc::depthwise_conv_scratch(s, layout).forward;
  void* memory = planned_or_own(scratch, bytes, state_->depthwise_scratch, stream());
  kc::depthwise_conv_forward(s, layout, x, w, bias, y, memory, stream());
}

void CudaBackend::depthwise_conv_backward(const model::Conv2dShape& s, const void* x, const void* dy, const float* w,
                                          void* dx, float* dw, float* dbias, model::Scratch scratch) {
  const model::ActivationLayout layout = activation_layout(s.data);
  const std::size_t bytes = kc::depthwise_conv_scratch(s, layout).backward;
  void* memory = planned_or_own(scratch, bytes, state_->depthwise_scratch, stream());
  kc::depthwise_conv_backward(s, layout, x, dy, w, dx, dw, dbias, memory, stream());
}

}  // namespace ringtrain::backend
