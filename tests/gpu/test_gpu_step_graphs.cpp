// Proves the CUDA pieces of gpu.cuda_graphs (backend/cuda/step_graphs.h, kernels/cuda/update_scalars.cuh): the
// optimizer kernels that read the step's numbers from device memory update bit for bit as those that take them by
// value (SGD, Nesterov SGD, AdamW with its bias corrections, LARS, LAMB), over steps whose numbers change; and a
// captured update replayed with each step's numbers refreshed through the slot's pinned table ends where the same
// steps run eagerly end, bit for bit, including after a recapture at another size (the instance updated in place or
// made anew). Skips without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "backend/cuda/step_graphs.h"
#include "common/error.h"
#include "gpu_test_support.h"
#include "kernels/cuda/adamw.h"
#include "kernels/cuda/layerwise.h"
#include "kernels/cuda/sgd.h"
#include "kernels/update_scalars.h"

namespace ringtrain::gpu_test {
namespace {

namespace kc = kernels::cuda;

class CudaStepGraphsTest : public GpuSuite {
 protected:
  static constexpr int64_t kParams = 70000;
  static constexpr int kSteps = 4;

  // The state one optimizer keeps, on the device: parameters, gradients and up to two state arrays.
  struct State {
    model::DeviceBuffer param, grad, a, b;
  };
  static State fresh_state() {
    return {upload(random_vector(kParams, 1)), upload(random_vector(kParams, 2, -0.1f, 0.1f)),
            upload(std::vector<float>(kParams, 0.0f)), upload(std::vector<float>(kParams, 0.0f))};
  }
  // Gradients for the next step (every update leaves them zero).
  static void next_gradients(State& s, int step) {
    const auto g = random_vector(kParams, 10 + static_cast<uint32_t>(step), -0.1f, 0.1f);
    cuda().to_device(s.grad.as<void>(), g.data(), g.size() * sizeof(float));
  }
  static std::vector<float> params(const State& s) { return download(s.param.as<float>(), kParams); }

  void SetUp() override {
    GpuSuite::SetUp();
    if (IsSkipped()) return;
    const auto mask = kernels::make_decay_mask(kParams, {{0, kParams / 2}});
    mask_ = cuda().allocate(mask.size() * sizeof(uint32_t));
    cuda().to_device(mask_.as<void>(), mask.data(), mask.size() * sizeof(uint32_t));
    const std::vector<kernels::TensorRange> ranges = {{0, kParams / 2, 1, 0}, {kParams / 2, kParams / 2, 0, 0}};
    ranges_ = cuda().allocate(ranges.size() * sizeof(kernels::TensorRange));
    cuda().to_device(ranges_.as<void>(), ranges.data(), ranges.size() * sizeof(kernels::TensorRange));
    scratch_ = cuda().allocate(kc::layerwise_scratch_bytes(2));
    scalars_ = cuda().allocate(sizeof(kernels::UpdateScalars));
  }
  void put_scalars(const kernels::UpdateScalars& s) {
    cuda().to_device(scalars_.as<void>(), &s, sizeof s);
  }
  const uint32_t* mask() const { return mask_.as<uint32_t>(); }
  const kernels::UpdateScalars* scalars() const { return scalars_.as<kernels::UpdateScalars>(); }

