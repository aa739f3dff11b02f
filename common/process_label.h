// Owns the "rank R/N on HOST" label that error messages carry; io/ and kernels/ use it without knowing MPI.
#pragma once
#include <string>

namespace ringtrain {

void set_process_label(int rank, int ranks, const std::string& host);
std::string process_label();  // "rank 1/4 on node07", or "process 1234 on HOST" before MPI is up
int process_rank() noexcept;  // -1 before set_process_label

}  // namespace ringtrain
