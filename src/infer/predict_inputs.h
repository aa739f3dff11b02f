// Owns what `predict`'s arguments name, sorted out before anything is predicted so a wrong path is an error
// before the first line: a split folder (it holds shard-*.h5 files), a folder of images (every .jpg/.jpeg/.png
// under it and its subfolders, sorted by path), or one image file (any name: its first bytes decide).
#pragma once
#include <filesystem>
#include <vector>

namespace ringtrain::infer {

struct PredictInput {
  std::filesystem::path path;                 // as given
  std::vector<std::filesystem::path> images;  // empty: `path` is a split folder
  bool is_split() const { return images.empty(); }
};

// In the arguments' order. Throws DataError naming the path for one that does not exist or cannot be read, and
// for a folder holding neither shards nor images.
std::vector<PredictInput> resolve_predict_inputs(const std::vector<std::filesystem::path>& paths);

}  // namespace ringtrain::infer
