// Owns the decoding of onnx.proto's ModelProto, GraphProto, NodeProto, AttributeProto and TensorProto; see
// onnx_model.h. Field numbers are onnx.proto's.
#include "io/onnx_model.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <algorithm>

#include "common/error.h"
#include "io/proto_reader.h"

namespace ringtrain::io {
namespace {

constexpr int kFloat = 1, kInt64 = 7, kBool = 9;

std::string text_of(const ProtoField& f) {
  if (f.wire_type != 2) throw ProtoError(fmt::format("field {} should be a string", f.number));
  return std::string(f.bytes);
}

std::vector<float> packed_floats(std::string_view bytes) {
  if (bytes.size() % 4 != 0) throw ProtoError("packed floats whose length is no multiple of 4 bytes");
  std::vector<float> out(bytes.size() / 4);
  std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

std::vector<int64_t> packed_int64_words(std::string_view bytes) {
  if (bytes.size() % 8 != 0) throw ProtoError("raw int64 data whose length is no multiple of 8 bytes");
  std::vector<int64_t> out(bytes.size() / 8);
  std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

// Varint-encoded int64s, one a field or packed.
void add_integers(const ProtoField& f, std::vector<int64_t>& out) {
  if (f.wire_type == 0) return out.push_back(static_cast<int64_t>(f.value));
  if (f.wire_type != 2) throw ProtoError(fmt::format("field {} should hold integers", f.number));
  ProtoReader packed(f.bytes);
  while (!packed.done()) out.push_back(static_cast<int64_t>(packed.varint()));
}

// 32-bit floats, one a field or packed.
void add_reals(const ProtoField& f, std::vector<float>& out) {
  if (f.wire_type == 5) return out.push_back(f.float32());
  if (f.wire_type != 2) throw ProtoError(fmt::format("field {} should hold floats", f.number));
  const std::vector<float> values = packed_floats(f.bytes);
  out.insert(out.end(), values.begin(), values.end());
}

int64_t element_count(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0 || (d > 0 && n > (int64_t{1} << 40) / d)) throw ProtoError("a tensor's dimensions are out of range");
    n *= d;
  }
  return n;
}

OnnxTensor tensor(std::string_view message) {
  OnnxTensor t;
  std::string_view raw;
  bool has_raw = false;
  for (ProtoReader r(message); !r.done();) {
    const ProtoField f = r.next();
    switch (f.number) {
      case 1: add_integers(f, t.dims); break;
      case 2: t.data_type = static_cast<int>(f.value); break;
      case 4: add_reals(f, t.floats); break;
      case 5: add_integers(f, t.integers); break;  // int32_data: where a bool's values are kept (as 0 and 1)
      case 7: add_integers(f, t.integers); break;
      case 8: t.name = text_of(f); break;
      case 9: raw = f.bytes, has_raw = true; break;
      case 13:
      case 14:
        if (f.number == 14 && f.value == 0) break;  // DEFAULT: the data is in the file
        throw ProtoError(fmt::format("tensor '{}' keeps its data in an external file, which import does not read; "
                                     "save the model with its weights inside (onnx.save(..., save_as_external_data="
                                     "False))", t.name));
      default: break;
    }
  }
  if (has_raw && t.data_type == kFloat) t.floats = packed_floats(raw);
  if (has_raw && t.data_type == kInt64) t.integers = packed_int64_words(raw);
  if (has_raw && t.data_type == kBool)
    for (const char byte : raw) t.integers.push_back(byte != 0 ? 1 : 0);
  const int64_t count = element_count(t.dims);
  const auto held = static_cast<int64_t>(t.data_type == kFloat ? t.floats.size() : t.integers.size());
  if ((t.data_type == kFloat || t.data_type == kInt64 || t.data_type == kBool) && held != count)
    throw ProtoError(fmt::format("tensor '{}' holds {} values for dimensions of {}", t.name, held, count));
  return t;
}

OnnxNodeAttribute attribute(std::string_view message) {
  OnnxNodeAttribute a;
  for (ProtoReader r(message); !r.done();) {
    const ProtoField f = r.next();
    switch (f.number) {
      case 1: a.name = text_of(f); break;
      case 2: a.real = f.float32(); break;
      case 3: a.integer = static_cast<int64_t>(f.value); break;
      case 4: a.text = text_of(f); break;
      case 5: a.tensor = tensor(f.bytes); break;
      case 6:
      case 10: throw ProtoError(fmt::format("attribute '{}' holds a subgraph (control flow), which import does not map", a.name));
      case 7: add_reals(f, a.reals); break;
      case 8: add_integers(f, a.integers); break;
      default: break;
    }
  }
  return a;
}

OnnxNode node(std::string_view message) {
  OnnxNode n;
  for (ProtoReader r(message); !r.done();) {
    const ProtoField f = r.next();
    switch (f.number) {
      case 1: n.inputs.push_back(text_of(f)); break;
      case 2: n.outputs.push_back(text_of(f)); break;
      case 3: n.name = text_of(f); break;
      case 4: n.op = text_of(f); break;
      case 5: n.attributes.push_back(attribute(f.bytes)); break;
      case 7: n.domain = text_of(f); break;
      default: break;
    }
  }
  return n;
}

// A named value: ValueInfoProto's name, and its TypeProto.Tensor's shape (-1 for a dimension without a value).
struct NamedValue {
  std::string name;
  std::vector<int64_t> dims;
};

std::vector<int64_t> tensor_shape(std::string_view type) {
  std::vector<int64_t> dims;
  for (ProtoReader t(type); !t.done();) {
    const ProtoField tensor = t.next();
    if (tensor.number != 1 || tensor.wire_type != 2) continue;  // TypeProto.tensor_type
    for (ProtoReader s(tensor.bytes); !s.done();) {
      const ProtoField shape = s.next();
      if (shape.number != 2 || shape.wire_type != 2) continue;  // Tensor.shape
      for (ProtoReader d(shape.bytes); !d.done();) {
        const ProtoField dim = d.next();
        if (dim.number != 1 || dim.wire_type != 2) continue;  // TensorShapeProto.dim
        int64_t value = -1;
        for (ProtoReader v(dim.bytes); !v.done();) {
          const ProtoField f = v.next();
          if (f.number == 1 && f.wire_type == 0) value = static_cast<int64_t>(f.value);  // dim_value
        }
        dims.push_back(value);
      }
    }
  }
  return dims;
}

NamedValue named_value(std::string_view message) {
  NamedValue v;
  for (ProtoReader r(message); !r.done();) {
    const ProtoField f = r.next();
    if (f.number == 1) v.name = text_of(f);
    if (f.number == 2 && f.wire_type == 2) v.dims = tensor_shape(f.bytes);
  }
  return v;
}

void graph(std::string_view message, OnnxModel& m) {
  std::vector<NamedValue> inputs;
  for (ProtoReader r(message); !r.done();) {
    const ProtoField f = r.next();
    switch (f.number) {
      case 1: m.nodes.push_back(node(f.bytes)); break;
      case 5: m.initializers.push_back(tensor(f.bytes)); break;
      case 11: inputs.push_back(named_value(f.bytes)); break;
      case 12: m.outputs.push_back(named_value(f.bytes).name); break;
      case 15: throw ProtoError("the graph has sparse initializers, which import does not read");
      default: break;
    }
  }
  // Older exporters list the initializers among the inputs too: the model's inputs are the others.
  for (NamedValue& input : inputs)
    if (!m.initializer(input.name)) m.inputs.push_back(input.name), m.input_dims.push_back(std::move(input.dims));
}

OnnxModel model(std::string_view message) {
  OnnxModel m;
  bool has_graph = false;
  for (ProtoReader r(message); !r.done();) {
    const ProtoField f = r.next();
    if (f.number == 2) m.producer = text_of(f);
    if (f.number == 7) graph(f.bytes, m), has_graph = true;
    if (f.number == 14) {
      std::pair<std::string, std::string>& entry = m.metadata.emplace_back();
      for (ProtoReader e(f.bytes); !e.done();) {
        const ProtoField g = e.next();
        if (g.number == 1) entry.first = text_of(g);
        if (g.number == 2) entry.second = text_of(g);
      }
    }
    if (f.number == 8) {
      std::string domain;
      int64_t version = 0;
      for (ProtoReader o(f.bytes); !o.done();) {
        const ProtoField g = o.next();
        if (g.number == 1) domain = text_of(g);
        if (g.number == 2) version = static_cast<int64_t>(g.value);
      }
      if (domain.empty() || domain == "ai.onnx") m.opset = version;
    }
  }
  if (!has_graph) throw ProtoError("it holds no graph");
  return m;
}

}  // namespace

const OnnxNodeAttribute* OnnxNode::attribute(const std::string& attribute_name) const {
  for (const auto& a : attributes)
    if (a.name == attribute_name) return &a;
  return nullptr;
}

const std::string* OnnxModel::metadata_value(std::string_view key) const {
  for (const auto& [k, value] : metadata)
    if (k == key) return &value;
  return nullptr;
}

const OnnxTensor* OnnxModel::initializer(const std::string& name) const {
  for (const auto& t : initializers)
    if (t.name == name) return &t;
  return nullptr;
}

OnnxModel read_onnx(const std::filesystem::path& file) {
  std::error_code error;
  if (const auto status = std::filesystem::status(file, error); !error && !std::filesystem::is_regular_file(status))
    throw DataError(fmt::format("ONNX file '{}' cannot be read: it is {}; name the .onnx file itself", file.string(),
                                std::filesystem::is_directory(status) ? "a folder" : "not a regular file"));
  std::ifstream in(file, std::ios::binary | std::ios::ate);
  if (!in) throw DataError(fmt::format("ONNX file '{}' cannot be opened: {}", file.string(), std::strerror(errno)));
  std::string bytes(static_cast<size_t>(std::max<std::streamoff>(in.tellg(), 0)), '\0');
  in.seekg(0);
  if (!in.read(bytes.data(), static_cast<std::streamsize>(bytes.size())))
    throw DataError(fmt::format("ONNX file '{}' cannot be read: {}", file.string(), std::strerror(errno)));
  try {
    return model(bytes);
  } catch (const ProtoError& e) {
    throw DataError(fmt::format("ONNX file '{}' is not a readable ONNX model: {}", file.string(), e.what()));
  }
}

}  // namespace ringtrain::io
