// Owns reading an ONNX model file into plain structs: its opset, producer and metadata, graph inputs and outputs, nodes
// (operator, inputs, outputs, attributes) and float and int64 initializers, as `ringtrain import` maps them onto layers.
// External data, sparse tensors and subgraphs are refused by name; anything malformed is a DataError naming
// the file and what was found.
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ringtrain::io {

// The producer_name ringtrain's export (io/onnx_graph.h) writes: the files whose input units and metadata import knows.
inline constexpr std::string_view kRingtrainProducer = "ringtrain";

struct OnnxTensor {
  std::string name;
  std::vector<int64_t> dims;
  int data_type = 0;              // TensorProto.DataType: 1 float, 7 int64, 9 bool
  std::vector<float> floats;      // data_type 1
  std::vector<int64_t> integers;  // data_type 7, and 9 as 0 and 1
};

struct OnnxNodeAttribute {
  std::string name;
  std::optional<int64_t> integer;
  std::optional<float> real;
  std::vector<int64_t> integers;
  std::vector<float> reals;
  std::string text;
  std::optional<OnnxTensor> tensor;  // a Constant's value
};

struct OnnxNode {
  std::string op, name, domain;
  std::vector<std::string> inputs, outputs;
  std::vector<OnnxNodeAttribute> attributes;
  const OnnxNodeAttribute* attribute(const std::string& attribute_name) const;
};

struct OnnxModel {
  int64_t opset = 0;  // of the default ("" or "ai.onnx") domain
  std::string producer;
  std::vector<std::pair<std::string, std::string>> metadata;  // metadata_props, in the file's order
  std::vector<std::string> inputs, outputs;  // graph inputs that are not initializers, and graph outputs
  // Each of `inputs`' tensor dimensions, -1 for a named (symbolic) or unknown one; empty where the file gives none.
  std::vector<std::vector<int64_t>> input_dims;
  std::vector<OnnxNode> nodes;               // in the file's (topological) order
  std::vector<OnnxTensor> initializers;
  const OnnxTensor* initializer(const std::string& name) const;
  const std::string* metadata_value(std::string_view key) const;  // the first entry of `key`, or null
  bool written_by_ringtrain() const { return producer == kRingtrainProducer; }
};

OnnxModel read_onnx(const std::filesystem::path& file);

}  // namespace ringtrain::io
