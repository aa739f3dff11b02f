// Owns the element-wise operations on stored tensors: fp32 on elementwise.h directly, 16-bit types on the calling
// thread, the sums in lanes (stored_lanes.h), the activations through widened chunks (stored_chunks.h); see
// stored_elementwise.h.
#include "kernels/cpu/stored_elementwise.h"

#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/stored_chunks.h"
#include "kernels/cpu/stored_lanes.h"

namespace ringtrain::kernels::cpu {
namespace {

const float* f32(const void* p) { return static_cast<const float*>(p); }
float* f32(void* p) { return static_cast<float*>(p); }

}  // namespace

void add(Elements n, const void* a, const void* b, void* y) {
  if (n.type == ElementType::f32) return add(n.n, f32(a), f32(b), f32(y));
  for_each_stored_lanes<2>(1, n, {a, b}, y, [](FloatLanes va, FloatLanes vb) { return va + vb; });
}

void accumulate(Elements n, const void* x, void* y) {
  if (n.type == ElementType::f32) return accumulate(n.n, f32(x), f32(y));
  for_each_stored_lanes<2>(1, n, {x, y}, y, [](FloatLanes vx, FloatLanes vy) { return vy + vx; });
}

void relu_forward(Elements n, const void* x, void* y) {
  if (n.type == ElementType::f32) return relu_forward(n.n, f32(x), f32(y));
  for_each_stored_chunk<1>(1, n, {x}, y,
                           [](int64_t count, const float* cx, float* out) { relu_forward(count, cx, out); });
}

void relu_backward(Elements n, const void* y, const void* dy, void* dx) {
  if (n.type == ElementType::f32) return relu_backward(n.n, f32(y), f32(dy), f32(dx));
  for_each_stored_chunk<2>(1, n, {y, dy}, dx, [](int64_t count, const float* cy, const float* cdy, float* out) {
    relu_backward(count, cy, cdy, out);
  });
}

void activation_forward(Activation a, Elements n, const void* x, void* y) {
  if (n.type == ElementType::f32) return activation_forward(a, n.n, f32(x), f32(y));
  for_each_stored_chunk<1>(1, n, {x}, y,
                           [a](int64_t count, const float* cx, float* out) { activation_forward(a, count, cx, out); });
}

void activation_backward(Activation a, Elements n, const void* x, const void* dy, void* dx) {
  if (n.type == ElementType::f32) return activation_backward(a, n.n, f32(x), f32(dy), f32(dx));
  for_each_stored_chunk<2>(1, n, {x, dy}, dx, [a](int64_t count, const float* cx, const float* cdy, float* out) {
    activation_backward(a, count, cx, cdy, out);
  });
}

}  // namespace ringtrain::kernels::cpu
