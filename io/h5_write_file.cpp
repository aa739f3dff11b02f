// Owns writing one HDF5 file so that a failure is an error, never a crash; see h5_write_file.h.
#include "io/h5_write_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "common/host_memory.h"
#include "io/h5_check.h"
#include "io/h5_file_format.h"
#include "io/h5_handle.h"

namespace ringtrain::io {
namespace {

namespace fs = std::filesystem;

// HDF5's clean-up at exit walks the ids it still holds, and the id of a file it failed to close points at memory
// it has freed (see the header): that walk is the crash. Every file ringtrain opens is closed by its owner before
// the process ends, so skipping the clean-up loses nothing. It can be turned off only before HDF5 first starts,
// hence a static initialiser in the file every HDF5 writer links.
[[maybe_unused]] const bool hdf5_exit_cleanup_off = [] { return H5dont_atexit() >= 0; }();

// Room for what HDF5 allocates while flushing and closing (the superblock's end-of-file, freed space handed back).
constexpr double kCloseSlack = 64.0 * 1024;

// The file descriptor under HDF5's default (sec2) driver; -1 under any other driver, which gets no reservation and
// no redirect: a failure is then only reported.
int descriptor(hid_t file) noexcept {
  const hid_t access = H5Fget_access_plist(file);
  const bool sec2 = access >= 0 && H5Pget_driver(access) == H5FD_SEC2;
  if (access >= 0) H5Pclose(access);
  void* handle = nullptr;
  if (!sec2 || H5Fget_vfd_handle(file, H5P_DEFAULT, &handle) < 0 || handle == nullptr) {
    H5Eclear2(H5E_DEFAULT);
    return -1;
  }
  return *static_cast<int*>(handle);
}

double free_bytes(const fs::path& path) noexcept {
  struct statvfs info {};
  if (::statvfs(path.parent_path().empty() ? "." : path.parent_path().c_str(), &info) != 0) return -1;
  return static_cast<double>(info.f_bavail) * static_cast<double>(info.f_frsize);
}

}  // namespace

H5WriteFile::H5WriteFile(fs::path path, double expected_bytes) : path_(std::move(path)) {
  id_ = H5_CHECK(H5Fcreate(path_.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, checksummed_file_access().id()));
  try {
    reserve(expected_bytes);
  } catch (...) {
    abandon();
    throw;
  }
}

H5WriteFile::~H5WriteFile() { abandon(); }

// Blocks allocated now cannot run out later (FALLOC_FL_KEEP_SIZE: the file's size stays HDF5's end of file). Where
// the file system cannot allocate ahead (NFS v3, some FUSE), its free space is compared instead.
void H5WriteFile::reserve(double bytes) {
  const int fd = descriptor(id_);
  if (fd < 0 || bytes <= 0) return;
  if (::fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, static_cast<off_t>(bytes)) == 0) return;
  const int error = errno;
  const double available = free_bytes(path_);
  const bool too_large = error == EFBIG;  // over RLIMIT_FSIZE (ulimit -f) or the file system's largest file
  if (!too_large && error != ENOSPC && error != EDQUOT && !(available >= 0 && available < bytes)) return;
  // Free space above the need when the allocation failed: other writers (a parallel prepare's ranks) took it.
  const std::string others = available >= bytes ? " now, as other files there grow" : "";
  throw DiskSpaceError(
      fmt::format("'{}' needs about {} and {}", path_.string(), byte_size_text(bytes),
                  too_large ? "that is more than one file may hold there (the file system's limit, or ulimit -f)"
                            : fmt::format("its file system has {} free{}{}", byte_size_text(std::max(available, 0.0)),
                                          error == EDQUOT ? " within this user's quota" : "", others)),
      bytes, available);
}

void H5WriteFile::commit() {
  try {
    const ssize_t open = H5_CHECK(H5Fget_obj_count(
        id_, H5F_OBJ_DATASET | H5F_OBJ_GROUP | H5F_OBJ_DATATYPE | H5F_OBJ_ATTR | H5F_OBJ_LOCAL));
    if (open > 0)
      throw std::logic_error(fmt::format("{} object(s) of '{}' still open when it is committed", open, path_.string()));
    hsize_t size = 0;
    H5_CHECK(H5Fget_filesize(id_, &size));
    reserve(static_cast<double>(size) + kCloseSlack);  // everything HDF5 has allocated, before it flushes
    H5_CHECK(H5Fflush(id_, H5F_SCOPE_LOCAL));
    // Data reaches the disk before a caller's rename makes the file the shard or checkpoint.
    if (const int fd = descriptor(id_); fd >= 0 && ::fsync(fd) != 0)
      throw std::runtime_error(fmt::format("fsync of '{}' failed: {}", path_.string(), std::strerror(errno)));
    H5_CHECK(H5Fclose(std::exchange(id_, H5I_INVALID_HID)));
  } catch (...) {
    abandon();
    throw;
  }
  // Blocks reserved past the end go back (truncating to the same size frees them on ext4, XFS and tmpfs).
  struct stat info {};
  if (::stat(path_.c_str(), &info) == 0) (void)::truncate(path_.c_str(), info.st_size);
  // HDF5 refuses to open a file shorter than it wrote ("truncated file"), and checks its superblock.
  H5File reopened(H5_CHECK(H5Fopen(path_.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT)));
  reopened.close();
}

// The writes HDF5 makes while closing go to a scratch file in memory instead of the file that failed, so they
// succeed and HDF5 frees the file's id; the caller removes the file itself. A close that fails even so leaves
// the id to the process's end, whose HDF5 clean-up is off (above).
void H5WriteFile::abandon() noexcept {
  if (id_ < 0) return;
  detail::silence_hdf5_auto_print();
  if (const int fd = descriptor(id_); fd >= 0) {
    const int scratch = ::memfd_create("ringtrain-abandoned-hdf5", MFD_CLOEXEC);
    if (scratch >= 0) {
      (void)::dup2(scratch, fd);
      ::close(scratch);
    }
  }
  if (H5Fclose(std::exchange(id_, H5I_INVALID_HID)) < 0) H5Eclear2(H5E_DEFAULT);
}

}  // namespace ringtrain::io
