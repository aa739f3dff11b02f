// Owns the per-shard header checks and the cross-shard consistency checks of a split.
#include "io/shard_header.h"

#include <fmt/format.h>
#include <unistd.h>
#include <fmt/ranges.h>
#include <hdf5.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "common/error.h"
#include "common/path_probe.h"
#include "io/chunk_coverage.h"
#include "io/h5_attributes.h"
#include "io/h5_check.h"
#include "io/h5_handle.h"

namespace ringtrain::io::detail {
namespace fs = std::filesystem;

std::string describe(const SampleShape& shape) {
  return fmt::format("{}x{}x{}", shape.channels, shape.height, shape.width);
}

std::string hdf5_detail(const std::exception& error) {
  const std::string text = error.what();
  const std::string marker = "HDF5 says: ";
  const auto at = text.find(marker);
  return at == std::string::npos ? text : text.substr(at + marker.size());
}

std::vector<fs::path> list_shard_files(const fs::path& dir) {
  std::vector<fs::path> files;
  const std::string prefix = shard_names::file_prefix;
  std::error_code error;
  fs::directory_iterator entries(dir, error);
  for (; !error && entries != fs::directory_iterator(); entries.increment(error)) {
    const std::string name = entries->path().filename().string();
    std::error_code type_error;
    if (entries->is_regular_file(type_error) && name.starts_with(prefix) && name.ends_with(".h5"))
      files.push_back(entries->path());
  }
  if (error)
    throw DataError(fmt::format("split folder '{}' cannot be read: {}; check its permissions (the ranks run as "
                                "this user on every node)",
                                dir.string(), error.message()));
  std::sort(files.begin(), files.end());
  return files;
}

bool holds_shard_files(const fs::path& dir) noexcept {
  try {
    return !list_shard_files(dir).empty();
  } catch (...) {
    return false;
  }
}

namespace {

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t begin = 0;
  for (std::size_t end; (end = text.find('\n', begin)) != std::string::npos; begin = end + 1)
    lines.push_back(text.substr(begin, end - begin));
  lines.push_back(text.substr(begin));
  return lines;
}

// Limits far beyond any real dataset that keep every size computed from a header within range.
constexpr int kMaxShards = 1 << 24;

std::string describe_type(hid_t type) {
  const H5T_class_t type_class = H5_CHECK(H5Tget_class(type));
  const std::size_t bits = h5::type_size(type) * 8;
  if (type_class == H5T_INTEGER)
    return fmt::format("{}int{}", H5_CHECK(H5Tget_sign(type)) == H5T_SGN_NONE ? "u" : "", bits);
  if (type_class == H5T_FLOAT) return fmt::format("float{}", bits);
  if (type_class == H5T_STRING) return "string";
  return "non-numeric";
}

std::vector<hsize_t> dataset_extent(hid_t dataset) {
  const H5Dataspace space(H5_CHECK(H5Dget_space(dataset)));
  const int rank = H5_CHECK(H5Sget_simple_extent_ndims(space.id()));
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
  if (rank > 0) H5_CHECK(H5Sget_simple_extent_dims(space.id(), dims.data(), nullptr));
  return dims;
}

// Opens `name` if it exists and is a dataset; otherwise records why not.
H5Dataset open_dataset(hid_t file, const char* name, std::vector<std::string>& problems) {
  if (H5_CHECK(H5Lexists(file, name, H5P_DEFAULT)) <= 0) {
    problems.push_back(fmt::format("has no dataset '{}'", name));
    return {};
  }
  H5O_info_t info{};
  H5_CHECK(H5Oget_info_by_name(file, name, &info, H5P_DEFAULT));
  if (info.type != H5O_TYPE_DATASET) {
    problems.push_back(fmt::format("has '{}' but it is not a dataset", name));
    return {};
  }
  return H5Dataset(H5_CHECK(H5Dopen2(file, name, H5P_DEFAULT)));
}

// An uncompressed dataset whose stored bytes fall short of its extent was never (fully) written: HDF5 would
// read fill values for the rest, and an extent a corrupt or hand-made header inflated (2^40 labels) would
// make every reader and `inspect` grind through it. Compressed datasets store fewer bytes by design.
bool stored_completely(hid_t dataset, const std::vector<hsize_t>& dims, hid_t type, const char* name,
                       ShardHeader& header) {
  const H5PropList creation(H5_CHECK(H5Dget_create_plist(dataset)));
  if (H5_CHECK(H5Pget_nfilters(creation.id())) > 0) return true;
  long double needed = static_cast<long double>(h5::type_size(type));
  for (const hsize_t d : dims) needed *= static_cast<long double>(d);
  const hsize_t stored = H5Dget_storage_size(dataset);  // 0 both for "nothing stored" and for failure
  if (static_cast<long double>(stored) >= needed) return true;
  header.problems.push_back(fmt::format("has dataset '{}' of extent [{}] ({:.0Lf} bytes) but only {} bytes of it "
                                        "are stored: the file was not written completely",
                                        name, fmt::join(dims, ", "), needed, stored));
  return false;
}

// Stored bytes can add up while a chunk is missing from the index (a flipped bit in the 1.8 format's unchecksummed
// chunk index): HDF5 would read that chunk as zeros, without an error (io/chunk_coverage.h).
bool chunks_in_place(hid_t dataset, const char* name, ShardHeader& header) {
  const std::string problem = chunk_coverage_problem(dataset);
  if (problem.empty()) return true;
  header.problems.push_back(fmt::format("is damaged: its dataset '{}' {}", name, problem));
  return false;
}

void examine_images(hid_t file, ShardHeader& header) {
  const H5Dataset images = open_dataset(file, shard_names::images, header.problems);
  if (!images.valid()) return;
  const H5Type type(H5_CHECK(H5Dget_type(images.id())));
  const bool is_uint8 = H5_CHECK(H5Tget_class(type.id())) == H5T_INTEGER && h5::type_size(type.id()) == 1 &&
                        H5_CHECK(H5Tget_sign(type.id())) == H5T_SGN_NONE;
  if (!is_uint8)
    header.problems.push_back(fmt::format("has dataset '{}' of {} elements, expected uint8", shard_names::images,
                                          describe_type(type.id())));
  const std::vector<hsize_t> dims = dataset_extent(images.id());
  if (dims.size() != 4) {
    header.problems.push_back(fmt::format("has dataset '{}' of rank {}, expected rank 4 (N x C x H x W)",
                                          shard_names::images, dims.size()));
    return;
  }
  // Bounded before narrowing to int, so no product of them (sample bytes, batch bytes) can overflow.
  const long double sample_values = static_cast<long double>(dims[1]) * dims[2] * dims[3];
  if (std::max({dims[1], dims[2], dims[3]}) > kMaxSampleValues || sample_values > kMaxSampleValues) {
    header.problems.push_back(fmt::format("has dataset '{}' of extent [{}]: samples of {:.0Lf} values, more than the "
                                          "{} ringtrain handles",
                                          shard_names::images, fmt::join(dims, ", "), sample_values, kMaxSampleValues));
    return;
  }
  header.image_count = static_cast<int64_t>(dims[0]);
  header.image_shape = {static_cast<int>(dims[1]), static_cast<int>(dims[2]), static_cast<int>(dims[3])};
  if (header.image_shape.elements() == 0)
    header.problems.push_back(fmt::format("has dataset '{}' with empty samples ({})", shard_names::images,
                                          describe(header.image_shape)));
  if (is_uint8 && stored_completely(images.id(), dims, type.id(), shard_names::images, header) &&
      chunks_in_place(images.id(), shard_names::images, header))
    header.datasets_readable = true;
}

// One of an encoded shard's datasets: its element class and size, and its rank; the extent when all match and
// its bytes are stored and its chunks in place.
struct ExpectedDataset {
  const char* name;
  H5T_class_t type_class;
  std::size_t element_bytes;
  bool is_signed;
  std::size_t rank;
};

std::optional<std::vector<hsize_t>> examine_dataset(hid_t file, const ExpectedDataset& expected, ShardHeader& header) {
  const H5Dataset set = open_dataset(file, expected.name, header.problems);
  if (!set.valid()) return std::nullopt;
  const H5Type type(H5_CHECK(H5Dget_type(set.id())));
  const bool type_ok = H5_CHECK(H5Tget_class(type.id())) == expected.type_class &&
                       h5::type_size(type.id()) == expected.element_bytes &&
                       (expected.type_class != H5T_INTEGER || (H5_CHECK(H5Tget_sign(type.id())) != H5T_SGN_NONE) == expected.is_signed);
  if (!type_ok) {
    header.problems.push_back(fmt::format("has dataset '{}' of {} elements, expected {}int{}", expected.name,
                                          describe_type(type.id()), expected.is_signed ? "" : "u",
                                          expected.element_bytes * 8));
    return std::nullopt;
  }
  const std::vector<hsize_t> dims = dataset_extent(set.id());
  if (dims.size() != expected.rank) {
    header.problems.push_back(fmt::format("has dataset '{}' of rank {}, expected rank {}", expected.name, dims.size(),
                                          expected.rank));
    return std::nullopt;
  }
  if (!stored_completely(set.id(), dims, type.id(), expected.name, header) || !chunks_in_place(set.id(), expected.name, header))
    return std::nullopt;
  return dims;
}

// An encoded shard: the bytes, N + 1 offsets, N sizes and N sample checksums, their counts agreeing.
void examine_encoded(hid_t file, ShardHeader& header) {
  const auto bytes = examine_dataset(file, {shard_names::encoded, H5T_INTEGER, 1, false, 1}, header);
  const auto offsets = examine_dataset(file, {shard_names::encoded_offsets, H5T_INTEGER, 8, true, 1}, header);
  const auto sizes = examine_dataset(file, {shard_names::image_sizes, H5T_INTEGER, 4, true, 2}, header);
  const auto crcs = examine_dataset(file, {shard_names::sample_crc32c, H5T_INTEGER, 4, false, 1}, header);
  if (!bytes || !offsets || !sizes || !crcs) return;
  if ((*offsets)[0] < 1) {
    header.problems.push_back(fmt::format("has an empty dataset '{}' (it holds N + 1 offsets)", shard_names::encoded_offsets));
    return;
  }
  const hsize_t samples = (*offsets)[0] - 1;
  if ((*sizes)[0] != samples || (*sizes)[1] != 2 || (*crcs)[0] != samples) {
    header.problems.push_back(fmt::format("has {} offsets, {}x{} image sizes and {} checksums; expected {} + 1, {}x2 "
                                          "and {} for its {} samples",
                                          (*offsets)[0], (*sizes)[0], (*sizes)[1], (*crcs)[0], samples, samples, samples,
                                          samples));
    return;
  }
  header.image_count = static_cast<int64_t>(samples);
  header.datasets_readable = true;
}

// The `storage` attribute: absent (raw images) or "jpeg".
void examine_storage(hid_t file, ShardHeader& header) {
  if (!h5::has_attribute(file, shard_names::storage)) return;
  const std::string value = h5::read_string_attribute(file, shard_names::storage);
  if (value == shard_names::jpeg_storage)
    header.storage = SampleStorage::jpeg;
  else
    header.problems.push_back(fmt::format("has root attribute '{}' = '{}', expected '{}' (or none, for raw images)",
                                          shard_names::storage, value, shard_names::jpeg_storage));
}

void examine_labels(hid_t file, ShardHeader& header) {
  const H5Dataset labels = open_dataset(file, shard_names::labels, header.problems);
  if (!labels.valid()) {
    header.datasets_readable = false;
    return;
  }
  const H5Type type(H5_CHECK(H5Dget_type(labels.id())));
  const std::vector<hsize_t> dims = dataset_extent(labels.id());
  bool usable = true;
  if (H5_CHECK(H5Tget_class(type.id())) != H5T_INTEGER || h5::type_size(type.id()) > 8) {
    header.problems.push_back(fmt::format("has dataset '{}' of {} elements, expected int32", shard_names::labels,
                                          describe_type(type.id())));
    usable = false;
  }
  if (dims.size() != 1) {
    header.problems.push_back(
        fmt::format("has dataset '{}' of rank {}, expected rank 1", shard_names::labels, dims.size()));
    usable = false;
  } else {
    header.label_count = static_cast<int64_t>(dims[0]);
  }
  if (usable)
    usable = stored_completely(labels.id(), dims, type.id(), shard_names::labels, header) &&
             chunks_in_place(labels.id(), shard_names::labels, header);
  header.datasets_readable = header.datasets_readable && usable;
}

// Reads one attribute with `read`, turning absence or a wrong type into a problem of the header.
template <typename Read>
void read_attribute(hid_t file, const char* name, ShardHeader& header, Read read) {
  try {
    if (!h5::has_attribute(file, name)) {
      header.problems.push_back(fmt::format("has no root attribute '{}'", name));
      return;
    }
    read();
  } catch (const h5::AttributeTypeError& e) {
    header.problems.push_back(fmt::format("has a root {}", e.what()));
  } catch (const Error& e) {
    header.problems.push_back(fmt::format("has an unreadable root attribute '{}' ({})", name, hdf5_detail(e)));
  }
}

// HDF5 clips a stored value beyond int's range to INT_MAX, so "<= maximum" also refuses those.
std::optional<int> single_int(const std::vector<int>& values, const char* name, int minimum, int maximum,
                              ShardHeader& header) {
  if (values.size() != 1 || values[0] < minimum || values[0] > maximum) {
    header.problems.push_back(fmt::format("has root attribute '{}' = [{}], expected one integer in [{}, {}]", name,
                                          fmt::join(values, ", "), minimum, maximum));
    return std::nullopt;
  }
  return values[0];
}

// Every input is normalised as (pixel - mean) / std, so one NaN/Inf (or a zero std) here poisons every sample
// of that channel; refuse it now rather than as a non-finite loss mid-training.
std::vector<float> checked_statistics(std::vector<float> values, const char* name, bool positive, ShardHeader& header) {
  for (std::size_t c = 0; c < values.size(); ++c) {
    const float v = values[c];
    if (!std::isfinite(v) || (positive && !(v > 0))) {
      header.problems.push_back(fmt::format("has root attribute '{}' = [{}]: channel {} is {}, expected {}", name,
                                            fmt::join(values, ", "), c, v,
                                            positive ? "a finite number > 0" : "a finite number (NaN/Inf would make "
                                                                               "every input non-finite)"));
      return {};
    }
  }
  return values;
}

void examine_attributes(hid_t file, ShardHeader& header) {
  read_attribute(file, shard_names::num_classes, header, [&] {
    header.num_classes = single_int(h5::read_int_attribute(file, shard_names::num_classes), shard_names::num_classes,
                                    1, kMaxClasses, header);
  });
  read_attribute(file, shard_names::shard_index, header, [&] {
    header.shard_index = single_int(h5::read_int_attribute(file, shard_names::shard_index), shard_names::shard_index,
                                    0, kMaxShards - 1, header);
  });
  read_attribute(file, shard_names::shard_count, header, [&] {
    header.shard_count = single_int(h5::read_int_attribute(file, shard_names::shard_count), shard_names::shard_count,
                                    1, kMaxShards, header);
  });
  read_attribute(file, shard_names::sample_shape, header, [&] {
    const std::vector<int> v = h5::read_int_attribute(file, shard_names::sample_shape);
    if (v.size() != 3 || std::any_of(v.begin(), v.end(), [](int d) { return d < 1; }))
      header.problems.push_back(fmt::format("has root attribute '{}' = [{}], expected three positive integers C, H, W",
                                            shard_names::sample_shape, fmt::join(v, ", ")));
    else
      header.attribute_shape = SampleShape{v[0], v[1], v[2]};
  });
  read_attribute(file, shard_names::mean, header, [&] {
    header.mean = checked_statistics(h5::read_float_attribute(file, shard_names::mean), shard_names::mean, false, header);
  });
  read_attribute(file, shard_names::stddev, header, [&] {
    header.stddev =
        checked_statistics(h5::read_float_attribute(file, shard_names::stddev), shard_names::stddev, true, header);
  });
  // Provenance and class names are informational: a shard without them is still usable.
  try {
    if (h5::has_attribute(file, shard_names::provenance))
      header.provenance = h5::read_string_attribute(file, shard_names::provenance);
    if (h5::has_attribute(file, shard_names::class_names))
      header.class_names = split_lines(h5::read_string_attribute(file, shard_names::class_names));
    if (h5::has_attribute(file, shard_names::split_id))
      header.split_id = h5::read_string_attribute(file, shard_names::split_id);
  } catch (const std::exception& e) {
    header.problems.push_back(fmt::format("has an unreadable root attribute '{}' ({})", shard_names::provenance,
                                          hdf5_detail(e)));
  }
}

// The checks that need several fields of one shard.
void cross_check(ShardHeader& header) {
  if (header.image_count >= 0 && header.label_count >= 0 && header.image_count != header.label_count)
    header.problems.push_back(fmt::format("has {} images but {} labels", header.image_count, header.label_count));
  if (header.image_count >= 0 && header.attribute_shape && !(*header.attribute_shape == header.image_shape))
    header.problems.push_back(fmt::format("stores {} images but its '{}' attribute says {}", describe(header.image_shape),
                                          shard_names::sample_shape, describe(*header.attribute_shape)));
  const std::size_t channels = header.attribute_shape ? static_cast<std::size_t>(header.attribute_shape->channels)
                                                      : static_cast<std::size_t>(header.image_shape.channels);
  if (channels > 0 && !header.mean.empty() && header.mean.size() != channels)
    header.problems.push_back(fmt::format("has {} '{}' values for {} channels", header.mean.size(), shard_names::mean,
                                          channels));
  if (channels > 0 && !header.stddev.empty() && header.stddev.size() != channels)
    header.problems.push_back(fmt::format("has {} '{}' values for {} channels", header.stddev.size(),
                                          shard_names::stddev, channels));
  if (header.shard_index && header.shard_count && *header.shard_index >= *header.shard_count)
    header.problems.push_back(fmt::format("says it is shard {} of {} (index out of range)", *header.shard_index,
                                          *header.shard_count));
  // The name and the attributes come from the same prepare run; a disagreement means files were mixed.
  int named_index = -1, named_count = -1;
  const std::string name = header.path.filename().string();
  if (std::sscanf(name.c_str(), "shard-%d-of-%d.h5", &named_index, &named_count) == 2 && header.shard_index &&
      header.shard_count && (named_index != *header.shard_index || named_count != *header.shard_count))
    header.problems.push_back(fmt::format("is named as shard {} of {} but its attributes say shard {} of {}",
                                          named_index, named_count, *header.shard_index, *header.shard_count));
}

}  // namespace

