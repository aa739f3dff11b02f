// Owns building an ONNX graph (opset 13) from nodes and float initializers, and writing it as a model file:
// the ONNX protobuf messages (ModelProto, GraphProto, NodeProto, TensorProto, ValueInfoProto, AttributeProto)
// with the field numbers of onnx.proto.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "io/proto_message.h"

namespace ringtrain::io {

struct OnnxAttribute {
  std::string name;
  std::vector<int64_t> ints;  // an INTS attribute, or
  bool is_float = false;      // a FLOAT attribute (`real`), or an INT attribute (`ints[0]`) when `single`
  float real = 0;
  bool single = false;
  static OnnxAttribute list(std::string n, std::vector<int64_t> v) { return {std::move(n), std::move(v)}; }
  static OnnxAttribute integer(std::string n, int64_t v) { return {std::move(n), {v}, false, 0, true}; }
  static OnnxAttribute floating(std::string n, float v) { return {std::move(n), {}, true, v, true}; }
};

class OnnxGraph {
 public:
  static constexpr int kOpset = 13;
  // A constant tensor; returns its name.
  std::string initializer(const std::string& name, const std::vector<int64_t>& dims, const float* values);
  // A node; returns the name of its (single) output.
  std::string node(const std::string& op, const std::vector<std::string>& inputs,
                   const std::vector<OnnxAttribute>& attributes = {}, const std::string& output = "");
  // A float32 input or output with a symbolic batch dimension "N" first (`dims` after it).
  void input(const std::string& name, const std::vector<int64_t>& dims);
  void output(const std::string& name, const std::vector<int64_t>& dims);
  // Written whole or not at all (a temporary name, then renamed); `metadata` becomes metadata_props.
  void write(const std::filesystem::path& file, const std::vector<std::pair<std::string, std::string>>& metadata,
             const std::string& producer_version) const;

 private:
  ProtoMessage graph_;
  int nodes_ = 0;
};

}  // namespace ringtrain::io
