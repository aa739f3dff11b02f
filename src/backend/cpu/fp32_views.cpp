// Owns the widening and narrowing around the CPU twin's fp32 kernels.
#include "backend/cpu/fp32_views.h"

#include "kernels/cpu/element_conversion.h"

namespace ringtrain::backend {

const float* Fp32Views::read(int slot, kernels::Elements x, const void* x_data) {
  if (x.type == kernels::ElementType::f32 || !x_data) return static_cast<const float*>(x_data);
  std::vector<float>& copy = copies_[static_cast<std::size_t>(slot)];
  copy.resize(static_cast<std::size_t>(x.n));
  kernels::cpu::widen_on_threads(x, x_data, copy.data());
  return copy.data();
}

float* Fp32Views::write(int slot, kernels::Elements y, void* y_data) {
  if (y.type == kernels::ElementType::f32 || !y_data) return static_cast<float*>(y_data);
  std::vector<float>& copy = copies_[static_cast<std::size_t>(slot)];
  copy.resize(static_cast<std::size_t>(y.n));
  return copy.data();
}

void Fp32Views::store(int slot, kernels::Elements y, void* y_data) const {
  if (y.type == kernels::ElementType::f32 || !y_data) return;
  kernels::cpu::narrow_on_threads(copies_[static_cast<std::size_t>(slot)].data(), y, y_data);
}

std::size_t Fp32Views::bytes() const {
  std::size_t total = 0;
  for (const auto& copy : copies_) total += copy.capacity() * sizeof(float);
  return total;
}

}  // namespace ringtrain::backend
