// Owns the Open MPI settings ringtrain picks for itself before MPI_Init; the user's environment always wins.
#pragma once
#include <string>

namespace ringtrain::dist {

// Sets OMPI_MCA_* defaults in this process's environment unless already set. Must run before MPI_Init; other
// MPI libraries ignore the variables.
void apply_open_mpi_defaults();

// One line for the run header: each setting, its value and whether it came from us or the user.
std::string open_mpi_defaults_summary();

}  // namespace ringtrain::dist
