// Owns the CUDA backend: this rank's GPU, its compute stream, device memory, the cuDNN and cuBLAS front ends,
// and the Backend operations over them and kernels/cuda. The CPU twin is backend/cpu/cpu_backend.h; the layers
// that call these operations are model/layers/, the gradient all-reduce is nccl_reducer.h.
//
// Ordering: every piece of work (copies included) goes on one compute stream, so the host never needs to wait
// except where a result must reach it (to_host, synchronize(), a readback or clock being read).
#pragma once
#include <cstddef>
#include <memory>
#include <string>

#include "backend/cuda/dnn.h"
#include "backend/cuda/math_mode.h"
#include "kernels/cuda/stream.h"
#include "kernels/resized_rows.h"
#include "model/backend.h"

namespace ringtrain::kernels::cuda {
struct BatchNormGroup;
}

namespace ringtrain::backend {

class Blas;
class CudaStepGraphs;
struct AttentionGraph;

// Which visible device a rank uses. `visible` is cudaGetDeviceCount(), which honours CUDA_VISIBLE_DEVICES:
//   visible == 1: device 0 (Slurm's GPU binding shows each task just its own GPU; or a single-GPU node);
//   visible >= local_size: device local_rank (each rank sees every GPU of the node);
//   otherwise: JobFileError naming the host and both counts (two ranks would share a GPU, which NCCL refuses),
//   unless `share` (gpu.share_device, for tests): device local_rank % visible.
// visible == 0 is a JobFileError too. Pure, so it is tested without a GPU.
int choose_device(int visible, int local_rank, int local_size, const std::string& host, bool share = false);

struct CudaOptions {
  std::size_t workspace_limit_bytes = std::size_t{256} << 20;  // per convolution algorithm; one shared workspace
  ConvSearch conv_search = ConvSearch::heuristic;               // see dnn.h
  MathMode math = MathMode::fp32;                               // see math_mode.h
  bool deterministic = true;                                    // see dnn.h
  bool share_device = false;  // gpu.share_device: this GPU may be shared with the node's other ranks (tests)
  // Mixed precision (train.precision bf16 / fp16): the 16-bit type activations may be stored in besides fp32.
  kernels::ElementType activations = kernels::ElementType::f32;
  // Those 16-bit activations stored NHWC (gpu.nhwc; fp32 ones stay NCHW): cuDNN's tensor-core layout.
  bool nhwc = false;
  // Those NHWC convolutions through cuDNN's graph API where it builds a plan (gpu.cudnn_graphs, conv_graphs.h).
  bool conv_graphs = true;
  // Those NHWC convolutions whose input channels are not a multiple of 8 (a stem on 3 colour channels) as im2col +
  // cuBLAS GEMM (gpu.few_channel_gemm, conv_gemm.cpp), their im2col rows made im2col_bytes at most at a time.
  bool few_channel_gemm = true;
  // Our kernels not yet proven on a GPU, used in place of the proven path for their layers (gpu.candidate_kernels);
  // and synchronised batch norm's sums on NCCL instead of through the host.
  bool candidate_kernels = false;
  // gpu.cuda_graphs: the steady-state training step captured and replayed as CUDA graphs (step_graphs.h).
  bool cuda_graphs = false;
  // run.collective_timeout_s: bounds the backend's own NCCL calls (synchronised batch norm's) as the reducer's.
  double collective_timeout_s = 300;
  std::size_t im2col_bytes = std::size_t{128} << 20;
};

class CudaBackend final : public model::Backend {
 public:
  // Picks the GPU with choose_device and makes it current (cudaSetDevice is the first CUDA call after counting
  // devices; no other device is touched), then creates the stream and library handles on it.
  CudaBackend(int local_rank, int local_size, std::string host, CudaOptions options = {});
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  std::string name() const override { return "cuda"; }
  std::string description() const override;

  model::DeviceBuffer allocate(std::size_t bytes) override;  // cudaMalloc, zero-filled (in stream order)
  std::size_t bytes_allocated() const override;
  bool allocates_host_memory() const override { return false; }
  std::size_t device_bytes_in_use() const override;  // cudaMemGetInfo: total - free
  std::size_t device_bytes_allocated_peak() const override;  // device_malloc's high-water mark
  std::size_t memory_available() const override;     // cudaMemGetInfo: free
  // cuDNN's workspace and 16-bit filter gradient, and mixed precision's 16-bit weight copies and batch-norm scratch.
  std::size_t working_bytes() const override;
  // Returns as soon as host_src may be reused: the bytes go through a pinned staging buffer, and the copy to
  // the device runs in stream order.
  void to_device(void* device_dst, const void* host_src, std::size_t bytes) override;
  void to_host(void* host_dst, const void* device_src, std::size_t bytes) override;  // waits for the stream
  void synchronize() override;
  std::unique_ptr<model::Readback> make_readback(std::size_t bytes) override;  // pinned memory and an event
  std::unique_ptr<model::DeviceClock> make_clock(int capacity) override;      // timing events
  model::StepCapturer* step_capturer() override;  // gpu.cuda_graphs' (step_graphs.h), else null
  // Frees every captured step graph (a later replay of one is an internal error): before a communicator whose
  // collectives the graphs hold ends, which NCCL does only once no graph holds them.
  void drop_step_graphs() noexcept;

