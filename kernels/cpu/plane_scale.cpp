// Owns the CPU per-plane sums and scales declared in plane_scale.h: single loops on the calling thread, as the other
// element-wise kernels run (a pass over one activation tensor is too short to pay for waking a thread team).
#include "kernels/cpu/plane_scale.h"

namespace ringtrain::kernels::cpu {

void plane_sums(const Planes& p, ActivationLayout layout, float factor, const float* a, const float* b, float* sums) {
  const PlaneStrides st = plane_strides(p, layout);
  const int64_t image = p.c * p.hw;
  for (int64_t n = 0; n < p.n; ++n)
    for (int64_t c = 0; c < p.c; ++c) {
      const int64_t base = n * image + c * st.channel;
      double sum = 0;
      for (int64_t i = 0; i < p.hw; ++i) {
        const int64_t at = base + i * st.position;
        sum += b ? double{a[at]} * b[at] : double{a[at]};
      }
      sums[n * p.c + c] = static_cast<float>(sum * factor);
    }
}

void plane_scale(const Planes& p, ActivationLayout layout, const float* x, const float* scale, const float* shift,
                 float* y) {
  const PlaneStrides st = plane_strides(p, layout);
  const int64_t image = p.c * p.hw;
  for (int64_t n = 0; n < p.n; ++n)
    for (int64_t c = 0; c < p.c; ++c) {
      const int64_t base = n * image + c * st.channel, nc = n * p.c + c;
      const float k = scale[nc], s = shift ? shift[nc] : 0.0f;
      for (int64_t i = 0; i < p.hw; ++i) {
        const int64_t at = base + i * st.position;
        y[at] = x[at] * k + s;
      }
    }
}

}  // namespace ringtrain::kernels::cpu
