// What predict's arguments name: a split folder, a folder of images (subfolders too, sorted, only image names),
// an image file; a missing path and a folder with neither shards nor images are data errors naming the path.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "common/error.h"
#include "infer/predict_inputs.h"
#include "tests/io/io_test_support.h"

namespace fs = std::filesystem;
using ringtrain::DataError;
using ringtrain::infer::resolve_predict_inputs;

namespace {

// A fresh folder per test (the io tests' fixture), and files with any content: names decide here, not bytes.
class PredictInputsTest : public ringtrain::io::testing::IoTest {
 protected:
  fs::path touch(const fs::path& relative) {
    fs::create_directories((dir() / relative).parent_path());
    std::ofstream(dir() / relative) << "x";
    return dir() / relative;
  }
};

TEST_F(PredictInputsTest, SplitFolderImageFolderAndImageFileInTheArgumentsOrder) {
  touch("split/shard-00000-of-00001.h5");
  touch("split/cat.png");  // a split folder's shards win over stray images
  touch("photos/b.JPG");
  touch("photos/a.png");
  touch("photos/more/c.jpeg");
  touch("photos/notes.txt");
  const fs::path single = touch("photo-without-extension");
  const auto inputs = resolve_predict_inputs({single, dir() / "split", dir() / "photos"});
  ASSERT_EQ(inputs.size(), 3u);
  EXPECT_FALSE(inputs[0].is_split());
  EXPECT_EQ(inputs[0].images, std::vector<fs::path>{single});
  EXPECT_TRUE(inputs[1].is_split());
  EXPECT_EQ(inputs[2].images, (std::vector<fs::path>{dir() / "photos/a.png", dir() / "photos/b.JPG", dir() / "photos/more/c.jpeg"}));
}

TEST_F(PredictInputsTest, MissingPathAndFolderWithoutImagesNameThePath) {
  touch("empty/readme.txt");
  for (const fs::path& bad : {dir() / "nowhere", dir() / "empty"}) {
    try {
      resolve_predict_inputs({bad});
      FAIL() << bad << " was accepted";
    } catch (const DataError& e) {
      EXPECT_NE(std::string(e.what()).find("'" + bad.string() + "'"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