  // fp32, and options.activations under mixed precision: 16-bit convolutions and products on tensor cores with fp32
  // accumulation (16-bit copies of the fp32 weights made by each forward), batch norm and pooling through our kernels.
  bool stores_activations_in(kernels::ElementType type) const override;
  // NHWC for 16-bit activations where CudaOptions::nhwc says so; NCHW otherwise.
  model::ActivationLayout activation_layout(kernels::ElementType type) const override;
  void reorder_activation(const kernels::Planes& p, model::ActivationLayout to, const void* x, void* y) override;

  // cuda_ops.cpp: every operation queued on the stream; nothing waits.
  void zero(void* y, std::size_t bytes) override;
  void fill(int64_t n, float value, float* y) override;
  void cast(kernels::Elements from, const void* x, kernels::ElementType to, void* y) override;
  void copy(kernels::Elements n, const void* x, void* y) override;
  void add(kernels::Elements n, const void* a, const void* b, void* y) override;
  void add_relu(kernels::Elements n, const void* a, const void* b, void* y) override;
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
  model::ScratchBytes conv2d_prepare(const model::Conv2dShape& s) override;  // the chosen algorithms' workspaces
  std::string conv2d_method(const model::Conv2dShape& s) override;  // cuDNN's algorithms for it
  void conv2d_forward(const model::Conv2dShape& s, const void* x, const float* w, const float* bias, void* y,
                      model::Scratch scratch) override;
  void conv2d_backward(const model::Conv2dShape& s, const void* x, const void* dy, const float* w, void* dx,
                       float* dw, float* dbias, model::Scratch scratch) override;
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
  // Batch norm takes on the ReLU after it, or the residual join after it, on 16-bit activations (our batch-norm
  // kernels); cuDNN's fp32 batch norm runs them apart, and no pool fuses.
  std::vector<model::FusionRule> fusion_rules() const override;
  // Training batch norm on our kernels, the group's per-channel sums added over its ranks through host memory
  // (Backend::synchronise_batchnorm).
  void synchronise_batchnorm(std::shared_ptr<model::BatchStatisticsGroup> group) override;
  void batchnorm_add_relu_forward_train(const model::BatchNormShape& s, const model::BatchNormSettings& settings,
                                        const void* x, const void* shortcut, const model::BatchNormBuffers& b,
                                        void* y) override;
  void batchnorm_add_relu_forward_infer(const model::BatchNormShape& s, const model::BatchNormSettings& settings,
                                        const void* x, const void* shortcut, const model::BatchNormBuffers& b,
                                        void* y) override;
  void batchnorm_add_relu_backward(const model::BatchNormShape& s, const model::BatchNormSettings& settings,
                                   const void* x, const void* y, const void* dy, const model::BatchNormBuffers& b,
                                   void* dx, void* dshortcut, float* dgamma, float* dbeta) override;
  // cuDNN's fp32 max pool finds its winners again from x and y; our 16-bit one keeps them.
  std::size_t pool_saved_bytes(const model::PoolShape& s, model::PoolMode mode) const override;
  void pool_forward(const model::PoolShape& s, model::PoolMode mode, const void* x, void* y, void* saved) override;
  void pool_backward(const model::PoolShape& s, model::PoolMode mode, const void* x, const void* y,
                     const void* dy, void* dx, const void* saved) override;
  // attention_ops.cpp: cuBLAS strided-batched products per head over the samples, our softmax between them; the
  // scratch holds one head's fp32 scores (backward: their gradient, fp32 and in the element type). Under
  // gpu.candidate_kernels, 16-bit NHWC tokens on cuDNN's fused attention where it has a plan (attention_graphs.h).
  model::ScratchBytes attention_prepare(const model::AttentionShape& s) override;
  std::string attention_method(const model::AttentionShape& s) override;
  std::size_t attention_kept_bytes(const model::AttentionShape& s) override;
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

