// Owns an HDF5 file while it is being written (a shard, a checkpoint), so that a write that fails is an error
// and never a crash later or a file that only looks whole. Why it takes this much: HDF5 1.10 cannot recover from
// a failed flush of a file. Every later flush and the close fail too ("slist already enabled?"), the file's id
// stays registered over memory HDF5 has already freed, and HDF5's clean-up at exit crashes on it. So:
//  - the file's disk space is reserved before HDF5 writes into it (fallocate), and again, for everything HDF5 has
//    allocated, before the flush that commits it, so a full file system is found before HDF5 meets it;
//  - a file whose writing failed is abandoned: its descriptor is pointed at a scratch file in memory, where the
//    writes HDF5 makes while closing cannot fail, so HDF5 releases it cleanly (the caller removes the file).
// Internal to io/: callers hold the HDF5 lock.
#pragma once
#include <hdf5.h>

#include <filesystem>
#include <stdexcept>
#include <string>

namespace ringtrain::io {

// The file system cannot hold the file. Callers phrase the advice: a shard's error is a data error (exit 4), a
// checkpoint's a checkpoint error (exit 5).
struct DiskSpaceError : std::runtime_error {
  DiskSpaceError(const std::string& what, double needed_bytes, double available_bytes)
      : std::runtime_error(what), needed(needed_bytes), available(available_bytes) {}
  double needed;     // bytes the file needs
  double available;  // bytes free for this user on its file system; < 0 when unknown
};

class H5WriteFile {
 public:
  // Creates (truncates) `path` in the checksummed 1.8 format and reserves `expected_bytes` for it. Throws
  // DiskSpaceError when the file system cannot hold that, before anything is written; H5_CHECK's error otherwise.
  H5WriteFile(std::filesystem::path path, double expected_bytes);
  ~H5WriteFile();  // abandons a file that was not committed
  H5WriteFile(const H5WriteFile&) = delete;
  H5WriteFile& operator=(const H5WriteFile&) = delete;

  hid_t id() const noexcept { return id_; }

  // Flushes, fsyncs and closes the file, each checked, then checks that its size on disk is what HDF5 wrote.
  // Every dataset and attribute opened in the file must be closed first (their close writes cached chunks, and a
  // close HDF5 defers to the last open object would swallow its error). On any failure the file is abandoned and
  // the error thrown (DiskSpaceError for a full file system).
  void commit();

 private:
  void reserve(double bytes);
  void abandon() noexcept;

  std::filesystem::path path_;
  hid_t id_ = H5I_INVALID_HID;
};

}  // namespace ringtrain::io
