// GPU monitoring: without NVML it is off, says why, and writes nothing; with NVML and a GPU (the lent GPU
// machine) it writes a line per GPU per sample with the quantities we promise; without a GPU that test skips.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
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

// The GPUs the driver shows this machine (/dev/nvidia0, /dev/nvidia1, ...): the devices NVML counts.
int visible_gpus() {
  int gpus = 0;
  std::error_code error;
  for (fs::directory_iterator it("/dev", error); !error && it != fs::directory_iterator(); it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (name.size() > 6 && name.starts_with("nvidia") &&
        name.find_first_not_of("0123456789", 6) == std::string::npos)
      ++gpus;
  }
  return gpus;
}

TEST(GpuMonitor, RealNvmlSamplesEveryGpu) {
  const int gpus = visible_gpus();
  if (gpus == 0) GTEST_SKIP() << "no GPU on this machine (/dev/nvidia<N>): the real NVML path needs one";
  const fs::path out = scratch("ringtrain-gpu-real");
  fs::remove(out);
  {
    obs::GpuMonitor monitor(out, 0.05);
    ASSERT_TRUE(monitor.on()) << gpus << " GPU(s) visible but: " << monitor.status();
    for (int i = 0; i < 100 && monitor.samples() < 2; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_GE(monitor.samples(), 2) << monitor.status();
  }
  std::ifstream in(out);
  std::set<int> sampled;
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line);
    for (const char* key : {"time", "gpu", "util_gpu_pct", "mem_used_mb", "temp_c", "power_w", "sm_clock_mhz"})
      EXPECT_TRUE(j.contains(key)) << key << " missing in " << line;
    EXPECT_GT(j.at("mem_total_mb").get<double>(), 0.0) << line;
    sampled.insert(j.at("gpu").get<int>());
  }
  EXPECT_EQ(static_cast<int>(sampled.size()), gpus) << "every GPU sampled";
  fs::remove(out);
}