  // For the NCCL reducer and the tests.
  kernels::cuda::Stream stream() const;
  int device() const { return device_; }
  bool shares_device() const;  // gpu.share_device was asked for and the node has more ranks than GPUs
  int visible_devices() const { return visible_; }
  const std::string& host() const { return host_; }
  std::string pci_bus_id() const;  // "0000:1B:00.0": identifies the physical GPU across processes
  Dnn& dnn();
  Blas& blas();

 private:
  struct State;
  CudaStepGraphs* scalars_pass() const;  // the step graphs while an update's numbers go through their table
  // Filters held KRSC for NHWC activations: the KCRS planes they are reordered from, and the channels each of their
  // K x R x S rows is padded to (conv_shape).
  struct KrscFilters {
    kernels::Planes kcrs;
    int64_t channels = 0;
  };
  // The 16-bit copy of the `count` fp32 weights at w in `type`: converted now (convert) or as the last forward left it;
  // where krsc is given, the copy holds them reordered (and padded) so.
  const void* weights_in(kernels::ElementType type, const float* w, int64_t count, bool convert,
                         const KrscFilters* krsc = nullptr);
  // The same for a convolution's filters, KRSC where its activations are NHWC.
  const void* filters_in(const model::Conv2dShape& s, const float* w, bool convert);
  // The shape cuDNN runs convolution s as: on 16-bit NHWC activations, its input channels padded with zeros to a
  // multiple of 8, which tensor-core kernels read (a 7x7 stem on 3 channels otherwise runs on slow ones); a grouped
  // one as it is (padding would move the groups' boundaries).
  model::Conv2dShape conv_shape(const model::Conv2dShape& s) const;
  // How s's NHWC input is padded to conv_shape's channels (rows of channels, one per position), with the backend's
  // padding buffer made large enough for it where it is padded.
  kernels::ResizedRows input_padding(const model::Conv2dShape& s);
  // x (s's NHWC input) with its channels padded as conv_shape's, in the backend's padding buffer.
  const void* padded_input(const model::Conv2dShape& s, const void* x);
  bool nhwc(kernels::ElementType type) const;
  // Convolution s as im2col + GEMM (CudaOptions::few_channel_gemm and the shape allow it; conv_gemm.cpp).
  bool gemm_conv(const model::Conv2dShape& s) const;
  model::ScratchBytes gemm_conv_scratch_bytes(const model::Conv2dShape& s) const;
  std::string gemm_conv_method(const model::Conv2dShape& s) const;
  void gemm_conv_forward(const model::Conv2dShape& s, const void* x, const float* w, const float* bias, void* y,
                         model::Scratch scratch);
  void gemm_conv_backward(const model::Conv2dShape& s, const void* x, const void* dy, const float* w, void* dx,
                          float* dw, float* dbias, model::Scratch scratch);
  // Convolution s on our depthwise kernels (CudaOptions::candidate_kernels and the shape allow it; conv_depthwise.cpp).
  bool depthwise_conv(const model::Conv2dShape& s) const;
  model::ScratchBytes depthwise_conv_scratch_bytes(const model::Conv2dShape& s) const;
  std::string depthwise_conv_method(const model::Conv2dShape& s) const;
  void depthwise_conv_forward(const model::Conv2dShape& s, const void* x, const float* w, const float* bias, void* y,
                              model::Scratch scratch);
  void depthwise_conv_backward(const model::Conv2dShape& s, const void* x, const void* dy, const float* w, void* dx,
                               float* dw, float* dbias, model::Scratch scratch);
  void* gemm_conv_filters(const model::Conv2dShape& s, const float* w, bool convert, int columns, std::byte* into);
  // The 16-bit batch norm's scratch for shape s (kernels/cuda/batchnorm.h), grown as needed and kept.
  void* batchnorm_scratch(const model::BatchNormShape& s);
  // The group synchronise_batchnorm set, or null: batch norm then runs on our kernels at every element type.
  const kernels::cuda::BatchNormGroup* batchnorm_group() const;
  // The candidate kernels' per-channel partial sums (kernels/cuda/column_sums.cuh), grown to `bytes` and kept.
  void* channel_sums_scratch(std::size_t bytes);
  // Layer norm on p as the candidate row kernels (gpu.candidate_kernels, channels contiguous, few enough).
  bool layer_norm_rows(const kernels::Planes& p) const;
  // Attention s's fused graphs (gpu.candidate_kernels, 16-bit, and cuDNN builds both directions; attention_ops.cpp),
  // built at first ask; null where s stays on the batched products.
  const AttentionGraph* fused_attention(const model::AttentionShape& s);

  std::string host_;
  int visible_ = 0, device_ = -1, local_size_ = 1;
  std::unique_ptr<State> state_;
};

}  // namespace ringtrain::backend
