// Owns the cuDNN handle, the descriptors and chosen algorithms cached per shape, the shared convolution
// workspace, and every cuDNN call of the legacy v8-style API (which cuDNN 9 still ships); 16-bit NHWC convolutions
// go to cuDNN's graph API where it builds a plan (conv_graphs.h), as fused attention does (attention_graphs.h).
#include "backend/cuda/dnn.h"

#include <cudnn.h>
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "backend/cuda/attention_graphs.h"
#include "backend/cuda/conv_graphs.h"
#include "backend/cuda/cuda_handles.h"
#include "common/error.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/reorder_layout.h"
#include "kernels/cuda/resize_rows.h"

namespace ringtrain::backend {
namespace {

void destroy_handle(cudnnHandle_t h) { (void)cudnnDestroy(h); }
void destroy_tensor(cudnnTensorDescriptor_t d) { (void)cudnnDestroyTensorDescriptor(d); }
void destroy_filter(cudnnFilterDescriptor_t d) { (void)cudnnDestroyFilterDescriptor(d); }
void destroy_conv(cudnnConvolutionDescriptor_t d) { (void)cudnnDestroyConvolutionDescriptor(d); }
void destroy_pool(cudnnPoolingDescriptor_t d) { (void)cudnnDestroyPoolingDescriptor(d); }

using CudnnHandle = UniqueHandle<cudnnHandle_t, destroy_handle>;
using TensorDesc = UniqueHandle<cudnnTensorDescriptor_t, destroy_tensor>;
using FilterDesc = UniqueHandle<cudnnFilterDescriptor_t, destroy_filter>;
using ConvDesc = UniqueHandle<cudnnConvolutionDescriptor_t, destroy_conv>;
using PoolDesc = UniqueHandle<cudnnPoolingDescriptor_t, destroy_pool>;

cudnnDataType_t cudnn_type(kernels::ElementType t) {
  switch (t) {
    case kernels::ElementType::bf16: return CUDNN_DATA_BFLOAT16;
    case kernels::ElementType::f16: return CUDNN_DATA_HALF;
    default: return CUDNN_DATA_FLOAT;
  }
}

TensorDesc nchw(int n, int c, int h, int w, kernels::ElementType type = kernels::ElementType::f32,
                cudnnTensorFormat_t format = CUDNN_TENSOR_NCHW) {
  cudnnTensorDescriptor_t d = nullptr;
  CUDNN_CHECK(cudnnCreateTensorDescriptor(&d));
  TensorDesc owned(d);
  CUDNN_CHECK(cudnnSetTensor4dDescriptor(d, format, cudnn_type(type), n, c, h, w));
  return owned;
}

constexpr float kOne = 1.0f, kZero = 0.0f;

struct ConvPlan {
  TensorDesc x, y, bias;
  FilterDesc w;
  ConvDesc conv;
  cudnnConvolutionFwdAlgo_t forward{};
  cudnnConvolutionBwdDataAlgo_t backward_data{};
  cudnnConvolutionBwdFilterAlgo_t backward_filter{};
  std::size_t forward_bytes = 0, data_bytes = 0, filter_bytes = 0;
  std::string nondeterministic;  // the passes that had to take a non-deterministic algorithm, if any
  // The directions cuDNN's graph API runs instead of the algorithms above (their workspaces in the *_bytes above);
  // null where the legacy API runs.
  const ConvGraph* graph_forward = nullptr;
  const ConvGraph* graph_data = nullptr;
  const ConvGraph* graph_filter = nullptr;
};

struct PoolPlan {
  PoolDesc pool;
  TensorDesc x, y;
};

struct BatchNormPlan {
  TensorDesc x, per_channel;
};

// FFT and Winograd algorithms convolve in a transformed domain whose rounding is not the direct sum's (Winograd's
// error grows with the tile, and 5x5 filters make large ones), so strict fp32, which promises the CPU twin's
// arithmetic, measures direct (GEMM-style) algorithms only.
bool transforms_operands(cudnnConvolutionFwdAlgo_t a) {
  return a == CUDNN_CONVOLUTION_FWD_ALGO_FFT || a == CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING ||
         a == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD || a == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED;
}
bool transforms_operands(cudnnConvolutionBwdDataAlgo_t a) {
  return a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT || a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING ||
         a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD || a == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED;
}
bool transforms_operands(cudnnConvolutionBwdFilterAlgo_t a) {
  return a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT || a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING ||
         a == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED;
}

// Takes the first usable candidate of a list cuDNN returns best first: it ran (or is supported), is deterministic
// when asked (so a step is reproducible and every rank does the same arithmetic), and its workspace, asked of
// cuDNN for this very algorithm rather than read from the list, fits the limit.
template <class Perf, class WorkspaceSize>
bool pick(const Perf* perf, int count, std::size_t limit, bool deterministic_only, bool strict_fp32,
          WorkspaceSize workspace_size, decltype(Perf::algo)& algo, std::size_t& bytes) {
  for (int i = 0; i < count; ++i) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS) continue;
    if (deterministic_only && perf[i].determinism != CUDNN_DETERMINISTIC) continue;
    // cudnnFind also times tensor-op variants whatever the descriptor says; in strict fp32 they would round
    // inputs to TF32 (seen on an H100: 0.4 % off the CPU's weight gradient), so measured candidates must be
    // FMA ones. (The heuristic ranking follows the descriptor's math type and passes strict_fp32 = false.)
    if (strict_fp32 && (perf[i].mathType != CUDNN_FMA_MATH || transforms_operands(perf[i].algo))) continue;
    std::size_t need = 0;
    if (workspace_size(perf[i].algo, &need) != CUDNN_STATUS_SUCCESS || need > limit) continue;
    algo = perf[i].algo;
    bytes = need;
    return true;
  }
  return false;
}

