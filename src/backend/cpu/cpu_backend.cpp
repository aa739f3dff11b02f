// Owns the CPU backend: aligned host memory, copies, and each operation forwarded to kernels/cpu.
#include "backend/cpu/cpu_backend.h"

#include <fmt/format.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "common/error.h"
#include "common/host_memory.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/batchnorm.h"
#include "kernels/cpu/denormals.h"
#include "kernels/cpu/dense.h"
#include "kernels/cpu/element_conversion.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/gelu.h"
#include "kernels/cpu/stored_elementwise.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/adamw.h"
#include "kernels/cpu/ema.h"
#include "kernels/cpu/lamb.h"
#include "kernels/cpu/lars.h"
#include "kernels/cpu/layer_norm.h"
#include "kernels/cpu/patches.h"
#include "kernels/cpu/pixel_norm.h"
#include "kernels/cpu/plane_scale.h"
#include "kernels/cpu/pooling.h"
#include "kernels/cpu/reorder_layout.h"
#include "kernels/cpu/sgd.h"
#include "kernels/cpu/softmax_cross_entropy.h"
#include "kernels/cpu/sum_squares.h"
#include "kernels/cpu/token_table.h"
#include "util/clock.h"

namespace ringtrain::backend {
namespace {

namespace kc = kernels::cpu;

// The work is done when the call returns, so the copy is made at start().
class HostReadback final : public model::Readback {
 public:
  explicit HostReadback(std::size_t bytes) : bytes_(bytes) {}
  void start(const void* src) override { std::memcpy(bytes_.data(), src, bytes_.size()); }
  bool ready() override { return true; }
  const void* wait() override { return bytes_.data(); }

 private:
  std::vector<unsigned char> bytes_;
};

// Work is done when its call returns, so a mark is dated when it is made.
class HostClock final : public model::DeviceClock {
 public:
  explicit HostClock(int capacity) : times_(static_cast<size_t>(capacity), 0.0) {}
  void mark(int id) override { times_.at(static_cast<size_t>(id)) = util::now_s(); }
  double elapsed(int from, int to) override { return host_time(to) - host_time(from); }
  double host_time(int id) override { return times_.at(static_cast<size_t>(id)); }

