// Owns the element types a network's activations (and their gradients) can be stored in: fp32, or bf16 or fp16
// under mixed precision, where parameters, their gradients and the optimizer's state stay fp32. bf16 and fp16
// travel as their 16-bit patterns. Plain data, known to the kernels and the backends alike.
#pragma once
#include <cstddef>
#include <cstdint>

namespace ringtrain::kernels {

enum class ElementType : uint8_t { f32, bf16, f16 };

constexpr std::size_t element_bytes(ElementType type) { return type == ElementType::f32 ? 4 : 2; }

constexpr const char* element_type_name(ElementType type) {
  switch (type) {
    case ElementType::bf16: return "bf16";
    case ElementType::f16: return "fp16";
    default: return "fp32";
  }
}

// The count and element type of an element-wise operation's tensors: n elements of `type` each. Made from a bare
// count for fp32, as most callers have.
struct Elements {
  Elements(int64_t count, ElementType element_type = ElementType::f32) : n(count), type(element_type) {}
  int64_t n = 0;
  ElementType type = ElementType::f32;
  std::size_t bytes() const { return static_cast<std::size_t>(n) * element_bytes(type); }
};

}  // namespace ringtrain::kernels
