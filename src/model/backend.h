// Owns the Backend contract: the operations a device provides so that the layers (model/layers/), the loss, the
// optimizer and the gradient reduction run on it. Layers are written once over these operations; the CPU twin
// implements them over kernels/cpu, the CUDA backend over cuDNN, cuBLAS and kernels/cuda.
//
// Ordering: every operation is queued in one stream order per backend; the host waits only where a result must
// reach it (to_host, synchronize, Readback::wait, reading a DeviceClock). Conventions, as in kernels/cpu: outputs
// and input gradients are overwritten, parameter gradients accumulate (micro-batches of one step add up).
//
// Element types: activations and their gradients (x, y, dx, dy) are in the element type their operation's shape or
// Elements says, fp32 or, under mixed precision, bf16 or fp16 (stores_activations_in); parameters, their gradients,
// statistics and optimizer state are always fp32, as are the loss's logits.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/error.h"
#include "kernels/activation.h"
#include "kernels/activation_layout.h"
#include "kernels/jpeg_crop.h"
#include "kernels/layer_norm.h"
#include "kernels/layer_seed.h"
#include "kernels/loss_settings.h"
#include "kernels/loss_totals.h"
#include "kernels/op_shapes.h"
#include "kernels/optimizer_step.h"
#include "kernels/pixel_norm.h"
#include "kernels/token_span.h"
#include "model/device_buffer.h"
#include "model/fusion.h"
#include "model/scratch.h"
#include "model/step_capturer.h"
#include "model/tensor.h"

namespace ringtrain::model {

using kernels::ActivationLayout;
using kernels::AttentionShape;
using kernels::BatchNormShape;
using kernels::Conv2dShape;
using kernels::DenseShape;
using kernels::LayerNormTensors;
using kernels::LossSettings;
using kernels::LossTotals;
using kernels::PixelShape;
using kernels::PoolMode;
using kernels::PoolShape;
using kernels::AdamStep;
using kernels::LarsStep;
using kernels::EmaStep;
using kernels::SgdStep;
using kernels::TensorRange;

// A batch-norm layer's per-channel buffers: parameters, running statistics, and what training forward saves
// for backward.
struct BatchNormBuffers {
  const float* gamma = nullptr;
  const float* beta = nullptr;
  float* running_mean = nullptr;
  float* running_var = nullptr;
  float* saved_mean = nullptr;
  float* saved_inv_std = nullptr;
  int32_t* pool_argmax = nullptr;  // the fused max pool's winners (BatchNormSettings::pool), kept for backward
};

struct BatchNormSettings {
  double momentum = 0.1, epsilon = 1e-5;
  // A ReLU follows in the same operation (the fusion pass fused it, where the backend's fusion table has batch norm
  // take on "relu"); backward then masks dy by the forward's output.
  bool relu = false;
  // And a max pool after the ReLU (the table's "relu", "maxpool"): y, and backward's y and dy, are pooled.
  std::optional<FusedMaxPool> pool;
  // The fused ReLU is a ReLU6 (the table's "relu6"): it clips at 6 as well, and backward masks dy where y is 0 or 6.
  bool relu6 = false;
};

// Adds per-channel sums up, in place, over the ranks whose batch norms normalise together
// (dist.sync_batchnorm_group). Collective over those ranks: each calls it as often, with spans of the same length.
// Declared here so a backend can be handed one without knowing how ranks talk (dist/ implements it).
class BatchStatisticsGroup {
 public:
  virtual ~BatchStatisticsGroup() = default;
  virtual void all_reduce(std::span<double> sums) = 0;
};

// A small device-to-host copy queued in stream order and read once it has landed, so the host learns a step's
// loss without waiting for the step. One copy in flight at a time per Readback.
class Readback {
 public:
  virtual ~Readback() = default;
  virtual void start(const void* device_src) = 0;  // queues the copy of the bytes the Readback was made for
  virtual bool ready() = 0;                        // the copy has landed; never waits
  virtual const void* wait() = 0;                  // waits for the copy; the host bytes stay valid until start()
};

// Marks recorded in stream order, each dated once the device has passed it: phase times measured on the
// device, not by making the host wait after each phase. Marks are numbered 0..capacity-1 and reused.
class DeviceClock {
 public:
  virtual ~DeviceClock() = default;
  virtual void mark(int id) = 0;
  // Device seconds from mark `from` to mark `to`; waits until the device has passed `to`.
  virtual double elapsed(int from, int to) = 0;
  // When the device passed mark `id`, on the host clock (util::now_s), for the trace; waits until it has.
  virtual double host_time(int id) = 0;
};

// JPEG batches decoded where the network runs (data.decode = gpu) into `slots` buffers of the backend's, by a thread
// other than the one that queues the network's work (data/decode_ahead.h), so that the decode's host phase (nvJPEG's
// Huffman decode or its submission to the hardware engine) leaves the step's thread free. A slot goes round: decode()
// on the decoding thread, then use() and release() on the queueing thread, then decode() again; each call happens
// after the one before it (the caller's queue orders them). Each sample is the whole photo decoded, then its crop
// resampled and mirrored onto C x H x W uint8, as kernels/crop_resample.h defines it.
class JpegSlots {
 public:
  virtual ~JpegSlots() = default;
  // Decodes into `slot` once the work that read it before its release() has run. The JPEG bytes may be reused once
  // it returns. Throws kernels::UndecodableJpeg naming the batch position of a sample that does not decode.
  virtual void decode(int slot, std::span<const kernels::JpegCrop> samples, const Shape& sample) = 0;
  // Work queued after this call (on the queueing thread) sees the slot's samples; returns them (device memory).
  virtual const uint8_t* use(int slot) = 0;
  // Everything that reads the slot's samples is queued: it may be decoded into again.
  virtual void release(int slot) = 0;
};

// The slots decode_jpegs uses in turn (decode_in_turn): the batch decoded before stays valid until the call after
// next.
inline constexpr int kJpegSlotsInTurn = 2;

// Backend::decode_jpegs on one thread, over kJpegSlotsInTurn slots used in turn. `next`: the slot the call decodes
// into (0 at first), advanced.
inline const uint8_t* decode_in_turn(JpegSlots& slots, int& next, std::span<const kernels::JpegCrop> samples,
                                     const Shape& sample) {
  slots.release(1 - next);  // the work queued so far includes every reader of the last call's batch
  slots.decode(next, samples, sample);
  const uint8_t* const decoded = slots.use(next);
  next = 1 - next;
  return decoded;
}

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;  // "cpu" | "cuda"
  virtual std::string description() const = 0;

