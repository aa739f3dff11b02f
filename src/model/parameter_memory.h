// Owns the contract for keeping a network's parameters and gradients, and its optimizer's state, in memory the
// network does not allocate itself: the ranks of a node sharing one copy of the parameters and the optimizer's
// state (dist/node_shared_reducer.h). Host memory only, for the CPU backend.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace ringtrain::model {

class ParameterMemory {
 public:
  virtual ~ParameterMemory() = default;
  // Each called once, in this order, by every rank that shares the memory (they may be collective); each returns
  // zero-filled floats, 64-byte aligned, that live as long as this object.
  virtual float* parameters(int64_t count) = 0;
  virtual float* gradients(int64_t count) = 0;
  virtual std::vector<float*> optimizer_state(int arrays, int64_t count) = 0;
  // Called by every rank that shares the memory once it has written its values there (set-up: the parameters and
  // the optimizer's state); returns once every rank has, with what each wrote visible to all of them.
  virtual void publish() = 0;
  // Bytes handed out so far, over every rank that shares them, and how many ranks share them (for the memory
  // report: each rank's share of what it holds).
  virtual std::size_t shared_bytes() const = 0;
  virtual int sharing_ranks() const = 0;
  // Whether this rank is the first of those sharing this memory: the one that changes it for all of them.
  virtual bool first_sharer() const = 0;
};

}  // namespace ringtrain::model
