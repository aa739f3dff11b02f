// Owns the chunked 16-bit forms of the element-wise operations; see stored_elementwise.h.
#include "kernels/cpu/stored_elementwise.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <tuple>

#include "kernels/cpu/element_conversion.h"
#include "kernels/cpu/elementwise.h"

namespace ringtrain::kernels::cpu {
namespace {

constexpr int64_t kChunk = 4096;  // 16 KiB of fp32 per operand: the three an operation touches stay in L1
using Chunk = std::array<float, kChunk>;

const void* element_at(const void* base, ElementType type, int64_t i) {
  return static_cast<const std::byte*>(base) + static_cast<std::ptrdiff_t>(element_bytes(type)) * i;
}
void* element_at(void* base, ElementType type, int64_t i) {
  return static_cast<std::byte*>(base) + static_cast<std::ptrdiff_t>(element_bytes(type)) * i;
}
const float* f32(const void* p) { return static_cast<const float*>(p); }
float* f32(void* p) { return static_cast<float*>(p); }

// Runs kernel(count, widened inputs..., output) over [0, n) a chunk at a time, each input's chunk widened into its
// own buffer and the output's narrowed into y.
template <std::size_t Inputs, class Kernel>
void in_chunks(Elements n, const std::array<const void*, Inputs>& inputs, void* y, Kernel kernel) {
  std::array<Chunk, Inputs> in;
  Chunk out;
  for (int64_t first = 0; first < n.n; first += kChunk) {
    const int64_t count = std::min(kChunk, n.n - first);
    std::array<float*, Inputs> wide;
    for (std::size_t i = 0; i < Inputs; ++i) {
      widen({count, n.type}, element_at(inputs[i], n.type, first), in[i].data());
      wide[i] = in[i].data();
    }
    std::apply([&](auto... operand) { kernel(count, operand..., out.data()); }, wide);
    narrow(out.data(), {count, n.type}, element_at(y, n.type, first));
  }
}

}  // namespace

void add(Elements n, const void* a, const void* b, void* y) {
  if (n.type == ElementType::f32) return add(n.n, f32(a), f32(b), f32(y));
  in_chunks<2>(n, {a, b}, y, [](int64_t count, float* ca, float* cb, float* out) { add(count, ca, cb, out); });
}

void accumulate(Elements n, const void* x, void* y) {
  if (n.type == ElementType::f32) return accumulate(n.n, f32(x), f32(y));
  in_chunks<2>(n, {x, y}, y, [](int64_t count, float* cx, float* cy, float* out) {
    accumulate(count, cx, cy);
    std::copy_n(cy, count, out);
  });
}

void relu_forward(Elements n, const void* x, void* y) {
  if (n.type == ElementType::f32) return relu_forward(n.n, f32(x), f32(y));
  in_chunks<1>(n, {x}, y, [](int64_t count, float* cx, float* out) { relu_forward(count, cx, out); });
}

void relu_backward(Elements n, const void* y, const void* dy, void* dx) {
  if (n.type == ElementType::f32) return relu_backward(n.n, f32(y), f32(dy), f32(dx));
  in_chunks<2>(n, {y, dy}, dx,
               [](int64_t count, float* cy, float* cdy, float* out) { relu_backward(count, cy, cdy, out); });
}

void activation_forward(Activation a, Elements n, const void* x, void* y) {
  if (n.type == ElementType::f32) return activation_forward(a, n.n, f32(x), f32(y));
  in_chunks<1>(n, {x}, y, [a](int64_t count, float* cx, float* out) { activation_forward(a, count, cx, out); });
}

void activation_backward(Activation a, Elements n, const void* x, const void* dy, void* dx) {
  if (n.type == ElementType::f32) return activation_backward(a, n.n, f32(x), f32(dy), f32(dx));
  in_chunks<2>(n, {x, dy}, dx, [a](int64_t count, float* cx, float* cdy, float* out) {
    activation_backward(a, count, cx, cdy, out);
  });
}

}  // namespace ringtrain::kernels::cpu
