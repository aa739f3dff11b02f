// Owns the record of every library version in use, printed by `ringtrain --version`, logged at start and
// written to <run.dir>/versions.json so a result can always be traced to what produced it.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace ringtrain::util {

using VersionList = std::vector<std::pair<std::string, std::string>>;  // (component, version)

std::string ringtrain_version();  // "0.1.0"
// ringtrain, the compiler, MPI, HDF5, BLAS and oneDNN; safe before MPI_Init. The GPU's libraries are named by
// backend/device_setup.h's library_versions(), which adds them to these: util/ sits below backend/.
VersionList host_library_versions();
std::string format_versions(const VersionList& versions);
std::string versions_json(const VersionList& versions);

}  // namespace ringtrain::util
