// A file whose writing fails at any stage (a data write, a dataset's close, the reservation before the final
// flush) is an error, and HDF5 lets go of it: no id is left over freed memory for HDF5's clean-up to crash on (it
// did, in H5F__close_cb, when a checkpoint's final flush met a full disk). The failure comes from RLIMIT_FSIZE,
// which fails writes past a size with EFBIG like a full disk, without a file system to fill.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <sys/resource.h>

#include <csignal>
#include <filesystem>
#include <vector>

#include <fmt/format.h>

#include "io/h5_handle.h"
#include "io/h5_write_file.h"
#include "io/hdf5_lock.h"
#include "io_test_support.h"

namespace ringtrain::io {
namespace {

namespace fs = std::filesystem;
using H5WriteFileTest = testing::IoTest;

class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    std::signal(SIGXFSZ, SIG_IGN);  // EFBIG instead of death
    getrlimit(RLIMIT_FSIZE, &saved_);
    rlimit limit = saved_;
    limit.rlim_cur = bytes;
    setrlimit(RLIMIT_FSIZE, &limit);
  }
  ~FileSizeLimit() { setrlimit(RLIMIT_FSIZE, &saved_); }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;

 private:
  rlimit saved_{};
};

// `bytes` of data in 64 KiB chunks and a 16 KiB attribute, each closed (checked) as a writer does.
void write_contents(hid_t file, std::size_t bytes) {
  const hsize_t n = bytes, chunk = 64 * 1024, text = 16 * 1024;
  H5Dataspace space(H5_CHECK(H5Screate_simple(1, &n, nullptr)));
  H5PropList layout(H5_CHECK(H5Pcreate(H5P_DATASET_CREATE)));
  H5_CHECK(H5Pset_chunk(layout.id(), 1, &chunk));
  H5Dataset set(H5_CHECK(H5Dcreate2(file, "x", H5T_NATIVE_UINT8, space.id(), H5P_DEFAULT, layout.id(), H5P_DEFAULT)));
  const std::vector<uint8_t> values(bytes, 7);
  H5_CHECK(H5Dwrite(set.id(), H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()));
  H5Dataspace text_space(H5_CHECK(H5Screate_simple(1, &text, nullptr)));
  H5Attribute attribute(H5_CHECK(H5Acreate2(file, "a", H5T_NATIVE_UINT8, text_space.id(), H5P_DEFAULT, H5P_DEFAULT)));
  H5_CHECK(H5Awrite(attribute.id(), H5T_NATIVE_UINT8, values.data()));
  attribute.close();
  set.close();
}

// The limit binds the writes only: HDF5 closes an abandoned file into a scratch file in memory, which a full disk
// leaves alone but RLIMIT_FSIZE would bind too.
void write_file(const fs::path& path, std::size_t bytes, double reserve) {
  const Hdf5Lock lock;
  H5WriteFile file(path, reserve);
  {
    const FileSizeLimit limit(256 * 1024);
    write_contents(file.id(), bytes);
  }
  file.commit();
}

TEST_F(H5WriteFileTest, AWriteThatFailsAtAnyStageIsAnErrorAndLeavesNoFileOpenInHdf5) {
  int failed = 0, committed = 0;
  // From data that fits to data that does not, in steps finer than a chunk, with and without a reservation: the
  // limit is met in a data write or a dataset's close (the reservation and the final flush meet a full disk in
  // tests/faults/full_disk.sh).
  for (const double reserve : {0.0, 1.0 * (1 << 20)})
    for (std::size_t kib = 160; kib <= 320; kib += 8) {
      const fs::path path = dir() / fmt::format("f{}-{}.h5", kib, reserve > 0);
      try {
        write_file(path, kib * 1024, reserve);
        ++committed;
      } catch (const std::exception&) {
        ++failed;
      }
      EXPECT_EQ(H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL), 0) << kib << " KiB: a file is still open in HDF5";
    }
  EXPECT_GT(failed, 0);
  EXPECT_GT(committed, 0);
  // What crashed at exit: HDF5's clean-up of the ids it holds. It must find none dangling.
  EXPECT_GE(H5close(), 0);
}

TEST_F(H5WriteFileTest, AFileNoDiskHoldsIsRefusedBeforeAnythingIsWritten) {
  const Hdf5Lock lock;
  try {
    H5WriteFile file(dir() / "big.h5", 1e15);  // 909 TiB: ENOSPC, or EFBIG past the file system's largest file
    FAIL() << "a 909 TiB reservation was accepted";
  } catch (const DiskSpaceError& e) {
    EXPECT_NE(std::string(e.what()).find("needs about 909.5 TiB and "), std::string::npos) << e.what();
    EXPECT_EQ(e.needed, 1e15);
  }
  EXPECT_EQ(H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL), 0);
}

}  // namespace
}  // namespace ringtrain::io
