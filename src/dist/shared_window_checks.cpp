// Owns the checks around a node-shared window's allocation; see shared_window_checks.h.
#include "dist/shared_window_checks.h"

#include <fmt/format.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/host_memory.h"
#include "common/path_probe.h"
#include "dist/mpi_check.h"

namespace ringtrain::dist {
namespace {

// Open MPI's setting for where its shared windows' backing files go (osc/sm; /dev/shm unless set otherwise).
constexpr const char* kBackingDirectorySetting = "osc_sm_backing_directory";

// The setting's value, read through MPI's tool interface, which sees it however it was set (environment, mpirun
// --mca, a parameter file); "" where this MPI has no such setting.
std::string read_backing_directory() {
  // The thread level MPI runs at: Open MPI's tool interface sets its own as the whole library's, and one lower
  // than MPI_Init_thread's would drop the locks other threads' MPI calls need.
  int level = MPI_THREAD_SINGLE, provided = 0;
  MPI_CHECK(MPI_Query_thread(&level));
  MPI_CHECK(MPI_T_init_thread(level, &provided));
  std::string directory;
  int index = 0;
  if (MPI_T_cvar_get_index(kBackingDirectorySetting, &index) == MPI_SUCCESS) {
    MPI_T_cvar_handle handle = MPI_T_CVAR_HANDLE_NULL;
    int length = 0;  // of the buffer a string setting needs
    MPI_CHECK(MPI_T_cvar_handle_alloc(index, nullptr, &handle, &length));
    std::string value(static_cast<std::size_t>(std::max(length, 1)), '\0');
    MPI_CHECK(MPI_T_cvar_read(handle, value.data()));
    MPI_CHECK(MPI_T_cvar_handle_free(&handle));
    directory = value.c_str();
  }
  MPI_CHECK(MPI_T_finalize());
  return directory;
}

}  // namespace

std::string why_no_room_for_window(double bytes) {
  static const std::string directory = read_backing_directory();  // set before MPI_Init, so read once
  if (directory.empty()) return "";
  const std::string where = fmt::format("MPI keeps it in '{}' (Open MPI's {})", directory, kBackingDirectorySetting);
  const PathProbe probe = probe_path(directory);
  if (probe.kind != PathProbe::Kind::directory) return fmt::format("{}, which {}", where, probe.describe());
  if (access(directory.c_str(), W_OK | X_OK) != 0)
    return fmt::format("{}, which cannot be written: {}", where, std::strerror(errno));
  struct statvfs fs = {};
  if (statvfs(directory.c_str(), &fs) != 0)
    return fmt::format("{}, whose free space cannot be read: {}", where, std::strerror(errno));
  const double room = static_cast<double>(fs.f_bavail) * static_cast<double>(fs.f_frsize);
  if (room < bytes)
    return fmt::format("{}, which has {} free for the {} it needs", where, byte_size_text(room), byte_size_text(bytes));
  return "";
}

std::string why_not_unified(MPI_Win window) {
  int* model = nullptr;
  int found = 0;
  MPI_CHECK(MPI_Win_get_attr(window, MPI_WIN_MODEL, &model, &found));
  if (found && model && *model == MPI_WIN_UNIFIED) return "";
  return "this MPI gives its shared windows the separate memory model (MPI_WIN_MODEL is not MPI_WIN_UNIFIED), in "
         "which one rank's plain stores are not promised to reach the others'";
}

}  // namespace ringtrain::dist