std::string describe(const Conv2dShape& g) {
  return fmt::format("{}x{}x{}x{} {} input, {} filters {}x{} stride {} padding {} groups {}", g.batch,
                     g.in_channels, g.in_h, g.in_w, kernels::element_type_name(g.data), g.filters, g.kernel_h,
                     g.kernel_w, g.stride, g.padding, g.groups);
}

}  // namespace

struct Dnn::Impl {
  cudaStream_t stream;
  std::size_t workspace_limit;
  ConvSearch search;
  MathMode math;
  bool deterministic;
  CudnnHandle handle;
  DeviceMemory workspace;
  DeviceMemory filter_gradient;  // a 16-bit convolution's filter gradient, before it is added into the fp32 one
  DeviceMemory filter_gradient_kcrs;  // the same reordered from KRSC, where filters are NHWC
  DeviceMemory bias_partials;         // an NHWC convolution's bias gradient, per chunk of positions
  bool nhwc16 = false;
  std::unique_ptr<ConvGraphs> graphs;  // 16-bit NHWC convolutions' graphs, where asked for
  std::unique_ptr<AttentionGraphs> attention;  // fused attention's graphs, once asked for
  // The layout of activations of `type` (and of a convolution's filters in it).
  cudnnTensorFormat_t format(kernels::ElementType type) const {
    return nhwc16 && type != kernels::ElementType::f32 ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
  }
  std::map<Conv2dShape, std::unique_ptr<ConvPlan>> conv_plans;
  std::map<std::pair<PoolShape, PoolMode>, std::unique_ptr<PoolPlan>> pool_plans;
  std::map<BatchNormShape, std::unique_ptr<BatchNormPlan>> bn_plans;

  ConvPlan& conv(const Conv2dShape& g);
  PoolPlan& pool(const PoolShape& g, PoolMode mode);
  BatchNormPlan& batchnorm(const BatchNormShape& g);
  void choose_algorithms(const Conv2dShape& g, ConvPlan& p);
  void take_graphs(const Conv2dShape& g, ConvPlan& p);
  // PERSISTENT is cuDNN's faster batch-norm path (one persistent kernel per pass), but it may reduce in an
  // order that varies from run to run, so it is taken only when determinism is not asked for.
  cudnnBatchNormMode_t training_bn_mode() const {
    return deterministic ? CUDNN_BATCHNORM_SPATIAL : CUDNN_BATCHNORM_SPATIAL_PERSISTENT;
  }
  void* workspace_for(std::size_t bytes, model::Scratch scratch) {
    if (bytes == 0) return nullptr;
    if (scratch.data && scratch.bytes >= bytes) return scratch.data;
    workspace.ensure(bytes, stream);
    return workspace.get();
  }
};

