// Owns the reading of a chain of ONNX nodes for a layer kind's import; see onnx_chain_reader.h.
#include "model/onnx_chain_reader.h"

#include <fmt/format.h>

#include <cmath>

namespace ringtrain::model {

const std::vector<const io::OnnxNode*>& OnnxChainReader::users(const std::string& value) const {
  static const std::vector<const io::OnnxNode*> none;
  const auto it = users_.find(value);
  return it == users_.end() ? none : it->second;
}

const io::OnnxNode* OnnxChainReader::producer(const std::string& value) const {
  const auto it = producers_.find(value);
  return it == producers_.end() ? nullptr : it->second;
}

const io::OnnxNode* OnnxChainReader::producer(const std::string& value, std::string_view op) const {
  const io::OnnxNode* node = producer(value);
  return node && node->op == op && !node->inputs.empty() ? node : nullptr;
}

const io::OnnxTensor* OnnxChainReader::integer_constant(const std::string& value) const {
  const auto it = constants_.find(value);
  return it == constants_.end() || it->second->data_type != 7 ? nullptr : it->second;
}

const io::OnnxNode* OnnxChainReader::only_user(const std::string& value, std::string_view op) const {
  const std::vector<const io::OnnxNode*>& next = users(value);
  return next.size() == 1 && next[0]->op == op ? next[0] : nullptr;
}

std::optional<std::string> OnnxChainReader::other_operand(const io::OnnxNode& node, const std::string& value) const {
  if (node.inputs.size() != 2 || (node.inputs[0] == value) == (node.inputs[1] == value)) return std::nullopt;
  return node.inputs[0] == value ? node.inputs[1] : node.inputs[0];
}

const io::OnnxTensor* OnnxChainReader::constant_operand(const io::OnnxNode& node, const std::string& value) const {
  const std::optional<std::string> other = other_operand(node, value);
  if (!other) return nullptr;
  const auto it = constants_.find(*other);
  return it == constants_.end() || it->second->data_type != 1 ? nullptr : it->second;
}

bool OnnxChainReader::scalar_operand(const io::OnnxNode& node, const std::string& value, float wanted) const {
  const io::OnnxTensor* t = constant_operand(node, value);
  return t && t->floats.size() == 1 && std::abs(t->floats[0] - wanted) <= 1e-6f * std::abs(wanted);
}

void OnnxChainReader::require(bool holds, const io::OnnxNode& node, std::string_view why) const {
  if (!holds) reader(node).refuse(std::string(why));
}

const io::OnnxNode& OnnxChainReader::next(const io::OnnxNode& after, const std::string& value, std::string_view op,
                                          std::string_view chain) const {
  const io::OnnxNode* n = only_user(value, op);
  if (!n)
    reader(after).refuse(fmt::format("its output '{}' is not taken by one {} node alone, as {} continues", value, op,
                                     chain));
  return *n;
}

}  // namespace ringtrain::model