  model::DeviceBuffer mask_, ranges_, scratch_, scalars_;
};

kernels::SgdStep sgd_step(int step, bool nesterov) {
  kernels::SgdStep s;
  s.lr = 0.1f / static_cast<float>(step + 1), s.momentum = 0.9f, s.weight_decay = 1e-4f, s.nesterov = nesterov;
  return s;
}

kernels::AdamStep adam_step(int step) {
  kernels::AdamStep s;
  s.lr = 1e-3f * static_cast<float>(step + 1), s.weight_decay = 0.05f;
  s.bias_correction1 = 1.0f - std::pow(0.9f, static_cast<float>(step + 1));
  s.bias_correction2 = 1.0f - std::pow(0.999f, static_cast<float>(step + 1));
  return s;
}

TEST_F(CudaStepGraphsTest, DeviceScalarsUpdateBitForBitAsScalarsByValue) {
  for (const char* rule : {"sgd", "nesterov", "adamw", "lars", "lamb"}) {
    State by_value = fresh_state(), on_device = fresh_state();
    for (int step = 0; step < kSteps; ++step) {
      next_gradients(by_value, step);
      next_gradients(on_device, step);
      const std::string r = rule;
      if (r == "sgd" || r == "nesterov") {
        const kernels::SgdStep s = sgd_step(step, r == "nesterov");
        kc::sgd_momentum_update(kParams, s, mask(), by_value.grad.as<float>(), by_value.a.as<float>(),
                                by_value.param.as<float>(), cuda().stream());
        put_scalars(kernels::update_scalars(s));
        kc::sgd_momentum_update(kParams, s, scalars(), mask(), on_device.grad.as<float>(), on_device.a.as<float>(),
                                on_device.param.as<float>(), cuda().stream());
      } else if (r == "adamw") {
        const kernels::AdamStep s = adam_step(step);
        kc::adamw_update(kParams, s, mask(), by_value.grad.as<float>(), by_value.a.as<float>(), by_value.b.as<float>(),
                         by_value.param.as<float>(), cuda().stream());
        put_scalars(kernels::update_scalars(s));
        kc::adamw_update(kParams, s, scalars(), mask(), on_device.grad.as<float>(), on_device.a.as<float>(),
                         on_device.b.as<float>(), on_device.param.as<float>(), cuda().stream());
      } else if (r == "lamb") {
        kernels::AdamStep s = adam_step(step);
        s.weight_decay = 0.01f;
        const auto* ranges = ranges_.as<kernels::TensorRange>();
        kc::lamb_update(2, ranges, s, by_value.grad.as<float>(), by_value.a.as<float>(), by_value.b.as<float>(),
                        by_value.param.as<float>(), scratch_.as<void>(), cuda().stream());
        put_scalars(kernels::update_scalars(s));
        kc::lamb_update(2, ranges, s, scalars(), on_device.grad.as<float>(), on_device.a.as<float>(),
                        on_device.b.as<float>(), on_device.param.as<float>(), scratch_.as<void>(), cuda().stream());
      } else {
        kernels::LarsStep s;
        s.lr = 2.0f / static_cast<float>(step + 1), s.momentum = 0.9f, s.weight_decay = 5e-4f;
        const auto* ranges = ranges_.as<kernels::TensorRange>();
        kc::lars_update(2, ranges, s, by_value.grad.as<float>(), by_value.a.as<float>(), by_value.param.as<float>(),
                        scratch_.as<void>(), cuda().stream());
        put_scalars(kernels::update_scalars(s));
        kc::lars_update(2, ranges, s, scalars(), on_device.grad.as<float>(), on_device.a.as<float>(),
                        on_device.param.as<float>(), scratch_.as<void>(), cuda().stream());
      }
    }
    const auto want = params(by_value);
    EXPECT_EQ(params(on_device), want) << rule;
    EXPECT_NE(want, download(fresh_state().param.as<float>(), kParams)) << rule << ": the updates changed nothing";
  }
}

// One slot; the step is an SGD update of the first `n` parameters, its rate refreshed from the pinned table.
TEST_F(CudaStepGraphsTest, ACapturedUpdateReplaysEachStepsRateAsEagerSteps) {
  State eager = fresh_state(), graphed = fresh_state();
  backend::CudaStepGraphs graphs(cuda().stream(), 1, 1);
  const auto queue_update = [&](int64_t n, const kernels::SgdStep& s) {
    graphs.refresh_scalars(0);
    kc::sgd_momentum_update(n, s, graphs.device_scalars(0, 0), mask(), graphed.grad.as<float>(),
                            graphed.a.as<float>(), graphed.param.as<float>(), cuda().stream());
  };
  for (int step = 0; step < 2 * kSteps; ++step) {
    // The last steps are a shorter update: a recapture over the slot's stale graph.
    const int64_t n = step < kSteps ? kParams : kParams / 3;
    const kernels::SgdStep s = sgd_step(step, false);
    next_gradients(eager, step);
    next_gradients(graphed, step);
    kc::sgd_momentum_update(n, s, mask(), eager.grad.as<float>(), eager.a.as<float>(), eager.param.as<float>(),
                            cuda().stream());
    graphs.host_scalars(0)[0] = kernels::update_scalars(s);
    if (step == 0 || step == kSteps) {
      graphs.begin_capture(0);
      queue_update(n, s);
      graphs.end_capture(0, step != 0);
    }
    graphs.launch(0);
    cuda().synchronize();  // the slot's table is written again next step: its copy must have run
  }
  EXPECT_EQ(params(graphed), params(eager));
}

TEST_F(CudaStepGraphsTest, AnAllocationMovesTheMemoryGeneration) {
  backend::CudaStepGraphs graphs(cuda().stream(), 2, 1);
  const uint64_t before = graphs.memory_generation();
  model::DeviceBuffer more = cuda().allocate(4096);
  EXPECT_GT(graphs.memory_generation(), before);
}

}  // namespace
}  // namespace ringtrain::gpu_test
