// Owns comparing the resolved job file a checkpoint was written by with this run's: a resume or an evaluation with
// another model (an activation swapped, a pooling changed: the same parameter shapes) is refused by name, and the
// other keys that changed are named in the run header, since the run then no longer continues the one it resumes.
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

// The differences that make another model: any under [model] but its name.
bool changes_the_model(const JobDifference& difference);

}  // namespace ringtrain::config
