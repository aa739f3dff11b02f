// Owns the walk over a checkpoint's tensors for the ONNX export; see onnx_layer_writer.h.
#include "model/onnx_layer_writer.h"

#include <fmt/format.h>

#include <algorithm>

#include "common/error.h"

namespace ringtrain::model {

std::string OnnxLayerWriter::constant(const std::vector<int64_t>& dims, const float* values) {
  return graph_.initializer(fmt::format("w{}", constants_++), dims, values);
}

std::string OnnxLayerWriter::integers(const std::vector<int64_t>& values) {
  return graph_.node("Constant", {}, {io::OnnxAttribute::list("value_ints", values)});
}

OnnxConstant OnnxLayerWriter::parameter(const char* suffix, std::vector<int64_t> dims) {
  if (tensor_ >= c_.tensor_names.size() || !c_.tensor_names[tensor_].ends_with(suffix))
    throw CheckpointError(fmt::format("checkpoint '{}' does not follow its job's layers: expected a '{}' tensor at "
                                      "position {}, found '{}'",
                                      path_, suffix, tensor_,
                                      tensor_ < c_.tensor_names.size() ? c_.tensor_names[tensor_] : "nothing"));
  const int64_t count = c_.tensor_sizes[tensor_++];
  int64_t known = 1;
  for (int64_t d : dims) known *= d > 0 ? d : 1;
  const auto free = std::find(dims.begin(), dims.end(), -1);
  if (free != dims.end()) *free = count / known;
  const float* values = c_.params.data() + offset_;
  offset_ += count;
  return {constant(dims, values), dims};
}

OnnxConstant OnnxLayerWriter::statistics(int64_t count) {
  std::vector<float> mean(static_cast<size_t>(count), 0.0f);
  for (int64_t r = 0; r < c_.ranks; ++r)
    for (int64_t i = 0; i < count; ++i)
      mean[static_cast<size_t>(i)] +=
          c_.states[static_cast<size_t>(r * c_.state_count + state_ + i)] / static_cast<float>(c_.ranks);
  state_ += count;
  return {constant({count}, mean.data()), {count}};
}

}  // namespace ringtrain::model
