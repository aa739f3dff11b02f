// Owns Scratch: device memory an operation uses only while it runs (cuDNN's convolution workspace). The network's
// memory plan places each step's scratch in the arena for that step alone, beside the buffers live then, so a
// large workspace costs memory only where the step's neighbours leave room.
#pragma once
#include <cstddef>

namespace ringtrain::model {

struct Scratch {
  void* data = nullptr;  // null: the backend uses its own workspace
  std::size_t bytes = 0;
};

// What a layer's forward and backward want as scratch at the batch it was set up for (0 where nothing).
struct ScratchBytes {
  std::size_t forward = 0, backward = 0;
};

}  // namespace ringtrain::model
