// Owns the job keys that evaluate, predict and export set whatever the job file says: keys that configure training alone,
// some of which refuse a rank count or a precision that running a trained model may well use (a model trained
// with synchronised batch norm in groups of 2, evaluated on one rank).
#pragma once
#include <string>
#include <vector>

namespace ringtrain::infer {

// `overrides` (--set's, applied in order) followed by the inference keys, which so win.
inline std::vector<std::string> with_inference_keys(std::vector<std::string> overrides) {
  overrides.push_back("dist.sync_batchnorm_group=0");  // batch norm in evaluation uses its running statistics
  overrides.push_back("dist.reducer=nonblocking");     // no gradients to reduce; "shared" refuses fp16
  overrides.push_back("gpu.cuda_graphs=false");        // no training step to capture; it refuses fp16
  overrides.push_back("train.freeze=\"\"");              // nothing is trained, so nothing is frozen
  overrides.push_back("data.mixup_alpha=0");           // nothing is mixed; mixing refuses an odd batch
  overrides.push_back("data.cutmix_alpha=0");
  return overrides;
}

}  // namespace ringtrain::infer
