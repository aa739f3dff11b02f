// Owns comparing the resolved job file a checkpoint was written by with this run's: a resume or an evaluation with
// another model (an activation swapped, a pooling changed: the same parameter shapes) is refused by name, from the
// layers as the job reader gives them (defaults filled, model.replace_head applied), and the other keys that
// changed are named in the run header, since the run then no longer continues the one it resumes.
#pragma once
#include <string>
#include <vector>

namespace ringtrain::config {

// One key whose value differs: its dotted name ("model.layers[2].type"), and each side's value as TOML writes it.
struct JobDifference {
  std::string key, was, now;
};

// The keys both jobs set whose values differ, tables and keys in name order. A key only one side sets is not a difference (a
// newer ringtrain may write a default an older one left out); a list of layers of another length is one difference,
// "model.layers". Either text failing to parse (a checkpoint of a ringtrain that kept no job) gives none.
std::vector<JobDifference> job_differences(const std::string& checkpoint_job, const std::string& this_job);

// The first difference between the models two job files describe, or "" for the same model (or where the
// checkpoint's job does not parse any more: nothing to tell). Compared: each layer's type and keys, residual blocks'
// bodies, shortcuts and activation; not a layer's label (name) nor the keys that only start or regularise training
// (init, init_scale, dropout's and drop_path's rate, batch norm's momentum), which a resume may change.
std::string model_difference(const std::string& checkpoint_job, const std::string& this_job);

}  // namespace ringtrain::config
