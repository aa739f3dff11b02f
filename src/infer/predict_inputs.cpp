// Owns resolve_predict_inputs; see predict_inputs.h.
#include "infer/predict_inputs.h"

#include <fmt/format.h>

#include "common/error.h"
#include "common/path_probe.h"
#include "io/image_folder.h"
#include "io/shard_header.h"

namespace ringtrain::infer {
namespace fs = std::filesystem;

namespace {

PredictInput resolve(const fs::path& path) {
  const PathProbe probe = probe_path(path);
  if (probe.kind == PathProbe::Kind::regular) return {path, {path}};
  if (probe.kind != PathProbe::Kind::directory)
    throw DataError(fmt::format("predict input '{}' {}; pass split folders, folders of images or image files",
                                path.string(), probe.describe()));
  if (!io::detail::list_shard_files(path).empty()) return {path, {}};
  PredictInput input{path, io::images_under(path)};
  if (input.images.empty())
    throw DataError(fmt::format("folder '{}' holds no shard-*.h5 files and no .jpg/.jpeg/.png images (its subfolders "
                                "included); pass a split folder (`ringtrain prepare` makes them), a folder of images "
                                "or image files",
                                path.string()));
  return input;
}

}  // namespace

std::vector<PredictInput> resolve_predict_inputs(const std::vector<fs::path>& paths) {
  std::vector<PredictInput> inputs;
  for (const fs::path& path : paths) inputs.push_back(resolve(path));
  return inputs;
}

}  // namespace ringtrain::infer
