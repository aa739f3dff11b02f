// GPU monitoring: without NVML it is off, says why, and writes nothing; with NVML and a GPU (the lent GPU
// machine) it writes a line per GPU per sample with the quantities we promise.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "obs/gpu_monitor.h"

using namespace ringtrain;
namespace fs = std::filesystem;

namespace {
fs::path scratch(const char* name) {
  return fs::temp_directory_path() / (std::string(name) + "-" + std::to_string(::getpid()) + ".jsonl");
}
}  // namespace

TEST(GpuMonitor, AbsentLibraryMeansOffAndNothingWritten) {
  const fs::path out = scratch("ringtrain-gpu-absent");
  {
    obs::GpuMonitor monitor(out, 0.01, "libringtrain-no-such-nvml.so.1");
    EXPECT_FALSE(monitor.on());
    EXPECT_EQ(monitor.status().rfind("GPU monitoring off: libringtrain-no-such-nvml.so.1 not loadable", 0), 0u)
        << monitor.status();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_EQ(monitor.samples(), 0);
  }
  EXPECT_FALSE(fs::exists(out));
}

TEST(GpuMonitor, RealNvmlEitherSamplesEveryGpuOrSaysWhyNot) {
  const fs::path out = scratch("ringtrain-gpu-real");
  fs::remove(out);
  bool on = false;
  {
    obs::GpuMonitor monitor(out, 0.05);
    on = monitor.on();
    if (!on) {
      EXPECT_EQ(monitor.status().rfind("GPU monitoring off: ", 0), 0u) << monitor.status();
    } else {
      for (int i = 0; i < 100 && monitor.samples() < 2; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
      EXPECT_GE(monitor.samples(), 2) << monitor.status();
    }
  }
  if (!on) {
    EXPECT_FALSE(fs::exists(out));
    return;
  }
  std::ifstream in(out);
  std::string line;
  int lines = 0;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    for (const char* key : {"time", "gpu", "util_gpu_pct", "mem_used_mb", "temp_c", "power_w", "sm_clock_mhz"})
      EXPECT_TRUE(j.contains(key)) << key << " missing in " << line;
    EXPECT_GT(j.at("mem_total_mb").get<double>(), 0.0) << line;
    ++lines;
  }
  EXPECT_GE(lines, 2);
  fs::remove(out);
}