  // ---- memory and copies
  virtual DeviceBuffer allocate(std::size_t bytes) = 0;  // zero-filled
  // Bytes allocate() has handed out so far (cumulative: buffers are made at setup and live for the run).
  virtual std::size_t bytes_allocated() const = 0;
  // Whether those bytes are host memory (the CPU twin), part of the process's resident set.
  virtual bool allocates_host_memory() const = 0;
  // Device memory in use now by this process and others (context, library workspaces, allocations), or 0
  // where the device is the host.
  virtual std::size_t device_bytes_in_use() const { return 0; }
  // The most device memory this process's own allocations (model buffers, library workspaces) held at once, the
  // measure PyTorch calls max_memory_allocated: without the context and the libraries' loaded kernels; 0 where
  // the device is the host.
  virtual std::size_t device_bytes_allocated_peak() const { return 0; }
  // Memory the backend holds for its own work besides what allocate() handed out (workspaces, staging and
  // conversion copies), as it stands now: it grows as operations first run.
  virtual std::size_t working_bytes() const { return 0; }
  // What new allocations can still get: the host's available memory (shared by the node's ranks) or the GPU's
  // free memory; 0 when unknown.
  virtual std::size_t memory_available() const = 0;
  virtual void to_device(void* device_dst, const void* host_src, std::size_t bytes) = 0;
  virtual void to_host(void* host_dst, const void* device_src, std::size_t bytes) = 0;  // waits for the stream
  virtual void synchronize() = 0;
  virtual std::unique_ptr<Readback> make_readback(std::size_t bytes) = 0;
  virtual std::unique_ptr<DeviceClock> make_clock(int capacity) = 0;
  // gpu.cuda_graphs: what captures and replays the training step (model/step_capturer.h), or null where steps run
  // as they are (the CPU twin; the CUDA backend without the key).
  virtual StepCapturer* step_capturer() { return nullptr; }

  // ---- element types: whether activations may be stored in `type` here (fp32 always), and conversion between
  // types (round to nearest even; widening is exact).
  virtual bool stores_activations_in(ElementType type) const { return type == ElementType::f32; }
  virtual void cast(Elements from, const void* x, ElementType to, void* y) = 0;  // from.n values of from.type

