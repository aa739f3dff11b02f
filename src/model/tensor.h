// Owns the activation shape (always N x C x H x W; a dense layer's output is N x F x 1 x 1) and the
// non-owning view of device memory that layers pass each other: a batch of activations, or their gradients, in
// the network's element type.
#pragma once
#include <cstdint>
#include <string>

#include "kernels/element_type.h"

namespace ringtrain::model {

using kernels::ElementType;
using kernels::Elements;

struct Shape {
  int n = 0, c = 0, h = 0, w = 0;
  int64_t per_sample() const { return int64_t{c} * h * w; }
  int64_t elements() const { return int64_t{n} * per_sample(); }
  Shape with_batch(int batch) const { return {batch, c, h, w}; }
  bool operator==(const Shape&) const = default;
  std::string str() const;  // "64x32x14x14"
};

// Memory belongs to whoever produced it (a layer's output buffer); valid until that producer runs again.
struct Tensor {
  void* data = nullptr;
  Shape shape;
  ElementType type = ElementType::f32;
  Elements elements() const { return {shape.elements(), type}; }
  template <class T>
  T* as() const {
    return static_cast<T*>(data);
  }
};

}  // namespace ringtrain::model
