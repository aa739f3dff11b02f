// Owns timing the two max pooling implementations; see pool_choice.h.
#include "backend/cpu/pool_choice.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/cpu/pooling.h"
#include "util/clock.h"

namespace ringtrain::backend {
namespace {

std::size_t outputs(const kernels::PoolShape& s) {
  return static_cast<std::size_t>(s.batch) * static_cast<std::size_t>(s.channels) *
         static_cast<std::size_t>(s.out_h()) * static_cast<std::size_t>(s.out_w());
}

// The quickest of a few forward + backward passes: the first pass also makes oneDNN's primitive, so it is not
// counted.
template <class Pass>
double quickest(Pass&& pass) {
  pass();
  double best = 1e30;
  for (int i = 0; i < 3; ++i) {
    const double start = util::now_s();
    pass();
    best = std::min(best, util::now_s() - start);
  }
  return best;
}

}  // namespace

std::size_t PoolChoice::saved_bytes(const kernels::PoolShape& s, std::size_t dnnl_bytes) {
  return std::max(dnnl_bytes, sizeof(int32_t) * outputs(s));
}

bool PoolChoice::choosable(const kernels::PoolShape& s, kernels::PoolMode mode) {
  return mode == kernels::PoolMode::max && s.window == s.stride && s.padding == 0;
}

PoolKernel PoolChoice::kernel(const kernels::PoolShape& s, kernels::cpu::DnnlOps& dnnl) {
  if (const auto it = chosen_.find(s); it != chosen_.end()) return it->second;
  const std::size_t inputs = static_cast<std::size_t>(s.batch) * static_cast<std::size_t>(s.channels) *
                             static_cast<std::size_t>(s.in_h) * static_cast<std::size_t>(s.in_w);
  std::vector<float> x(inputs, 0.0f), dx(inputs), y(outputs(s)), dy(outputs(s), 1.0f);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 2654435761u) >> 20 & 255);
  std::vector<unsigned char> saved(saved_bytes(s, dnnl.pool_workspace_bytes(s, kernels::PoolMode::max)));
  auto* argmax = reinterpret_cast<int32_t*>(saved.data());
  const double ours = quickest([&] {
    kernels::cpu::maxpool_forward(s, x.data(), y.data(), argmax);
    kernels::cpu::maxpool_backward(s, dy.data(), argmax, dx.data());
  });
  const double theirs = quickest([&] {
    dnnl.pool_forward(s, kernels::PoolMode::max, x.data(), y.data(), saved.data());
    dnnl.pool_backward(s, kernels::PoolMode::max, dy.data(), dx.data(), saved.data());
  });
  return chosen_[s] = ours < theirs ? PoolKernel::ours : PoolKernel::dnnl;
}

}  // namespace ringtrain::backend
