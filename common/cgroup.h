// Owns finding this process's control group from /proc/<self>/cgroup: "0::/path" names its group in the unified
// (v2) hierarchy, "N:cpuset,cpu:/path" its group in a v1 controller's. The memory check (host_memory.h) and the core
// count (dist/rank_cores.h) read their limits under that path.
#pragma once
#include <optional>
#include <string>
#include <string_view>

namespace ringtrain {

// The group's path ("/slurm/job_7"), or none where the file names no such group. `v2`: the unified hierarchy's line;
// else the v1 line whose controllers include `controller` ("memory", "cpuset").
std::optional<std::string> cgroup_of_process(std::string_view controller, bool v2,
                                             const std::string& proc_self = "/proc/self");

}  // namespace ringtrain