 private:
  std::vector<double> times_;
};

}  // namespace

CpuBackend::CpuBackend(int threads, kc::DnnlMath math, kc::OperandRounding rounding)
    : threads_(threads), math_(math), dnnl_(threads, math), rounded_(rounding) {
  if (math == kc::DnnlMath::bf16 && rounded_.active())
    throw Error(ExitCode::internal, "the CPU backend was asked for oneDNN's bf16 products and rounded operands at once");
  kc::set_compute_threads(threads);
  kc::flush_denormals(threads);
}

std::string CpuBackend::description() const {
  const std::string products =
      math_ == kc::DnnlMath::bf16 ? " with bf16 operands"
      : rounded_.active()
          ? fmt::format(", products of operands rounded to {} (emulated)", kc::operand_rounding_name(rounded_.rounding()))
          : std::string();
  const std::string layout = !nhwc_.enabled() ? std::string()
                             : native_nhwc_    ? ", activations NHWC (run.cpu_layout)"
                                               : ", activations NHWC, convolutions staged through NCHW";
  return fmt::format("cpu, {} compute thread{}, {}{}, {}{}", threads_, threads_ == 1 ? "" : "s",
                     kc::DnnlOps::version(), products, kc::blas_description(), layout);
}

model::DeviceBuffer CpuBackend::allocate(std::size_t bytes) {
  // 64-byte alignment: whole cache lines and AVX-512-safe loads for the BLAS and the vectorised loops.
  const std::size_t rounded = (std::max<std::size_t>(bytes, 1) + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded);
  if (!p) {
    const AvailableMemory memory = available_memory();
    throw JobFileError(fmt::format("cannot allocate {} of host memory ({}); lower train.batch_per_rank or "
                                   "the model's size, or run fewer ranks per node{}",
                                   byte_size_text(static_cast<double>(rounded)), memory.text(), memory.or_remedy()));
  }
  std::memset(p, 0, rounded);
  allocated_ += rounded;
  return model::DeviceBuffer(p, bytes, [](void* q, std::size_t) { std::free(q); });
}

std::size_t CpuBackend::memory_available() const { return host_memory_available(); }

void CpuBackend::to_device(void* device_dst, const void* host_src, std::size_t bytes) {
  if (bytes) std::memcpy(device_dst, host_src, bytes);
}

void CpuBackend::to_host(void* host_dst, const void* device_src, std::size_t bytes) {
  if (bytes) std::memcpy(host_dst, device_src, bytes);
}

std::unique_ptr<model::Readback> CpuBackend::make_readback(std::size_t bytes) {
  return std::make_unique<HostReadback>(bytes);
}

std::unique_ptr<model::DeviceClock> CpuBackend::make_clock(int capacity) { return std::make_unique<HostClock>(capacity); }

std::size_t CpuBackend::working_bytes() const {
  return conv_workspace_.bytes() + batchnorm_workspace_.bytes() + attention_workspace_.bytes() + dnnl_.working_bytes() + rounded_.bytes() +
         views_.bytes() + nhwc_.bytes() + as_product_.x.capacity() + as_product_.y.capacity() +
         as_product_.dx.capacity();
}

void CpuBackend::zero(void* y, std::size_t bytes) {
  if (bytes) std::memset(y, 0, bytes);
}
void CpuBackend::fill(int64_t n, float value, float* y) { kc::fill(n, value, y); }
void CpuBackend::cast(kernels::Elements from, const void* x, kernels::ElementType to, void* y) {
  if (from.type == to) return copy(from, x, y);
  const kernels::Elements out{from.n, to};
  if (to == kernels::ElementType::f32) return kc::widen_on_threads(from, x, static_cast<float*>(y));
  if (from.type == kernels::ElementType::f32) return kc::narrow_on_threads(static_cast<const float*>(x), out, y);
  kc::widen_on_threads(from, x, views_.write(0, out, y));  // between the 16-bit types, through an fp32 copy
  views_.store(0, out, y);
}
void CpuBackend::copy(kernels::Elements n, const void* x, void* y) {
  if (n.n > 0 && x != y) std::memcpy(y, x, n.bytes());
}
void CpuBackend::add(kernels::Elements n, const void* a, const void* b, void* y) { kc::add(n, a, b, y); }
void CpuBackend::accumulate(kernels::Elements n, const void* x, void* y) { kc::accumulate(n, x, y); }
void CpuBackend::unscale(int64_t n, float factor, float* y, int32_t* nonfinite) { kc::unscale(n, factor, y, nonfinite); }
void CpuBackend::scale(int64_t n, float factor, float* y) { kc::scale(n, factor, y); }
void CpuBackend::sum_squares(int64_t n, const float* x, double* total) { *total = kc::sum_squares(n, x); }
void CpuBackend::relu_forward(kernels::Elements n, const void* x, void* y) { kc::relu_forward(n, x, y); }
void CpuBackend::relu_backward(kernels::Elements n, const void* y, const void* dy, void* dx) {
  kc::relu_backward(n, y, dy, dx);
}
// fp32 and bf16 GELU, SiLU and sigmoid on oneDNN's vector kernels (kernels/cpu/dnnl_eltwise.h), except GELU's
// derivative, on our vector kernel in every type (kernels/cpu/gelu.h: one exp for Phi and phi; oneDNN's took 1.8x its
// time in ViT-S/16's step), as is its forward where oneDNN has no JIT kernel for the type; the rest on the loops.
void CpuBackend::activation_forward(kernels::Activation a, kernels::Elements n, const void* x, void* y) {
  if (dnnl_.runs_activation(a, n)) return dnnl_.activation_forward(a, n, x, y);
  if (a == kernels::Activation::gelu) return kc::gelu_forward(threads_, n, x, y);
  kc::activation_forward(a, n, x, y);
}
void CpuBackend::activation_backward(kernels::Activation a, kernels::Elements n, const void* x, const void* dy,
                                     void* dx) {
  if (a == kernels::Activation::gelu) return kc::gelu_backward(threads_, n, x, dy, dx);
  if (dnnl_.runs_activation(a, n)) return dnnl_.activation_backward(a, n, x, dy, dx);
  kc::activation_backward(a, n, x, dy, dx);
}
// Dropout's mask is drawn over the whole tensor, so it widens and narrows whole tensors.
void CpuBackend::dropout_forward(const kernels::Planes& x_planes, float p, const kernels::LayerSeed& seed,
                                 const void* x, void* y, uint8_t* mask) {
  const kernels::Elements n{x_planes.elements(), x_planes.type};
  kc::dropout_forward(n.n, p, kernels::layer_seed(seed), views_.read(0, n, x), views_.write(2, n, y), mask,
                      kernels::nchw_index(x_planes, activation_layout(x_planes.type)));
  views_.store(2, n, y);
}
void CpuBackend::dropout_backward(kernels::Elements n, float p, const uint8_t* mask, const void* dy, void* dx) {
  kc::dropout_backward(n.n, p, mask, views_.read(0, n, dy), views_.write(2, n, dx));
  views_.store(2, n, dx);
}
void CpuBackend::plane_sums(const kernels::Planes& p, float factor, const void* a, const void* b, float* sums) {
  const kernels::Elements n{p.elements(), p.type};
  kc::plane_sums(p, activation_layout(p.type), factor, views_.read(0, n, a), views_.read(1, n, b),
                 sums);
}
void CpuBackend::plane_scale(const kernels::Planes& p, const void* x, const float* scale, const float* shift,
                             void* y) {
  const kernels::Elements n{p.elements(), p.type};
  kc::plane_scale(p, activation_layout(p.type), views_.read(0, n, x), scale, shift, views_.write(2, n, y));
  views_.store(2, n, y);
}

void CpuBackend::layer_norm_forward(const kernels::Planes& p, float epsilon, const void* x,
                                    const model::LayerNormTensors& t, void* y) {
  kc::layer_norm_forward(p, activation_layout(p.type), epsilon, x, t, y);
}
void CpuBackend::layer_norm_backward(const kernels::Planes& p, const void* x, const void* dy,
                                     const model::LayerNormTensors& t, void* dx, float* dgamma, float* dbeta) {
  kc::layer_norm_backward(p, activation_layout(p.type), x, dy, t, dx, dgamma, dbeta);
}
// The token kernels read and write stored values themselves: a range of tokens is a small share of its tensor, not
// worth widening whole.
void CpuBackend::copy_tokens(const kernels::TokenCopy& c, const void* x, void* y) {
  kc::copy_tokens(c, activation_layout(c.from.type), x, y);
}
void CpuBackend::add_token_table(const kernels::TokenSpan& s, const void* x, const float* table, void* y) {
  kc::add_token_table(s, activation_layout(s.tokens.type), x, table, y);
}
void CpuBackend::token_table_gradient(const kernels::TokenSpan& s, const void* dy, float* dtable) {
  kc::token_table_gradient(s, activation_layout(s.tokens.type), dy, dtable);
}

void CpuBackend::reorder_activation(const kernels::Planes& p, model::ActivationLayout to, const void* x, void* y) {
  kernels::cpu::reorder_layout(p, to, x, y);
}

// An empty batch (possible for the last evaluation batch of a tiny split) goes to our kernels, which do nothing.
bool CpuBackend::on_dnnl(const model::Conv2dShape& s) { return s.batch > 0 && dnnl_.runs_conv2d(s); }

std::optional<model::Conv2dShape> CpuBackend::on_dnnl_nhwc(const model::Conv2dShape& s) {
  if (!native_nhwc_ || !dnnl_.takes_stored(s.data)) return std::nullopt;
  model::Conv2dShape native = s;
  native.in_block = s.in_channels;
  native.out_block = s.filters;
  if (!on_dnnl(native)) return std::nullopt;
  return native;
}
bool CpuBackend::pointwise(const model::Conv2dShape& s) {
  return s.kernel_h == 1 && s.kernel_w == 1 && s.stride == 1 && s.padding == 0 && s.groups == 1;
}
bool CpuBackend::runs_as_product(const model::Conv2dShape& s) { return pointwise(s) || kc::conv2d_is_patchwise(s); }
model::DenseShape CpuBackend::pointwise_dense(const model::Conv2dShape& s) {
  return {s.batch * s.in_h * s.in_w, s.in_channels, s.filters, s.data};
}
// NHWC images' patches are the rows of a dense product (kernels/cpu/patches.h): oneDNN's convolutions of three
// input channels with a 16x16 kernel of stride 16 took 7 ms for ViT-S/16's filter gradient at 64x64, batch 32,
// where its matmul takes the same product over the patches in a fraction of that (perf/results/2026-12-01-vit-patches-cpu.md).
bool CpuBackend::on_patches(const model::Conv2dShape& s) const {
  return native_nhwc_ && dnnl_.takes_stored(s.data) && s.batch > 0 && kc::conv2d_is_patchwise(s);
}
// bf16 pointwise convolutions over NCHW planes of at most 4 positions (MobileNetV2's and EfficientNet's last stage
// at 64x64: 2x2) as oneDNN's matrix product over the positions, between reorders: oneDNN's bf16 convolution took the
// weight gradient of 1x1, 320 -> 1280 over 2x2 planes, batch 32, in 3 ms, twice its fp32 one. MobileNetV2 bf16 at
// 64x64: 423-442 -> 453-465 samples/s, alternated (perf/results/2026-12-01-mobilenet-positions-cpu.md). Over 4x4
// planes the reorders cost more than the product gains, and in fp32 the convolution is the faster (both measured).
bool CpuBackend::on_positions(const model::Conv2dShape& s) const {
  constexpr int64_t kSmallPlane = 4;
  return !nhwc_.enabled() && math_ == kc::DnnlMath::bf16 && s.data == kernels::ElementType::bf16 && s.batch > 0 &&
         pointwise(s) && s.in_block == 1 && s.out_block == 1 && int64_t{s.in_h} * s.in_w <= kSmallPlane;
}
// A patch embedding's rows hold at most its input's values (all of them where the patches tile the planes).
void* CpuBackend::grown(std::vector<std::byte>& buffer, const kernels::Planes& p) {
  const std::size_t bytes = static_cast<std::size_t>(p.elements()) * kernels::element_bytes(p.type);
  if (buffer.size() < bytes) buffer.resize(bytes);
  return buffer.data();
}
model::ScratchBytes CpuBackend::conv2d_prepare(const model::Conv2dShape& s) {
  if (on_positions(s) || on_patches(s)) return {};
  const auto native = on_dnnl_nhwc(s);
  if (native && pointwise(s)) return {};
  dnnl_.conv2d_prepare(native ? *native : s);
  return {};
}
namespace {
kernels::Planes input_planes(const model::Conv2dShape& s) {
  return {s.batch, s.in_channels, int64_t{s.in_h} * s.in_w, s.data};
}
kernels::Planes output_planes(const model::Conv2dShape& s) {
  return {s.batch, s.filters, int64_t{s.out_h()} * s.out_w(), s.data};
}
kernels::Elements input_elements(const model::Conv2dShape& s) {
  return {int64_t{s.batch} * s.in_channels * s.in_h * s.in_w, s.data};
}
kernels::Elements output_elements(const model::Conv2dShape& s) {
  return {int64_t{s.batch} * s.filters * s.out_h() * s.out_w(), s.data};
}
}  // namespace

int CpuBackend::conv2d_output_block(const model::Conv2dShape& s) {
  return on_dnnl(s) && !nhwc_.enabled() && !on_positions(s) ? dnnl_.conv2d_output_block(s) : 1;
}
int CpuBackend::conv2d_input_block(const model::Conv2dShape& s) {
  return on_dnnl(s) && !nhwc_.enabled() && !on_positions(s) ? dnnl_.conv2d_input_block(s) : 1;
}
std::string CpuBackend::conv2d_method(const model::Conv2dShape& s) {
  if (on_positions(s)) return "oneDNN matmul over the positions, between NHWC reorders";
  if (on_patches(s)) return "oneDNN matmul over the NHWC patches";
  if (const auto native = on_dnnl_nhwc(s))
    return pointwise(s) ? "oneDNN matmul over the NHWC positions"
                        : "oneDNN on NHWC " + dnnl_.conv2d_implementation(*native);
  if (on_dnnl(s)) return "oneDNN " + dnnl_.conv2d_implementation(s);
  return kc::conv2d_runs_direct(s) ? "direct kernel; im2col + OpenBLAS SGEMM for the data gradient"
                                   : "im2col + OpenBLAS SGEMM";
}

// Products read their operands as the GPU's tensor cores would: activations in their stored type and, under
// reduced precision, every operand rounded to it (rounded_, or oneDNN's bf16 staging). A 16-bit activation needs no
// rounding: it is one of the values rounding gives (stores_activations_in).
const void* CpuBackend::rounded_activation(int slot, kernels::Elements x, const void* data) {
  return x.type == kernels::ElementType::f32 ? rounded_.operand(slot, x.n, static_cast<const float*>(data)) : data;
}
// The same as fp32 for a product that reads fp32 only: a 16-bit activation widened into views_' slot `view_slot`.
const float* CpuBackend::fp32_operand(int slot, int view_slot, kernels::Elements x, const void* data) {
  if (x.type == kernels::ElementType::f32) return rounded_.operand(slot, x.n, static_cast<const float*>(data));
  return views_.read(view_slot, x, data);
}

// Our im2col kernels read and write the stored type themselves, an image at a time, and so do oneDNN's where its
// products read that type (bf16 on bf16 operands); otherwise oneDNN gets fp32 views.
void CpuBackend::conv2d_forward(const model::Conv2dShape& s, const void* x_stored, const float* w, const float* bias,
                                void* y_stored, model::Scratch) {
  if (on_positions(s)) {
    const kernels::Planes in = input_planes(s), out = output_planes(s);
    void* const x = grown(as_product_.x, in), *const y = grown(as_product_.y, out);
    kc::reorder_layout(in, model::ActivationLayout::nhwc, x_stored, x);
    dense_forward(pointwise_dense(s), x, w, bias, y);
    return kc::reorder_layout(out, model::ActivationLayout::nchw, y, y_stored);
  }
  if (on_patches(s)) {
    void* const patches = grown(as_product_.x, input_planes(s));
    kc::gather_patches(s, x_stored, patches);
    return dense_forward(kc::conv2d_patch_product(s), patches, w, bias, y_stored);
  }
  if (const auto native = on_dnnl_nhwc(s)) {
    if (pointwise(s)) return dense_forward(pointwise_dense(s), x_stored, w, bias, y_stored);
    return dnnl_.conv2d_forward(*native, rounded_activation(0, input_elements(s), x_stored),
                                rounded_.operand(1, s.weight_elements(), w), bias, y_stored);
  }
  const void* x_data = nhwc_.read(0, input_planes(s), x_stored);
  const auto y_nchw = nhwc_.write(1, output_planes(s), y_stored);
  void* const y_data = y_nchw.data();
  const kernels::Elements xe = input_elements(s), ye = output_elements(s);
  w = rounded_.operand(1, s.weight_elements(), w);
  if (!on_dnnl(s)) return kc::conv2d_forward(s, rounded_activation(0, xe, x_data), w, bias, y_data, conv_workspace_);
  if (dnnl_.takes_stored(s.data)) return dnnl_.conv2d_forward(s, rounded_activation(0, xe, x_data), w, bias, y_data);
  const float* x = fp32_operand(0, 0, xe, x_data);
  dnnl_.conv2d_forward(s, x, w, bias, views_.write(2, ye, y_data));
  views_.store(2, ye, y_data);
}
void CpuBackend::conv2d_backward(const model::Conv2dShape& s, const void* x_stored, const void* dy_stored,
                                 const float* w, void* dx_stored, float* dw, float* dbias, model::Scratch) {
  if (on_positions(s)) {
    const kernels::Planes in = input_planes(s), out = output_planes(s);
    void* const x = grown(as_product_.x, in), *const dy = grown(as_product_.y, out);
    kc::reorder_layout(in, model::ActivationLayout::nhwc, x_stored, x);
    kc::reorder_layout(out, model::ActivationLayout::nhwc, dy_stored, dy);
    void* const dx = dx_stored ? grown(as_product_.dx, in) : nullptr;
    dense_backward(pointwise_dense(s), x, w, dy, dx, dw, dbias);
    if (dx) kc::reorder_layout(in, model::ActivationLayout::nchw, dx, dx_stored);
    return;
  }
  if (on_patches(s)) {
    void* const patches = grown(as_product_.x, input_planes(s));
    kc::gather_patches(s, x_stored, patches);
    void* const dpatches = dx_stored ? grown(as_product_.dx, input_planes(s)) : nullptr;
    dense_backward(kc::conv2d_patch_product(s), patches, w, dy_stored, dpatches, dw, dbias);
    if (dx_stored) kc::scatter_patches(s, dpatches, dx_stored);
    return;
  }
  if (const auto native = on_dnnl_nhwc(s)) {
    if (pointwise(s)) return dense_backward(pointwise_dense(s), x_stored, w, dy_stored, dx_stored, dw, dbias);
    return dnnl_.conv2d_backward(*native, rounded_activation(0, input_elements(s), x_stored),
                                 rounded_activation(1, output_elements(s), dy_stored),
                                 rounded_.operand(2, s.weight_elements(), w), dx_stored, dw, dbias);
  }
  const void* x_data = nhwc_.read(0, input_planes(s), x_stored);
  const void* dy_data = nhwc_.read(1, output_planes(s), dy_stored);
  const auto dx_nchw = nhwc_.write(2, input_planes(s), dx_stored);
  void* const dx_data = dx_nchw.data();
  const kernels::Elements xe = input_elements(s), ye = output_elements(s);
  w = rounded_.operand(2, s.weight_elements(), w);
  if (!on_dnnl(s)) {
    const void* dy = rounded_activation(1, ye, dy_data);
    kc::conv2d_backward_filter(s, rounded_activation(0, xe, x_data), dy, dw, dbias, conv_workspace_);
    if (dx_data) kc::conv2d_backward_data(s, dy, w, dx_data, conv_workspace_);
    return;
  }
  if (dnnl_.takes_stored(s.data))
    return dnnl_.conv2d_backward(s, rounded_activation(0, xe, x_data), rounded_activation(1, ye, dy_data), w,
                                 dx_data, dw, dbias);
  const float* x = fp32_operand(0, 0, xe, x_data);
  const float* dy = fp32_operand(1, 1, ye, dy_data);
  dnnl_.conv2d_backward(s, x, dy, w, views_.write(2, xe, dx_data), dw, dbias);
  views_.store(2, xe, dx_data);
}

void CpuBackend::dense_forward(const model::DenseShape& s, const void* x_data, const float* w, const float* bias,
                               void* y_data) {
  if (s.batch <= 0) return;
  if (fp32_beside_16_bit(s))
    return kc::dense_forward(s.batch, s.in, s.out, static_cast<const float*>(x_data), w, bias,
                             static_cast<float*>(y_data));
  const kernels::Elements xe{int64_t{s.batch} * s.in, s.data}, ye{int64_t{s.batch} * s.out, s.data};
  if (dnnl_.takes_stored(s.data))
    return dnnl_.dense_forward(s, rounded_activation(0, xe, x_data), rounded_.operand(1, s.weight_elements(), w),
                               bias, y_data);
  const float* x = fp32_operand(0, 0, xe, x_data);
  w = rounded_.operand(1, s.weight_elements(), w);
  dnnl_.dense_forward(s, x, w, bias, views_.write(2, ye, y_data));
  views_.store(2, ye, y_data);
}
void CpuBackend::dense_backward(const model::DenseShape& s, const void* x_data, const float* w, const void* dy_data,
                                void* dx_data, float* dw, float* dbias) {
  if (s.batch <= 0) return;
  if (fp32_beside_16_bit(s))
    return kc::dense_backward(s.batch, s.in, s.out, static_cast<const float*>(x_data), w,
                              static_cast<const float*>(dy_data), static_cast<float*>(dx_data), dw, dbias);
  const kernels::Elements xe{int64_t{s.batch} * s.in, s.data}, ye{int64_t{s.batch} * s.out, s.data};
  w = rounded_.operand(1, s.weight_elements(), w);
  if (dnnl_.takes_stored(s.data))
    return dnnl_.dense_backward(s, rounded_activation(0, xe, x_data), w, rounded_activation(2, ye, dy_data), dx_data,
                                dw, dbias);
  const float* x = fp32_operand(0, 0, xe, x_data);
  const float* dy = fp32_operand(2, 1, ye, dy_data);
  dnnl_.dense_backward(s, x, w, dy, views_.write(2, xe, dx_data), dw, dbias);
  views_.store(2, xe, dx_data);
}

namespace {
// The kernels' view of a fused max pool: the planes it pools and where its winners go.
std::optional<kc::FusedPool> fused_pool(const model::BatchNormShape& s, const model::BatchNormSettings& settings,
                                        const model::BatchNormBuffers& b) {
  if (!settings.pool) return std::nullopt;
  return kc::FusedPool{settings.pool->h, settings.pool->w, b.pool_argmax, s.data};
}
kernels::Planes input_planes(const model::BatchNormShape& s) { return {s.batch, s.channels, s.spatial, s.data}; }
// The activation the batch norm took on (the fusion table's "relu" or "relu6"), as the kernels name it.
kc::FusedActivation fused_activation(const model::BatchNormSettings& settings) {
  if (!settings.relu) return kc::FusedActivation::none;
  return settings.relu6 ? kc::FusedActivation::relu6 : kc::FusedActivation::relu;
}
// y and dy: pooled by a fused pool.
kernels::Planes output_planes(const model::BatchNormShape& s, const model::BatchNormSettings& settings) {
  if (!settings.pool) return input_planes(s);
  return {s.batch, s.channels, int64_t{settings.pool->h / 2} * (settings.pool->w / 2), s.data};
}
}  // namespace

std::vector<model::FusionRule> CpuBackend::fusion_rules() const {
  return {{"batchnorm", {"relu"}},
          {"batchnorm", {"relu6"}},
          {"batchnorm", {"relu", "maxpool"}},
          {"batchnorm", {std::string(model::kJoin)}}};
}

// Blocked batch norm only with a fused pool: the one form whose blocked kernels run along the block both ways.
// Reading x blocked where that is faster at the setup batch than NCHW with the convolution's reorders
// (kc::blocked_input_fits); writing the pooled y blocked where x is blocked alike.
int CpuBackend::chain_block(const model::LayerOperation& producer, const model::LayerOperation& consumer) {
  if (nhwc_.enabled()) return 1;
  const auto* conv_out = std::get_if<model::Conv2dShape>(&producer);
  const auto* conv_in = std::get_if<model::Conv2dShape>(&consumer);
  const auto* norm_in = std::get_if<model::BatchNormOperation>(&consumer);
  const auto* norm_out = std::get_if<model::BatchNormOperation>(&producer);
  if (conv_out && norm_in && norm_in->tail.pool) {
    const int block = conv2d_output_block(*conv_out);
    return block > 1 && kc::blocked_input_fits(norm_in->shape, block) ? block : 1;
  }
  if (norm_out && conv_in && norm_out->tail.pool) {
    const int block = conv2d_input_block(*conv_in);
    return block > 1 && kc::blocked_output_supported(norm_out->shape, block) ? block : 1;
  }
  return 1;
}

void CpuBackend::synchronise_batchnorm(std::shared_ptr<model::BatchStatisticsGroup> group) {
  batchnorm_sync_ = [group = std::move(group)](std::span<double> sums) { group->all_reduce(sums); };
}

void CpuBackend::batchnorm_forward_train(const model::BatchNormShape& s, const model::BatchNormSettings& settings,
                                         const void* x, const model::BatchNormBuffers& b, void* y) {
  const auto pool = fused_pool(s, settings, b);
  const auto y_nchw = nhwc_.write(1, output_planes(s, settings), y);
  const void* x_nchw = nhwc_.read(0, input_planes(s), x);
  const auto momentum = static_cast<float>(settings.momentum), eps = static_cast<float>(settings.epsilon);
  if (batchnorm_sync_)
    return kc::batchnorm_forward_train_synced(s, x_nchw, b.gamma, b.beta, momentum, eps, b.running_mean,
                                              b.running_var, y_nchw.data(), b.saved_mean, b.saved_inv_std,
                                              fused_activation(settings), pool ? &*pool : nullptr, batchnorm_sync_);
  kc::batchnorm_forward_train(s, x_nchw, b.gamma, b.beta, momentum, eps, b.running_mean, b.running_var,
                              y_nchw.data(), b.saved_mean, b.saved_inv_std, fused_activation(settings),
                              pool ? &*pool : nullptr);
}
void CpuBackend::batchnorm_forward_infer(const model::BatchNormShape& s, const model::BatchNormSettings& settings,
                                         const void* x, const model::BatchNormBuffers& b, void* y) {
  const auto pool = fused_pool(s, settings, b);
  const auto y_nchw = nhwc_.write(1, output_planes(s, settings), y);
  kc::batchnorm_forward_infer(s, nhwc_.read(0, input_planes(s), x), b.gamma, b.beta, b.running_mean, b.running_var,
                              static_cast<float>(settings.epsilon), y_nchw.data(), fused_activation(settings),
                              pool ? &*pool : nullptr);
}
void CpuBackend::batchnorm_backward(const model::BatchNormShape& s, const model::BatchNormSettings& settings,
                                    const void* x, const void* y, const void* dy, const model::BatchNormBuffers& b,
                                    void* dx, float* dgamma, float* dbeta) {
  const auto pool = fused_pool(s, settings, b);
  const kernels::Planes out = output_planes(s, settings);
  const auto dx_nchw = nhwc_.write(3, input_planes(s), dx);
  const kc::FusedOutput fused{settings.relu ? nhwc_.read(1, out, y) : nullptr, fused_activation(settings)};
  const void* x_nchw = nhwc_.read(0, input_planes(s), x);
  const void* dy_nchw = nhwc_.read(2, out, dy);
  if (batchnorm_sync_)
    return kc::batchnorm_backward_synced(s, x_nchw, dy_nchw, b.gamma, b.saved_mean, b.saved_inv_std, dx_nchw.data(),
                                         dgamma, dbeta, fused, pool ? &*pool : nullptr, &batchnorm_workspace_,
                                         batchnorm_sync_);
  kc::batchnorm_backward(s, x_nchw, dy_nchw, b.gamma, b.saved_mean, b.saved_inv_std, dx_nchw.data(), dgamma, dbeta,
                         fused, pool ? &*pool : nullptr, &batchnorm_workspace_);
}

// Pooling runs on oneDNN's JIT kernels in our layout, except max pooling over windows that do not overlap, which
// runs on whichever of oneDNN's and ours the machine runs faster (backend/cpu/pool_choice.h): the same bits either
// way. Max pooling keeps what either needs for backward (oneDNN's workspace, or our argmax).
std::size_t CpuBackend::pool_saved_bytes(const model::PoolShape& s, model::PoolMode mode) const {
  if (s.batch <= 0) return 0;
  const std::size_t dnnl_bytes = dnnl_.pool_workspace_bytes(s, mode);
  return PoolChoice::choosable(s, mode) ? PoolChoice::saved_bytes(s, dnnl_bytes) : dnnl_bytes;
}
namespace {
kernels::Elements pool_input_elements(const model::PoolShape& s) {
  return {int64_t{s.batch} * s.channels * s.in_h * s.in_w, s.data};
}
kernels::Elements pool_output_elements(const model::PoolShape& s) {
  return {int64_t{s.batch} * s.channels * s.out_h() * s.out_w(), s.data};
}
kernels::Planes pool_input_planes(const model::PoolShape& s) {
  return {s.batch, s.channels, int64_t{s.in_h} * s.in_w, s.data};
}
kernels::Planes pool_output_planes(const model::PoolShape& s) {
  return {s.batch, s.channels, int64_t{s.out_h()} * s.out_w(), s.data};
}
}  // namespace
void CpuBackend::pool_forward(const model::PoolShape& s, model::PoolMode mode, const void* x_stored, void* y_stored,
                              void* saved) {
  if (s.batch <= 0) return;
  const kernels::Elements ye = pool_output_elements(s);
  const auto y_data = nhwc_.write(1, pool_output_planes(s), y_stored);
  const float* x = views_.read(0, pool_input_elements(s), nhwc_.read(0, pool_input_planes(s), x_stored));
  float* const y = views_.write(2, ye, y_data.data());
  if (PoolChoice::choosable(s, mode) && pool_choice_.kernel(s, dnnl_) == PoolKernel::ours)
    kc::maxpool_forward(s, x, y, static_cast<int32_t*>(saved));
  else
    dnnl_.pool_forward(s, mode, x, y, saved);
  views_.store(2, ye, y_data.data());
}
void CpuBackend::pool_backward(const model::PoolShape& s, model::PoolMode mode, const void*, const void*,
                               const void* dy_stored, void* dx_stored, const void* saved) {
  if (s.batch <= 0) return;
  const kernels::Elements xe = pool_input_elements(s);
  const auto dx_data = nhwc_.write(1, pool_input_planes(s), dx_stored);
  const float* dy = views_.read(1, pool_output_elements(s), nhwc_.read(0, pool_output_planes(s), dy_stored));
  float* const dx = views_.write(2, xe, dx_data.data());
  if (PoolChoice::choosable(s, mode) && pool_choice_.kernel(s, dnnl_) == PoolKernel::ours)
    kc::maxpool_backward(s, dy, static_cast<const int32_t*>(saved), dx);
  else
    dnnl_.pool_backward(s, mode, dy, dx, saved);
  views_.store(2, xe, dx_data.data());
}

// The kernels read and write the tensors as stored, in either layout and element type: no staging, no widening.
void CpuBackend::attention_forward(const model::AttentionShape& s, const void* qkv, void* y, void* probabilities,
                                   model::Scratch) {
  if (dnnl_.runs_attention(s))
    return dnnl_.attention_forward(s, activation_layout(s.data), qkv, y, probabilities);
  kc::attention_forward(s, activation_layout(s.data), qkv, y, probabilities, attention_workspace_);
}
// The kept probabilities are all backward needs: y is not read.
void CpuBackend::attention_backward(const model::AttentionShape& s, const void* qkv, const void*,
                                    const void* probabilities, const void* dy, void* dqkv, model::Scratch) {
  if (dnnl_.runs_attention(s))
    return dnnl_.attention_backward(s, activation_layout(s.data), qkv, probabilities, dy, dqkv);
  kc::attention_backward(s, activation_layout(s.data), qkv, probabilities, dy, dqkv, attention_workspace_);
}
std::string CpuBackend::attention_method(const model::AttentionShape& s) {
  if (!dnnl_.runs_attention(s)) return "";
  return "core: oneDNN batched matmul " + dnnl_.attention_implementation(s, activation_layout(s.data));
}

void CpuBackend::softmax_cross_entropy(int batch, int classes, const float* logits, const int32_t* labels,
                                       const model::LossSettings& loss, float* dlogits, model::LossTotals* totals) {
  kc::softmax_cross_entropy(batch, classes, logits, labels, loss, dlogits, *totals);
}

void CpuBackend::soft_target_cross_entropy(int batch, int classes, const float* logits, const float* targets,
                                           const model::LossSettings& loss, float* dlogits, model::LossTotals* totals) {
  kc::soft_target_cross_entropy(batch, classes, logits, targets, loss, dlogits, *totals);
}

void CpuBackend::sgd_update(int64_t n, const model::SgdStep& step, const uint32_t* decay_mask, float* grad,
                            float* velocity, float* param) {
  kc::sgd_momentum_update(n, step, decay_mask, grad, velocity, param);
}
void CpuBackend::adamw_update(int64_t n, const model::AdamStep& step, const uint32_t* decay_mask, float* grad,
                              float* m, float* v, float* param) {
  kc::adamw_update(n, step, decay_mask, grad, m, v, param);
}
void CpuBackend::ema_update(int64_t n, const model::EmaStep& step, const float* param, float* ema) {
  kc::ema_update(n, step, param, ema);
}
void CpuBackend::lars_update(int tensors, const model::TensorRange* ranges, const model::LarsStep& step,
                             float* grad, float* velocity, float* param) {
  kc::lars_update(tensors, ranges, step, grad, velocity, param);
}
void CpuBackend::lamb_update(int tensors, const model::TensorRange* ranges, const model::AdamStep& step,
                             float* grad, float* m, float* v, float* param) {
  kc::lamb_update(tensors, ranges, step, grad, m, v, param);
}

// The table the loader threads normalise with (kernels/cpu/pixel_norm.h), built per call: 256 values a channel
// are nothing beside a batch, and the same table is what makes this bit-identical to the loader's output.
void CpuBackend::normalize_pixels(const model::PixelShape& s, const uint8_t* x, const float* mean,
                                  const float* stddev, float* y) {
  const std::vector<float> table = kc::pixel_table(s.channels, mean, stddev);
  kc::normalize_pixels(s, table.data(), x, y);
}

}  // namespace ringtrain::backend
