// Owns what is checked around a node-shared window's collective allocation (dist/node_shared_reducer.h): before it,
// that the file system where MPI keeps a window's pages has room for it, since Open MPI fails the allocation on node
// rank 0 alone and leaves the node's other ranks waiting inside MPI_Win_allocate_shared; after it, that the window
// is in MPI's unified memory model, where the ranks may read and write it as plain memory.
#pragma once
#include <mpi.h>

#include <string>

namespace ringtrain::dist {

// Why a window of `bytes` (over all of its parts) cannot be placed where MPI keeps shared windows' pages on this
// host, or "": room enough, or an MPI that does not say where (then MPI_Win_allocate_shared finds out itself).
std::string why_no_room_for_window(double bytes);

// Why `window` cannot be shared as plain memory, or "": its MPI_WIN_MODEL is MPI_WIN_UNIFIED.
std::string why_not_unified(MPI_Win window);

}  // namespace ringtrain::dist
