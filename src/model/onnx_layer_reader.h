// Owns what a layer kind's ONNX import is read with (model/layer_registry.h), the reading twin of
// onnx_layer_writer.h: one node of the graph being imported, its attributes with ONNX's defaults, its constant
// inputs (initializers and Constant nodes' values), and the one wording of a refusal, which names the node; and
// what a kind's import gives back: the layer's spec, its parameters and its running statistics.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "config/layer_spec.h"
#include "config/layer_types.h"
#include "io/onnx_model.h"

namespace ringtrain::model {

// A layer made from one ONNX node: its spec, and its parameters and running statistics, each tensor's values in
// the order the kind declares them (Layer::param_decls, Layer::state_decls), laid out as the layer reads them.
struct ImportedLayer {
  config::LayerSpec spec;
  std::vector<std::vector<float>> params = {}, states = {};
};

// The values a node may read as constants, by value name: the graph's initializers and its Constant nodes' values.
using OnnxConstants = std::map<std::string, const io::OnnxTensor*, std::less<>>;

// A square window as ringtrain's convolution and pooling layers take it.
struct OnnxWindow {
  int64_t kernel = 0, stride = 1, padding = 0;
};

class OnnxNodeReader {
 public:
  OnnxNodeReader(const io::OnnxNode& node, const OnnxConstants& constants) : node_(node), constants_(constants) {}
  const io::OnnxNode& node() const { return node_; }
  // "ONNX node '/layer1/conv1/Conv' (Conv)"
  std::string describe() const;
  // JobFileError (exit 3): "<describe>: <why>; <what import maps>".
  [[noreturn]] void refuse(const std::string& why) const;

  // Attributes, ONNX's default where the node leaves one out.
  int64_t integer(const char* name, int64_t fallback) const;
  float real(const char* name, float fallback) const;
  std::vector<int64_t> integers(const char* name, std::vector<int64_t> fallback) const;
  // Refused where the node sets an attribute other than to the one value import maps.
  void require_integer(const char* name, int64_t fallback, int64_t wanted, const char* why) const;

  // Whether optional input `index` is given (ONNX leaves one out as "" or by ending the list).
  bool has_input(size_t index) const { return index < node_.inputs.size() && !node_.inputs[index].empty(); }
  // Input `index` as a float constant of `count` values (0: any); refused where the graph computes it, or its
  // size differs. `what` names it in the refusal ("the weight").
  const io::OnnxTensor& constant(size_t index, const char* what, int64_t count = 0) const;
  // Input `index` as an int64 constant (a Reshape's shape).
  const std::vector<int64_t>& integer_constant(size_t index, const char* what) const;
  // The node's window over H and W (Conv, MaxPool, AveragePool), the kernel's side given where the node's kernel
  // is its weight's: refused where H and W differ, padding is not alike on every side, dilations are not 1 or
  // auto_pad asks for SAME.
  OnnxWindow window(std::vector<int64_t> kernel_shape) const;
  // A spec of `type` with these keys, checked as a job file's would be; refused where a value is outside what the
  // layer takes. Its name is the node's, its place in errors the node.
  config::LayerSpec spec(std::string_view type, const std::vector<config::LayerArg>& args = {}) const;

 private:
  const io::OnnxNodeAttribute* attribute(const char* name) const { return node_.attribute(name); }
  const io::OnnxTensor& any_constant(size_t index, const char* what) const;
  const io::OnnxNode& node_;
  const OnnxConstants& constants_;
};

// A rows x cols matrix (row-major) transposed to cols x rows: an ONNX MatMul's C x K weight as ringtrain's K x C.
std::vector<float> transposed_matrix(const std::vector<float>& m, int64_t rows, int64_t cols);

// A float as the shortest decimal that reads back as it (1e-05, not 9.99999974737875e-06), for a spec's number.
double decimal_of(float value);

}  // namespace ringtrain::model
