// Owns the shard writers' shared root attributes and read-back; see shard_attributes.h.
#include "io/shard_attributes.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/error.h"
#include "io/chunk_coverage.h"
#include "io/data_checksum.h"
#include "io/h5_attributes.h"
#include "io/h5_check.h"
#include "io/h5_handle.h"

namespace ringtrain::io::detail {

void write_shard_attributes(hid_t file, const DatasetMeta& meta, int index, int count) {
  const int num_classes[] = {meta.num_classes};
  const int shape[] = {meta.shape.channels, meta.shape.height, meta.shape.width};
  const int shard_index[] = {index};
  const int shard_count[] = {count};
  h5::write_int_attribute(file, shard_names::num_classes, num_classes);
  h5::write_int_attribute(file, shard_names::sample_shape, shape);
  h5::write_float_attribute(file, shard_names::mean, meta.mean);
  h5::write_float_attribute(file, shard_names::stddev, meta.stddev);
  h5::write_string_attribute(file, shard_names::provenance, meta.provenance);
  if (!meta.class_names.empty())
    h5::write_string_attribute(file, shard_names::class_names, fmt::format("{}", fmt::join(meta.class_names, "\n")));
  if (!meta.split_id.empty()) h5::write_string_attribute(file, shard_names::split_id, meta.split_id);
  if (meta.storage == SampleStorage::jpeg)
    h5::write_string_attribute(file, shard_names::storage, shard_names::jpeg_storage);
  h5::write_int_attribute(file, shard_names::shard_index, shard_index);
  h5::write_int_attribute(file, shard_names::shard_count, shard_count);
  mark_file_checksummed(file);  // its datasets carry their CRC-32C (written with the data)
}

void verify_written_datasets(const std::filesystem::path& file,
                             std::initializer_list<std::pair<const char*, double>> datasets_and_bytes) {
  const H5File handle(H5_CHECK(H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT)));
  for (const auto& [name, bytes] : datasets_and_bytes) {
    const H5Dataset set(H5_CHECK(H5Dopen2(handle.id(), name, H5P_DEFAULT)));
    std::string problem = chunk_coverage_problem(set.id());
    const auto stored = static_cast<double>(H5Dget_storage_size(set.id()));
    if (problem.empty() && stored < bytes) problem = fmt::format("has {:.0f} of its {:.0f} bytes stored", stored, bytes);
    if (!problem.empty())
      throw DataError(fmt::format("shard '{}', read back just after it was written: dataset '{}' {}", file.string(),
                                  name, problem));
  }
}

}  // namespace ringtrain::io::detail
