// Owns what import reads at the two ends of a classifier's graph rather than as layers: the input normalisation a
// graph applies itself (ringtrain's export takes raw 0..255 pixels and subtracts the per-channel mean, then divides by
// the per-channel std, as the data loader does), outputs beside the logits that are only their Softmax (ringtrain's
// export's "probabilities") and a Flatten of logits that are flat already. Taking them off the graph leaves the layers between the logits and a normalised input,
// which the walk (onnx_import.h) maps.
#pragma once
#include <optional>
#include <vector>

#include "io/onnx_model.h"

namespace ringtrain::model {

struct InputNormalisation {
  std::vector<float> mean, stddev;  // per channel, in the units of the graph's input
};

// Drops the outputs that are a Softmax of another output, with their Softmax nodes; and where one output is left, a
// Flatten (axis 1) that gives it from a Gemm's output, which is 2-D already.
void drop_probability_outputs(io::OnnxModel& model);

// Where the graph's input feeds only Sub(input, mean) and that only Div(., std), both per-channel constants of
// 1 x C x 1 x 1 (std above 0): removes the two nodes, makes the Div's output the graph's input, and returns them.
// Nothing (the model untouched) otherwise, and for a model no ringtrain export wrote, whose input's units are unknown.
std::optional<InputNormalisation> take_input_normalisation(io::OnnxModel& model);

}  // namespace ringtrain::model
