// Owns the checks and conversions shared by the .npy and HDF5 array imports: rank and dtype of the images,
// NHWC to NCHW reordering, label widening to int32, and matching counts. Every refusal names the file.
#include "io/labelled_arrays.h"

#include <fmt/format.h>
#include <hdf5.h>

#include <cstring>
#include <limits>

#include "common/error.h"
#include "common/host_memory.h"
#include "common/path_probe.h"
#include "io/h5_attributes.h"
#include "io/h5_check.h"
#include "io/h5_handle.h"
#include "io/hdf5_lock.h"
#include "io/npy_file.h"
#include "io/shard_header.h"

namespace ringtrain::io {
namespace fs = std::filesystem;

namespace {

// Images as read, before reordering: dims in the file's order and the raw uint8 payload.
struct RawImages {
  std::vector<int64_t> dims;
  std::vector<uint8_t> bytes;
  std::string name;  // the file (and dataset) for messages
};

SampleShape sample_shape_of(const RawImages& raw, ArrayLayout layout) {
  if (raw.dims.size() != 3 && raw.dims.size() != 4)
    throw DataError(fmt::format("{} has {} dimensions; images need N x C x H x W, N x H x W x C (--layout) or "
                                "N x H x W",
                                raw.name, raw.dims.size()));
  for (const int64_t d : raw.dims)
    if (d < 1 || d > std::numeric_limits<int>::max())
      throw DataError(fmt::format("{} has an empty or oversized dimension ({})", raw.name, d));
  if (raw.dims.size() == 3) return {1, static_cast<int>(raw.dims[1]), static_cast<int>(raw.dims[2])};
  // numpy, Keras and TensorFlow keep images channels-last: N x 32 x 32 x 3 read as N x C x H x W would train on
  // 32 channels of 32 x 3 pixels, without an error anywhere.
  const auto channel_count = [](int64_t d) { return d == 1 || d == 3 || d == 4; };
  if (layout == ArrayLayout::unstated && channel_count(raw.dims[3]) && !channel_count(raw.dims[1]))
    throw DataError(fmt::format("{} is N x {} x {} x {}: its last axis looks like the colour channels (numpy, Keras "
                                "and TensorFlow store images channels-last), but without --layout it would be read as "
                                "N x C x H x W, {} channels of {} x {} pixels; pass --layout nhwc for channels-last, or "
                                "--layout nchw to read it as N x C x H x W",
                                raw.name, raw.dims[1], raw.dims[2], raw.dims[3], raw.dims[1], raw.dims[2], raw.dims[3]));
  if (layout == ArrayLayout::nhwc)
    return {static_cast<int>(raw.dims[3]), static_cast<int>(raw.dims[1]), static_cast<int>(raw.dims[2])};
  return {static_cast<int>(raw.dims[1]), static_cast<int>(raw.dims[2]), static_cast<int>(raw.dims[3])};
}

// The bytes as they are (moved, not copied) where no reordering is needed: the arrays may fill most of the memory.
std::vector<uint8_t> to_nchw(RawImages&& raw, const SampleShape& shape, ArrayLayout layout) {
  if (layout != ArrayLayout::nhwc || shape.channels == 1 || raw.dims.size() == 3) return std::move(raw.bytes);
  std::vector<uint8_t> out(raw.bytes.size());
  const auto plane = static_cast<std::size_t>(shape.height) * static_cast<std::size_t>(shape.width);
  const auto channels = static_cast<std::size_t>(shape.channels);
  const std::size_t sample = plane * channels;
  for (std::size_t n = 0; n < raw.bytes.size() / sample; ++n)
    for (std::size_t p = 0; p < plane; ++p)
      for (std::size_t c = 0; c < channels; ++c) out[n * sample + c * plane + p] = raw.bytes[n * sample + p * channels + c];
  return out;
}

LabelledArrays assemble(RawImages raw, std::vector<int64_t> labels, const std::string& labels_name,
                        ArrayLayout layout) {
  LabelledArrays arrays;
  arrays.shape = sample_shape_of(raw, layout);
  if (raw.dims.empty() || static_cast<int64_t>(labels.size()) != raw.dims[0])
    throw DataError(fmt::format("{} holds {} images but {} holds {} labels; they must describe the same samples",
                                raw.name, raw.dims.empty() ? 0 : raw.dims[0], labels_name, labels.size()));
  if (labels.empty()) throw DataError(fmt::format("{} holds no samples", raw.name));
  if (static_cast<uint64_t>(arrays.shape.elements()) > detail::kMaxSampleValues)
    throw DataError(fmt::format("{} samples of {} exceed {} values each", raw.name, detail::describe(arrays.shape),
                                detail::kMaxSampleValues));
  arrays.labels.reserve(labels.size());
  for (std::size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] < 0 || labels[i] > std::numeric_limits<int32_t>::max())
      throw DataError(fmt::format("{} has label {} at position {}; labels are class indices 0, 1, ..., K-1",
                                  labels_name, labels[i], i));
    arrays.labels.push_back(static_cast<int32_t>(labels[i]));
  }
  arrays.origin = fmt::format("{} and {}", raw.name, labels_name);
  arrays.pixels = to_nchw(std::move(raw), arrays.shape, layout);
  return arrays;
}

