// Owns the GPU seam (backend/gpu_device.h) of a build without a GPU backend: nothing is visible, and asking for
// a GPU is a job-file error that says how to get one.
#include <fmt/format.h>

#include "backend/gpu_device.h"
#include "common/error.h"

namespace ringtrain::backend::gpu {
namespace {

[[noreturn]] void not_built() {
  throw JobFileError("run.device = \"cuda\" but this ringtrain was built without the CUDA backend; rebuild with "
                     "-DRINGTRAIN_CUDA=ON on a machine with the CUDA toolkit, cuDNN and NCCL, or set "
                     "run.device = \"cpu\"");
}

}  // namespace

bool built() { return false; }
bool device_visible() noexcept { return false; }
std::vector<std::pair<std::string, std::string>> library_versions() {
  return {{"CUDA", "not built (RINGTRAIN_CUDA=OFF or toolkit not found)"}};
}
std::unique_ptr<model::Backend> open_backend(const config::JobConfig&, int, int, const std::string&) { not_built(); }
std::unique_ptr<dist::GradientReducer> open_reducer(model::Backend&, MPI_Comm, double, config::WireFormat) {
  not_built();
}

}  // namespace ringtrain::backend::gpu
