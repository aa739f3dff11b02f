// Owns finding image files in folders: a class-per-subfolder tree for `prepare images` (ROOT/CLASS/IMAGE: class
// names sorted, each image file with the index of its class), and every image under a folder for `predict`. Only
// the folder structure is read here, no pixels.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace ringtrain::io {

// A class-per-subfolder tree's image files, each as its path relative to the root in one shared string: an
// ImageNet-sized tree (1.28 M files) costs about 60 bytes a file here, where a std::filesystem::path each (with its
// parsed components) costs several hundred.
struct ImageFolder {
  std::filesystem::path root;
  std::vector<std::string> class_names;  // sorted; index = label
  std::string names;                      // every file's relative path, one after another (by class, then name)
  std::vector<uint64_t> name_ends;        // file i is names[name_ends[i - 1] (0 for i = 0), name_ends[i])
  std::vector<int32_t> labels;            // file i's class
  // Regular files the walk passed over: not named like an image, or lying in the root beside the class folders.
  int64_t ignored_files = 0;
  std::filesystem::path ignored_example;  // the first of them

  std::size_t size() const { return labels.size(); }
  std::filesystem::path path(std::size_t i) const;
  int32_t label(std::size_t i) const { return labels[i]; }
};

// Names ending .jpg/.jpeg/.png (any case): what counts as an image inside a folder.
bool is_image_name(const std::filesystem::path& file);

// Every image file under `root` and its subfolders, sorted by path (empty when there is none). Throws DataError
// naming the folder when it cannot be read.
std::vector<std::filesystem::path> images_under(const std::filesystem::path& root);

// The same, counting into `folder` the regular files it passes over (ImageFolder::ignored_files).
std::vector<std::filesystem::path> images_under(const std::filesystem::path& root, ImageFolder& folder);

// Files ending .jpg/.jpeg/.png (any case) count as images, in a class folder and its subfolders (as torchvision's
// ImageFolder takes them; linked subfolders are not followed). Throws DataError for a missing root, a root with
// no class folders, a class folder with no images, or one with a line break in its name. With `classes` given (a test source), every folder
// must be one of them, labels follow their order and class_names is `classes`.
ImageFolder scan_image_folder(const std::filesystem::path& root, const std::vector<std::string>& classes = {});

}  // namespace ringtrain::io
