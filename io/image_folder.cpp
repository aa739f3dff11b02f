// Owns the directory walks behind `prepare images` (sorted class folders, sorted image files, and the errors a
// user gets for a tree that is not class-per-subfolder) and `predict` (every image under a folder).
#include "io/image_folder.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "common/error.h"
#include "common/path_probe.h"

namespace ringtrain::io {
namespace fs = std::filesystem;

fs::path ImageFolder::path(std::size_t i) const {
  const std::size_t begin = i == 0 ? 0 : name_ends[i - 1];
  return root / std::string_view(names).substr(begin, name_ends[i] - begin);
}

bool is_image_name(const fs::path& file) {
  std::string ext = file.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ext == ".jpg" || ext == ".jpeg" || ext == ".png";
}

namespace {

void note_ignored(ImageFolder* folder, const fs::directory_entry& entry) {
  std::error_code kind;
  if (!folder || !entry.is_regular_file(kind)) return;
  if (folder->ignored_files++ == 0) folder->ignored_example = entry.path();
}

// The class folders of `dir`: folders, or links to them. The error_code forms throughout: a link that loops is the
// user's to hear about, not a filesystem_error. Files beside them are noted in `ignored`.
std::vector<fs::path> class_folders(const fs::path& dir, ImageFolder* ignored) {
  std::vector<fs::path> entries;
  std::error_code error;
  for (fs::directory_iterator it(dir, error); !error && it != fs::directory_iterator(); it.increment(error)) {
    std::error_code kind;
    const bool folder = it->is_directory(kind);
    if (kind && kind != std::errc::no_such_file_or_directory)  // a dangling link is no class folder: ignored
      throw DataError(fmt::format("class folder '{}' cannot be reached: {}; fix or remove it", it->path().string(),
                                  kind.message()));
    if (folder)
      entries.push_back(it->path());
    else
      note_ignored(ignored, *it);
  }
  if (error)
    throw DataError(fmt::format("image folder '{}' cannot be read: {}; check the path and its permissions",
                                dir.string(), error.message()));
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

std::vector<fs::path> walk_images(const fs::path& root, ImageFolder* ignored) {
  std::vector<fs::path> images;
  std::error_code error, kind;
  // Symlinked folders are not followed, so a link loop cannot make the walk endless.
  fs::recursive_directory_iterator entries(root, error);
  // Anything named like an image but a folder (which the walk enters) is kept, so that a FIFO or a link that loops
  // is refused by the decoder naming it, not dropped unseen.
  fs::path at = root;  // the last entry met: a subfolder that cannot be entered fails the next step
  for (; !error && entries != fs::recursive_directory_iterator(); entries.increment(error)) {
    at = entries->path();
    if (is_image_name(entries->path()) && !entries->is_directory(kind))
      images.push_back(entries->path());
    else if (!is_image_name(entries->path()))
      note_ignored(ignored, *entries);
  }
  std::error_code ignored_kind;
  if (error)
    throw DataError(fmt::format("image folder '{}' cannot be read: {}; check the path and its permissions",
                                (fs::is_directory(at, ignored_kind) ? at : root).string(), error.message()));
  std::sort(images.begin(), images.end());
  return images;
}

}  // namespace

std::vector<fs::path> images_under(const fs::path& root) { return walk_images(root, nullptr); }

std::vector<fs::path> images_under(const fs::path& root, ImageFolder& folder) { return walk_images(root, &folder); }

ImageFolder scan_image_folder(const fs::path& root, const std::vector<std::string>& classes) {
  const PathProbe probe = probe_path(root);
  if (probe.kind != PathProbe::Kind::directory)
    throw DataError(fmt::format("image folder '{}' {}; pass the folder holding one subfolder per class", root.string(),
                                probe.describe()));
  ImageFolder folder;
  folder.root = root;
  const std::vector<fs::path> class_dirs = class_folders(root, &folder);
  if (class_dirs.empty())
    throw DataError(fmt::format("'{}' has no class subfolders; lay images out as {}/CLASS_NAME/IMAGE.jpg",
                                root.string(), root.string()));
  for (const fs::path& dir : class_dirs) {
    const std::string name = dir.filename().string();
    // The shards store class names one a line: a line break inside one would shift every later class's name.
    if (name.find_first_of("\n\r") != std::string::npos)
      throw DataError(fmt::format("class folder '{}' has a line break in its name, which the shards' class names (one "
                                  "a line) cannot hold; rename the folder",
                                  dir.string()));
    const int32_t label = classes.empty() ? static_cast<int32_t>(folder.class_names.size()) : label_of(name, classes, root);
    if (classes.empty()) folder.class_names.push_back(name);
    // Its subfolders too, as torchvision's ImageFolder takes them (ImageNet's class folders hold none, but a
    // user's tree may, and images left out unseen would be data lost).
    const std::vector<fs::path> images = images_under(dir, folder);
    if (images.empty())
      throw DataError(fmt::format("class folder '{}' holds no .jpg/.jpeg/.png images; add images or remove the "
                                  "folder",
                                  dir.string()));
    for (const fs::path& image : images) {
      folder.names += (fs::path(name) / image.lexically_relative(dir)).string();
      folder.name_ends.push_back(folder.names.size());
      folder.labels.push_back(label);
    }
  }
  if (!classes.empty()) folder.class_names = classes;
  return folder;
}

}  // namespace ringtrain::io
