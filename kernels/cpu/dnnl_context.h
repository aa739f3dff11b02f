// Owns what the CPU backend's oneDNN primitives share, and how one of them meets our tensors:
//   DnnlContext     the engine and stream, the thread count, the operand type of the products (fp32, or bf16
//                   with fp32 outputs and accumulation), and two scratch areas that are ours: oneDNN's
//                   scratchpad and the staging memory where a tensor waits in the layout a primitive chose.
//                   Both grow when a primitive is made (setup, or the first step at a new batch), never in a step.
//   PlainPrimitive  one primitive over tensors in our plain layouts (NCHW, KCRS, row-major matrices): an argument
//                   the primitive wants in another layout is reordered into staging memory before it runs (inputs)
//                   or out of it after (outputs, or added to what the tensor holds: gradient accumulation).
// Layers run one at a time, so every primitive can use all of the scratch areas. Every call into oneDNN runs with
// the calling thread's signals blocked (see dnnl_context.cpp: its JIT GEMM does not survive a signal handler).
#pragma once
#include <oneapi/dnnl/dnnl.hpp>

#include <cstddef>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "kernels/cpu/dnnl_math.h"
#include "kernels/cpu/gemm.h"
#include "kernels/element_type.h"

namespace ringtrain::kernels::cpu {

class DnnlContext {
 public:
  DnnlContext(int threads, DnnlMath math);
  int threads() const { return threads_; }
  const dnnl::engine& engine() const { return engine_; }
  // dnnl::memory::data_type::f32 or bf16: what a product's inputs are converted to.
  dnnl::memory::data_type operand_type() const;
  // The type the primitives take activations stored as `stored` in: that type itself where the products read it
  // (fp32 always; bf16 when the operands are bf16), else fp32, which the caller widens to and narrows from.
  dnnl::memory::data_type activation_type(ElementType stored) const;
  // What every primitive is made with: the scratchpad is ours (user mode), so no call allocates. Also puts our thread
  // count in force on the calling thread: oneDNN fixes a primitive's threads when it is made, from that count.
  dnnl::primitive_attr attributes() const;
  // Puts our thread count in force on the calling thread, as attributes() does, for a primitive made without them.
  void use_our_threads() const;
  // Makes sure the scratch areas hold this much; call when a primitive is made.
  void reserve(std::size_t scratchpad_bytes, std::size_t staging_bytes);
  std::size_t working_bytes() const { return scratchpad_.bytes + staging_.bytes; }
  void* scratchpad() const { return scratchpad_.data; }
  std::byte* staging() const { return staging_.data; }
  // Runs `p` on our thread count and returns when it is done.
  void execute(const dnnl::primitive& p, const std::unordered_map<int, dnnl::memory>& args);
  // oneDNN's own row-major SGEMM (its JIT kernels), on our thread count: c (m x n) = op(a) op(b) + beta c, the
  // matrices packed (op(a) m x k, op(b) k x n). Faster than the matmul primitive where b is a wide plain matrix
  // read as is (the dense data gradient), and than OpenBLAS on the dense weight gradient inside a training step.
  void sgemm(Transpose ta, Transpose tb, int m, int n, int k, const float* a, const float* b, float beta, float* c);

 private:
  struct Area {
    std::byte* data = nullptr;
    std::size_t bytes = 0;
    std::unique_ptr<std::byte, void (*)(std::byte*)> owner{nullptr, nullptr};
    void grow(std::size_t want);
  };
  int threads_;
  DnnlMath math_;
  dnnl::engine engine_;
  dnnl::stream stream_;
  Area scratchpad_, staging_;
};

// How an argument flows: read by the primitive, written by it, or written and added to what our tensor holds.
enum class Flow { in, out, accumulate };

struct PlainArg {
  int id = 0;                 // DNNL_ARG_*
  dnnl::memory::desc plain;   // our layout
  dnnl::memory::desc wanted;  // the primitive's
  Flow flow = Flow::in;
};

class PlainPrimitive {
 public:
  PlainPrimitive(DnnlContext& ctx, const dnnl::primitive& primitive, const dnnl::memory::desc& scratchpad,
                 const std::vector<PlainArg>& args);
  // One pointer per argument, in the order given at construction. Inputs are not written.
  void run(DnnlContext& ctx, std::span<void* const> tensors);
  // How much of the context's staging area a run uses, from its start.
  std::size_t staging_bytes() const { return staging_bytes_; }

 private:
  struct Bound {
    dnnl::memory user, inner;  // the same object when the primitive takes our layout
    std::size_t staging_offset = 0;
    bool staged = false;
    Flow flow = Flow::in;
    dnnl::reorder reorder;  // user -> inner for inputs, inner -> user (adding, for accumulate) for outputs
  };
  Bound bind(DnnlContext& ctx, const PlainArg& arg);
  dnnl::primitive primitive_;
  std::vector<Bound> bound_;
  std::unordered_map<int, dnnl::memory> args_;
  dnnl::memory scratchpad_;
  std::size_t staging_bytes_ = 0;
};

}  // namespace ringtrain::kernels::cpu
