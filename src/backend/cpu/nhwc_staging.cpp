// Owns the staging copies of nhwc_staging.h.
#include "backend/cpu/nhwc_staging.h"

#include "kernels/cpu/reorder_layout.h"

namespace ringtrain::backend {

using kernels::ActivationLayout;

void* NhwcStaging::copy(int slot, const kernels::Planes& p) {
  auto& bytes = copies_[static_cast<std::size_t>(slot)];
  bytes.resize(static_cast<std::size_t>(p.elements()) * kernels::element_bytes(p.type));
  return bytes.data();
}

const void* NhwcStaging::read(int slot, const kernels::Planes& p, const void* x) {
  if (!staged(p) || !x) return x;
  void* nchw = copy(slot, p);
  kernels::cpu::reorder_layout(p, ActivationLayout::nchw, x, nchw);
  return nchw;
}

NhwcStaging::Output::Output(NhwcStaging& staging, int slot, const kernels::Planes& p, void* y)
    : planes_(p), data_(staging.staged(p) && y ? staging.copy(slot, p) : y), y_(y) {}

NhwcStaging::Output::~Output() {
  if (data_ != y_) kernels::cpu::reorder_layout(planes_, ActivationLayout::nhwc, data_, y_);
}

std::size_t NhwcStaging::bytes() const {
  std::size_t total = 0;
  for (const auto& c : copies_) total += c.capacity();
  return total;
}

}  // namespace ringtrain::backend
