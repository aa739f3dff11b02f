// Owns the job-file keys that a job sets but whose rule is not in use (momentum with adamw, poly_power with a
// cosine schedule, augment_pad without pad_crop_flip, ...): the run header warns of each, since a user who set one
// expects it to change something.
#pragma once
#include <set>
#include <string>
#include <vector>

#include "config/job_config.h"

namespace ringtrain::config {

// `given` holds "table.key" for every key the job file and --set name. One sentence per key without effect.
std::vector<std::string> keys_without_effect(const JobConfig& job, const std::set<std::string>& given);

}  // namespace ringtrain::config
