// Owns the Open MPI settings ringtrain picks for itself before MPI_Init.
//
// Why: the CPU path reduces gradient buckets with MPI_Iallreduce in place. Open MPI's libnbc then always
// picks its binomial tree (it does for fewer than 4 ranks or any in-place buffer), which sends the whole
// bucket up the tree and back down instead of 2(N-1)/N of it. Its ring moves the bandwidth-optimal amount:
// on 2 ranks it reached 97-110 % of blocking MPI_Allreduce's bus bandwidth for 1-16 MiB against 35-60 % for
// the tree (perf/results/2026-11-23-observability.md, section 7).
#include "dist/open_mpi_defaults.h"

#include <fmt/format.h>

#include <cstdlib>
#include <string_view>

namespace ringtrain::dist {
namespace {

struct Setting {
  const char* variable;
  const char* value;
  const char* meaning;
};

constexpr Setting kSettings[] = {
    {"OMPI_MCA_coll_libnbc_iallreduce_algorithm", "1", "ring"},
};

bool chosen_by_user[std::size(kSettings)] = {};

}  // namespace

void apply_open_mpi_defaults() {
  for (size_t i = 0; i < std::size(kSettings); ++i) {
    chosen_by_user[i] = std::getenv(kSettings[i].variable) != nullptr;
    if (!chosen_by_user[i]) ::setenv(kSettings[i].variable, kSettings[i].value, 0);
  }
}

std::string open_mpi_defaults_summary() {
  std::string line;
  for (size_t i = 0; i < std::size(kSettings); ++i) {
    const char* value = std::getenv(kSettings[i].variable);
    if (!line.empty()) line += ", ";
    if (chosen_by_user[i])
      line += fmt::format("{}={} (from your environment)", kSettings[i].variable, value ? value : "");
    else
      line += fmt::format("{}={} ({}, ringtrain's default)", kSettings[i].variable, kSettings[i].value,
                          kSettings[i].meaning);
  }
  return line;
}

}  // namespace ringtrain::dist
