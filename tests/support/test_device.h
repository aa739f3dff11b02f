// Owns RINGTRAIN_TEST_DEVICE for the MPI proofs that run on either backend: whether this run asks for the CUDA
// backend, and why it cannot have it here (no GPU visible, or a build without CUDA), which such a test skips with.
#pragma once
#include <cstdlib>
#include <string>

#include "backend/gpu_device.h"

namespace ringtrain::test_support {

inline bool test_on_gpu() {
  const char* device = std::getenv("RINGTRAIN_TEST_DEVICE");
  return device && std::string(device) == "cuda";
}

// "" where the run may go ahead on the device it asked for.
inline std::string why_not_on_test_device() {
  if (!test_on_gpu() || backend::gpu::device_visible()) return "";
  return std::string("RINGTRAIN_TEST_DEVICE=cuda but no GPU is visible (") +
         (backend::gpu::built() ? "CUDA build" : "built without CUDA") + "): runs on a GPU machine";
}

}  // namespace ringtrain::test_support
