// The probe behind the signal finding of ../2026-11-25-cpu-spr-2.md: dnnl_sgemm on the dense data-gradient shape
// while another process sends SIGUSR1 (handled: a counter) every ~2 ms. Not part of the build:
//   g++ -O2 signal_probe.cpp -o sig -ldnnl
//   MALLOC_CHECK_=3 OMP_NUM_THREADS=1 ./sig 3000 & P=$!; sleep 0.5
//   for i in $(seq 3000); do kill -USR1 $P || break; sleep 0.002; done; wait $P   # 134: glibc's heap check aborted
#include <dnnl.hpp>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <vector>
#include <unistd.h>
volatile sig_atomic_t hits = 0;
extern "C" void h(int) { hits = hits + 1; }
int main(int argc, char** argv) {
  struct sigaction a {}; a.sa_handler = h; sigemptyset(&a.sa_mask); a.sa_flags = SA_RESTART; sigaction(SIGUSR1, &a, nullptr);
  const int M = 64, N = 3136, K = 1024;
  std::vector<float> A(M * K), B(K * N), C(M * N), R(M * N);
  for (size_t i = 0; i < A.size(); ++i) A[i] = (i % 13) * 0.01f;
  for (size_t i = 0; i < B.size(); ++i) B[i] = (i % 7) * 0.02f;
  dnnl_sgemm('N', 'N', M, N, K, 1.f, A.data(), K, B.data(), N, 0.f, R.data(), N);
  int bad = 0;
  for (int it = 0; it < atoi(argv[1]); ++it) {
    std::vector<char> junk(1000 + it % 5000);  // malloc traffic
    dnnl_sgemm('N', 'N', M, N, K, 1.f, A.data(), K, B.data(), N, 0.f, C.data(), N);
    if (std::memcmp(C.data(), R.data(), C.size() * 4)) ++bad;
  }
  printf("signals %d, wrong results %d\n", (int)hits, bad);
}
