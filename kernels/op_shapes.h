// Owns the shapes of the operations every backend implements (convolution, pooling, batch norm, dense), so the
// CPU kernels, the cuDNN front end and the layers that call them all describe an operation the same way.
// Plain data, comparable (the cuDNN front end caches a plan per shape), no device and no file knowledge.
#pragma once
#include <compare>
#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/element_type.h"

namespace ringtrain::kernels {

// 2-D convolution, NCHW, weights K x C/G x R x S (filters, input channels per group, kernel rows, kernel cols).
// Grouped as PyTorch groups: the channels and filters split into G equal groups, output channel k reading only the
// input channels of group k / (K/G); depthwise is G = C.
struct Conv2dShape {
  int batch = 0, in_channels = 0, in_h = 0, in_w = 0;
  int filters = 0, kernel_h = 0, kernel_w = 0, stride = 1, padding = 0;
  // y and dy in the channel-blocked layout N x K/b x (OH x OW) x b, b = out_block (see BatchNormShape::in_block);
  // 1 is NCHW.
  int out_block = 1;
  // x and dx in the channel-blocked layout N x C/b x (H x W) x b, b = in_block, as the batch norm before it wrote x
  // (BatchNormShape::out_block); 1 is NCHW.
  int in_block = 1;
  // x, y, dx and dy; the weights, bias and their gradients are fp32.
  ElementType data = ElementType::f32;
  int groups = 1;  // G; divides in_channels and filters
  int out_h() const { return (in_h + 2 * padding - kernel_h) / stride + 1; }
  int out_w() const { return (in_w + 2 * padding - kernel_w) / stride + 1; }
  int group_channels() const { return in_channels / groups; }  // C/G: the input channels each filter reads
  int group_filters() const { return filters / groups; }       // K/G
  int64_t weight_elements() const {  // K x C/G x R x S
    return int64_t{filters} * group_channels() * kernel_h * kernel_w;
  }
  // 2 x multiply-adds of the forward pass.
  double forward_flops() const {
    return 2.0 * batch * filters * out_h() * out_w() * static_cast<double>(group_channels()) * kernel_h * kernel_w;
  }
  auto operator<=>(const Conv2dShape&) const = default;
};

// Average pooling divides by the full window (padding counts as zeros), as cuDNN's
// CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING does. Global average pooling is a window equal to the input.
enum class PoolMode { max, average };

struct PoolShape {
  int batch = 0, channels = 0, in_h = 0, in_w = 0;
  int window = 2, stride = 2, padding = 0;
  ElementType data = ElementType::f32;  // x, y, dx and dy
  int out_h() const { return (in_h + 2 * padding - window) / stride + 1; }
  int out_w() const { return (in_w + 2 * padding - window) / stride + 1; }
  auto operator<=>(const PoolShape&) const = default;
};

// Spatial batch normalisation: per channel over N x H x W.
struct BatchNormShape {
  int batch = 0, channels = 0, spatial = 0;  // spatial = H x W (1 after a dense layer)
  // x and dx in a channel-blocked layout, N x C/b x (H x W) x b with b = in_block channels per block (oneDNN's
  // nChw16c for 16), as the convolution before it wrote x; 1 is NCHW, and b = C is NHWC.
  int in_block = 1;
  // y and dy (with a fused pool: the pooled output and its gradient) blocked by out_block channels the same way, as
  // the convolution after it reads x; 1 is NCHW.
  int out_block = 1;
  // x, y, dx and dy; gamma, beta, the statistics and the parameter gradients are fp32.
  ElementType data = ElementType::f32;
  int64_t elements() const { return int64_t{batch} * channels * spatial; }
  auto operator<=>(const BatchNormShape&) const = default;
};

// Fully connected: y (batch x out) = x (batch x in) W^T + b, W stored out x in (PyTorch's layout).
struct DenseShape {
  int batch = 0, in = 0, out = 0;
  ElementType data = ElementType::f32;  // x, y, dx and dy; W, b and their gradients are fp32
  // fp32 products whatever the training's precision, as a GPU's sgemm computes them (squeeze-and-excitation's gate,
  // which 16-bit operands would round); else data = f32 products take the precision's operands, as the CPU twin
  // emulates bf16 or fp16 math over fp32 tensors.
  bool full_precision = false;
  int64_t weight_elements() const { return int64_t{out} * in; }
  double forward_flops() const { return 2.0 * batch * static_cast<double>(in) * out; }
  auto operator<=>(const DenseShape&) const = default;
};

// Multi-head self-attention over T tokens of width D = heads x head_dim: per sample and head,
// softmax(Q K^T / sqrt(head_dim)) V, where Q, K and V are the head's slices of the qkv tensor's three channel thirds
// (model/layers/multi_head_attention.cpp). Token tensors are N x C x T x 1 activations in the backend's layout.
struct AttentionShape {
  int batch = 0, heads = 0, tokens = 0, head_dim = 0;
  ElementType data = ElementType::f32;  // qkv, y, their gradients and the kept probabilities
  int width() const { return heads * head_dim; }  // D
  // The softmax probabilities forward keeps for backward: N x heads x T x T.
  int64_t probabilities() const { return int64_t{batch} * heads * tokens * tokens; }
  std::size_t probabilities_bytes() const { return Elements{probabilities(), data}.bytes(); }
  // What a fused attention keeps instead: each query row's fp32 softmax statistic, N x heads x T.
  int64_t statistics() const { return int64_t{batch} * heads * tokens; }
  std::size_t statistics_bytes() const { return static_cast<std::size_t>(statistics()) * sizeof(float); }
  // 2 x multiply-adds of Q K^T and of P V.
  double forward_flops() const { return 4.0 * batch * heads * static_cast<double>(tokens) * tokens * head_dim; }
  auto operator<=>(const AttentionShape&) const = default;
};

// The name of an activation layout blocked by `block` channels, for the layer profile: NCHW, NHWC (one block of
// every channel) or oneDNN's nChw<b>c.
inline std::string blocked_layout_name(int block, int channels) {
  if (block <= 1) return "NCHW";
  return block == channels ? "NHWC" : "nChw" + std::to_string(block) + "c";
}

}  // namespace ringtrain::kernels
