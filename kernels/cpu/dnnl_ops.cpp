// Owns the caches of oneDNN primitives by shape and the rule that picks oneDNN or im2col for a convolution.
#include "kernels/cpu/dnnl_ops.h"

#include <fmt/format.h>

#include <map>
#include <optional>
#include <string_view>
#include <tuple>

#include "kernels/cpu/bf16_weight_copies.h"
#include "kernels/cpu/dnnl_attention.h"
#include "kernels/cpu/dnnl_context.h"
#include "kernels/cpu/dnnl_conv2d.h"
#include "kernels/cpu/dnnl_dense.h"
#include "kernels/cpu/dnnl_eltwise.h"
#include "kernels/cpu/dnnl_pool.h"

namespace ringtrain::kernels::cpu {
namespace {

constexpr int kMinInputChannels = 16;
// The fewest tokens from which oneDNN's batched bf16 products outrun the tiles, whose products are fp32 FMAs. With
// AMX, forward + backward on two threads, batch 32, in two alternated rounds: 8.7 and 9.4 ms against 9.3 and 9.9 at
// 101 tokens (ViT-S/16 at 160 x 160), 24.1 against 38.5 and 38.9 at 197, even or behind at 82 and fewer
// (perf/results/2026-12-02-vit-attention-amx-cpu.md). With AVX512_BF16 alone, on a Zen 4 VM, whose bf16 dot products
// run at twice its fp32 FMA rate, two threads, batch 32, two rounds: ahead from 50 tokens (5.1 and 4.6 ms against 5.7
// and 6.0; at 65, 8.2 and 7.0 against 9.2 and 9.8), even or ahead at 37, behind at 26 and 17
// (perf/results/2026-12-02-vit-epyc-cpu.md).
int min_attention_tokens() { return dnnl::get_effective_cpu_isa() >= dnnl::cpu_isa::avx512_core_amx ? 100 : 50; }

bool jit_kernel(std::string_view implementation) {
  return implementation.starts_with("jit") || implementation.starts_with("brg");
}

// A patch embedding (ViT's stem): windows that tile the image without overlap or padding, each a product over
// C x R x S >= 48 inputs, where oneDNN's direct kernel does the work of im2col's many small per-image products.
bool patchify(const Conv2dShape& s) {
  return s.groups == 1 && s.kernel_h == s.stride && s.kernel_w == s.stride && s.padding == 0 &&
         s.in_channels * s.kernel_h * s.kernel_w >= 48;
}

// A layout's block where the channels fill whole blocks of it, else 1 (NCHW).
int whole_blocks(int block, int channels) { return block > 1 && channels % block == 0 ? block : 1; }

}  // namespace

struct DnnlOps::State {
  State(int threads, DnnlMath math) : ctx(threads, math) {}
  DnnlContext ctx;
  // nullopt: a convolution shape that stays on im2col + BLAS.
  std::map<Conv2dShape, std::optional<DnnlConv2d>> convs;
  Bf16WeightCopies weight_copies;  // read by the dense products of every batch size
  std::map<DenseShape, DnnlDense> denses;
  std::map<std::pair<PoolShape, PoolMode>, DnnlPool> pools;
  std::map<std::tuple<Activation, int64_t, ElementType>, DnnlEltwise> eltwises;
  std::map<std::pair<AttentionShape, ActivationLayout>, DnnlAttention> attentions;

