// Owns reading /proc/<self>/cgroup; see cgroup.h.
#include "common/cgroup.h"

#include <fstream>
#include <sstream>

namespace ringtrain {

std::optional<std::string> cgroup_of_process(std::string_view controller, bool v2, const std::string& proc_self) {
  std::ifstream in(proc_self + "/cgroup");
  for (std::string line; std::getline(in, line);) {
    const auto first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    bool named = false;
    std::istringstream list(controllers);
    for (std::string c; std::getline(list, c, ',');) named = named || c == controller;
    if (v2 ? (line.compare(0, first, "0") == 0 && controllers.empty()) : named) return line.substr(second + 1);
  }
  return std::nullopt;
}

}  // namespace ringtrain