  // ---- layouts: how 4-D activations of `type` lie in this backend's memory (kernels/activation_layout.h). Layers
  // pass NCHW shapes whatever it is; the network reorders its input into it and flatten reorders out of it, so what
  // leaves the backend's kernels (dense inputs, logits, checkpoints) keeps one meaning.
  virtual ActivationLayout activation_layout(ElementType type) const {
    (void)type;
    return ActivationLayout::nchw;
  }
  // y = x reordered into `to` (x is in the other layout); asked only of a backend storing something NHWC.
  virtual void reorder_activation(const kernels::Planes& p, ActivationLayout to, const void* x, void* y) {
    (void)p, (void)to, (void)x, (void)y;
    throw Error(ExitCode::internal, name() + " backend asked to reorder activations it stores NCHW only");
  }

  // ---- element-wise
  virtual void zero(void* y, std::size_t bytes) = 0;
  virtual void fill(int64_t n, float value, float* y) = 0;
  virtual void copy(Elements n, const void* x, void* y) = 0;
  virtual void add(Elements n, const void* a, const void* b, void* y) = 0;  // y may alias a or b
  virtual void accumulate(Elements n, const void* x, void* y) = 0;          // y += x
  // y *= factor, and *nonfinite (device memory) = 1 where any element is infinite or NaN, left alone otherwise:
  // fp16's loss scaling takes the scale out of the reduced gradients and learns whether they overflowed.
  virtual void unscale(int64_t n, float factor, float* y, int32_t* nonfinite) = 0;
  virtual void scale(int64_t n, float factor, float* y) = 0;  // y *= factor (gradient clipping)
  // *total (device memory) = the sum of x[i]^2 in double, in a fixed order (the same bits for the same x):
  // gradient clipping's global norm, which every rank must find alike.
  virtual void sum_squares(int64_t n, const float* x, double* total) = 0;
  virtual void relu_forward(Elements n, const void* x, void* y) = 0;  // y may alias x
  virtual void relu_backward(Elements n, const void* y, const void* dy, void* dx) = 0;
  // y = a(x) and dx = a'(x) dy for the smooth and clipped activations (kernels/activation.h); y may alias x.
  virtual void activation_forward(kernels::Activation a, Elements n, const void* x, void* y) = 0;
  virtual void activation_backward(kernels::Activation a, Elements n, const void* x, const void* dy, void* dx) = 0;
  // y = relu(a + b), bit for bit add then relu_forward (a residual join); a backend overrides it with one pass.
  virtual void add_relu(Elements n, const void* a, const void* b, void* y) {
    add(n, a, b, y);
    relu_forward(n, y, y);
  }
  // Inverted dropout: keeps each element with probability 1-p, scaled by 1/(1-p); mask: one byte per element in x's
  // order, kept for backward. Each element's draw follows its NCHW position in x's planes (kernels::NchwIndex), so
  // it is the same whichever layout the backend stores x in. The mask is reproducible from the seed on each backend
  // (not across backends): the layer's seed (kernels/layer_seed.h), which a graphed step derives on the device.
  virtual void dropout_forward(const kernels::Planes& x_planes, float p, const kernels::LayerSeed& seed,
                               const void* x, void* y, uint8_t* mask) = 0;
  virtual void dropout_backward(Elements n, float p, const uint8_t* mask, const void* dy, void* dx) = 0;
  // Per (sample, channel) plane of x's planes, in the layout the backend stores p.type in: sums[n*C + c] = factor *
  // the sum over the plane of a (times b where b is not null), in fp32 (a squeeze-and-excitation's mean, and its
  // gate's gradient); and y = x * scale[n*C + c] + shift[n*C + c], shift optional, y may alias x (its gate, and the
  // gate's backward). The per-plane numbers are fp32 whatever p.type.
  virtual void plane_sums(const kernels::Planes& p, float factor, const void* a, const void* b, float* sums) = 0;
  virtual void plane_scale(const kernels::Planes& p, const void* x, const float* scale, const float* shift,
                           void* y) = 0;

