// Owns the CUDA backend's operations: convolution through cuDNN (dnn.h) or, for the shapes it runs slowly, our
// kernels (few-channel stems: conv_gemm.cpp; depthwise under gpu.candidate_kernels: conv_depthwise.cpp), dense layers
// through cuBLAS (blas.h), batch norm and pooling through cuDNN on fp32 activations and through kernels/cuda on
// 16-bit ones, and the rest through kernels/cuda. Everything is queued on the backend's stream. Activation pointers
// are in the element type of their operation's shape or Elements; under mixed precision the convolutions and products
// read 16-bit copies of the fp32 weights (weights_in), and their weight gradients land in fp32.
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include "backend/cuda/cuda_backend_state.h"
#include "backend/cuda/nccl_communicator.h"
#include "common/error.h"
#include "dist/batch_statistics_group.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/dropout.h"
#include "kernels/cuda/layer_norm.h"
#include "kernels/cuda/plane_scale.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/adamw.h"
#include "kernels/cuda/ema.h"
#include "kernels/cuda/batchnorm.h"
#include "kernels/cuda/cast.h"
#include "kernels/cuda/pooling.h"
#include "kernels/cuda/reorder_layout.h"
#include "kernels/cuda/resize_rows.h"
#include "kernels/cuda/layerwise.h"
#include "kernels/cuda/pixel_norm.h"
#include "kernels/cuda/sgd.h"
#include "kernels/cuda/step_scalars.h"
#include "kernels/cuda/softmax_cross_entropy.h"
#include "kernels/cuda/sum_squares.h"
#include "kernels/cuda/token_table.h"