Dnn::Dnn(kernels::cuda::Stream stream, std::size_t workspace_limit_bytes, ConvSearch search, MathMode math,
         bool deterministic, bool nhwc16, bool graphs16)
    : impl_(std::make_unique<Impl>()) {
  impl_->deterministic = deterministic;
  impl_->nhwc16 = nhwc16;
  impl_->stream = stream;
  impl_->workspace_limit = workspace_limit_bytes;
  impl_->search = search;
  impl_->math = math;
  cudnnHandle_t h = nullptr;
  CUDNN_CHECK(cudnnCreate(&h));
  impl_->handle = CudnnHandle(h);
  CUDNN_CHECK(cudnnSetStream(h, stream));
  if (nhwc16 && graphs16)
    impl_->graphs = std::make_unique<ConvGraphs>(h, workspace_limit_bytes, deterministic,
                                                 search == ConvSearch::measure);
}

Dnn::~Dnn() = default;

ConvPlan& Dnn::Impl::conv(const Conv2dShape& g) {
  if (auto it = conv_plans.find(g); it != conv_plans.end()) return *it->second;
  auto p = std::make_unique<ConvPlan>();
  p->x = nchw(g.batch, g.in_channels, g.in_h, g.in_w, g.data, format(g.data));
  p->y = nchw(g.batch, g.filters, g.out_h(), g.out_w(), g.data, format(g.data));
  p->bias = nchw(1, g.filters, 1, 1);
  cudnnFilterDescriptor_t w = nullptr;
  CUDNN_CHECK(cudnnCreateFilterDescriptor(&w));
  p->w = FilterDesc(w);
  CUDNN_CHECK(cudnnSetFilter4dDescriptor(w, cudnn_type(g.data), format(g.data), g.filters, g.group_channels(),
                                         g.kernel_h, g.kernel_w));
  cudnnConvolutionDescriptor_t c = nullptr;
  CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&c));
  p->conv = ConvDesc(c);
  // Cross-correlation is what every framework calls convolution; fp32 accumulation.
  CUDNN_CHECK(cudnnSetConvolution2dDescriptor(c, g.padding, g.padding, g.stride, g.stride, 1, 1,
                                              CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  CUDNN_CHECK(cudnnSetConvolutionGroupCount(c, g.groups));
  // Strict fp32 needs FMA_MATH: cuDNN's default lets fp32 convolutions run on TF32 tensor cores (10-bit mantissa
  // inputs), which is not the CPU twin's arithmetic. TF32 mode asks for exactly that default. 16-bit operands are
  // what tensor cores take as they are.
  CUDNN_CHECK(cudnnSetConvolutionMathType(c, g.data != kernels::ElementType::f32 ? CUDNN_TENSOR_OP_MATH
                                             : math == MathMode::tf32            ? CUDNN_DEFAULT_MATH
                                                                                 : CUDNN_FMA_MATH));
  int n = 0, k = 0, oh = 0, ow = 0;
  CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(c, p->x, w, &n, &k, &oh, &ow));
  if (n != g.batch || k != g.filters || oh != g.out_h() || ow != g.out_w())
    throw Error(ExitCode::internal, fmt::format("cuDNN gives a {}x{}x{}x{} output for {}, ringtrain expects {}x{}x{}x{}",
                                                n, k, oh, ow, describe(g), g.batch, g.filters, g.out_h(), g.out_w()));
  if (graphs && g.data != kernels::ElementType::f32) take_graphs(g, *p);
  choose_algorithms(g, *p);
  return *conv_plans.emplace(g, std::move(p)).first->second;
}

// The directions the graph API builds a plan for; choose_algorithms leaves them alone.
void Dnn::Impl::take_graphs(const Conv2dShape& g, ConvPlan& p) {
  const auto take = [&](ConvDirection d, const ConvGraph*& graph, std::size_t& bytes) {
    graph = graphs->prepare(g, d);
    if (graph) bytes = graphs->workspace_bytes(*graph);
  };
  take(ConvDirection::forward, p.graph_forward, p.forward_bytes);
  take(ConvDirection::data, p.graph_data, p.data_bytes);
  take(ConvDirection::filter, p.graph_filter, p.filter_bytes);
}

