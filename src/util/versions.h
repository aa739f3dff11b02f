// Owns the record of every library version in use, printed by `ringtrain --version`, logged at start and
// written to <run.dir>/versions.json so a result can always be traced to what produced it.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace ringtrain::util {

using VersionList = std::vector<std::pair<std::string, std::string>>;  // (component, version)

std::string ringtrain_version();  // "0.1.0"
VersionList library_versions();  // safe before MPI_Init
std::string format_versions(const VersionList& versions);
std::string versions_json(const VersionList& versions);

}  // namespace ringtrain::util
