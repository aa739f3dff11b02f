// Proves the ONNX reader on models the ONNX writer makes here: every field ringtrain's export writes comes back
// (opset, inputs that are not initializers, outputs, nodes with their attributes, initializers' dimensions and
// values), and a truncated file, bytes that are no model and a missing file are DataErrors naming the file.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "common/error.h"
#include "io/onnx_graph.h"
#include "io/onnx_model.h"
#include "io_test_support.h"

namespace ringtrain::io {
namespace {

namespace fs = std::filesystem;

class OnnxModelTest : public testing::IoTest {
 protected:
  fs::path small_model() const {
    OnnxGraph g;
    g.input("pixels", {3, 8, 8});
    const std::vector<float> w(4 * 3 * 3 * 3, 0.25f), b{1.0f, -2.0f, 3.5f, 0.0f};
    const std::string conv =
        g.node("Conv", {"pixels", g.initializer("w0", {4, 3, 3, 3}, w.data()), g.initializer("b0", {4}, b.data())},
               {OnnxAttribute::list("kernel_shape", {3, 3}), OnnxAttribute::list("pads", {1, 1, 1, 1})});
    const std::string norm = g.node("BatchNormalization", {conv}, {OnnxAttribute::floating("epsilon", 1e-5f)});
    g.node("Flatten", {g.node("Relu", {norm})}, {OnnxAttribute::integer("axis", 1)}, "logits");
    g.output("logits", {256});
    const fs::path file = dir() / "small.onnx";
    g.write(file, {{"class_names", "[]"}}, "test");
    return file;
  }
};

TEST_F(OnnxModelTest, ReadsBackWhatTheWriterWrote) {
  const OnnxModel m = read_onnx(small_model());
  EXPECT_EQ(m.opset, OnnxGraph::kOpset);
  EXPECT_EQ(m.inputs, std::vector<std::string>{"pixels"});
  EXPECT_EQ(m.outputs, std::vector<std::string>{"logits"});
  ASSERT_EQ(m.nodes.size(), 4u);
  EXPECT_EQ(m.nodes[0].op, "Conv");
  EXPECT_EQ(m.nodes[0].inputs, (std::vector<std::string>{"pixels", "w0", "b0"}));
  ASSERT_NE(m.nodes[0].attribute("pads"), nullptr);
  EXPECT_EQ(m.nodes[0].attribute("pads")->integers, (std::vector<int64_t>{1, 1, 1, 1}));
  EXPECT_EQ(m.nodes[0].attribute("kernel_shape")->integers, (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(m.nodes[0].attribute("dilations"), nullptr);
  EXPECT_FLOAT_EQ(*m.nodes[1].attribute("epsilon")->real, 1e-5f);
  EXPECT_EQ(m.nodes[1].inputs, m.nodes[0].outputs);
  EXPECT_EQ(*m.nodes[3].attribute("axis")->integer, 1);
  EXPECT_EQ(m.nodes[3].outputs, std::vector<std::string>{"logits"});
  const OnnxTensor* w = m.initializer("w0");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->dims, (std::vector<int64_t>{4, 3, 3, 3}));
  EXPECT_EQ(w->floats, std::vector<float>(108, 0.25f));
  EXPECT_EQ(m.initializer("b0")->floats, (std::vector<float>{1.0f, -2.0f, 3.5f, 0.0f}));
  EXPECT_EQ(m.initializer("nothing"), nullptr);
}

void expect_data_error(const fs::path& file, const std::string& why) {
  try {
    (void)read_onnx(file);
    ADD_FAILURE() << "read " << file << " without an error";
  } catch (const DataError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find(file.string()), std::string::npos) << message;
    EXPECT_NE(message.find(why), std::string::npos) << message;
  }
}

TEST_F(OnnxModelTest, DamagedOrMissingFilesAreDataErrorsNamingTheFile) {
  const fs::path whole = small_model();
  std::string bytes(static_cast<size_t>(fs::file_size(whole)), '\0');
  std::ifstream(whole, std::ios::binary).read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  // Cut inside the graph, which holds nearly all the bytes: its length then runs past the end.
  for (const size_t keep : {bytes.size() / 2, bytes.size() - 1}) {
    const fs::path cut = dir() / ("cut" + std::to_string(keep) + ".onnx");
    std::ofstream(cut, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(keep));
    expect_data_error(cut, "is not a readable ONNX model");
  }
  const fs::path text = dir() / "text.onnx";
  std::ofstream(text) << "this is a job file, not a model\n";
  expect_data_error(text, "is not a readable ONNX model");
  expect_data_error(dir() / "missing.onnx", "cannot be opened");
}

}  // namespace
}  // namespace ringtrain::io
