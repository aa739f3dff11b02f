// Owns what a layer kind's ONNX form is written with (model/layer_registry.h): the graph being built, and the
// checkpoint's parameters and running statistics taken in the order the network declared them, each as a constant.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "io/checkpoint_file.h"
#include "io/onnx_graph.h"

namespace ringtrain::model {

// A constant of the graph: its name and dimensions.
struct OnnxConstant {
  std::string name;
  std::vector<int64_t> dims;
};

class OnnxLayerWriter {
 public:
  OnnxLayerWriter(io::OnnxGraph& graph, const io::CheckpointData& checkpoint, std::string checkpoint_path)
      : graph_(graph), c_(checkpoint), path_(std::move(checkpoint_path)) {}
  io::OnnxGraph& graph() { return graph_; }
  // The checkpoint's next parameter tensor, whose name must end in `suffix` (".weight"), with `dims`; one entry
  // of -1 stands for what the tensor's size leaves (a convolution's input channels). CheckpointError where the
  // checkpoint does not follow the job's layers.
  OnnxConstant parameter(const char* suffix, std::vector<int64_t> dims);
  // How many values the next parameter tensor holds (0 past the last), for a layer whose dimensions follow from it
  // and not from its keys (multi_head_attention's embedding width).
  int64_t next_parameter_count() const {
    return tensor_ < c_.tensor_sizes.size() ? c_.tensor_sizes[tensor_] : 0;
  }
  // The next `count` running statistics, averaged over the ranks' rows.
  OnnxConstant statistics(int64_t count);
  // A constant of the layer's own (an activation's 0.5, a clip's bounds); `dims` empty for a scalar.
  std::string constant(const std::vector<int64_t>& dims, const float* values);
  // A 1-D int64 constant (a Constant node): a Reshape's shape, a Gather's indices, an Unsqueeze's axes.
  std::string integers(const std::vector<int64_t>& values);

 private:

  io::OnnxGraph& graph_;
  const io::CheckpointData& c_;
  std::string path_;
  size_t tensor_ = 0;
  int64_t offset_ = 0, state_ = 0;
  int constants_ = 0;
};

}  // namespace ringtrain::model
