// Owns the reading of one ONNX node for a layer kind's import; see onnx_layer_reader.h.
#include "model/onnx_layer_reader.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <variant>

#include "common/error.h"

namespace ringtrain::model {

std::string OnnxNodeReader::describe() const {
  return fmt::format("ONNX node '{}' ({})", node_.name.empty() ? node_.outputs.empty() ? "" : node_.outputs[0] : node_.name,
                     node_.op);
}

void OnnxNodeReader::refuse(const std::string& why) const {
  throw JobFileError(fmt::format("{}: {}", describe(), why));
}

int64_t OnnxNodeReader::integer(const char* name, int64_t fallback) const {
  const io::OnnxNodeAttribute* a = attribute(name);
  if (!a) return fallback;
  if (!a->integer) refuse(fmt::format("attribute '{}' is not an integer", name));
  return *a->integer;
}

float OnnxNodeReader::real(const char* name, float fallback) const {
  const io::OnnxNodeAttribute* a = attribute(name);
  if (!a) return fallback;
  if (!a->real) refuse(fmt::format("attribute '{}' is not a float", name));
  return *a->real;
}

std::vector<int64_t> OnnxNodeReader::integers(const char* name, std::vector<int64_t> fallback) const {
  const io::OnnxNodeAttribute* a = attribute(name);
  return a ? a->integers : fallback;
}

void OnnxNodeReader::require_integer(const char* name, int64_t fallback, int64_t wanted, const char* why) const {
  const int64_t v = integer(name, fallback);
  if (v != wanted) refuse(fmt::format("{} = {}: {}", name, v, why));
}

const io::OnnxTensor& OnnxNodeReader::any_constant(size_t index, const char* what) const {
  if (!has_input(index)) refuse(fmt::format("it has no {} (input {})", what, index));
  const auto it = constants_.find(node_.inputs[index]);
  if (it == constants_.end())
    refuse(fmt::format("its {} ('{}') is computed by the graph; import maps it only as a constant (an initializer)",
                       what, node_.inputs[index]));
  return *it->second;
}

const std::vector<int64_t>& OnnxNodeReader::integer_constant(size_t index, const char* what) const {
  const io::OnnxTensor& t = any_constant(index, what);
  if (t.data_type != 7) refuse(fmt::format("its {} ('{}') is not int64", what, t.name));
  return t.integers;
}

const io::OnnxTensor& OnnxNodeReader::constant(size_t index, const char* what, int64_t count) const {
  const io::OnnxTensor& t = any_constant(index, what);
  if (t.data_type != 1) refuse(fmt::format("its {} ('{}') is not float32", what, t.name));
  if (count > 0 && static_cast<int64_t>(t.floats.size()) != count)
    refuse(fmt::format("its {} ('{}') holds {} values, {} expected", what, t.name, t.floats.size(), count));
  // A weight that is not a number would be refused only later, by every command that reads the checkpoint.
  if (const auto bad = std::find_if(t.floats.begin(), t.floats.end(), [](float v) { return !std::isfinite(v); });
      bad != t.floats.end())
    refuse(fmt::format("its {} ('{}') holds {} non-finite values (the first, {}, at index {}); the model's weights are "
                       "damaged",
                       what, t.name,
                       std::count_if(t.floats.begin(), t.floats.end(), [](float v) { return !std::isfinite(v); }),
                       *bad, bad - t.floats.begin()));
  return t;
}

OnnxWindow OnnxNodeReader::window(std::vector<int64_t> kernel_shape) const {
  kernel_shape = integers("kernel_shape", kernel_shape);
  const std::string auto_pad = attribute("auto_pad") ? attribute("auto_pad")->text : "NOTSET";
  if (auto_pad != "NOTSET" && auto_pad != "VALID")
    refuse(fmt::format("auto_pad = {}: import maps explicit pads only (export with explicit padding)", auto_pad));
  const std::vector<int64_t> strides = integers("strides", {1, 1}), pads = integers("pads", {0, 0, 0, 0}),
                             dilations = integers("dilations", {1, 1});
  if (kernel_shape.size() != 2 || strides.size() != 2 || pads.size() != 4 || dilations.size() != 2)
    refuse(fmt::format("kernel_shape {}, strides {}, pads {}: import maps 2-D windows only", kernel_shape, strides,
                       pads));
  if (kernel_shape[0] != kernel_shape[1]) refuse(fmt::format("kernel_shape {}: ringtrain's windows are square", kernel_shape));
  if (strides[0] != strides[1]) refuse(fmt::format("strides {}: ringtrain's strides are alike in H and W", strides));
  if (pads[0] != pads[1] || pads[0] != pads[2] || pads[0] != pads[3])
    refuse(fmt::format("pads {}: ringtrain pads every side alike (asymmetric padding cannot be mapped)", pads));
  if (dilations[0] != 1 || dilations[1] != 1) refuse(fmt::format("dilations {}: ringtrain has no dilation", dilations));
  return {kernel_shape[0], strides[0], auto_pad == "VALID" ? 0 : pads[0]};
}

config::LayerSpec OnnxNodeReader::spec(std::string_view type, const std::vector<config::LayerArg>& args) const {
  config::LayerSpec s;
  try {
    s = config::layer_spec(type, args, std::string(type));
  } catch (const JobFileError& e) {
    std::vector<std::string> given;
    for (const config::LayerArg& a : args)
      given.push_back(a.key + " = " + std::visit([](const auto& v) { return fmt::format("{}", v); }, a.value));
    refuse(fmt::format("ringtrain's {} layer cannot take it as {}: {}", type, fmt::join(given, ", "), e.what()));
  }
  s.where = describe();
  s.name = node_.name;
  return s;
}

std::vector<float> transposed_matrix(const std::vector<float>& m, int64_t rows, int64_t cols) {
  std::vector<float> t(m.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) t[static_cast<size_t>(c * rows + r)] = m[static_cast<size_t>(r * cols + c)];
  return t;
}

double decimal_of(float value) { return std::stod(fmt::format("{}", value)); }

}  // namespace ringtrain::model