ShardHeader read_shard_header(const fs::path& file) {
  ShardHeader header;
  header.path = file;
  if (const std::string why = unreadable_reason(file); !why.empty()) {
    header.unreadable = true;
    // A folder without search (x) permission hides files that are themselves readable: name what to open.
    const fs::path folder = file.parent_path().empty() ? fs::path(".") : file.parent_path();
    const bool folder_closed = ::access(folder.c_str(), X_OK) != 0;
    header.problems.push_back(fmt::format(
        "cannot be read: {}; the file may well be intact: give the user that runs ringtrain (on every node) {}", why,
        folder_closed ? fmt::format("access to its folder, e.g. chmod a+x '{}'", folder.string())
                      : fmt::format("read permission on it, e.g. chmod a+r '{}'", file.string())));
    return header;
  }
  H5File handle;
  try {
    if (H5_CHECK(H5Fis_hdf5(file.c_str())) == 0) {
      header.problems.push_back("is not an HDF5 file");
      return header;
    }
    handle = H5File(H5_CHECK(H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT)));
  } catch (const Error& e) {
    header.problems.push_back(fmt::format("cannot be opened by HDF5, the file is truncated or corrupt ({})", hdf5_detail(e)));
    return header;
  }
  // Everything below lives in the root group's object header. If that cannot be loaded (in the checksummed
  // format a damaged header fails its checksum), each dataset and attribute check would repeat the same
  // HDF5 error; say it once.
  try {
    H5G_info_t root{};
    H5_CHECK(H5Gget_info(handle.id(), &root));
  } catch (const Error& e) {
    header.datasets_readable = false;
    header.problems.push_back(
        fmt::format("has unreadable metadata (its root group), the file is corrupt ({})", hdf5_detail(e)));
    return header;
  }
  try {
    examine_storage(handle.id(), header);
    if (header.storage == SampleStorage::jpeg)
      examine_encoded(handle.id(), header);
    else
      examine_images(handle.id(), header);
    examine_labels(handle.id(), header);
  } catch (const Error& e) {
    header.datasets_readable = false;
    header.problems.push_back(fmt::format("has unreadable datasets, the file is corrupt ({})", hdf5_detail(e)));
  }
  examine_attributes(handle.id(), header);
  // An encoded shard's samples have the shape they decode to.
  if (header.storage == SampleStorage::jpeg && header.attribute_shape) {
    header.image_shape = *header.attribute_shape;
    if (header.image_shape.channels != 1 && header.image_shape.channels != 3)
      header.problems.push_back(fmt::format("stores JPEGs but its '{}' attribute asks for {} channels (1 or 3)",
                                            shard_names::sample_shape, header.image_shape.channels));
  }
  cross_check(header);
  return header;
}

