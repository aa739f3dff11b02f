// Owns the seam between ringtrain and its GPU backend, resolved at link time: backend/cuda implements these
// functions in a CUDA build, backend/no_gpu in a build without one, so no caller needs an #ifdef.
#pragma once
#include <mpi.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "config/job_config.h"
#include "dist/gradient_reducer.h"
#include "model/backend.h"

namespace ringtrain::backend::gpu {

bool built();                    // this binary carries a GPU backend
bool device_visible() noexcept;  // a GPU is visible to this process (touches no device)
// The GPU libraries' run-time versions, or one line saying none were built.
std::vector<std::pair<std::string, std::string>> library_versions();

// This rank's GPU backend, configured from the job (precision, algorithm search, workspace, determinism).
// Throws JobFileError when no GPU can serve this rank, naming the host and why.
std::unique_ptr<model::Backend> open_backend(const config::JobConfig& job, int local_rank, int local_size,
                                             const std::string& host);
// The gradient all-reduce between the ranks of `comm` on `backend` (made by open_backend); collective.
std::unique_ptr<dist::GradientReducer> open_reducer(model::Backend& backend, MPI_Comm comm, double timeout_s,
                                                   config::WireFormat wire);

}  // namespace ringtrain::backend::gpu
