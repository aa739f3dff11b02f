// Owns the oneDNN engine, stream, threads and scratch areas of the CPU backend, and the binding of a primitive
// to tensors in our plain layouts through reorders into staging memory.
#include "kernels/cpu/dnnl_context.h"

#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <new>

#include "kernels/cpu/dnnl_check.h"
#include "kernels/cpu/signals_held.h"

namespace ringtrain::kernels::cpu {
namespace {

constexpr std::size_t kAlignment = 64;  // whole cache lines; what oneDNN's own allocations use

std::size_t aligned(std::size_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; }

}  // namespace

void DnnlContext::Area::grow(std::size_t want) {
  if (want <= bytes) return;
  void* p = std::aligned_alloc(kAlignment, aligned(want));
  if (!p) throw std::bad_alloc();
  owner = {static_cast<std::byte*>(p), [](std::byte* q) { std::free(q); }};
  data = owner.get();
  bytes = want;
}

DnnlContext::DnnlContext(int threads, DnnlMath math)
    : threads_(std::max(1, threads)),
      math_(math),
      engine_(DNNL_CALL(dnnl::engine(dnnl::engine::kind::cpu, 0))),
      stream_(DNNL_CALL(dnnl::stream(engine_))) {}

dnnl::memory::data_type DnnlContext::operand_type() const {
  return math_ == DnnlMath::bf16 ? dnnl::memory::data_type::bf16 : dnnl::memory::data_type::f32;
}

dnnl::memory::data_type DnnlContext::activation_type(ElementType stored) const {
  return stored == ElementType::bf16 ? operand_type() : dnnl::memory::data_type::f32;
}

void DnnlContext::use_our_threads() const { omp_set_num_threads(threads_); }

dnnl::primitive_attr DnnlContext::attributes() const {
  use_our_threads();
  dnnl::primitive_attr attr;
  DNNL_CALL(attr.set_scratchpad_mode(dnnl::scratchpad_mode::user));
  return attr;
}

void DnnlContext::reserve(std::size_t scratchpad_bytes, std::size_t staging_bytes) {
  scratchpad_.grow(scratchpad_bytes);
  staging_.grow(staging_bytes);
}

void DnnlContext::execute(const dnnl::primitive& p, const std::unordered_map<int, dnnl::memory>& args) {
  // Set at every call, not once: the ICV belongs to the calling thread, and another backend in the same
  // process (a test's) may have set another count. Fixed count, static schedules: the same sums every run.
  omp_set_num_threads(threads_);
  const SignalsHeld held;
  DNNL_CALL(p.execute(stream_, args));
  DNNL_CALL(stream_.wait());
}

void DnnlContext::sgemm(Transpose ta, Transpose tb, int m, int n, int k, const float* a, const float* b, float beta,
                        float* c) {
  const char a_flag = ta == Transpose::yes ? 'T' : 'N', b_flag = tb == Transpose::yes ? 'T' : 'N';
  const int lda = ta == Transpose::yes ? m : k, ldb = tb == Transpose::yes ? k : n;
  omp_set_num_threads(threads_);  // as in execute(): the calling thread's count, set at every call
  const SignalsHeld held;
  DNNL_CALL(throw_unless_success(dnnl::sgemm(a_flag, b_flag, m, n, k, 1.0f, a, lda, b, ldb, beta, c, n),
                                 "dnnl_sgemm failed"));
}

PlainPrimitive::PlainPrimitive(DnnlContext& ctx, const dnnl::primitive& primitive,
                               const dnnl::memory::desc& scratchpad, const std::vector<PlainArg>& args)
    : primitive_(primitive) {
  for (const PlainArg& arg : args) {
    bound_.push_back(bind(ctx, arg));
    args_[arg.id] = bound_.back().inner;
  }
  if (scratchpad.get_size() > 0) {
    scratchpad_ = DNNL_CALL(dnnl::memory(scratchpad, ctx.engine(), DNNL_MEMORY_NONE));
    args_[DNNL_ARG_SCRATCHPAD] = scratchpad_;
  }
  ctx.reserve(scratchpad.get_size(), staging_bytes_);
}

PlainPrimitive::Bound PlainPrimitive::bind(DnnlContext& ctx, const PlainArg& arg) {
  Bound b;
  b.flow = arg.flow;
  b.user = DNNL_CALL(dnnl::memory(arg.plain, ctx.engine(), DNNL_MEMORY_NONE));
  // Accumulated outputs are always staged: the primitive overwrites, our contract adds.
  b.staged = arg.flow == Flow::accumulate || arg.plain != arg.wanted;
  if (!b.staged) {
    b.inner = b.user;
    return b;
  }
  b.inner = DNNL_CALL(dnnl::memory(arg.wanted, ctx.engine(), DNNL_MEMORY_NONE));
  b.staging_offset = staging_bytes_;
  staging_bytes_ += aligned(arg.wanted.get_size());
  ctx.use_our_threads();
  dnnl::primitive_attr attr;  // reorders of plain float tensors need no scratchpad
  if (arg.flow == Flow::accumulate) {
    dnnl::post_ops sum;
    DNNL_CALL(sum.append_sum(1.0f));
    DNNL_CALL(attr.set_post_ops(sum));
  }
  const bool in = arg.flow == Flow::in;
  b.reorder = DNNL_CALL(dnnl::reorder(dnnl::reorder::primitive_desc(in ? b.user : b.inner, in ? b.inner : b.user, attr)));
  return b;
}

void PlainPrimitive::run(DnnlContext& ctx, std::span<void* const> tensors) {
  for (std::size_t i = 0; i < bound_.size(); ++i) {
    Bound& b = bound_[i];
    DNNL_CALL(b.user.set_data_handle(tensors[i]));
    if (b.staged) DNNL_CALL(b.inner.set_data_handle(ctx.staging() + b.staging_offset));
  }
  if (scratchpad_) DNNL_CALL(scratchpad_.set_data_handle(ctx.scratchpad()));
  for (const Bound& b : bound_)
    if (b.staged && b.flow == Flow::in) ctx.execute(b.reorder, {{DNNL_ARG_FROM, b.user}, {DNNL_ARG_TO, b.inner}});
  ctx.execute(primitive_, args_);
  for (const Bound& b : bound_)
    if (b.staged && b.flow != Flow::in) ctx.execute(b.reorder, {{DNNL_ARG_FROM, b.inner}, {DNNL_ARG_TO, b.user}});
}

}  // namespace ringtrain::kernels::cpu
