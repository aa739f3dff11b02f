// Owns summing one slice of several ranks' gradient arrays in memory they share: the sum goes into one array, in
// rank order, and the others' values there are cleared for the next step's accumulation.
#pragma once
#include <cstdint>
#include <span>

namespace ringtrain::kernels::cpu {

// For i in [begin, begin + count): arrays[own][i] = (...((arrays[0][i] + arrays[1][i]) + arrays[2][i]) ...), the
// same bits whichever rank sums and on any number of `threads`, and arrays[k][i] = 0 for every k != own.
void sum_slice_and_clear(std::span<float* const> arrays, std::size_t own, int64_t begin, int64_t count, int threads);

}  // namespace ringtrain::kernels::cpu
