// Our TensorBoard event files, read back by TensorBoard's own EventAccumulator (in the venv that
// scripts/install_deps.sh makes): every tag, step and value arrives, and the CRC-32C is the standard one.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "common/crc32c.h"
#include "obs/tensorboard_writer.h"

using namespace ringtrain;

TEST(Crc32c, MatchesTheStandardCheckValues) {
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);  // the CRC-32C check value (RFC 3720)
  EXPECT_EQ(crc32c("", 0), 0u);
}

// The 8-byte step and the byte tail agree with the bit-at-a-time definition at every length and alignment, and
// a CRC extended block by block equals the CRC of the whole.
TEST(Crc32c, EightBytesAStepMatchesTheDefinitionAndExtends) {
  std::string bytes;
  for (int i = 0; i < 300; ++i) bytes.push_back(static_cast<char>(i * 37 + 11));
  const auto bitwise = [](const char* p, std::size_t n) {
    uint32_t crc = 0xFFFFFFFFu;
    for (std::size_t i = 0; i < n; ++i) {
      crc ^= static_cast<uint8_t>(p[i]);
      for (int k = 0; k < 8; ++k) crc = (crc & 1) ? (crc >> 1) ^ 0x82F63B78u : crc >> 1;
    }
    return ~crc;
  };
  for (std::size_t offset = 0; offset < 8; ++offset)
    for (std::size_t n = 0; n + offset <= 100; ++n)
      ASSERT_EQ(crc32c(bytes.data() + offset, n), bitwise(bytes.data() + offset, n)) << offset << "+" << n;
  for (std::size_t split = 0; split <= bytes.size(); split += 13)
    EXPECT_EQ(crc32c_extend(crc32c(bytes.data(), split), bytes.data() + split, bytes.size() - split),
              crc32c(bytes.data(), bytes.size()));
}

// TensorBoard's own reader's view of `dir` ({tag: [[step, value], ...]} as JSON) into `output`.
void read_with_tensorboard(const std::filesystem::path& dir, std::string& output) {
  const std::string python = RINGTRAIN_TOOLS_PYTHON;
  ASSERT_TRUE(std::filesystem::exists(python))
      << python << " is missing: run scripts/install_deps.sh (it makes the venv with tensorboard)";
  const std::string command = python + " " + RINGTRAIN_SOURCE_DIR + "/tests/obs/read_tfevents.py " + dir.string();
  FILE* pipe = ::popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  char buffer[4096];
  while (size_t n = std::fread(buffer, 1, sizeof buffer, pipe)) output.append(buffer, n);
  ASSERT_EQ(::pclose(pipe), 0) << command << " printed: " << output;
}

TEST(TensorBoard, TensorBoardReadsBackEveryScalar) {
  const auto dir = std::filesystem::temp_directory_path() / ("ringtrain-tb-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  {
    obs::TensorBoardWriter writer(dir);
    EXPECT_EQ(writer.file().filename().string().rfind("events.out.tfevents.", 0), 0u);
    for (int step = 1; step <= 5; ++step)
      writer.scalars(step * 10, {{"train/loss", 2.0 / step}, {"train/lr", 0.05}, {"train/samples_per_s", 100.0 * step}});
    writer.scalars(50, {{"epoch/test_acc", 0.875}});
  }
  std::string output;
  ASSERT_NO_FATAL_FAILURE(read_with_tensorboard(dir, output));
  const auto scalars = nlohmann::json::parse(output);
  ASSERT_EQ(scalars.size(), 4u) << output;
  ASSERT_EQ(scalars.at("train/loss").size(), 5u);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(scalars["train/loss"][i][0].get<int>(), (i + 1) * 10);
    EXPECT_FLOAT_EQ(scalars["train/loss"][i][1].get<float>(), static_cast<float>(2.0 / (i + 1)));
    EXPECT_FLOAT_EQ(scalars["train/samples_per_s"][i][1].get<float>(), static_cast<float>(100.0 * (i + 1)));
    EXPECT_FLOAT_EQ(scalars["train/lr"][i][1].get<float>(), 0.05f);
  }
  EXPECT_EQ(scalars["epoch/test_acc"][0][0].get<int>(), 50);
  EXPECT_FLOAT_EQ(scalars["epoch/test_acc"][0][1].get<float>(), 0.875f);
  std::filesystem::remove_all(dir);
}

// A resumed run's writer drops, in TensorBoard's eyes, what the earlier file holds from its first step on: the steps
// trained again show once, with the resumed run's values.
TEST(TensorBoard, AResumedRunsCurvesReplaceTheEarlierOnesFromItsFirstStep) {
  const auto dir = std::filesystem::temp_directory_path() / ("ringtrain-tb-purge-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  {
    obs::TensorBoardWriter first(dir);
    for (int step = 1; step <= 5; ++step) first.scalars(step * 10, {{"train/loss", 1.0 * step}});
    // An older name: the earlier run's file sorts first, as its start time would make it.
    std::filesystem::rename(first.file(), dir / "events.out.tfevents.1000000000.host.1");
  }
  {
    obs::TensorBoardWriter resumed(dir, 31);  // the checkpoint held 30 steps
    for (int step = 4; step <= 5; ++step) resumed.scalars(step * 10, {{"train/loss", 100.0 * step}});
  }
  std::string output;
  ASSERT_NO_FATAL_FAILURE(read_with_tensorboard(dir, output));
  const auto loss = nlohmann::json::parse(output).at("train/loss");
  std::vector<std::pair<int, float>> points;
  for (const auto& p : loss) points.emplace_back(p[0].get<int>(), p[1].get<float>());
  EXPECT_EQ(points, (std::vector<std::pair<int, float>>{{10, 1}, {20, 2}, {30, 3}, {40, 400}, {50, 500}})) << output;
  std::filesystem::remove_all(dir);
}
