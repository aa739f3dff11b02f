// Owns chunk_coverage_problem: one lookup per expected chunk (H5Dget_chunk_info_by_coord), not a walk of the
// index per chunk (H5Dget_chunk_info), so a shard of 100,000 chunks is checked in milliseconds.
#include "io/chunk_coverage.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <vector>

#include "io/h5_attributes.h"
#include "io/h5_check.h"
#include "io/h5_handle.h"

namespace ringtrain::io::detail {
namespace {

// The bytes the file holds, as HDF5 sees them: a chunk ending past them was never there.
hsize_t file_bytes(hid_t dataset) {
  const H5File file(H5_CHECK(H5Iget_file_id(dataset)));
  hsize_t size = 0;
  H5_CHECK(H5Fget_filesize(file.id(), &size));
  return size;
}

}  // namespace

std::string chunk_coverage_problem(hid_t dataset) {
  const H5PropList create(H5_CHECK(H5Dget_create_plist(dataset)));
  if (H5_CHECK(H5Pget_layout(create.id())) != H5D_CHUNKED) return "";
  const H5Dataspace space(H5_CHECK(H5Dget_space(dataset)));
  const int rank = H5_CHECK(H5Sget_simple_extent_ndims(space.id()));
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank)), chunk(static_cast<std::size_t>(rank));
  if (rank > 0) H5_CHECK(H5Sget_simple_extent_dims(space.id(), dims.data(), nullptr));
  if (H5_CHECK(H5Pget_chunk(create.id(), rank, chunk.data())) != rank)
    return fmt::format("has a chunk shape of another rank than its extent [{}]", fmt::join(dims, ", "));
  hsize_t expected = 1;
  for (std::size_t d = 0; d < dims.size(); ++d) {
    if (chunk[d] == 0) return "has a chunk shape with an empty dimension";
    expected *= (dims[d] + chunk[d] - 1) / chunk[d];
  }
  if (expected == 0) return "";  // an empty extent has no chunks to store
  hsize_t listed = 0;
  H5_CHECK(H5Dget_num_chunks(dataset, space.id(), &listed));
  if (listed != expected)
    return fmt::format("has {} chunks in its chunk index where its extent [{}] needs {}: the index is damaged or the "
                       "data was not written completely",
                       listed, fmt::join(dims, ", "), expected);

  // Unfiltered chunks are stored at exactly their size; filtered ones (Fletcher-32) at any size, which the
  // filter itself then checks.
  const bool filtered = H5_CHECK(H5Pget_nfilters(create.id())) > 0;
  const H5Type type(H5_CHECK(H5Dget_type(dataset)));
  hsize_t chunk_bytes = h5::type_size(type.id());
  for (const hsize_t c : chunk) chunk_bytes *= c;
  const hsize_t eof = file_bytes(dataset);
  std::vector<hsize_t> origin(dims.size(), 0);  // an odometer over the chunk grid, last dimension fastest
  for (hsize_t index = 0; index < expected; ++index) {
    unsigned filter_mask = 0;
    haddr_t address = HADDR_UNDEF;
    hsize_t size = 0;
    H5_CHECK(H5Dget_chunk_info_by_coord(dataset, origin.data(), &filter_mask, &address, &size));
    const auto where = [&] { return fmt::format("chunk {} of {} (from element [{}])", index + 1, expected, fmt::join(origin, ", ")); };
    if (address == HADDR_UNDEF || size == 0) return fmt::format("has {} missing from its chunk index", where());
    if (address + size > eof) return fmt::format("has {} ending at byte {} of a {}-byte file", where(), address + size, eof);
    if (filter_mask != 0) return fmt::format("has {} marked as stored with its filters skipped", where());
    if (!filtered && size != chunk_bytes)
      return fmt::format("has {} of {} bytes where it needs {}", where(), size, chunk_bytes);
    for (std::size_t d = dims.size(); d-- > 0;) {
      origin[d] += chunk[d];
      if (origin[d] < dims[d]) break;
      origin[d] = 0;
    }
  }
  return "";
}

}  // namespace ringtrain::io::detail
