// Proves config::job_differences (config/job_difference.h): the keys two resolved job files both set with other
// values, by dotted name and in each side's TOML, layers compared one by one, and which of them make another model.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config/job_difference.h"

namespace ringtrain::config {
namespace {

constexpr const char* kJob = R"(
[optimizer]
base_lr = 0.05
name = 'sgd'

[model]
name = 'tiny'

    [[model.layers]]
    filters = 4
    type = 'conv2d'

    [[model.layers]]
    type = 'relu'

[run]
dir = 'runs/a'
)";

std::string with(std::string job, const std::string& from, const std::string& to) {
  return job.replace(job.find(from), from.size(), to);
}

// The one difference `d` holds must be `key`, from `was` to `now`.
void expect_one(const std::vector<JobDifference>& d, const std::string& key, const std::string& was,
                const std::string& now) {
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].key, key);
  EXPECT_EQ(d[0].was, was);
  EXPECT_EQ(d[0].now, now);
}

TEST(JobDifference, TheSameJobHasNone) { EXPECT_TRUE(job_differences(kJob, kJob).empty()); }

TEST(JobDifference, AnotherActivationIsALayerKeyThatChangesTheModel) {
  const auto d = job_differences(kJob, with(kJob, "type = 'relu'", "type = 'sigmoid'"));
  expect_one(d, "model.layers[1].type", "'relu'", "'sigmoid'");
  EXPECT_TRUE(!d.empty() && changes_the_model(d[0]));
}

TEST(JobDifference, AFloatIsShownShortAndTheModelsNameIsNoOtherModel) {
  const auto d = job_differences(kJob, with(with(kJob, "base_lr = 0.05", "base_lr = 0.5"), "'tiny'", "'small'"));
  ASSERT_EQ(d.size(), 2u);  // in name order: [model] before [optimizer]
  EXPECT_EQ(d[0].key, "model.name");
  EXPECT_FALSE(changes_the_model(d[0]));
  EXPECT_EQ(d[1].key, "optimizer.base_lr");
  EXPECT_EQ(d[1].was, "0.05");
  EXPECT_EQ(d[1].now, "0.5");
  EXPECT_FALSE(changes_the_model(d[1]));
}

TEST(JobDifference, AnotherLayerCountIsOneDifference) {
  const auto d = job_differences(kJob, with(kJob, "    [[model.layers]]\n    type = 'relu'\n", ""));
  expect_one(d, "model.layers", "2 entries", "1 entries");
  EXPECT_TRUE(!d.empty() && changes_the_model(d[0]));
}

// A key only one side sets is a default one ringtrain wrote and the other did not: no difference.
TEST(JobDifference, AKeyOnlyOneSideSetsIsNone) {
  EXPECT_TRUE(job_differences(kJob, with(kJob, "    filters = 4\n", "    filters = 4\n    stride = 1\n")).empty());
}

TEST(JobDifference, AnEmptyOrBrokenTextGivesNone) {
  EXPECT_TRUE(job_differences("", kJob).empty());
  EXPECT_TRUE(job_differences("[model\nname = ", kJob).empty());
}

}  // namespace
}  // namespace ringtrain::config
