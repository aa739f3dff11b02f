// Owns the directory walks behind `prepare images` (sorted class folders, sorted image files, and the errors a
// user gets for a tree that is not class-per-subfolder) and `predict` (every image under a folder).
#include "io/image_folder.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "common/error.h"

namespace ringtrain::io {
namespace fs = std::filesystem;

bool is_image_name(const fs::path& file) {
  std::string ext = file.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ext == ".jpg" || ext == ".jpeg" || ext == ".png";
}

namespace {

std::vector<fs::path> sorted_entries(const fs::path& dir, bool folders) {
  std::vector<fs::path> entries;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir)) {
    if (folders ? entry.is_directory() : (entry.is_regular_file() && is_image_name(entry.path())))
      entries.push_back(entry.path());
  }
  std::sort(entries.begin(), entries.end());
  return entries;
}

int32_t label_of(const std::string& name, const std::vector<std::string>& classes, const fs::path& root) {
  const auto found = std::find(classes.begin(), classes.end(), name);
  if (found == classes.end())
    throw DataError(fmt::format("'{}' has a class folder '{}' that the training source does not have; both "
                                "sources need the same class folders",
                                root.string(), name));
  return static_cast<int32_t>(found - classes.begin());
}

}  // namespace

std::vector<fs::path> images_under(const fs::path& root) {
  std::vector<fs::path> images;
  std::error_code error, kind;
  // Symlinked folders are not followed, so a link loop cannot make the walk endless.
  fs::recursive_directory_iterator entries(root, error);
  for (; !error && entries != fs::recursive_directory_iterator(); entries.increment(error))
    if (entries->is_regular_file(kind) && is_image_name(entries->path())) images.push_back(entries->path());
  if (error)
    throw DataError(fmt::format("image folder '{}' cannot be read: {}; check the path and its permissions",
                                root.string(), error.message()));
  std::sort(images.begin(), images.end());
  return images;
}

ImageFolder scan_image_folder(const fs::path& root, const std::vector<std::string>& classes) {
  std::error_code error;
  if (!fs::is_directory(root, error))
    throw DataError(fmt::format("image folder '{}' does not exist; pass the folder holding one subfolder per class",
                                root.string()));
  ImageFolder folder;
  const std::vector<fs::path> class_dirs = sorted_entries(root, true);
  if (class_dirs.empty())
    throw DataError(fmt::format("'{}' has no class subfolders; lay images out as {}/CLASS_NAME/IMAGE.jpg",
                                root.string(), root.string()));
  for (const fs::path& dir : class_dirs) {
    const std::string name = dir.filename().string();
    const int32_t label = classes.empty() ? static_cast<int32_t>(folder.class_names.size()) : label_of(name, classes, root);
    if (classes.empty()) folder.class_names.push_back(name);
    const std::vector<fs::path> images = sorted_entries(dir, false);
    if (images.empty())
      throw DataError(fmt::format("class folder '{}' holds no .jpg/.jpeg/.png images; add images or remove the "
                                  "folder",
                                  dir.string()));
    for (const fs::path& image : images) folder.files.push_back({image, label});
  }
  if (!classes.empty()) folder.class_names = classes;
  return folder;
}

}  // namespace ringtrain::io
