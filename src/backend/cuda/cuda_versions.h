// Owns what the CUDA build reports about itself for `ringtrain --version` and versions.json, and the device probe
// behind run.device = "auto". Both work, and never throw, on a machine without a GPU or driver.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace ringtrain::backend {

// ("CUDA runtime", "13.0"), ("CUDA driver", "13.0" | "no driver"), ("cuDNN", "9.19.0"), ("cudnn-frontend",
// "1.32.0": the headers compiled in, conv_graphs.h), ("cuBLAS", "13.1.0"), ("NCCL", "2.28.3"),
// ("nvJPEG", "13.0.4" | "not built (...)"), ("GPUs", "1 visible: NVIDIA H100 80GB HBM3" | "none visible (...)"), each
// from the library's run-time query, so a mismatched shared library shows up.
std::vector<std::pair<std::string, std::string>> cuda_versions();

// True when the CUDA runtime sees at least one device (honouring CUDA_VISIBLE_DEVICES). Touches no device.
bool cuda_device_visible() noexcept;

}  // namespace ringtrain::backend
