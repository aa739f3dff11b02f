// Owns GPU monitoring: NVML loaded at run time (dlopen of libnvidia-ml, so ringtrain neither links nor needs
// it), sampled on a thread of its own every few seconds into a JSON-lines file: utilisation, memory,
// temperature, power and clocks of every GPU NVML sees on this node. No library, no driver or no GPU means
// monitoring is off, which is said once and is not an error.
#pragma once
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>

namespace ringtrain::obs {

class GpuMonitor {
 public:
  GpuMonitor(std::filesystem::path out, double every_s, const char* library = "libnvidia-ml.so.1");
  ~GpuMonitor();  // stops sampling, shuts NVML down, unloads it
  GpuMonitor(const GpuMonitor&) = delete;
  GpuMonitor& operator=(const GpuMonitor&) = delete;

  bool on() const { return on_; }
  // "GPU monitoring: N GPUs every S s into FILE" or "GPU monitoring off: why".
  const std::string& status() const { return status_; }
  int samples() const;  // sampling rounds written so far

 private:
  struct Nvml;
  void run();
  void sample_once();

  std::filesystem::path out_path_;
  double every_s_;
  void* library_ = nullptr;
  Nvml* nvml_ = nullptr;
  unsigned gpus_ = 0;
  bool on_ = false;
  std::string status_;
  std::ofstream out_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  int samples_ = 0;
  std::thread thread_;
};

}  // namespace ringtrain::obs