  // ---- tokens (kernels/token_span.h): activations of Shape {n, D, T, 1}, D features of each of T tokens, in the
  // layout the backend stores their type in; tables are fp32 and token-major (token t's feature d at t * D + d)
  // whatever that layout (a ViT's class token and position embedding).
  // y's tokens [c.to_first, c.to_first + c.count) = x's tokens [c.from_first, ...) in each sample, bit for bit.
  virtual void copy_tokens(const kernels::TokenCopy& c, const void* x, void* y) = 0;
  // y's tokens [s.first, s.first + s.count) = x's same tokens (0 where x is null) + the table's rows 0..count-1;
  // y may alias x; y's other tokens are left as they are.
  virtual void add_token_table(const kernels::TokenSpan& s, const void* x, const float* table, void* y) = 0;
  // dtable[t * D + d] += the sum over samples of dy's token s.first + t, feature d (a table's gradient).
  virtual void token_table_gradient(const kernels::TokenSpan& s, const void* dy, float* dtable) = 0;

  // ---- convolution: prepare() at setup chooses algorithms and says what scratch they want, so no step does.
  // A step given less scratch than its algorithm wants (another batch size) uses the backend's own workspace.
  virtual ScratchBytes conv2d_prepare(const Conv2dShape& s) {
    (void)s;
    return {};
  }
  virtual void conv2d_forward(const Conv2dShape& s, const void* x, const float* w, const float* bias, void* y,
                              Scratch scratch) = 0;
  // The filter (and bias) gradient added to dw (dbias, may be null) and, where dx is not null, the data gradient
  // written to dx: one call, so a backend can share what both read (the CPU twin stages dy once).
  virtual void conv2d_backward(const Conv2dShape& s, const void* x, const void* dy, const float* w, void* dx,
                               float* dw, float* dbias, Scratch scratch) = 0;
  // How this backend runs convolution s (after conv2d_prepare): the library and the implementations or algorithms
  // it chose, for the layer profile. Empty where there is nothing to tell.
  virtual std::string conv2d_method(const Conv2dShape& s) {
    (void)s;
    return "";
  }

  // ---- dense: dx may be null (the first layer needs none); bias and dbias may be null
  virtual void dense_forward(const DenseShape& s, const void* x, const float* w, const float* bias, void* y) = 0;
  virtual void dense_backward(const DenseShape& s, const void* x, const float* w, const void* dy, void* dx,
                              float* dw, float* dbias) = 0;

  // ---- batch norm: running = (1-momentum)*running + momentum*batch, unbiased variance for running_var.
  // y (backward) is the forward's output, read only when settings.relu.
  virtual void batchnorm_forward_train(const BatchNormShape& s, const BatchNormSettings& settings, const void* x,
                                       const BatchNormBuffers& b, void* y) = 0;
  virtual void batchnorm_forward_infer(const BatchNormShape& s, const BatchNormSettings& settings, const void* x,
                                       const BatchNormBuffers& b, void* y) = 0;
  virtual void batchnorm_backward(const BatchNormShape& s, const BatchNormSettings& settings, const void* x,
                                  const void* y, const void* dy, const BatchNormBuffers& b, void* dx,
                                  float* dgamma, float* dbeta) = 0;
  // A residual block's last batch norm with the block's join (its add, then ReLU): y = relu(batch norm(x) +
  // shortcut); backward writes dshortcut, dy through the ReLU's mask (relu_backward's), and the batch norm's backward
  // of it into dx. settings.relu and settings.pool are off (the ReLU is the join's). The defaults run the ops apart,
  // so the numbers are theirs by construction; a backend that fuses overrides them with the same bits in fewer
  // passes over memory, where its fusion table has batch norm take on the join (kJoin).
  virtual void batchnorm_add_relu_forward_train(const BatchNormShape& s, const BatchNormSettings& settings,
                                                const void* x, const void* shortcut, const BatchNormBuffers& b,
                                                void* y) {
    batchnorm_forward_train(s, settings, x, b, y);
    add_relu({s.elements(), s.data}, y, shortcut, y);
  }
  virtual void batchnorm_add_relu_forward_infer(const BatchNormShape& s, const BatchNormSettings& settings,
                                                const void* x, const void* shortcut, const BatchNormBuffers& b,
                                                void* y) {
    batchnorm_forward_infer(s, settings, x, b, y);
    add_relu({s.elements(), s.data}, y, shortcut, y);
  }
  virtual void batchnorm_add_relu_backward(const BatchNormShape& s, const BatchNormSettings& settings, const void* x,
                                           const void* y, const void* dy, const BatchNormBuffers& b, void* dx,
                                           void* dshortcut, float* dgamma, float* dbeta) {
    relu_backward({s.elements(), s.data}, y, dy, dshortcut);
    batchnorm_backward(s, settings, x, nullptr, dshortcut, b, dx, dgamma, dbeta);
  }
  // From now on training batch norm (every batchnorm_* but the _infer ones) normalises with the statistics of the
  // batches of `group`'s ranks, and backward's dx follows them; inference is unchanged. A backend that cannot
  // refuses with a JobFileError naming the key.
  virtual void synchronise_batchnorm(std::shared_ptr<BatchStatisticsGroup> group) {
    (void)group;
    throw JobFileError("dist.sync_batchnorm_group is not available on the " + name() +
                       " backend; set dist.sync_batchnorm_group = 0 or run.device = \"cpu\"");
  }
  // ---- layer normalisation over channels (kernels/layer_norm.h): per (sample, position) of p's planes, in the
  // layout the backend stores p.type in, the C values normalised by their mean and biased variance, then
  // y = gamma[c] * xhat + beta[c]. Forward writes the positions' statistics into t.mean and t.rstd (N x HW each),
  // which backward reads; backward writes dx (none where null) and adds to dgamma and dbeta.
  virtual void layer_norm_forward(const kernels::Planes& p, float epsilon, const void* x, const LayerNormTensors& t,
                                  void* y) = 0;
  virtual void layer_norm_backward(const kernels::Planes& p, const void* x, const void* dy, const LayerNormTensors& t,
                                   void* dx, float* dgamma, float* dbeta) = 0;

