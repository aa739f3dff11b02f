// Owns the ONNX protobuf encoding; see onnx_graph.h. Field numbers are onnx.proto's.
#include "io/onnx_graph.h"

#include <fmt/format.h>


#include "common/error.h"
#include "io/onnx_model.h"
#include "io/whole_file.h"

namespace ringtrain::io {
namespace {

constexpr int kFloat = 1;  // TensorProto.DataType.FLOAT

ProtoMessage attribute(const OnnxAttribute& a) {
  ProtoMessage m;
  m.bytes(1, a.name);
  if (a.is_float) return m.float32(2, a.real).varint(20, 1);     // FLOAT
  if (a.single) return m.varint(3, static_cast<uint64_t>(a.ints[0])).varint(20, 2);  // INT
  for (int64_t v : a.ints) m.varint(8, static_cast<uint64_t>(v));
  return m.varint(20, 7);  // INTS
}

ProtoMessage value_info(const std::string& name, const std::vector<int64_t>& dims) {
  ProtoMessage shape;
  shape.message(1, ProtoMessage().bytes(2, "N"));
  for (int64_t d : dims) shape.message(1, ProtoMessage().varint(1, static_cast<uint64_t>(d)));
  ProtoMessage tensor_type;
  tensor_type.varint(1, kFloat).message(2, shape);
  return ProtoMessage().bytes(1, name).message(2, ProtoMessage().message(1, tensor_type));
}

}  // namespace

std::string OnnxGraph::initializer(const std::string& name, const std::vector<int64_t>& dims, const float* values) {
  int64_t count = 1;
  ProtoMessage t;
  for (int64_t d : dims) t.varint(1, static_cast<uint64_t>(d)), count *= d;
  t.varint(2, kFloat).bytes(8, name);
  t.bytes(9, std::string_view(reinterpret_cast<const char*>(values), static_cast<size_t>(count) * sizeof(float)));
  graph_.message(5, t);
  return name;
}

std::string OnnxGraph::node(const std::string& op, const std::vector<std::string>& inputs,
                            const std::vector<OnnxAttribute>& attributes, const std::string& output) {
  const std::string name = fmt::format("{}_{}", op, nodes_++);
  const std::string out = output.empty() ? name + "_out" : output;
  ProtoMessage n;
  for (const auto& i : inputs) n.bytes(1, i);
  n.bytes(2, out).bytes(3, name).bytes(4, op);
  for (const auto& a : attributes) n.message(5, attribute(a));
  graph_.message(1, n);
  return out;
}

void OnnxGraph::input(const std::string& name, const std::vector<int64_t>& dims) {
  graph_.message(11, value_info(name, dims));
}

void OnnxGraph::output(const std::string& name, const std::vector<int64_t>& dims) {
  graph_.message(12, value_info(name, dims));
}

void OnnxGraph::write(const std::filesystem::path& file, const std::vector<std::pair<std::string, std::string>>& metadata,
                      const std::string& producer_version) const {
  ProtoMessage graph = graph_;
  graph.bytes(2, std::string(kRingtrainProducer));
  ProtoMessage model;
  model.varint(1, 8).bytes(2, std::string(kRingtrainProducer)).bytes(3, producer_version);  // IR version 8 (ONNX 1.10+)
  model.message(7, graph).message(8, ProtoMessage().bytes(1, "").varint(2, kOpset));
  for (const auto& [key, value] : metadata) model.message(14, ProtoMessage().bytes(1, key).bytes(2, value));
  if (const std::string why = io::write_whole_file(file, model.encoded()); !why.empty())
    throw JobFileError(fmt::format("--onnx '{}' cannot be written: {}; pick a writable path with --onnx (free "
                                   "space there if its file system is full)",
                                   file.string(), why));
}

}  // namespace ringtrain::io
