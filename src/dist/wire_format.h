// Owns what a gradient all-reduce sends: fp32, or bf16 (dist.allreduce_dtype), which halves the bytes on the wire
// at bf16's 8-bit mantissa: every partial sum is rounded to bf16 (round to nearest even), as NCCL's bf16 sum does.
// For the MPI reducers, MpiWire turns a bucket into the message MPI reduces (its staging copy and a bf16 sum
// operator) and the arrived sum back into the gradients.
#pragma once
#include <mpi.h>

#include <cstdint>
#include <vector>

#include "config/job_config.h"

namespace ringtrain::dist {

using config::WireFormat;
const char* wire_format_name(WireFormat format);  // "fp32", "bf16"

class MpiWire {
 public:
  explicit MpiWire(WireFormat format) : format_(format) {}
  struct Message {
    void* data;
    int count;
    MPI_Datatype type;
    MPI_Op op;
  };
  // The message for `count` gradients at `grads`; `slot` names its staging copy while it is in flight.
  Message outgoing(float* grads, int64_t count, size_t slot);
  void arrived(float* grads, int64_t count, size_t slot);  // the sum, back into the gradients
  WireFormat format() const { return format_; }

 private:
  WireFormat format_;
  std::vector<std::vector<uint16_t>> staging_;
};

}  // namespace ringtrain::dist