template <class T>
void widen(const std::vector<uint8_t>& bytes, std::vector<int64_t>& out) {
  out.resize(bytes.size() / sizeof(T));
  for (std::size_t i = 0; i < out.size(); ++i) {
    T value;
    std::memcpy(&value, bytes.data() + i * sizeof(T), sizeof(T));
    out[i] = static_cast<int64_t>(value);
  }
}

std::vector<int64_t> npy_labels(const NpyArray& array, const fs::path& file) {
  const bool column = array.shape.size() == 2 && array.shape[1] == 1;
  if (array.shape.size() != 1 && !column)
    throw DataError(fmt::format("labels '{}' have {} dimensions; they need one (N) or N x 1", file.string(),
                                array.shape.size()));
  const std::string kind = array.descr.substr(1);
  std::vector<int64_t> out;
  if (kind == "u1") widen<uint8_t>(array.bytes, out);
  else if (kind == "i1") widen<int8_t>(array.bytes, out);
  else if (kind == "u2") widen<uint16_t>(array.bytes, out);
  else if (kind == "i2") widen<int16_t>(array.bytes, out);
  else if (kind == "u4") widen<uint32_t>(array.bytes, out);
  else if (kind == "i4") widen<int32_t>(array.bytes, out);
  else if (kind == "i8" || kind == "u8") widen<int64_t>(array.bytes, out);
  else
    throw DataError(fmt::format("labels '{}' have dtype '{}'; they need an integer dtype (e.g. "
                                "labels.astype(numpy.int64))",
                                file.string(), array.descr));
  return out;
}

}  // namespace

ArrayLayout parse_array_layout(const std::string& text) {
  if (text.empty()) return ArrayLayout::unstated;
  if (text == "nchw") return ArrayLayout::nchw;
  if (text == "nhwc") return ArrayLayout::nhwc;
  throw UsageError(fmt::format("--layout '{}' is not 'nchw' or 'nhwc'", text));
}

LabelledArrays load_npy_arrays(const fs::path& images, const fs::path& labels, ArrayLayout layout) {
  NpyArray image_array = read_npy(images);
  if (image_array.descr != "|u1" && image_array.descr != "<u1" && image_array.descr != "=u1")
    throw DataError(fmt::format("images '{}' have dtype '{}'; they need uint8 pixels 0..255 (e.g. "
                                "numpy.clip(x * 255, 0, 255).astype(numpy.uint8))",
                                images.string(), image_array.descr));
  RawImages raw{image_array.shape, std::move(image_array.bytes), fmt::format("images '{}'", images.string())};
  return assemble(std::move(raw), npy_labels(read_npy(labels), labels), fmt::format("labels '{}'", labels.string()),
                  layout);
}

