// Owns the gradient all-reduce's wire format; see wire_format.h.
#include "dist/wire_format.h"

#include "dist/mpi_check.h"
#include "kernels/cpu/bf16.h"

namespace ringtrain::dist {
namespace {

namespace kc = kernels::cpu;

void bf16_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = kc::float_to_bf16(kc::bf16_to_float(a[i]) + kc::bf16_to_float(b[i]));
}

MPI_Op bf16_sum_op() {
  static const MPI_Op op = [] {
    MPI_Op made = MPI_OP_NULL;
    MPI_CHECK(MPI_Op_create(&bf16_sum, /*commute=*/1, &made));
    return made;
  }();
  return op;
}

}  // namespace

const char* wire_format_name(WireFormat format) { return format == WireFormat::bf16 ? "bf16" : "fp32"; }

MpiWire::Message MpiWire::outgoing(float* grads, int64_t count, size_t slot) {
  if (format_ == WireFormat::fp32) return {grads, static_cast<int>(count), MPI_FLOAT, MPI_SUM};
  if (staging_.size() <= slot) staging_.resize(slot + 1);
  std::vector<uint16_t>& wire = staging_[slot];
  wire.resize(static_cast<size_t>(count));
  kc::float_to_bf16(grads, count, wire.data());
  return {wire.data(), static_cast<int>(count), MPI_UINT16_T, bf16_sum_op()};
}

void MpiWire::arrived(float* grads, int64_t count, size_t slot) {
  if (format_ == WireFormat::bf16) kc::bf16_to_float(staging_[slot].data(), count, grads);
}

}  // namespace ringtrain::dist