  // ---- pooling: `saved` is what forward keeps for backward on this backend, pool_saved_bytes() of it (the CPU
  // twin keeps the winners of max pooling); x and y are the forward's input and output.
  virtual std::size_t pool_saved_bytes(const PoolShape& s, PoolMode mode) const = 0;
  virtual void pool_forward(const PoolShape& s, PoolMode mode, const void* x, void* y, void* saved) = 0;
  virtual void pool_backward(const PoolShape& s, PoolMode mode, const void* x, const void* y, const void* dy,
                             void* dx, const void* saved) = 0;

  // ---- multi-head self-attention (kernels/attention.h): per sample and head h, y's head-h channels =
  // softmax(Q K^T / sqrt(head_dim)) V, where Q, K and V are head h's channels of the three thirds of qkv. qkv is
  // N x 3D x T x 1 and y N x D x T x 1, both in the layout the backend stores s.data in. probabilities: the softmax's
  // output, s.probabilities() values of s.data (N x heads x T x T), written by forward for backward. They are kept
  // in the element type rather than fp32: the product with V reads them as an operand in that type on tensor cores
  // anyway, so backward sees the numbers forward used, and at ViT's 197 tokens they outweigh the block's other
  // kept tensors (fp32 would double that). A backend's fused attention (the CUDA backend's cuDNN graphs under
  // gpu.candidate_kernels) keeps less in that buffer instead, each query row's softmax statistic, and reads y back.
  // prepare() at setup says what scratch the passes want, attention_kept_bytes() how large `probabilities` must be.
  virtual ScratchBytes attention_prepare(const AttentionShape& s) {
    (void)s;
    return {};
  }
  // The bytes forward keeps in `probabilities` at s, after attention_prepare(s): s.probabilities_bytes() where
  // the softmax's output is kept, s.statistics_bytes() where this backend takes a fused path for s. The path may
  // differ with the batch, so a layer reserving for its full batch asks again at a smaller one.
  virtual std::size_t attention_kept_bytes(const AttentionShape& s) = 0;
  virtual void attention_forward(const AttentionShape& s, const void* qkv, void* y, void* probabilities,
                                 Scratch scratch) = 0;
  // dqkv (overwritten) from dy, and the forward's qkv, output y and probabilities.
  virtual void attention_backward(const AttentionShape& s, const void* qkv, const void* y, const void* probabilities,
                                  const void* dy, void* dqkv, Scratch scratch) = 0;
  // How this backend runs attention s (after attention_prepare), for the layer profile; empty where there is nothing
  // to tell.
  virtual std::string attention_method(const AttentionShape& s) {
    (void)s;
    return "";
  }

  // ---- fusion and layouts (model/fusion.h), asked once by the fusion pass, after setup
  // The fusion table: which layer types take on which layers after them, each fused form with the numbers of the
  // layers apart (batch norm's: BatchNormSettings::relu and pool, batchnorm_add_relu_*). Empty: nothing fuses.
  virtual std::vector<FusionRule> fusion_rules() const { return {}; }
  // The channel block (N x C/b x H x W x b) in which `producer` hands its output to `consumer`, the next layer of its
  // chain and that output's only reader: one the producer's kernels write and the consumer's read, sparing a reorder
  // each way in forward and backward. 1: NCHW.
  virtual int chain_block(const LayerOperation& producer, const LayerOperation& consumer) {
    (void)producer, (void)consumer;
    return 1;
  }