std::vector<std::string> check_split_consistency(std::vector<ShardHeader>& headers) {
  std::vector<std::string> problems;
  std::stable_sort(headers.begin(), headers.end(), [](const ShardHeader& a, const ShardHeader& b) {
    return a.shard_index.value_or(INT32_MAX) < b.shard_index.value_or(INT32_MAX);
  });
  const int files = static_cast<int>(headers.size());

  std::map<int, int> files_claiming_count;  // shard_count value -> how many shards say it
  for (const ShardHeader& h : headers)
    if (h.shard_count) ++files_claiming_count[*h.shard_count];
  for (const auto& [count, claimants] : files_claiming_count)
    if (count != files)
      problems.push_back(fmt::format("{} of the shards say the split has {} files (attribute '{}') but the folder "
                                     "holds {} shard-*.h5 files",
                                     claimants, count, shard_names::shard_count, files));

  std::map<int, const ShardHeader*> by_index;
  for (const ShardHeader& h : headers) {
    if (!h.shard_index) continue;
    const auto [it, inserted] = by_index.emplace(*h.shard_index, &h);
    if (!inserted)
      problems.push_back(fmt::format("'{}' and '{}' both say they are shard {}", it->second->path.string(),
                                     h.path.string(), *h.shard_index));
  }
  if (files_claiming_count.size() == 1 && files_claiming_count.begin()->first > files) {
    std::vector<std::string> missing;
    const int count = files_claiming_count.begin()->first;
    for (int i = 0; i < count; ++i)
      if (!by_index.contains(i)) missing.push_back(fmt::format("shard-{:05d}-of-{:05d}.h5", i, count));
    if (!missing.empty()) problems.push_back(fmt::format("missing shard files: {}", fmt::join(missing, ", ")));
  }

  // One split's shards carry one id; a shard without any among shards with one is as foreign (older shards carry none).
  // Only shards read whole are compared: one that could not be read has its own problem already.
  const auto with_id = std::find_if(headers.begin(), headers.end(), [](const ShardHeader& h) { return !h.split_id.empty(); });
  if (with_id != headers.end())
    for (const ShardHeader& h : headers)
      if (h.problems.empty() && h.split_id != with_id->split_id)
        problems.push_back(fmt::format("'{}' belongs to split '{}' but '{}' to split '{}': shards of different prepare "
                                       "runs or splits (a shard copied in from the test split?)",
                                       h.path.string(), h.split_id.empty() ? "none named" : h.split_id,
                                       with_id->path.string(), with_id->split_id));

  // Compare every shard with the first one that has the value, so the message names both files.
  const ShardHeader* shape_reference = nullptr;
  const ShardHeader* classes_reference = nullptr;
  const ShardHeader* statistics_reference = nullptr;
  for (const ShardHeader& h : headers) {
    if (h.storage != headers.front().storage)
      problems.push_back(fmt::format("'{}' stores {} samples but '{}' stores {} samples (shards of different prepare "
                                     "runs?)",
                                     h.path.string(), h.storage == SampleStorage::jpeg ? "JPEG" : "raw",
                                     headers.front().path.string(),
                                     headers.front().storage == SampleStorage::jpeg ? "JPEG" : "raw"));
    if (h.image_count >= 0) {
      if (shape_reference == nullptr)
        shape_reference = &h;
      else if (!(h.image_shape == shape_reference->image_shape))
        problems.push_back(fmt::format("'{}' holds {} samples but '{}' holds {} samples", h.path.string(),
                                       describe(h.image_shape), shape_reference->path.string(),
                                       describe(shape_reference->image_shape)));
    }
    if (h.num_classes) {
      if (classes_reference == nullptr)
        classes_reference = &h;
      else if (*h.num_classes != *classes_reference->num_classes)
        problems.push_back(fmt::format("'{}' says {} classes but '{}' says {}", h.path.string(), *h.num_classes,
                                       classes_reference->path.string(), *classes_reference->num_classes));
    }
    if (!h.mean.empty() && !h.stddev.empty()) {
      if (statistics_reference == nullptr)
        statistics_reference = &h;
      else if (h.mean != statistics_reference->mean || h.stddev != statistics_reference->stddev)
        problems.push_back(fmt::format("'{}' and '{}' store different mean/std (shards of different prepare runs?)",
                                       h.path.string(), statistics_reference->path.string()));
    }
  }
  return problems;
}

DatasetMeta meta_of(const ShardHeader& header) {
  DatasetMeta meta;
  meta.shape = header.attribute_shape.value_or(header.image_shape);
  meta.num_classes = header.num_classes.value_or(0);
  meta.mean = header.mean;
  meta.stddev = header.stddev;
  meta.provenance = header.provenance;
  meta.class_names = header.class_names;
  meta.storage = header.storage;
  meta.split_id = header.split_id;
  return meta;
}

}  // namespace ringtrain::io::detail
