// Owns closing HDF5 identifiers: one move-only RAII wrapper per kind of hid_t (file, dataset, dataspace,
// attribute, datatype, property list), so an exception between open and close never leaks a handle and
// never leaves a shard file open.
#pragma once
#include <hdf5.h>

#include <utility>

#include "io/h5_check.h"

namespace ringtrain::io {

template <herr_t (*Close)(hid_t)>
class H5Handle {
 public:
  H5Handle() = default;
  explicit H5Handle(hid_t id) : id_(id) {}
  ~H5Handle() { close_quietly(); }
  H5Handle(const H5Handle&) = delete;
  H5Handle& operator=(const H5Handle&) = delete;
  H5Handle(H5Handle&& other) noexcept : id_(std::exchange(other.id_, H5I_INVALID_HID)) {}
  H5Handle& operator=(H5Handle&& other) noexcept {
    if (this != &other) {
      close_quietly();
      id_ = std::exchange(other.id_, H5I_INVALID_HID);
    }
    return *this;
  }

  hid_t id() const noexcept { return id_; }
  bool valid() const noexcept { return id_ >= 0; }

  // Checked close, for where a failure matters (a file being written: its close flushes the data).
  void close() {
    if (!valid()) return;
    const hid_t id = std::exchange(id_, H5I_INVALID_HID);
    H5_CHECK(Close(id));
  }

 private:
  // A destructor cannot report a failed close (it may already run during unwinding), and the data of a
  // file being read is not at stake; writers call close() so their flush failures do surface.
  void close_quietly() noexcept {
    if (!valid()) return;
    detail::silence_hdf5_auto_print();
    if (Close(id_) < 0) H5Eclear2(H5E_DEFAULT);
    id_ = H5I_INVALID_HID;
  }

  hid_t id_ = H5I_INVALID_HID;
};

using H5File = H5Handle<H5Fclose>;
using H5Dataset = H5Handle<H5Dclose>;
using H5Dataspace = H5Handle<H5Sclose>;
using H5Attribute = H5Handle<H5Aclose>;
using H5Type = H5Handle<H5Tclose>;
using H5PropList = H5Handle<H5Pclose>;

}  // namespace ringtrain::io