namespace ringtrain::backend {

namespace kc = kernels::cuda;
using kernels::Elements;
using kernels::ElementType;

namespace {
const float* f32(const void* p) { return static_cast<const float*>(p); }
float* f32(void* p) { return static_cast<float*>(p); }
bool sixteen_bit(ElementType t) { return t != ElementType::f32; }
}  // namespace

bool CudaBackend::stores_activations_in(ElementType type) const {
  return type == ElementType::f32 || type == state_->options.activations;
}

bool CudaBackend::nhwc(ElementType type) const { return state_->options.nhwc && sixteen_bit(type); }
model::ActivationLayout CudaBackend::activation_layout(ElementType type) const {
  return nhwc(type) ? model::ActivationLayout::nhwc : model::ActivationLayout::nchw;
}
void CudaBackend::reorder_activation(const kernels::Planes& p, model::ActivationLayout to, const void* x, void* y) {
  kc::reorder_layout(p, to, x, y, stream());
}

void CudaBackend::cast(Elements from, const void* x, ElementType to, void* y) {
  if (from.type == to) return copy(from, x, y);
  kc::cast(from, x, to, y, stream());
}

const void* CudaBackend::weights_in(ElementType type, const float* w, int64_t count, bool convert,
                                    const KrscFilters* krsc) {
  if (!sixteen_bit(type)) return w;
  DeviceMemory& copy = state_->weight_copies[w];
  const Elements n{count, type};
  const int64_t rows = krsc ? krsc->kcrs.n * krsc->kcrs.hw : 0;
  const Elements held = krsc ? Elements{rows * krsc->channels, type} : n;
  if (copy.bytes() < held.bytes()) {
    if (!convert)
      throw Error(ExitCode::internal, "a layer's backward ran before its forward made the 16-bit copy of its weights");
    copy.ensure(held.bytes(), stream());
  }
  if (!convert) return copy.get();
  if (!krsc) {
    kc::cast({count, ElementType::f32}, w, type, copy.get(), stream());
    return copy.get();
  }
  State& st = *state_;
  st.filter_staging.ensure(n.bytes(), stream());
  kc::cast({count, ElementType::f32}, w, type, st.filter_staging.get(), stream());
  if (krsc->channels == krsc->kcrs.c) {
    kc::reorder_layout(krsc->kcrs, model::ActivationLayout::nhwc, st.filter_staging.get(), copy.get(), stream());
    return copy.get();
  }
  st.filter_padding.ensure(n.bytes(), stream());
  kc::reorder_layout(krsc->kcrs, model::ActivationLayout::nhwc, st.filter_staging.get(), st.filter_padding.get(),
                     stream());
  kc::resize_rows({rows, krsc->kcrs.c, krsc->channels, type}, st.filter_padding.get(), copy.get(), stream());
  return copy.get();
}

// NHWC filters are KRSC: K filters of C channels at R*S positions, reordered as an activation is.
const void* CudaBackend::filters_in(const model::Conv2dShape& s, const float* w, bool convert) {
  if (!nhwc(s.data)) return weights_in(s.data, w, s.weight_elements(), convert);
  const KrscFilters krsc{{s.filters, s.group_channels(), int64_t{s.kernel_h} * s.kernel_w, s.data},
                         conv_shape(s).group_channels()};
  return weights_in(s.data, w, s.weight_elements(), convert, &krsc);
}

model::Conv2dShape CudaBackend::conv_shape(const model::Conv2dShape& s) const {
  model::Conv2dShape padded = s;
  if (nhwc(s.data) && s.groups == 1)
    padded.in_channels = static_cast<int>(kernels::tensor_core_channels(s.in_channels));
  return padded;
}

kernels::ResizedRows CudaBackend::input_padding(const model::Conv2dShape& s) {
  const kernels::ResizedRows pad{int64_t{s.batch} * s.in_h * s.in_w, s.in_channels, conv_shape(s).in_channels,
                                 s.data};
  if (pad.to != pad.from) state_->channel_padding.ensure(Elements{pad.rows * pad.to, s.data}.bytes(), stream());
  return pad;
}

const void* CudaBackend::padded_input(const model::Conv2dShape& s, const void* x) {
  kc::resize_rows(input_padding(s), x, state_->channel_padding.get(), stream());
  return state_->channel_padding.get();
}

void* CudaBackend::batchnorm_scratch(const model::BatchNormShape& s) {
  State& st = *state_;
  st.batchnorm_scratch.ensure(kc::batchnorm_scratch_bytes(s), st.stream);
  return st.batchnorm_scratch.get();
}

void* CudaBackend::channel_sums_scratch(std::size_t bytes) {
  if (bytes == 0) return nullptr;
  State& st = *state_;
  st.channel_sums_scratch.ensure(bytes, st.stream);
  return st.channel_sums_scratch.get();
}

std::size_t CudaBackend::working_bytes() const {
  std::size_t bytes =
      state_->dnn->working_bytes() + state_->batchnorm_scratch.bytes() + state_->channel_sums_scratch.bytes() +
      state_->filter_staging.bytes() + state_->filter_padding.bytes() + state_->channel_padding.bytes() +
      state_->gemm_conv_scratch.bytes() + state_->attention_scratch.bytes() + state_->depthwise_scratch.bytes();
  for (const auto& [w, copy] : state_->weight_copies) bytes += copy.bytes();
  return bytes;
}

void CudaBackend::zero(void* y, std::size_t bytes) {
  if (bytes) CUDA_CHECK(cudaMemsetAsync(y, 0, bytes, stream()));
}
void CudaBackend::fill(int64_t n, float value, float* y) { kc::fill(n, value, y, stream()); }
void CudaBackend::copy(Elements n, const void* x, void* y) {
  if (n.n > 0 && x != y) CUDA_CHECK(cudaMemcpyAsync(y, x, n.bytes(), cudaMemcpyDeviceToDevice, stream()));
}
void CudaBackend::add(Elements n, const void* a, const void* b, void* y) { kc::add(n, a, b, y, stream()); }
void CudaBackend::add_relu(Elements n, const void* a, const void* b, void* y) {
  kc::add_relu(n, a, b, y, stream());
}
void CudaBackend::accumulate(Elements n, const void* x, void* y) { kc::accumulate(n, x, y, stream()); }
void CudaBackend::unscale(int64_t n, float factor, float* y, int32_t* nonfinite) {
  kc::unscale(n, factor, y, nonfinite, stream());
}
void CudaBackend::scale(int64_t n, float factor, float* y) { kc::scale(n, factor, y, stream()); }
// Shares the layer-wise optimizers' scratch: both run in stream order, never at once.
void CudaBackend::sum_squares(int64_t n, const float* x, double* total) {
  State& s = *state_;
  s.norm_scratch.ensure(kc::sum_squares_scratch_bytes(), s.stream);
  kc::sum_squares(n, x, total, s.norm_scratch.get(), s.stream);
}
void CudaBackend::relu_forward(Elements n, const void* x, void* y) { kc::relu_forward(n, x, y, stream()); }
void CudaBackend::relu_backward(Elements n, const void* y, const void* dy, void* dx) {
  kc::relu_backward(n, y, dy, dx, stream());
}
void CudaBackend::activation_forward(kernels::Activation a, Elements n, const void* x, void* y) {
  kc::activation_forward(a, n, x, y, stream());
}
void CudaBackend::activation_backward(kernels::Activation a, Elements n, const void* x, const void* dy, void* dx) {
  kc::activation_backward(a, n, x, dy, dx, stream());
}
// A graphed step's launch reads its pass's seed from the slot's device copy (step_graphs.h), which each step
// rewrites, and derives the layer's on the device: a replay draws the step's own mask, as an eager step does.
void CudaBackend::dropout_forward(const kernels::Planes& x_planes, float p, const kernels::LayerSeed& seed,
                                  const void* x, void* y, uint8_t* mask) {
  const Elements n{x_planes.elements(), x_planes.type};
  const kernels::NchwIndex order = kernels::nchw_index(x_planes, activation_layout(x_planes.type));
  if (CudaStepGraphs* graphs = scalars_pass())
    return kc::dropout_forward(n, p, graphs->pass_seed(seed.pass), seed, x, y, mask, stream(), order);
  kc::dropout_forward(n, p, kernels::layer_seed(seed), x, y, mask, stream(), order);
}
void CudaBackend::dropout_backward(Elements n, float p, const uint8_t* mask, const void* dy, void* dx) {
  kc::dropout_backward(n, p, mask, dy, dx, stream());
}
void CudaBackend::plane_sums(const kernels::Planes& p, float factor, const void* a, const void* b, float* sums) {
  kc::plane_sums(p, activation_layout(p.type), factor, a, b, sums, stream());
}
void CudaBackend::plane_scale(const kernels::Planes& p, const void* x, const float* scale, const float* shift,
                              void* y) {
  kc::plane_scale(p, activation_layout(p.type), x, scale, shift, y, stream());
}
bool CudaBackend::layer_norm_rows(const kernels::Planes& p) const {
  return state_->options.candidate_kernels && kc::layer_norm_rows_fit(p, activation_layout(p.type));
}
void CudaBackend::layer_norm_forward(const kernels::Planes& p, float epsilon, const void* x,
                                     const model::LayerNormTensors& t, void* y) {
  if (layer_norm_rows(p)) return kc::layer_norm_rows_forward(p, epsilon, x, t, y, stream());
  kc::layer_norm_forward(p, activation_layout(p.type), epsilon, x, t, y, stream());
}
void CudaBackend::layer_norm_backward(const kernels::Planes& p, const void* x, const void* dy,
                                      const model::LayerNormTensors& t, void* dx, float* dgamma, float* dbeta) {
  if (layer_norm_rows(p))
    return kc::layer_norm_rows_backward(p, x, dy, t, dx, dgamma, dbeta,
                                        channel_sums_scratch(kc::layer_norm_rows_scratch_bytes(p)), stream());
  kc::layer_norm_backward(p, activation_layout(p.type), x, dy, t, dx, dgamma, dbeta, stream());
}
void CudaBackend::copy_tokens(const kernels::TokenCopy& c, const void* x, void* y) {
  kc::copy_tokens(c, activation_layout(c.from.type), x, y, stream());
}
void CudaBackend::add_token_table(const kernels::TokenSpan& s, const void* x, const float* table, void* y) {
  kc::add_token_table(s, activation_layout(s.tokens.type), x, table, y, stream());
}
void CudaBackend::token_table_gradient(const kernels::TokenSpan& s, const void* dy, float* dtable) {
  kc::token_table_gradient(s, activation_layout(s.tokens.type), dy, dtable, stream());
}

// A convolution whose channels conv_shape pads reads its input through the padding buffer (made at prepare, so no
// step allocates), and its data gradient is cropped back out of it.
model::ScratchBytes CudaBackend::conv2d_prepare(const model::Conv2dShape& s) {
  if (depthwise_conv(s)) return depthwise_conv_scratch_bytes(s);
  if (gemm_conv(s)) return gemm_conv_scratch_bytes(s);
  input_padding(s);
  return dnn().prepare_conv(conv_shape(s));
}
std::string CudaBackend::conv2d_method(const model::Conv2dShape& s) {
  if (depthwise_conv(s)) return depthwise_conv_method(s);
  if (gemm_conv(s)) return gemm_conv_method(s);
  const model::Conv2dShape run = conv_shape(s);
  const std::string padded = run.in_channels != s.in_channels
                                 ? fmt::format(" (input channels padded {} -> {})", s.in_channels, run.in_channels)
                                 : "";
  return dnn().conv_algorithms(run) + padded;
}
void CudaBackend::conv2d_forward(const model::Conv2dShape& s, const void* x, const float* w, const float* bias,
                                 void* y, model::Scratch scratch) {
  if (depthwise_conv(s)) return depthwise_conv_forward(s, x, w, bias, y, scratch);
  if (gemm_conv(s)) return gemm_conv_forward(s, x, w, bias, y, scratch);
  const model::Conv2dShape run = conv_shape(s);
  const void* input = run.in_channels != s.in_channels ? padded_input(s, x) : x;
  dnn().conv_forward(run, input, filters_in(s, w, true), bias, y, scratch);
}
void CudaBackend::conv2d_backward(const model::Conv2dShape& s, const void* x, const void* dy, const float* w,
                                  void* dx, float* dw, float* dbias, model::Scratch scratch) {
  if (depthwise_conv(s)) return depthwise_conv_backward(s, x, dy, w, dx, dw, dbias, scratch);
  if (gemm_conv(s)) return gemm_conv_backward(s, x, dy, w, dx, dw, dbias, scratch);
  const model::Conv2dShape run = conv_shape(s);
  const bool padded = run.in_channels != s.in_channels;
  dnn().conv_backward_filter(run, padded ? padded_input(s, x) : x, dy, dw, dbias, scratch, s.in_channels);
  if (!dx) return;
  // The padded input is read: its buffer takes the padded data gradient next, in stream order.
  void* const data_gradient = padded ? state_->channel_padding.get() : dx;
  dnn().conv_backward_data(run, dy, filters_in(s, w, false), data_gradient, scratch);
  if (padded) {
    const kernels::ResizedRows pad = input_padding(s);
    kc::resize_rows({pad.rows, pad.to, pad.from, pad.type}, data_gradient, dx, stream());
  }
}

// Row-major, W stored out x in (kernels/cpu/dense.h): y (n x out) = x (n x in) * W^T (in x out), then the bias.
void CudaBackend::dense_forward(const model::DenseShape& s, const void* x, const float* w, const float* bias, void* y) {
  if (sixteen_bit(s.data)) {
    const void* w16 = weights_in(s.data, w, s.weight_elements(), true);
    blas().gemm(Transpose::no, Transpose::yes, s.batch, s.out, s.in, 1.0f, s.data, x, s.in, w16, s.in, 0.0f, s.data, y,
                s.out);
  } else {
    blas().sgemm(Transpose::no, Transpose::yes, s.batch, s.out, s.in, 1.0f, f32(x), s.in, w, s.in, 0.0f, f32(y), s.out);
  }
  if (bias) kc::add_bias_rows(s.batch, s.out, bias, s.data, y, stream());
}

void CudaBackend::dense_backward(const model::DenseShape& s, const void* x, const float* w, const void* dy, void* dx,
                                 float* dw, float* dbias) {
  const bool mixed = sixteen_bit(s.data);
  // dW (out x in) += dy^T (out x n) * x (n x in); beta 1 accumulates, in fp32 whatever the activations' type.
  if (mixed)
    blas().gemm(Transpose::yes, Transpose::no, s.out, s.in, s.batch, 1.0f, s.data, dy, s.out, x, s.in, 1.0f,
                ElementType::f32, dw, s.in);
  else
    blas().sgemm(Transpose::yes, Transpose::no, s.out, s.in, s.batch, 1.0f, f32(dy), s.out, f32(x), s.in, 1.0f, dw,
                 s.in);
  if (dbias) kc::bias_grad_rows(s.batch, s.out, s.data, dy, dbias, stream());
  if (!dx) return;
  // dx (n x in) = dy (n x out) * W (out x in)
  if (mixed)
    blas().gemm(Transpose::no, Transpose::no, s.batch, s.in, s.out, 1.0f, s.data, dy, s.out,
                weights_in(s.data, w, s.weight_elements(), false), s.in, 0.0f, s.data, dx, s.in);
  else
    blas().sgemm(Transpose::no, Transpose::no, s.batch, s.in, s.out, 1.0f, f32(dy), s.out, w, s.in, 0.0f, f32(dx),
                 s.in);
}

namespace {

// The fusion pass fuses a ReLU into batch norm only where fusion_rules() say so (16-bit activations, our kernels),
// and never a pool or a ReLU6 (the kernels' ReLU has no ceiling); anything else asked is a bug.
void refuse_unfusable(const model::BatchNormShape& s, const model::BatchNormSettings& settings) {
  if (settings.pool || settings.relu6 || (settings.relu && !sixteen_bit(s.data)))
    throw Error(ExitCode::internal,
                fmt::format("batch norm with a fused {} on {} activations asked of the CUDA backend",
                            settings.pool ? "max pool" : settings.relu6 ? "ReLU6" : "ReLU",
                            kernels::element_type_name(s.data)));
}

// The join is fused where fusion_rules() say so, on a batch norm that fused nothing itself.
void refuse_unfused_join(const model::BatchNormShape& s, const model::BatchNormSettings& settings) {
  if (!sixteen_bit(s.data) || settings.relu || settings.pool)
    throw Error(ExitCode::internal, fmt::format("batch norm with a fused residual join on {} activations{} asked of "
                                                "the CUDA backend", kernels::element_type_name(s.data),
                                                settings.relu || settings.pool ? ", and its own ReLU or pool" : ""));
}

}  // namespace

std::vector<model::FusionRule> CudaBackend::fusion_rules() const {
  const auto on_our_kernels = [](const model::FusionSite& site) { return sixteen_bit(site.data); };
  return {{"batchnorm", {"relu"}, on_our_kernels}, {"batchnorm", {std::string(model::kJoin)}, on_our_kernels}};
}

namespace {
// An NHWC tensor is NCHW blocked by all its channels (nChw{C}c): so our 16-bit batch-norm kernels are told.
model::BatchNormShape as_kernels_read(const model::BatchNormShape& s, bool nhwc) {
  if (!nhwc) return s;
  model::BatchNormShape blocked = s;
  blocked.in_block = blocked.out_block = s.channels;
  return blocked;
}
}  // namespace

// The proven path: the sums go to the host and back, as the group's MPI all-reduce (dist/batch_statistics_group.h)
// takes host memory, and the kernels after it wait for them anyway. Pageable memory: a copy to the device returns
// once the source has been read, so the next call may refill it.
// Under gpu.candidate_kernels a group of MPI ranks gets an NCCL communicator of its own (nccl_batchnorm_sums.h)
// that adds the sums on the device in stream order: no copies, and the host never waits. A group that is no MPI
// communicator (a test's stand-in) keeps the host path.
void CudaBackend::synchronise_batchnorm(std::shared_ptr<model::BatchStatisticsGroup> group) {
  if (const auto* ranks = dynamic_cast<const dist::MpiRankGroup*>(group.get());
      ranks && state_->options.candidate_kernels) {
    state_->batchnorm_nccl =
        std::make_unique<NcclBatchNormSums>(ranks->comm(), *this, state_->options.collective_timeout_s);
    state_->batchnorm_group.add_over_ranks = [sums = state_->batchnorm_nccl.get()](double* values, std::size_t count,
                                                                                  kc::Stream on) {
      sums->add(values, count, on);
    };
    return;
  }
  // The wait for the sums is bounded: the compute stream waits for the last step's gradient all-reduce, which a
  // dead peer's NCCL stalls, and this wait runs outside the reducer's and the watchdog's.
  auto landed = std::make_shared<CudaEvent>(make_event(false));
  state_->batchnorm_group.add_over_ranks = [this, group = std::move(group), landed](double* values, std::size_t count,
                                                                                   kc::Stream on) {
    std::vector<double>& host = state_->batchnorm_group_sums;
    host.resize(count);
    CUDA_CHECK(cudaMemcpyAsync(host.data(), values, count * sizeof(double), cudaMemcpyDeviceToHost, on));
    CUDA_CHECK(cudaEventRecord(landed->get(), on));
    wait_for_events_within({landed->get()}, state_->options.collective_timeout_s, [count] {
      return fmt::format("the device work before the synchronised batch norm's sums ({} doubles)", count);
    });
    group->all_reduce(host);
    CUDA_CHECK(cudaMemcpyAsync(values, host.data(), count * sizeof(double), cudaMemcpyHostToDevice, on));
  };
}
const kc::BatchNormGroup* CudaBackend::batchnorm_group() const {
  return state_->batchnorm_group.add_over_ranks ? &state_->batchnorm_group : nullptr;
}

void CudaBackend::batchnorm_forward_train(const model::BatchNormShape& s, const model::BatchNormSettings& settings,
                                          const void* x, const model::BatchNormBuffers& b, void* y) {
  refuse_unfusable(s, settings);
  const model::BatchNormShape k = as_kernels_read(s, nhwc(s.data));
  if (sixteen_bit(s.data) || batchnorm_group())
    return kc::batchnorm_forward_train(k, x, b.gamma, b.beta, settings.momentum, settings.epsilon, b.running_mean,
                                       b.running_var, {.relu = settings.relu}, y, b.saved_mean, b.saved_inv_std,
                                       batchnorm_scratch(k), stream(), batchnorm_group());
  dnn().batchnorm_forward_train(s, f32(x), b.gamma, b.beta, settings.momentum, settings.epsilon, b.running_mean,
                                b.running_var, f32(y), b.saved_mean, b.saved_inv_std);
}
void CudaBackend::batchnorm_forward_infer(const model::BatchNormShape& s, const model::BatchNormSettings& settings,
                                          const void* x, const model::BatchNormBuffers& b, void* y) {
  refuse_unfusable(s, settings);
  const model::BatchNormShape k = as_kernels_read(s, nhwc(s.data));
  if (sixteen_bit(s.data))
    return kc::batchnorm_forward_infer(k, x, b.gamma, b.beta, b.running_mean, b.running_var, settings.epsilon,
                                       {.relu = settings.relu}, y, batchnorm_scratch(k), stream());
  dnn().batchnorm_forward_infer(s, f32(x), b.gamma, b.beta, b.running_mean, b.running_var, settings.epsilon, f32(y));
}
void CudaBackend::batchnorm_backward(const model::BatchNormShape& s, const model::BatchNormSettings& settings,
                                     const void* x, const void* /*y: the ReLU mask is found again from x*/,
                                     const void* dy, const model::BatchNormBuffers& b,
                                     void* dx, float* dgamma, float* dbeta) {
  refuse_unfusable(s, settings);
  const model::BatchNormShape k = as_kernels_read(s, nhwc(s.data));
  if (sixteen_bit(s.data) || batchnorm_group())
    return kc::batchnorm_backward(k, x, dy, {.relu = settings.relu}, b.gamma, b.beta, b.saved_mean, b.saved_inv_std,
                                  dx, dgamma, dbeta, batchnorm_scratch(k), stream(), batchnorm_group());
  dnn().batchnorm_backward(s, f32(x), f32(dy), b.gamma, b.saved_mean, b.saved_inv_std, settings.epsilon, f32(dx),
                           dgamma, dbeta);
}

// The fused join's operations, asked for on 16-bit activations only (fusion_rules): our kernels add the shortcut and
// apply the ReLU in their output pass; cuDNN's fp32 batch norm would gain nothing from it.

void CudaBackend::batchnorm_add_relu_forward_train(const model::BatchNormShape& s,
                                                   const model::BatchNormSettings& settings, const void* x,
                                                   const void* shortcut, const model::BatchNormBuffers& b, void* y) {
  refuse_unfused_join(s, settings);
  const model::BatchNormShape k = as_kernels_read(s, nhwc(s.data));
  kc::batchnorm_forward_train(k, x, b.gamma, b.beta, settings.momentum, settings.epsilon, b.running_mean,
                              b.running_var, {.relu = true, .shortcut = shortcut}, y, b.saved_mean, b.saved_inv_std,
                              batchnorm_scratch(k), stream(), batchnorm_group());
}
void CudaBackend::batchnorm_add_relu_forward_infer(const model::BatchNormShape& s,
                                                   const model::BatchNormSettings& settings, const void* x,
                                                   const void* shortcut, const model::BatchNormBuffers& b, void* y) {
  refuse_unfused_join(s, settings);
  const model::BatchNormShape k = as_kernels_read(s, nhwc(s.data));
  kc::batchnorm_forward_infer(k, x, b.gamma, b.beta, b.running_mean, b.running_var, settings.epsilon,
                              {.relu = true, .shortcut = shortcut}, y, batchnorm_scratch(k), stream());
}
void CudaBackend::batchnorm_add_relu_backward(const model::BatchNormShape& s, const model::BatchNormSettings& settings,
                                              const void* x, const void* y, const void* dy,
                                              const model::BatchNormBuffers& b, void* dx, void* dshortcut,
                                              float* dgamma, float* dbeta) {
  refuse_unfused_join(s, settings);
  const model::BatchNormShape k = as_kernels_read(s, nhwc(s.data));
  kc::batchnorm_backward(k, x, dy, {.join_y = y, .dshortcut = dshortcut}, b.gamma, b.beta, b.saved_mean,
                         b.saved_inv_std, dx, dgamma, dbeta, batchnorm_scratch(k), stream(), batchnorm_group());
}

// Our pooling kernels take 16-bit tensors, NCHW or NHWC; fp32 ones go to cuDNN.
std::size_t CudaBackend::pool_saved_bytes(const model::PoolShape& s, model::PoolMode mode) const {
  return sixteen_bit(s.data) ? kc::pool_saved_bytes(s, mode) : 0;
}
void CudaBackend::pool_forward(const model::PoolShape& s, model::PoolMode mode, const void* x, void* y, void* saved) {
  if (sixteen_bit(s.data))
    return kc::pool_forward(s, mode, activation_layout(s.data), x, y, static_cast<uint16_t*>(saved), stream());
  dnn().pool_forward(s, mode, x, y);
}
void CudaBackend::pool_backward(const model::PoolShape& s, model::PoolMode mode, const void* x, const void* y,
                                const void* dy, void* dx, const void* saved) {
  if (sixteen_bit(s.data))
    return kc::pool_backward(s, mode, activation_layout(s.data), dy, static_cast<const uint16_t*>(saved), dx,
                             stream());
  dnn().pool_backward(s, mode, x, y, dy, dx);
}

void CudaBackend::softmax_cross_entropy(int batch, int classes, const float* logits, const int32_t* labels,
                                        const model::LossSettings& loss, float* dlogits, model::LossTotals* totals) {
  State& s = *state_;
  s.loss_workspace.ensure(kc::softmax_cross_entropy_workspace_bytes(batch), s.stream);
  kc::softmax_cross_entropy(batch, classes, logits, labels, loss, dlogits, s.loss_workspace.get(), totals, s.stream);
}

void CudaBackend::soft_target_cross_entropy(int batch, int classes, const float* logits, const float* targets,
                                            const model::LossSettings& loss, float* dlogits,
                                            model::LossTotals* totals) {
  State& s = *state_;
  s.loss_workspace.ensure(kc::softmax_cross_entropy_workspace_bytes(batch), s.stream);
  kc::soft_target_cross_entropy(batch, classes, logits, targets, loss, dlogits, s.loss_workspace.get(), totals,
                                s.stream);
}

// gpu.cuda_graphs: within a graphed step's pass the updates take their numbers from the slot's table
// (step_graphs.h): null outside one. The fill pass gives no device address: the call queues nothing.
CudaStepGraphs* CudaBackend::scalars_pass() const {
  CudaStepGraphs* graphs = state_->step_graphs.get();
  return graphs && graphs->taking_scalars() ? graphs : nullptr;
}

void CudaBackend::sgd_update(int64_t n, const model::SgdStep& step, const uint32_t* decay_mask, float* grad,
                             float* velocity, float* param) {
  if (CudaStepGraphs* graphs = scalars_pass()) {
    if (const auto* scalars = graphs->next(kc::step_scalars(step)))
      kc::sgd_momentum_update(n, step, scalars, decay_mask, grad, velocity, param, stream());
    return;
  }
  kc::sgd_momentum_update(n, step, decay_mask, grad, velocity, param, stream());
}
void CudaBackend::adamw_update(int64_t n, const model::AdamStep& step, const uint32_t* decay_mask, float* grad,
                               float* m, float* v, float* param) {
  if (CudaStepGraphs* graphs = scalars_pass()) {
    if (const auto* scalars = graphs->next(kc::step_scalars(step)))
      kc::adamw_update(n, step, scalars, decay_mask, grad, m, v, param, stream());
    return;
  }
  kc::adamw_update(n, step, decay_mask, grad, m, v, param, stream());
}
void CudaBackend::ema_update(int64_t n, const model::EmaStep& step, const float* param, float* ema) {
  kc::ema_update(n, step, param, ema, stream());
}
// The norms' scratch is sized at the first update (a few KiB) and kept.
void CudaBackend::lars_update(int tensors, const model::TensorRange* ranges, const model::LarsStep& step,
                              float* grad, float* velocity, float* param) {
  State& s = *state_;
  CudaStepGraphs* graphs = scalars_pass();
  const kernels::UpdateScalars* scalars = graphs ? graphs->next(kc::step_scalars(step)) : nullptr;
  if (graphs && !scalars) return;
  s.norm_scratch.ensure(kc::layerwise_scratch_bytes(tensors), s.stream);
  if (scalars)
    kc::lars_update(tensors, ranges, step, scalars, grad, velocity, param, s.norm_scratch.get(), s.stream);
  else
    kc::lars_update(tensors, ranges, step, grad, velocity, param, s.norm_scratch.get(), s.stream);
}
void CudaBackend::lamb_update(int tensors, const model::TensorRange* ranges, const model::AdamStep& step,
                              float* grad, float* m, float* v, float* param) {
  State& s = *state_;
  CudaStepGraphs* graphs = scalars_pass();
  const kernels::UpdateScalars* scalars = graphs ? graphs->next(kc::step_scalars(step)) : nullptr;
  if (graphs && !scalars) return;
  s.norm_scratch.ensure(kc::layerwise_scratch_bytes(tensors), s.stream);
  if (scalars)
    kc::lamb_update(tensors, ranges, step, scalars, grad, m, v, param, s.norm_scratch.get(), s.stream);
  else
    kc::lamb_update(tensors, ranges, step, grad, m, v, param, s.norm_scratch.get(), s.stream);
}

void CudaBackend::normalize_pixels(const model::PixelShape& s, const uint8_t* x, const float* mean,
                                   const float* stddev, float* y) {
  kc::normalize_pixels(s, x, mean, stddev, y, stream());
}

}  // namespace ringtrain::backend
