// Owns gathering versions from each library's own run-time query (not from headers where a run-time query
// exists, so a mismatched shared library shows up).
#include "util/versions.h"

#include <mpi.h>
#include <nlohmann/json.hpp>

#include <string>

#include "io/hdf5_version.h"
#include "kernels/cpu/dnnl_ops.h"
#include "kernels/cpu/gemm.h"
#include "util/json_text.h"

#define RT_STR2(x) #x
#define RT_STR(x) RT_STR2(x)

namespace ringtrain::util {

std::string ringtrain_version() { return RT_STR(RINGTRAIN_VERSION); }

VersionList host_library_versions() {
  VersionList v;
  v.emplace_back("ringtrain", ringtrain_version());
  v.emplace_back("compiler", "g++ " __VERSION__);
  char mpi[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  MPI_Get_library_version(mpi, &length);
  std::string mpi_text(mpi, static_cast<size_t>(length));
  if (const auto cut = mpi_text.find_first_of(",\n"); cut != std::string::npos) mpi_text.resize(cut);
  int major = 0, minor = 0;
  MPI_Get_version(&major, &minor);
  v.emplace_back("MPI", mpi_text + " (MPI " + std::to_string(major) + "." + std::to_string(minor) + ")");
  v.emplace_back("HDF5", io::hdf5_version());
  v.emplace_back("BLAS", kernels::cpu::blas_description());
  v.emplace_back("oneDNN", kernels::cpu::DnnlOps::version());
  return v;
}

std::string format_versions(const VersionList& versions) {
  std::string out;
  for (const auto& [name, version] : versions) out += "  " + name + ": " + version + "\n";
  return out;
}

std::string versions_json(const VersionList& versions) {
  nlohmann::ordered_json j;
  for (const auto& [name, version] : versions) j[name] = version;
  return util::json_text(j, 2);
}

}  // namespace ringtrain::util