  // ---- loss and optimizers
  // dlogits may be null (evaluation); `loss` scales them and smooths the target (kernels/loss_settings.h). The
  // batch's sums are added to `totals`, which lives in device memory (allocate(sizeof(LossTotals))); nothing waits.
  virtual void softmax_cross_entropy(int batch, int classes, const float* logits, const int32_t* labels,
                                     const LossSettings& loss, float* dlogits, LossTotals* totals) = 0;
  // The same against soft targets (batch x classes rows summing to 1, device memory; mixup and CutMix): the
  // formulas, the smoothing and the accuracy against the dominant class are kernels/cpu/softmax_cross_entropy.h's.
  virtual void soft_target_cross_entropy(int batch, int classes, const float* logits, const float* targets,
                                         const LossSettings& loss, float* dlogits, LossTotals* totals) = 0;
  // The element-wise optimizers: one pass over the flat buffers; decay_mask (device memory) says where weight
  // decay applies. Formulas: kernels/optimizer_step.h. Every optimizer leaves grad zero: it is consumed in the pass
  // that reads it last, so the next step's gradients need no separate zeroing pass.
  virtual void sgd_update(int64_t n, const SgdStep& step, const uint32_t* decay_mask, float* grad,
                          float* velocity, float* param) = 0;
  virtual void adamw_update(int64_t n, const AdamStep& step, const uint32_t* decay_mask, float* grad, float* m,
                            float* v, float* param) = 0;
  // The layer-wise optimizers: `ranges` (device memory) are the parameter tensors, covering the flat buffers; each
  // tensor's norms scale its update. A fixed number of passes over all tensors, not one call per tensor.
  virtual void lars_update(int tensors, const TensorRange* ranges, const LarsStep& step, float* grad,
                           float* velocity, float* param) = 0;
  virtual void lamb_update(int tensors, const TensorRange* ranges, const AdamStep& step, float* grad, float* m,
                           float* v, float* param) = 0;
  // The weights' moving average after an update: ema += (1 - decay) * (param - ema) over n values
  // (kernels::ema_blend; model/weight_average.h), queued like the update it follows.
  virtual void ema_update(int64_t n, const EmaStep& step, const float* param, float* ema) = 0;

  // ---- input: the loader's uint8 N x C x H x W pixels (device memory) to the network's fp32 input,
  // (x - mean[c]) / stddev[c] as kernels/pixel_norm.h defines it, bit-identical on every backend. mean and
  // stddev: s.channels floats in device memory.
  virtual void normalize_pixels(const PixelShape& s, const uint8_t* x, const float* mean, const float* stddev,
                                float* y) = 0;
  // A JPEG split's batch decoded where the network runs (data.decode = gpu): each sample's whole photo decoded,
  // then its crop resampled and mirrored onto `sample` (C x H x W uint8) as kernels/crop_resample.h defines it.
  // Returns device memory the backend owns, samples.size() samples, which work queued after the call sees; it stays
  // valid until the call after next, so one batch may be decoded while the previous one is used. The JPEG bytes
  // may be reused once the call returns. Throws kernels::UndecodableJpeg naming the batch position of a sample
  // that does not decode, and Error where this build or device has no decoder.
  virtual const uint8_t* decode_jpegs(std::span<const kernels::JpegCrop> samples, const Shape& sample) = 0;
  // The same decode split across two threads (see JpegSlots); throws Error where this build or device has no
  // decoder.
  virtual std::unique_ptr<JpegSlots> make_jpeg_slots(int slots) = 0;
};

// Activations of `shape` in `type` as a reorder between layouts takes them.
inline kernels::Planes planes_of(const Shape& shape, ElementType type) {
  return {shape.n, shape.c, int64_t{shape.h} * shape.w, type};
}
// Whether `backend` keeps activations of `type` and `shape` in another order than NCHW: NHWC with more than one
// position (with one, the two layouts are the same bytes).
inline bool stored_nhwc(const Backend& backend, ElementType type, const Shape& shape) {
  return backend.activation_layout(type) == ActivationLayout::nhwc && int64_t{shape.h} * shape.w > 1;
}

}  // namespace ringtrain::model
