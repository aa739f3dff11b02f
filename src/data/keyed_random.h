// Owns the training pipeline's random numbers: a counter-based generator seeded from a sample's key (splitmix64,
// the same on every platform), so every random choice is a pure function of (seed, epoch, rank, sample) and no
// thread's timing or count can change it. Augmentation (data/augment.cpp) and batch mixing (data/batch_mix.cpp)
// both draw from it.
#pragma once
#include <cstdint>

namespace ringtrain::train {

struct SampleKey {
  uint64_t seed = 0;
  int64_t epoch = 0;
  int rank = 0;
  int64_t sample = 0;  // the rank's own index of the sample
};

class KeyedRandom {
 public:
  explicit KeyedRandom(const SampleKey& key)
      : state_(mix(mix(mix(mix(key.seed) ^ static_cast<uint64_t>(key.epoch)) ^ static_cast<uint64_t>(key.rank)) ^
                   static_cast<uint64_t>(key.sample))) {}
  double uniform() { return static_cast<double>((state_ = mix(state_)) >> 11) * 0x1.0p-53; }  // [0, 1)
  int integer(int below) { return static_cast<int>(uniform() * below); }                   // [0, below)

 private:
  static uint64_t mix(uint64_t x) {  // splitmix64 finaliser
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
  }
  uint64_t state_;
};

}  // namespace ringtrain::train
