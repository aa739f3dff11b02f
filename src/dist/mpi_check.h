// Owns MPI_CHECK: every MPI call goes through it so a failure names the call, file:line, rank and MPI's text.
// MPI_Init sets MPI_ERRORS_RETURN on MPI_COMM_WORLD (dist/world.cpp) so errors reach this macro.
#pragma once
#include <mpi.h>

#include <string>

#include "common/error.h"

namespace ringtrain::dist {
std::string mpi_error_string(int code);
}

#define MPI_CHECK(call)                                                                                     \
  do {                                                                                                      \
    const int rt_mpi_rc_ = (call);                                                                          \
    if (rt_mpi_rc_ != MPI_SUCCESS)                                                                          \
      ::ringtrain::throw_library_error("MPI", #call, __FILE__, __LINE__,                                    \
                                       ::ringtrain::dist::mpi_error_string(rt_mpi_rc_));                    \
  } while (0)
