// Proves config/job_difference.h: the keys two resolved job files both set with other values (the run header's note
// on a resume), and the model check behind the refusal of another model's checkpoint, from the layers as the job
// reader gives them: a swapped activation or a residual block's activation left to its default tell models apart;
// a label, a dropout rate, a number written in hex or a head written out where model.replace_head made it do not.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config/job_difference.h"

namespace ringtrain::config {
namespace {

const std::string kJob = R"(
[data]
train = 'd/train'
test = 'd/test'

[train]
epochs = 1
batch_per_rank = 4

[optimizer]
base_batch = 32
base_lr = 0.05
name = 'sgd'

[run]
dir = 'runs/a'

[model]
name = 'tiny'

    [[model.layers]]
    filters = 4
    kernel = 3
    padding = 1
    type = 'conv2d'

    [[model.layers]]
    type = 'relu'

    [[model.layers]]
    rate = 0.25
    type = 'dropout'

    [[model.layers]]
    type = 'flatten'

    [[model.layers]]
    type = 'dense'
    units = 16

)";

std::string with(std::string job, const std::string& from, const std::string& to) {
  return job.replace(job.find(from), from.size(), to);
}

TEST(JobDifference, TheSameJobHasNoneAndTheSameModel) {
  EXPECT_TRUE(job_differences(kJob, kJob).empty());
  EXPECT_EQ(model_difference(kJob, kJob), "");
}

TEST(JobDifference, AFloatIsShownShortAndInNameOrder) {
  const auto d = job_differences(kJob, with(with(kJob, "base_lr = 0.05", "base_lr = 0.5"), "'tiny'", "'small'"));
  ASSERT_EQ(d.size(), 2u);  // in name order: [model] before [optimizer]
  EXPECT_EQ(d[0].key, "model.name");
  EXPECT_EQ(d[1].key, "optimizer.base_lr");
  EXPECT_EQ(d[1].was, "0.05");
  EXPECT_EQ(d[1].now, "0.5");
}

// A key only one side sets is a default one ringtrain wrote and the other did not: no difference.
TEST(JobDifference, AKeyOnlyOneSideSetsIsNone) {
  EXPECT_TRUE(job_differences(kJob, with(kJob, "    filters = 4\n", "    filters = 4\n    stride = 1\n")).empty());
}

TEST(JobDifference, AnEmptyOrBrokenTextGivesNone) {
  EXPECT_TRUE(job_differences("", kJob).empty());
  EXPECT_TRUE(job_differences("[model\nname = ", kJob).empty());
  EXPECT_EQ(model_difference("[model\nname = ", kJob), "");
}

TEST(JobDifference, AnotherActivationIsAnotherModel) {
  EXPECT_EQ(model_difference(kJob, with(kJob, "type = 'relu'", "type = 'sigmoid'")),
            "its job file has model.layers[1].type = 'relu', this one 'sigmoid'");
}

TEST(JobDifference, AnotherLayerCountOrPaddingIsAnotherModel) {
  EXPECT_EQ(model_difference(kJob, with(kJob, "    [[model.layers]]\n    type = 'relu'\n", "")),
            "its job file's model.layers has 5 layers, this one's 4");
  EXPECT_EQ(model_difference(kJob, with(kJob, "padding = 1", "padding = 0")),
            "its job file has model.layers[0].padding = 1, this one 0");
}

TEST(JobDifference, ALabelADropoutRateAHexNumberOrAnInitIsTheSameModel) {
  EXPECT_EQ(model_difference(kJob, with(kJob, "    type = 'relu'\n", "    name = 'act1'\n    type = 'relu'\n")), "");
  EXPECT_EQ(model_difference(kJob, with(kJob, "rate = 0.25", "rate = 0.5")), "");
  EXPECT_EQ(model_difference(kJob, with(kJob, "units = 16", "units = 0x10")), "");
}

// model.replace_head gives the last dense layer new units: the fine-tuned checkpoint's job and one that writes that
// head out are the same model.
TEST(JobDifference, AHeadWrittenOutIsTheHeadReplaceHeadMade) {
  const std::string fine_tuned = with(kJob, "name = 'tiny'", "name = 'tiny'\nreplace_head = 3");
  EXPECT_EQ(model_difference(fine_tuned, with(kJob, "units = 16", "units = 3")), "");
  EXPECT_NE(model_difference(fine_tuned, kJob), "");
}

// A residual block's activation left out is relu: a block trained with 'none' is another model.
TEST(JobDifference, AResidualActivationLeftToItsDefaultIsCompared) {
  // kJob with its model replaced by a residual network.
  const std::string block = kJob.substr(0, kJob.find("[model]")) + R"(
[model]
name = 'r'
    [[model.layers]]
    type = 'conv2d'
    filters = 4
    kernel = 3
    padding = 1
    [[model.layers]]
    type = 'residual'
    activation = 'none'
    body = [{type = 'conv2d', filters = 4, kernel = 3, padding = 1}]
    [[model.layers]]
    type = 'flatten'
    [[model.layers]]
    type = 'dense'
    units = 3
)";
  EXPECT_EQ(model_difference(block, with(block, "    activation = 'none'\n", "")),
            "its job file has model.layers[1].activation = 'none', this one 'relu'");
}

}  // namespace
}  // namespace ringtrain::config
