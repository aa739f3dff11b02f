// Owns the ReLU layer: element-wise, so the memory plan may run it in place over its input.
#include "model/layer_registry.h"
#include "model/layers/leaf_layer.h"

namespace ringtrain::model {
namespace {

class Relu final : public LeafLayer {
 public:
  using LeafLayer::LeafLayer;
  std::string describe() const override { return "relu"; }
  Shape setup(const Shape& in) override {
    in_ = out_ = in;
    return out_;
  }
  // Backward reads the output (y > 0), never the input, so the output may overwrite it.
  MemoryUse memory_use() const override {
    return {.backward_reads_output = true, .output = OutputMemory::may_overwrite_input};
  }
  void forward(const ForwardPass& pass) override {
    backend_.relu_forward(pass.x.elements(), pass.x.data, pass.y);
  }
  void backward(const BackwardPass& pass) override {
    if (pass.dx) backend_.relu_backward(pass.dy.elements(), pass.y, pass.dy.data, pass.dx);
  }
};

const LayerRegistration kRelu{{
    .keys = {.type = "relu", .help = "max(x, 0), element-wise"},
    .make = make_layer_of<Relu>,
    .onnx = onnx_operator("Relu"),
    .onnx_import = {{"Relu"}, [](const OnnxNodeReader& r) { return ImportedLayer{r.spec("relu")}; }},
}};

}  // namespace
}  // namespace ringtrain::model
