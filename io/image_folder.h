// Owns finding image files in folders: a class-per-subfolder tree for `prepare images` (ROOT/CLASS/IMAGE: class
// names sorted, each image file with the index of its class), and every image under a folder for `predict`. Only
// the folder structure is read here, no pixels.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace ringtrain::io {

struct LabelledFile {
  std::filesystem::path path;
  int32_t label = 0;
};

struct ImageFolder {
  std::vector<std::string> class_names;  // sorted; index = label
  std::vector<LabelledFile> files;       // by class, then by file name
};

// Names ending .jpg/.jpeg/.png (any case): what counts as an image inside a folder.
bool is_image_name(const std::filesystem::path& file);

// Every image file under `root` and its subfolders, sorted by path (empty when there is none). Throws DataError
// naming the folder when it cannot be read.
std::vector<std::filesystem::path> images_under(const std::filesystem::path& root);

// Files ending .jpg/.jpeg/.png (any case) count as images. Throws DataError for a missing root, a root with
// no class folders, or a class folder with no images. With `classes` given (a test source), every folder
// must be one of them, labels follow their order and class_names is `classes`.
ImageFolder scan_image_folder(const std::filesystem::path& root, const std::vector<std::string>& classes = {});

}  // namespace ringtrain::io
