// Owns `ringtrain inspect`: examining every shard of a split, listing all problems instead of stopping at
// the first, verifying every byte of its data against the stored CRC-32C, and printing counts and class
// histograms.
#include "io/inspect.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <hdf5.h>

#include <algorithm>
#include <numeric>
#include <optional>

#include "common/crc32c.h"
#include "common/error.h"
#include "common/path_probe.h"
#include "io/data_checksum.h"
#include "io/h5_attributes.h"
#include "io/h5_check.h"
#include "io/h5_handle.h"
#include "io/hdf5_lock.h"
#include "io/shard_header.h"

namespace ringtrain::io {
namespace fs = std::filesystem;

bool SplitReport::valid() const {
  return problems.empty() &&
         std::all_of(shards.begin(), shards.end(), [](const ShardReport& s) { return s.problems.empty(); });
}

namespace {

// "0 cat, 1 dog, ..."; a long list is cut after 20 names, as the histogram is.
std::string numbered_names(const std::vector<std::string>& names) {
  std::string text;
  const std::size_t shown = std::min<std::size_t>(names.size(), 20);
  for (std::size_t i = 0; i < shown; ++i) text += fmt::format("{}{} {}", i == 0 ? "" : ", ", i, names[i]);
  if (shown < names.size()) text += fmt::format(", ... ({} more)", names.size() - shown);
  return text;
}

// The dataset's stored CRC-32C against the one of the bytes read; a shard of an older ringtrain has none, one
// whose file says its datasets carry a CRC (detail::file_says_checksummed) must have it.
void check_crc(hid_t dataset, const char* name, uint32_t read, bool required, ShardReport& report) {
  std::optional<uint32_t> stored;
  try {
    stored = detail::read_data_checksum(dataset);
  } catch (const h5::AttributeTypeError& e) {
    report.problems.push_back(fmt::format("is damaged: its dataset '{}' has a broken checksum ({})", name, e.what()));
    return;
  }
  if (!stored && required) {
    report.problems.push_back(fmt::format("is damaged or was edited: its dataset '{}' has lost its CRC-32C (the file "
                                          "says its datasets carry one)",
                                          name));
  } else if (!stored) {
    report.unchecked.push_back(name);
  } else if (*stored != read) {
    report.problems.push_back(fmt::format("is damaged: its dataset '{}' fails its checksum (CRC-32C {:08x} stored, "
                                          "{:08x} read)",
                                          name, *stored, read));
  }
}

// Counts labels per class in blocks, so a shard of any size is checked in bounded memory.
void scan_labels(hid_t file, int num_classes, ShardReport& report) {
  const H5Dataset labels(H5_CHECK(H5Dopen2(file, shard_names::labels, H5P_DEFAULT)));
  const H5Dataspace space(H5_CHECK(H5Dget_space(labels.id())));
  hsize_t total = 0;
  H5_CHECK(H5Sget_simple_extent_dims(space.id(), &total, nullptr));
  report.class_histogram.assign(static_cast<std::size_t>(std::max(num_classes, 0)), 0);
  int64_t out_of_range = 0;
  std::string first_bad;
  constexpr hsize_t block = hsize_t{1} << 20;
  std::vector<int32_t> values(static_cast<std::size_t>(std::min(total, block)));
  uint32_t crc = 0;
  for (hsize_t start = 0; start < total; start += block) {
    const hsize_t count = std::min(block, total - start);
    H5_CHECK(H5Sselect_hyperslab(space.id(), H5S_SELECT_SET, &start, nullptr, &count, nullptr));
    const H5Dataspace memory(H5_CHECK(H5Screate_simple(1, &count, nullptr)));
    H5_CHECK(H5Dread(labels.id(), H5T_NATIVE_INT32, memory.id(), space.id(), H5P_DEFAULT, values.data()));
    crc = crc32c_extend(crc, values.data(), static_cast<std::size_t>(count) * sizeof(int32_t));
    for (hsize_t i = 0; i < count; ++i) {
      const int32_t label = values[static_cast<std::size_t>(i)];
      if (label >= 0 && label < num_classes) {
        ++report.class_histogram[static_cast<std::size_t>(label)];
      } else if (out_of_range++ == 0) {
        first_bad = fmt::format("label {} at sample {}", label, start + i);
      }
    }
  }
  if (out_of_range > 0)
    report.problems.push_back(fmt::format("has {} labels outside [0, {}) (first: {})", out_of_range, num_classes,
                                          first_bad));
  check_crc(labels.id(), shard_names::labels, crc, detail::file_says_checksummed(file), report);
}

// Every image, in blocks of whole rows (bounded memory), against the images' CRC-32C: the only check that sees a
// flipped byte in unfiltered image data, or a chunk index pointing at other bytes. A shard without the CRC (an
// older ringtrain's) gets its first and last sample read, proving at least that the data is where the header says.
void scan_images(hid_t file, int64_t count, const SampleShape& shape, ShardReport& report) {
  if (count <= 0) return;
  const H5Dataset images(H5_CHECK(H5Dopen2(file, shard_names::images, H5P_DEFAULT)));
  const H5Dataspace space(H5_CHECK(H5Dget_space(images.id())));
  const auto sample_bytes = static_cast<hsize_t>(shape.elements());
  const bool checked = h5::has_attribute(images.id(), detail::kChecksumAttribute);
  const hsize_t block = checked ? std::max<hsize_t>(1, (hsize_t{64} << 20) / sample_bytes) : 1;
  std::vector<uint8_t> rows(static_cast<std::size_t>(std::min<hsize_t>(block, static_cast<hsize_t>(count)) * sample_bytes));
  uint32_t crc = 0;
  const auto read_rows = [&](hsize_t first, hsize_t n) {
    const hsize_t start[4] = {first, 0, 0, 0};
    const hsize_t extent[4] = {n, static_cast<hsize_t>(shape.channels), static_cast<hsize_t>(shape.height),
                               static_cast<hsize_t>(shape.width)};
    H5_CHECK(H5Sselect_hyperslab(space.id(), H5S_SELECT_SET, start, nullptr, extent, nullptr));
    const H5Dataspace memory(H5_CHECK(H5Screate_simple(4, extent, nullptr)));
    H5_CHECK(H5Dread(images.id(), H5T_NATIVE_UINT8, memory.id(), space.id(), H5P_DEFAULT, rows.data()));
    crc = crc32c_extend(crc, rows.data(), static_cast<std::size_t>(n * sample_bytes));
  };
  if (!checked) {
    read_rows(0, 1);
    read_rows(static_cast<hsize_t>(count - 1), 1);
    report.unchecked.push_back(shard_names::images);
    return;
  }
  const auto total = static_cast<hsize_t>(count);
  for (hsize_t first = 0; first < total; first += block) read_rows(first, std::min(block, total - first));
  check_crc(images.id(), shard_names::images, crc, detail::file_says_checksummed(file), report);
}

// A small dataset read whole, its stored CRC-32C checked.
template <typename T>
std::vector<T> read_checked(hid_t file, const char* name, hid_t memory_type, std::size_t count, ShardReport& report) {
  const H5Dataset set(H5_CHECK(H5Dopen2(file, name, H5P_DEFAULT)));
  std::vector<T> values(count);
  H5_CHECK(H5Dread(set.id(), memory_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()));
  check_crc(set.id(), name, crc32c(values.data(), count * sizeof(T)), true, report);
  return values;
}

// An encoded shard: its offsets, sizes and sample checksums against their own CRC-32C, then every byte of
// `encoded` in blocks (bounded memory) against the dataset's CRC-32C and each sample's. The JPEGs are not decoded
// here: `prepare` decoded each before storing it, and the checksums prove the bytes are those.
void scan_encoded(hid_t file, int64_t count, ShardReport& report) {
  const auto n = static_cast<std::size_t>(count);
  const auto offsets = read_checked<int64_t>(file, shard_names::encoded_offsets, H5T_NATIVE_INT64, n + 1, report);
  const auto sizes = read_checked<int32_t>(file, shard_names::image_sizes, H5T_NATIVE_INT32, 2 * n, report);
  const auto crcs = read_checked<uint32_t>(file, shard_names::sample_crc32c, H5T_NATIVE_UINT32, n, report);
  const H5Dataset encoded(H5_CHECK(H5Dopen2(file, shard_names::encoded, H5P_DEFAULT)));
  const H5Dataspace space(H5_CHECK(H5Dget_space(encoded.id())));
  hsize_t total = 0;
  H5_CHECK(H5Sget_simple_extent_dims(space.id(), &total, nullptr));
  for (std::size_t i = 0; i < n; ++i)
    if (offsets[i] < 0 || offsets[i + 1] < offsets[i] || static_cast<hsize_t>(offsets[i + 1]) > total ||
        sizes[2 * i] < 1 || sizes[2 * i + 1] < 1) {
      report.problems.push_back(fmt::format("is damaged: sample {} claims bytes [{}, {}) of {} and a {}x{} image", i,
                                            offsets[i], offsets[i + 1], total, sizes[2 * i + 1], sizes[2 * i]));
      return;
    }
  constexpr hsize_t block = hsize_t{64} << 20;
  std::vector<uint8_t> bytes(static_cast<std::size_t>(std::min(block, total)));
  uint32_t whole = 0, sample = 0;
  std::size_t next = 0;  // the sample whose bytes are being summed
  int64_t bad = 0;
  for (hsize_t start = 0; start < total; start += block) {
    const hsize_t length = std::min(block, total - start);
    H5_CHECK(H5Sselect_hyperslab(space.id(), H5S_SELECT_SET, &start, nullptr, &length, nullptr));
    const H5Dataspace memory(H5_CHECK(H5Screate_simple(1, &length, nullptr)));
    H5_CHECK(H5Dread(encoded.id(), H5T_NATIVE_UINT8, memory.id(), space.id(), H5P_DEFAULT, bytes.data()));
    whole = crc32c_extend(whole, bytes.data(), static_cast<std::size_t>(length));
    for (auto at = static_cast<int64_t>(start); next < n && at < static_cast<int64_t>(start + length);) {
      const int64_t end = std::min<int64_t>(offsets[next + 1], static_cast<int64_t>(start + length));
      sample = crc32c_extend(sample, bytes.data() + (at - static_cast<int64_t>(start)), static_cast<std::size_t>(end - at));
      at = end;
      if (at < offsets[next + 1]) break;
      if (sample != crcs[next] && bad++ == 0)
        report.problems.push_back(fmt::format("is damaged: sample {} fails its checksum (CRC-32C {:08x} stored, {:08x} "
                                              "read)",
                                              next, crcs[next], sample));
      sample = 0;
      ++next;
    }
  }
  if (bad > 1) report.problems.push_back(fmt::format("has {} samples failing their checksum in all", bad));
  check_crc(encoded.id(), shard_names::encoded, whole, true, report);
}

ShardReport examine_contents(const detail::ShardHeader& header, int split_classes) {
  ShardReport report;
  report.path = header.path;
  report.samples = std::max<int64_t>(header.image_count, 0);
  report.problems = header.problems;
  report.unreadable = header.unreadable;
  if (!header.datasets_readable) return report;
  const int num_classes = header.num_classes.value_or(split_classes);
  try {
    const H5File file(H5_CHECK(H5Fopen(header.path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT)));
    scan_labels(file.id(), num_classes, report);
    if (header.storage == SampleStorage::jpeg)
      scan_encoded(file.id(), header.image_count, report);
    else
      scan_images(file.id(), header.image_count, header.image_shape, report);
  } catch (const Error& e) {
    report.problems.push_back(fmt::format("has unreadable data, the file is truncated or corrupt ({})",
                                          detail::hdf5_detail(e)));
  }
  return report;
}

}  // namespace

SplitReport inspect_split(const fs::path& dir) {
  const PathProbe probe = probe_path(dir);
  if (probe.kind != PathProbe::Kind::directory)
    throw DataError(fmt::format("split folder '{}' {}; check the path, or create it with `ringtrain prepare`",
                                dir.string(), probe.kind == PathProbe::Kind::regular ? "is a file, not a folder"
                                                                                     : probe.describe()));
  SplitReport report;
  report.dir = dir;
  const std::vector<fs::path> files = detail::list_shard_files(dir);
  if (files.empty()) {
    report.problems.push_back(fmt::format("the folder holds no {}*.h5 files", shard_names::file_prefix));
    return report;
  }

  const Hdf5Lock lock;
  std::vector<detail::ShardHeader> headers;
  for (const fs::path& file : files) headers.push_back(detail::read_shard_header(file));
  report.problems = detail::check_split_consistency(headers);

  const auto described = std::find_if(headers.begin(), headers.end(), [](const detail::ShardHeader& h) {
    return h.num_classes.has_value() && h.attribute_shape.has_value();
  });
  if (described != headers.end()) report.meta = detail::meta_of(*described);
  for (const detail::ShardHeader& header : headers) report.shards.push_back(examine_contents(header, report.meta.num_classes));
  return report;
}

std::string format_report(const SplitReport& report) {
  std::string text;
  const DatasetMeta& meta = report.meta;
  const int64_t total = std::accumulate(report.shards.begin(), report.shards.end(), int64_t{0},
                                        [](int64_t sum, const ShardReport& s) { return sum + s.samples; });
  text += fmt::format("split {}\n", report.dir.string());
  text += fmt::format("  samples     {} in {} shards\n", total, report.shards.size());
  text += fmt::format("  shape       {} (C x H x W, uint8{})\n", detail::describe(meta.shape),
                      meta.storage == SampleStorage::jpeg ? ", decoded from the stored JPEGs" : "");
  text += fmt::format("  classes     {}\n", meta.num_classes);
  if (!meta.class_names.empty()) text += fmt::format("  names       {}\n", numbered_names(meta.class_names));
  text += fmt::format("  mean        {:.2f}\n", fmt::join(meta.mean, " "));
  text += fmt::format("  std         {:.2f}\n", fmt::join(meta.stddev, " "));
  if (!meta.provenance.empty()) text += fmt::format("  provenance  {}\n", meta.provenance);

  // A 1000-class histogram does not fit a line; its extremes say what matters (empty or starved classes).
  const bool full_histogram = meta.num_classes > 0 && meta.num_classes <= 20;
  const std::string histogram_title =
      full_histogram         ? "samples per class 0.." + std::to_string(meta.num_classes - 1)
      : meta.num_classes > 0 ? std::string("samples per class (min / max / empty classes)")
                             : std::string("samples per class");
  text += fmt::format("  {:<28} {:>9}  {}\n", "shard", "samples", histogram_title);
  for (const ShardReport& shard : report.shards) {
    std::string histogram;
    if (shard.class_histogram.empty()) {
      histogram = "-";
    } else if (full_histogram) {
      histogram = fmt::format("{}", fmt::join(shard.class_histogram, " "));
    } else {
      const auto [low, high] = std::minmax_element(shard.class_histogram.begin(), shard.class_histogram.end());
      histogram = fmt::format("{} / {} / {}", *low, *high,
                              std::count(shard.class_histogram.begin(), shard.class_histogram.end(), 0));
    }
    text += fmt::format("  {:<28} {:>9}  {}\n", shard.path.filename().string(), shard.samples, histogram);
  }

  std::vector<std::string> problems;
  bool rewrite = !report.problems.empty();  // a shard that is merely unreadable needs its permissions fixed instead
  for (const std::string& problem : report.problems) problems.push_back(problem);
  for (const ShardReport& shard : report.shards) {
    for (const std::string& problem : shard.problems)
      problems.push_back(fmt::format("shard '{}' {}", shard.path.string(), problem));
    rewrite = rewrite || (!shard.problems.empty() && !shard.unreadable);
  }
  const auto unchecked = std::count_if(report.shards.begin(), report.shards.end(),
                                       [](const ShardReport& s) { return !s.unchecked.empty(); });
  if (problems.empty() && unchecked == 0) {
    text += "  OK: every shard is valid (every image and label read and matched to its CRC-32C)\n";
  } else if (problems.empty()) {
    text += fmt::format("  OK: every shard is valid; {} of them carry no CRC-32C (written by an older ringtrain), so "
                        "their data was checked only where it lies, not byte by byte\n",
                        unchecked);
  } else {
    text += fmt::format("  INVALID: {} problem{}\n", problems.size(), problems.size() == 1 ? "" : "s");
    for (const std::string& problem : problems) text += fmt::format("    - {}\n", problem);
    if (rewrite) text += fmt::format("  {}\n", detail::rewrite_advice);
  }
  return text;
}

}  // namespace ringtrain::io