namespace {

// Opens `name` in `file` and returns its extent; a missing dataset is a DataError naming both.
std::vector<int64_t> dataset_dims(hid_t dataset) {
  const H5Dataspace space(H5_CHECK(H5Dget_space(dataset)));
  const int rank = H5_CHECK(H5Sget_simple_extent_ndims(space.id()));
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
  H5_CHECK(H5Sget_simple_extent_dims(space.id(), dims.data(), nullptr));
  return {dims.begin(), dims.end()};
}

// Opens `name` in `file`; a missing path (any part of it) or a group is a DataError naming both.
H5Dataset open_dataset(hid_t file, const Hdf5ArraySource& source, const std::string& name) {
  // Unchecked on purpose: H5Lexists fails, rather than says no, when a folder-like part of `name` is missing.
  const bool exists = H5Lexists(file, name.c_str(), H5P_DEFAULT) > 0 && H5Oexists_by_name(file, name.c_str(), H5P_DEFAULT) > 0;
  H5Eclear2(H5E_DEFAULT);
  if (!exists)
    throw DataError(fmt::format("'{}' has no dataset '{}'; list its datasets with `h5ls -r {}`", source.file.string(),
                                name, source.file.string()));
  H5O_info_t info{};
  H5_CHECK(H5Oget_info_by_name2(file, name.c_str(), &info, H5O_INFO_BASIC, H5P_DEFAULT));
  if (info.type != H5O_TYPE_DATASET)
    throw DataError(fmt::format("'{}' in '{}' is {}, not a dataset; name a dataset (list them with `h5ls -r {}`)", name,
                                source.file.string(), info.type == H5O_TYPE_GROUP ? "a group" : "a named datatype",
                                source.file.string()));
  return H5Dataset(H5_CHECK(H5Dopen2(file, name.c_str(), H5P_DEFAULT)));
}

// Before reading: the values a dataset's extent holds, as bytes in memory, against what this host has (a
// never-written dataset may claim 10^12 values and hold none).
std::size_t checked_bytes(const std::vector<int64_t>& dims, std::size_t element, const std::string& name) {
  double bytes = static_cast<double>(element);
  for (const int64_t d : dims) bytes *= static_cast<double>(d);
  const AvailableMemory memory = available_memory();
  if (bytes > 0.8 * static_cast<double>(memory.bytes > 0 ? memory.bytes : std::numeric_limits<uint64_t>::max()) ||
      bytes > 0x1p62)
    throw DataError(fmt::format("{} holds {} in memory, with {}; import it in parts or on a larger host{}",
                                name, byte_size_text(bytes), memory.text(), memory.or_remedy()));
  return static_cast<std::size_t>(bytes);
}

H5T_class_t type_class(hid_t dataset, H5T_sign_t* sign, std::size_t* size) {
  const H5Type type(H5_CHECK(H5Dget_type(dataset)));
  const H5T_class_t cls = H5_CHECK(H5Tget_class(type.id()));
  *size = h5::type_size(type.id());
  *sign = cls == H5T_INTEGER ? H5_CHECK(H5Tget_sign(type.id())) : H5T_SGN_ERROR;
  return cls;
}

}  // namespace

LabelledArrays load_hdf5_arrays(const Hdf5ArraySource& source, ArrayLayout layout) {
  const PathProbe probe = probe_path(source.file);
  if (probe.kind != PathProbe::Kind::regular)
    throw DataError(fmt::format("--from-hdf5 '{}' {}; give an HDF5 file", source.file.string(),
                                probe.kind == PathProbe::Kind::missing ? "does not exist" : probe.describe()));
  const Hdf5Lock lock;
  detail::silence_hdf5_auto_print();
  // Unchecked on purpose: a truncated or foreign file makes it fail, and that is the user's error to report.
  if (H5Fis_hdf5(source.file.c_str()) <= 0 && H5Eclear2(H5E_DEFAULT) >= 0)
    throw DataError(fmt::format("'{}' is not an HDF5 file (or is truncated); check --from-hdf5", source.file.string()));
  const H5File file(H5_CHECK(H5Fopen(source.file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT)));
  const H5Dataset images = open_dataset(file.id(), source, source.images_dataset);
  const H5Dataset labels = open_dataset(file.id(), source, source.labels_dataset);
  const std::string images_name = fmt::format("dataset '{}' of '{}'", source.images_dataset, source.file.string());
  const std::string labels_name = fmt::format("dataset '{}' of '{}'", source.labels_dataset, source.file.string());
  H5T_sign_t sign{};
  std::size_t size = 0;
  if (type_class(images.id(), &sign, &size) != H5T_INTEGER || size != 1 || sign != H5T_SGN_NONE)
    throw DataError(fmt::format("{} is not uint8; images need uint8 pixels 0..255", images_name));
  if (type_class(labels.id(), &sign, &size) != H5T_INTEGER)
    throw DataError(fmt::format("{} does not hold integers; labels are class indices 0..K-1", labels_name));
  RawImages raw{dataset_dims(images.id()), {}, images_name};
  const std::vector<int64_t> label_dims = dataset_dims(labels.id());
  if (label_dims.size() != 1 && !(label_dims.size() == 2 && label_dims[1] == 1))
    throw DataError(fmt::format("{} has {} dimensions; labels need one (N) or N x 1", labels_name, label_dims.size()));
  raw.bytes.resize(raw.dims.empty() ? 0 : checked_bytes(raw.dims, 1, images_name));
  std::vector<int64_t> label_values(checked_bytes({label_dims[0]}, sizeof(int64_t), labels_name) / sizeof(int64_t));
  if (!raw.bytes.empty())
    H5_CHECK(H5Dread(images.id(), H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, raw.bytes.data()));
  if (!label_values.empty())
    H5_CHECK(H5Dread(labels.id(), H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, label_values.data()));
  return assemble(std::move(raw), std::move(label_values), labels_name, layout);
}

}  // namespace ringtrain::io