void Dnn::Impl::choose_algorithms(const Conv2dShape& g, ConvPlan& p) {
  // Candidates: measured (ConvSearch::measure) and cuDNN's heuristic ranking; deterministic ones first, any
  // as a last resort (noted in the plan). Directions a graph runs (take_graphs) need none.
  const bool measure = search == ConvSearch::measure;
  const bool strict = math == MathMode::fp32 && g.data == kernels::ElementType::f32;
  const auto choose = [&](const char* which, auto* perf, int capacity, auto find, auto rank, auto workspace_size,
                          auto& algo, std::size_t& bytes) {
    int measured = 0, ranked = 0;
    if (measure) CUDNN_CHECK(find(capacity, &measured, perf));
    auto* ranking = perf + capacity;
    CUDNN_CHECK(rank(capacity, &ranked, ranking));
    for (const bool only_deterministic : {true, false})
      if (only_deterministic && !deterministic) continue;
      else if (pick(perf, measured, workspace_limit, only_deterministic, strict, workspace_size, algo, bytes) ||
               pick(ranking, ranked, workspace_limit, only_deterministic, false, workspace_size, algo, bytes)) {
        if (!only_deterministic && deterministic) p.nondeterministic += std::string(p.nondeterministic.empty() ? "" : ", ") + which;
        return;
      }
    throw Error(ExitCode::library,
                fmt::format("cuDNN offers no {} convolution algorithm within the {:.0f} MiB workspace limit for {}",
                            which, static_cast<double>(workspace_limit) / (1 << 20), describe(g)));
  };
  if (!p.graph_forward) {
    cudnnConvolutionFwdAlgoPerf_t perf[2 * CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    choose(
        "forward", perf, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
        [&](int n, int* got, cudnnConvolutionFwdAlgoPerf_t* out) {
          return cudnnFindConvolutionForwardAlgorithm(handle, p.x, p.w, p.conv, p.y, n, got, out);
        },
        [&](int n, int* got, cudnnConvolutionFwdAlgoPerf_t* out) {
          return cudnnGetConvolutionForwardAlgorithm_v7(handle, p.x, p.w, p.conv, p.y, n, got, out);
        },
        [&](cudnnConvolutionFwdAlgo_t a, std::size_t* bytes) {
          return cudnnGetConvolutionForwardWorkspaceSize(handle, p.x, p.w, p.conv, p.y, a, bytes);
        },
        p.forward, p.forward_bytes);
  }
  if (!p.graph_data) {
    cudnnConvolutionBwdDataAlgoPerf_t perf[2 * CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    choose(
        "backward-data", perf, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
        [&](int n, int* got, cudnnConvolutionBwdDataAlgoPerf_t* out) {
          return cudnnFindConvolutionBackwardDataAlgorithm(handle, p.w, p.y, p.conv, p.x, n, got, out);
        },
        [&](int n, int* got, cudnnConvolutionBwdDataAlgoPerf_t* out) {
          return cudnnGetConvolutionBackwardDataAlgorithm_v7(handle, p.w, p.y, p.conv, p.x, n, got, out);
        },
        [&](cudnnConvolutionBwdDataAlgo_t a, std::size_t* bytes) {
          return cudnnGetConvolutionBackwardDataWorkspaceSize(handle, p.w, p.y, p.conv, p.x, a, bytes);
        },
        p.backward_data, p.data_bytes);
  }
  if (!p.graph_filter) {
    cudnnConvolutionBwdFilterAlgoPerf_t perf[2 * CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    choose(
        "backward-filter", perf, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT,
        [&](int n, int* got, cudnnConvolutionBwdFilterAlgoPerf_t* out) {
          return cudnnFindConvolutionBackwardFilterAlgorithm(handle, p.x, p.y, p.conv, p.w, n, got, out);
        },
        [&](int n, int* got, cudnnConvolutionBwdFilterAlgoPerf_t* out) {
          return cudnnGetConvolutionBackwardFilterAlgorithm_v7(handle, p.x, p.y, p.conv, p.w, n, got, out);
        },
        [&](cudnnConvolutionBwdFilterAlgo_t a, std::size_t* bytes) {
          return cudnnGetConvolutionBackwardFilterWorkspaceSize(handle, p.x, p.y, p.conv, p.w, a, bytes);
        },
        p.backward_filter, p.filter_bytes);
  }
}

PoolPlan& Dnn::Impl::pool(const PoolShape& g, PoolMode mode) {
  const auto key = std::make_pair(g, mode);
  if (auto it = pool_plans.find(key); it != pool_plans.end()) return *it->second;
  auto p = std::make_unique<PoolPlan>();
  cudnnPoolingDescriptor_t d = nullptr;
  CUDNN_CHECK(cudnnCreatePoolingDescriptor(&d));
  p->pool = PoolDesc(d);
  // MAX_DETERMINISTIC: overlapping windows (3x3 stride 2) get a reproducible backward.
  const cudnnPoolingMode_t cudnn_mode =
      mode == PoolMode::max ? CUDNN_POOLING_MAX_DETERMINISTIC : CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING;
  CUDNN_CHECK(cudnnSetPooling2dDescriptor(d, cudnn_mode, CUDNN_PROPAGATE_NAN, g.window, g.window, g.padding, g.padding,
                                          g.stride, g.stride));
  p->x = nchw(g.batch, g.channels, g.in_h, g.in_w, g.data, format(g.data));
  int n = 0, c = 0, oh = 0, ow = 0;
  CUDNN_CHECK(cudnnGetPooling2dForwardOutputDim(d, p->x, &n, &c, &oh, &ow));
  if (oh != g.out_h() || ow != g.out_w())
    throw Error(ExitCode::internal, fmt::format("cuDNN pools {}x{} to {}x{}, ringtrain expects {}x{}", g.in_h, g.in_w,
                                                oh, ow, g.out_h(), g.out_w()));
  p->y = nchw(g.batch, g.channels, g.out_h(), g.out_w(), g.data, format(g.data));
  return *pool_plans.emplace(key, std::move(p)).first->second;
}

BatchNormPlan& Dnn::Impl::batchnorm(const BatchNormShape& g) {
  if (auto it = bn_plans.find(g); it != bn_plans.end()) return *it->second;
  auto p = std::make_unique<BatchNormPlan>();
  p->x = nchw(g.batch, g.channels, g.spatial, 1);  // spatial mode only needs H x W as a count
  p->per_channel = nchw(1, g.channels, 1, 1);
  return *bn_plans.emplace(g, std::move(p)).first->second;
}

model::ScratchBytes Dnn::prepare_conv(const Conv2dShape& g) {
  const ConvPlan& p = impl_->conv(g);
  return {.forward = p.forward_bytes, .backward = std::max(p.data_bytes, p.filter_bytes)};
}

namespace {

// cuDNN's names for its algorithms, as its enums spell them.
const char* algorithm_name(cudnnConvolutionFwdAlgo_t a) {
  switch (a) {
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM: return "IMPLICIT_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM: return "IMPLICIT_PRECOMP_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_GEMM: return "GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_DIRECT: return "DIRECT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT: return "FFT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING: return "FFT_TILING";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD: return "WINOGRAD";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED: return "WINOGRAD_NONFUSED";
    default: return "?";
  }
}
const char* algorithm_name(cudnnConvolutionBwdDataAlgo_t a) {
  switch (a) {
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_0: return "ALGO_0";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_1: return "ALGO_1";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT: return "FFT";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING: return "FFT_TILING";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD: return "WINOGRAD";
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED: return "WINOGRAD_NONFUSED";
    default: return "?";
  }
}
const char* algorithm_name(cudnnConvolutionBwdFilterAlgo_t a) {
  switch (a) {
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0: return "ALGO_0";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1: return "ALGO_1";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT: return "FFT";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3: return "ALGO_3";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED: return "WINOGRAD_NONFUSED";
    case CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING: return "FFT_TILING";
    default: return "?";
  }
}

}  // namespace

std::string Dnn::conv_algorithms(const Conv2dShape& g) {
  const ConvPlan& p = impl_->conv(g);
  const auto name = [&](const ConvGraph* graph, ConvDirection d, auto legacy) {
    return graph ? "graph " + impl_->graphs->describe(g, d) : std::string(algorithm_name(legacy));
  };
  return fmt::format("cuDNN forward {}, data {}, filter {}, workspace {:.1f} MiB{}{}",
                     name(p.graph_forward, ConvDirection::forward, p.forward),
                     name(p.graph_data, ConvDirection::data, p.backward_data),
                     name(p.graph_filter, ConvDirection::filter, p.backward_filter),
                     static_cast<double>(std::max({p.forward_bytes, p.data_bytes, p.filter_bytes})) / (1 << 20),
                     p.nondeterministic.empty() ? "" : ", non-deterministic: ", p.nondeterministic);
}

AttentionGraphs& Dnn::attention_graphs() {
  if (!impl_->attention)
    impl_->attention = std::make_unique<AttentionGraphs>(impl_->handle, impl_->workspace_limit, impl_->deterministic);
  return *impl_->attention;
}

std::size_t Dnn::working_bytes() const {
  return impl_->workspace.bytes() + impl_->filter_gradient.bytes() + impl_->filter_gradient_kcrs.bytes() +
         impl_->bias_partials.bytes();
}

void Dnn::conv_forward(const Conv2dShape& g, const void* x, const void* w, const float* bias, void* y,
                       model::Scratch scratch) {
  ConvPlan& p = impl_->conv(g);
  void* ws = impl_->workspace_for(p.forward_bytes, scratch);
  if (p.graph_forward)
    impl_->graphs->run(*p.graph_forward, {.x = x, .w = w, .y = nullptr, .out = y}, ws);
  else
    CUDNN_CHECK(cudnnConvolutionForward(impl_->handle, &kOne, p.x, x, p.w, w, p.conv, p.forward, ws,
                                        p.forward_bytes, &kZero, p.y, y));
  if (!bias) return;
  // cudnnAddTensor wants the bias in y's type; ours stays fp32, so 16-bit outputs take it through our kernel.
  if (g.data == kernels::ElementType::f32)
    CUDNN_CHECK(cudnnAddTensor(impl_->handle, &kOne, p.bias, bias, &kOne, p.y, y));
  else if (impl_->format(g.data) == CUDNN_TENSOR_NHWC)  // rows of `filters` channels, one per output position
    kernels::cuda::add_bias_rows(g.batch * g.out_h() * g.out_w(), g.filters, bias, g.data, y, impl_->stream);
  else
    kernels::cuda::add_bias_channels(g.batch, g.filters, g.out_h() * g.out_w(), bias, g.data, y, impl_->stream);
}

void Dnn::conv_backward_data(const Conv2dShape& g, const void* dy, const void* w, void* dx,
                             model::Scratch scratch) {
  ConvPlan& p = impl_->conv(g);
  void* ws = impl_->workspace_for(p.data_bytes, scratch);
  if (p.graph_data)
    impl_->graphs->run(*p.graph_data, {.x = nullptr, .w = w, .y = dy, .out = dx}, ws);
  else
    CUDNN_CHECK(cudnnConvolutionBackwardData(impl_->handle, &kOne, p.w, w, p.y, dy, p.conv, p.backward_data, ws,
                                             p.data_bytes, &kZero, p.x, dx));
}

void Dnn::conv_backward_filter(const Conv2dShape& g, const void* x, const void* dy, float* dw, float* dbias,
                               model::Scratch scratch, int weight_channels) {
  ConvPlan& p = impl_->conv(g);
  void* ws = impl_->workspace_for(p.filter_bytes, scratch);
  if (g.data == kernels::ElementType::f32) {
    // beta = 1: parameter gradients accumulate (micro-batches of one optimizer step add up).
    CUDNN_CHECK(cudnnConvolutionBackwardFilter(impl_->handle, &kOne, p.x, x, p.y, dy, p.conv, p.backward_filter, ws,
                                               p.filter_bytes, &kOne, p.w, dw));
    if (dbias) CUDNN_CHECK(cudnnConvolutionBackwardBias(impl_->handle, &kOne, p.y, dy, &kOne, p.bias, dbias));
    return;
  }
  // cuDNN writes a 16-bit filter gradient in the filter's type (accumulated in fp32 inside); it is added into the
  // fp32 gradient, as autocast frameworks add the 16-bit copy's gradient into the master weight's.
  const kernels::Elements filter{g.weight_elements(), g.data};
  impl_->filter_gradient.ensure(filter.bytes(), impl_->stream);
  void* dw16 = impl_->filter_gradient.get();
  if (p.graph_filter)
    impl_->graphs->run(*p.graph_filter, {.x = x, .w = nullptr, .y = dy, .out = dw16}, ws);
  else
    CUDNN_CHECK(cudnnConvolutionBackwardFilter(impl_->handle, &kOne, p.x, x, p.y, dy, p.conv, p.backward_filter, ws,
                                               p.filter_bytes, &kZero, p.w, dw16));
  const bool nhwc = impl_->format(g.data) == CUDNN_TENSOR_NHWC;
  const int64_t positions = int64_t{g.kernel_h} * g.kernel_w;
  if (nhwc) {  // KRSC, as the filters are: back to our KCRS before it meets the fp32 gradient
    impl_->filter_gradient_kcrs.ensure(filter.bytes(), impl_->stream);
    const kernels::Planes krsc{g.filters, g.group_channels(), positions, g.data};
    kernels::cuda::reorder_layout(krsc, kernels::ActivationLayout::nchw, dw16, impl_->filter_gradient_kcrs.get(),
                                  impl_->stream);
    dw16 = impl_->filter_gradient_kcrs.get();
  }
  if (weight_channels != g.in_channels) {  // padded channels: each filter's first C x R x S values are the weights'
    if (!nhwc) throw Error(ExitCode::internal, "a convolution's channels were padded outside NHWC");
    const kernels::ResizedRows crop{g.filters, g.in_channels * positions, weight_channels * positions, g.data};
    kernels::cuda::resize_rows(crop, dw16, impl_->filter_gradient.get(), impl_->stream);
    dw16 = impl_->filter_gradient.get();
  }
  const int64_t weights = int64_t{g.filters} * (weight_channels / g.groups) * positions;
  kernels::cuda::accumulate_into_fp32({weights, g.data}, dw16, dw, impl_->stream);
  if (dbias && nhwc) {
    const int rows = g.batch * g.out_h() * g.out_w();
    const auto partials = static_cast<std::size_t>(kernels::cuda::bias_grad_tall_partials(rows, g.filters));
    impl_->bias_partials.ensure(sizeof(float) * partials, impl_->stream);
    float* const chunk_sums = static_cast<float*>(impl_->bias_partials.get());
    kernels::cuda::bias_grad_tall_rows(rows, g.filters, g.data, dy, chunk_sums, dbias, impl_->stream);
  } else if (dbias)
    kernels::cuda::bias_grad_channels(g.batch, g.filters, g.out_h() * g.out_w(), g.data, dy, dbias, impl_->stream);
}

void Dnn::batchnorm_forward_train(const BatchNormShape& g, const float* x, const float* gamma, const float* beta,
                                  double momentum, double epsilon, float* running_mean, float* running_var, float* y,
                                  float* saved_mean, float* saved_inv_std) {
  BatchNormPlan& p = impl_->batchnorm(g);
  // cuDNN's exponentialAverageFactor is our momentum: running = (1-f)*running + f*batch, and its running
  // variance is the unbiased one, as on the CPU.
  CUDNN_CHECK(cudnnBatchNormalizationForwardTraining(impl_->handle, impl_->training_bn_mode(), &kOne, &kZero, p.x, x, p.x,
                                                     y, p.per_channel, gamma, beta, momentum, running_mean,
                                                     running_var, epsilon, saved_mean, saved_inv_std));
}

void Dnn::batchnorm_forward_infer(const BatchNormShape& g, const float* x, const float* gamma, const float* beta,
                                  const float* running_mean, const float* running_var, double epsilon, float* y) {
  BatchNormPlan& p = impl_->batchnorm(g);
  CUDNN_CHECK(cudnnBatchNormalizationForwardInference(impl_->handle, CUDNN_BATCHNORM_SPATIAL, &kOne, &kZero, p.x, x,
                                                      p.x, y, p.per_channel, gamma, beta, running_mean, running_var,
                                                      epsilon));
}

void Dnn::batchnorm_backward(const BatchNormShape& g, const float* x, const float* dy, const float* gamma,
                             const float* saved_mean, const float* saved_inv_std, double epsilon, float* dx,
                             float* dgamma, float* dbeta) {
  BatchNormPlan& p = impl_->batchnorm(g);
  // Data gradient overwritten (beta 0), parameter gradients accumulated (beta 1).
  CUDNN_CHECK(cudnnBatchNormalizationBackward(impl_->handle, impl_->training_bn_mode(), &kOne, &kZero, &kOne, &kOne, p.x,
                                              x, p.x, dy, p.x, dx, p.per_channel, gamma, dgamma, dbeta, epsilon,
                                              saved_mean, saved_inv_std));
}

void Dnn::pool_forward(const PoolShape& g, PoolMode mode, const void* x, void* y) {
  PoolPlan& p = impl_->pool(g, mode);
  CUDNN_CHECK(cudnnPoolingForward(impl_->handle, p.pool, &kOne, p.x, x, &kZero, p.y, y));
}

void Dnn::pool_backward(const PoolShape& g, PoolMode mode, const void* x, const void* y, const void* dy, void* dx) {
  PoolPlan& p = impl_->pool(g, mode);
  CUDNN_CHECK(cudnnPoolingBackward(impl_->handle, p.pool, &kOne, p.y, y, p.y, dy, p.x, x, &kZero, p.x, dx));
}

}  // namespace ringtrain::backend
