// Owns the one clock used for every timing in the product (monotonic, seconds as double).
#pragma once
#include <chrono>

namespace ringtrain::util {

inline double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace ringtrain::util