  std::optional<DnnlConv2d>& conv(const Conv2dShape& s) {
    auto it = convs.find(s);
    if (it != convs.end()) return it->second;
    std::optional<DnnlConv2d>& slot = convs[s];
    if (s.in_channels >= kMinInputChannels || patchify(s)) {
      slot.emplace(ctx, s);
      if (!jit_kernel(slot->implementation())) slot.reset();
    }
    return slot;
  }
  DnnlPool& pool(const PoolShape& s, PoolMode mode) {
    const auto key = std::make_pair(s, mode);
    auto it = pools.find(key);
    return it != pools.end() ? it->second : pools.try_emplace(key, ctx, s, mode).first->second;
  }
  DnnlEltwise& eltwise(Activation a, Elements n) {
    const auto key = std::make_tuple(a, n.n, n.type);
    auto it = eltwises.find(key);
    if (it != eltwises.end()) return it->second;
    const auto values = n.type == ElementType::bf16 ? dnnl::memory::data_type::bf16 : dnnl::memory::data_type::f32;
    return eltwises.try_emplace(key, ctx, a, n.n, values).first->second;
  }
  DnnlAttention& attention(const AttentionShape& s, ActivationLayout layout) {
    const auto key = std::make_pair(s, layout);
    auto it = attentions.find(key);
    return it != attentions.end() ? it->second : attentions.try_emplace(key, ctx, s, layout).first->second;
  }
  DnnlDense& dense(const DenseShape& s) {
    auto it = denses.find(s);
    return it != denses.end() ? it->second : denses.try_emplace(s, ctx, s, weight_copies).first->second;
  }
};

DnnlOps::DnnlOps(int threads) : DnnlOps(threads, DnnlMath::fp32) {}
DnnlOps::DnnlOps(int threads, DnnlMath math) : state_(std::make_unique<State>(threads, math)) {}
DnnlOps::~DnnlOps() = default;

std::string DnnlOps::version() {
  const dnnl_version_t* v = dnnl_version();
  return fmt::format("oneDNN {}.{}.{} ({})", v->major, v->minor, v->patch,
                     v->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP" : "other threading");
}

std::size_t DnnlOps::working_bytes() const {
  std::size_t total = state_->ctx.working_bytes() + state_->weight_copies.bytes();
  for (const auto& [shape, dense] : state_->denses) total += dense.working_bytes();
  for (const auto& [key, attention] : state_->attentions) total += attention.working_bytes();
  return total;
}

bool DnnlOps::bf16_available() { return __builtin_cpu_supports("avx512bf16"); }

bool DnnlOps::runs_conv2d(const Conv2dShape& s) { return state_->conv(s).has_value(); }

std::string DnnlOps::conv2d_implementation(const Conv2dShape& s) {
  auto& conv = state_->conv(s);
  return conv ? conv->description(state_->ctx) : "";
}

bool DnnlOps::takes_stored(ElementType type) const {
  using dnnl_type = dnnl::memory::data_type;
  const dnnl_type stored = type == ElementType::f32    ? dnnl_type::f32
                           : type == ElementType::bf16 ? dnnl_type::bf16
                                                       : dnnl_type::f16;
  return state_->ctx.activation_type(type) == stored;
}

int DnnlOps::conv2d_output_block(const Conv2dShape& s) {
  Conv2dShape nchw = s;
  nchw.out_block = 1;
  const auto& conv = state_->conv(nchw);
  return whole_blocks(conv ? conv->output_block() : 1, s.filters);
}

int DnnlOps::conv2d_input_block(const Conv2dShape& s) {
  Conv2dShape nchw = s;
  nchw.in_block = 1;
  const auto& conv = state_->conv(nchw);
  return whole_blocks(conv ? conv->input_block() : 1, s.in_channels);
}

void DnnlOps::conv2d_prepare(const Conv2dShape& s) {
  if (auto& c = state_->conv(s)) c->prepare(state_->ctx);
}
void DnnlOps::conv2d_forward(const Conv2dShape& s, const void* x, const float* w, const float* bias, void* y) {
  state_->conv(s)->forward(state_->ctx, x, w, bias, y);
}
void DnnlOps::conv2d_backward(const Conv2dShape& s, const void* x, const void* dy, const float* w, void* dx,
                              float* dw, float* dbias) {
  state_->conv(s)->backward(state_->ctx, x, dy, w, dx, dw, dbias);
}

std::size_t DnnlOps::pool_workspace_bytes(const PoolShape& s, PoolMode mode) const {
  return state_->pool(s, mode).workspace_bytes();
}
void DnnlOps::pool_forward(const PoolShape& s, PoolMode mode, const float* x, float* y, void* workspace) {
  state_->pool(s, mode).forward(state_->ctx, x, y, workspace);
}
void DnnlOps::pool_backward(const PoolShape& s, PoolMode mode, const float* dy, float* dx, const void* workspace) {
  state_->pool(s, mode).backward(state_->ctx, dy, dx, workspace);
}

bool DnnlOps::runs_activation(Activation a, Elements n) {
  if (n.n <= 0 || n.type == ElementType::f16 || !DnnlEltwise::runs(a)) return false;
  return state_->eltwise(a, n).jit();
}
void DnnlOps::activation_forward(Activation a, Elements n, const void* x, void* y) {
  state_->eltwise(a, n).forward(state_->ctx, x, y);
}
void DnnlOps::activation_backward(Activation a, Elements n, const void* x, const void* dy, void* dx) {
  state_->eltwise(a, n).backward(state_->ctx, x, dy, dx);
}

bool DnnlOps::runs_attention(const AttentionShape& s) const {
  return s.batch > 0 && s.data == ElementType::bf16 && s.tokens >= min_attention_tokens() &&
         state_->ctx.operand_type() == dnnl::memory::data_type::bf16 &&
         dnnl::get_effective_cpu_isa() >= dnnl::cpu_isa::avx512_core_bf16;
}
void DnnlOps::attention_forward(const AttentionShape& s, ActivationLayout layout, const void* qkv, void* y,
                                void* probabilities) {
  state_->attention(s, layout).forward(state_->ctx, qkv, y, probabilities);
}
void DnnlOps::attention_backward(const AttentionShape& s, ActivationLayout layout, const void* qkv,
                                 const void* probabilities, const void* dy, void* dqkv) {
  state_->attention(s, layout).backward(state_->ctx, qkv, probabilities, dy, dqkv);
}
std::string DnnlOps::attention_implementation(const AttentionShape& s, ActivationLayout layout) {
  return state_->attention(s, layout).implementation();
}

void DnnlOps::dense_forward(const DenseShape& s, const void* x, const float* w, const float* bias, void* y) {
  state_->dense(s).forward(state_->ctx, x, w, bias, y);
}
void DnnlOps::dense_backward(const DenseShape& s, const void* x, const float* w, const void* dy, void* dx,
                             float* dw, float* dbias) {
  state_->dense(s).backward(state_->ctx, x, w, dy, dx, dw, dbias);
}

}  // namespace ringtrain::kernels::cpu
