// The probe behind "batch norm + ReLU + max pool, fused" in ../2026-11-25-cpu-spr-3.md: the three kernels apart against
// the fused batch norm, bit-compared with memcmp and timed with a 64 MB eviction before every call (median of 41).
//   g++ -O2 -march=native -std=c++20 -I. -Isrc bnpool_probe.cpp build/kernels/librt_kernels_cpu.a -o bnpool_probe
//   (from the repository root, after a build); ./bnpool_probe
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>
#include "kernels/cpu/batchnorm.h"
#include "kernels/cpu/pooling.h"
using namespace ringtrain::kernels;
using namespace ringtrain::kernels::cpu;
using clk = std::chrono::steady_clock;
std::vector<char> junk(64 << 20);
void evict() { for (size_t i = 0; i < junk.size(); i += 64) junk[i]++; }
template <class F> double med_ms(F f, int reps = 41) {
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) { evict(); auto a = clk::now(); f(); t.push_back(std::chrono::duration<double, std::milli>(clk::now() - a).count()); }
  std::sort(t.begin(), t.end()); return t[t.size() / 2];
}
template <class T> bool same(const std::vector<T>& a, const std::vector<T>& b) { return a.size() == b.size() && !std::memcmp(a.data(), b.data(), a.size() * sizeof(T)); }
int main() {
  for (auto [c, hw] : {std::pair{32, 28}, std::pair{64, 14}, std::pair{8, 9}}) {
    const int N = 64;
    BatchNormShape s{N, c, hw * hw};
    PoolShape ps{}; ps.batch = N; ps.channels = c; ps.in_h = hw; ps.in_w = hw;
    size_t in = size_t(N) * c * hw * hw, out = size_t(N) * c * ps.out_h() * ps.out_w();
    std::mt19937 g(7); std::normal_distribution<float> nd;
    std::vector<float> x(in), gamma(c), beta(c), dp(out);
    for (auto& v : x) v = nd(g) * 2 + 0.5f; for (auto& v : gamma) v = 1 + 0.1f * nd(g); for (auto& v : beta) v = 0.1f * nd(g); for (auto& v : dp) v = nd(g);
    // unfused
    std::vector<float> rm(c, 0), rv(c, 1), sm(c), si(c), y(in), yp(out), dy(in), dx(in), dgm(c, 0), dbt(c, 0);
    std::vector<int32_t> am(out);
    auto unf_f = [&] { batchnorm_forward_train(s, x.data(), gamma.data(), beta.data(), 0.1f, 1e-5f, rm.data(), rv.data(), y.data(), sm.data(), si.data(), true);
                       maxpool_forward(ps, y.data(), yp.data(), am.data()); };
    auto unf_b = [&] { maxpool_backward(ps, dp.data(), am.data(), dy.data());
                       batchnorm_backward(s, x.data(), dy.data(), gamma.data(), sm.data(), si.data(), dx.data(), dgm.data(), dbt.data(), y.data()); };
    std::vector<float> rm2(c, 0), rv2(c, 1), sm2(c), si2(c), yp2(out), dx2(in), dgm2(c, 0), dbt2(c, 0);
    std::vector<int32_t> am2(out);
    FusedPool fp{hw, hw, am2.data()};
    auto fu_f = [&] { batchnorm_forward_train(s, x.data(), gamma.data(), beta.data(), 0.1f, 1e-5f, rm2.data(), rv2.data(), yp2.data(), sm2.data(), si2.data(), true, &fp); };
    auto fu_b = [&] { batchnorm_backward(s, x.data(), dp.data(), gamma.data(), sm2.data(), si2.data(), dx2.data(), dgm2.data(), dbt2.data(), yp2.data(), &fp); };
    unf_f(); unf_b(); fu_f(); fu_b();
    bool ok = same(yp, yp2) && same(am, am2) && same(dx, dx2) && same(dgm, dgm2) && same(dbt, dbt2) && same(rm, rm2) && same(rv, rv2);
    // inference
    std::vector<float> yi(in), ypi(out), ypi2(out); std::vector<int32_t> ai(out), ai2(out);
    batchnorm_forward_infer(s, x.data(), gamma.data(), beta.data(), rm.data(), rv.data(), 1e-5f, yi.data(), true);
    maxpool_forward(ps, yi.data(), ypi.data(), ai.data());
    FusedPool fpi{hw, hw, ai2.data()};
    batchnorm_forward_infer(s, x.data(), gamma.data(), beta.data(), rm.data(), rv.data(), 1e-5f, ypi2.data(), true, &fpi);
    ok = ok && same(ypi, ypi2) && same(ai, ai2);
    double a = med_ms(unf_f), b = med_ms(unf_b), cf = med_ms(fu_f), d = med_ms(fu_b);
    std::printf("%dx%dx%d: bits %s | unfused fwd %.3f bwd %.3f | fused fwd %.3f bwd %.3f ms\n", c, hw, hw, ok ? "same" : "DIFFER", a, b, cf, d);
  }
}
