// Owns the NVML binding (the few entry points we call, resolved by name) and the sampling thread.
#include "obs/gpu_monitor.h"
#include "util/json_text.h"

#include <dlfcn.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <chrono>

namespace ringtrain::obs {

// NVML's C ABI, declared here so building needs no NVML header: handles are opaque pointers, results ints
// (0 = NVML_SUCCESS), and the two structs we read are stable since NVML's first release.
struct GpuMonitor::Nvml {
  using Device = void*;
  struct Utilization {
    unsigned gpu, memory;
  };
  struct Memory {
    unsigned long long total, free, used;
  };
  int (*init)() = nullptr;
  int (*shutdown)() = nullptr;
  const char* (*error_string)(int) = nullptr;
  int (*device_count)(unsigned*) = nullptr;
  int (*device_by_index)(unsigned, Device*) = nullptr;
  int (*device_name)(Device, char*, unsigned) = nullptr;
  int (*utilization)(Device, Utilization*) = nullptr;
  int (*memory)(Device, Memory*) = nullptr;
  int (*temperature)(Device, int, unsigned*) = nullptr;  // sensor 0: NVML_TEMPERATURE_GPU
  int (*power_mw)(Device, unsigned*) = nullptr;
  int (*clock_mhz)(Device, int, unsigned*) = nullptr;    // 1: NVML_CLOCK_SM, 2: NVML_CLOCK_MEM
};

namespace {

template <class F>
bool resolve(void* library, const char* name, F& fn) {
  fn = reinterpret_cast<F>(dlsym(library, name));
  return fn != nullptr;
}

double unix_time_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

GpuMonitor::GpuMonitor(std::filesystem::path out, double every_s, const char* library)
    : out_path_(std::move(out)), every_s_(every_s) {
  library_ = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (!library_) {
    const char* why = dlerror();
    status_ = fmt::format("GPU monitoring off: {} not loadable ({})", library, why ? why : "unknown reason");
    return;
  }
  nvml_ = new Nvml;
  Nvml& n = *nvml_;
  const bool resolved = resolve(library_, "nvmlInit_v2", n.init) && resolve(library_, "nvmlShutdown", n.shutdown) &&
                        resolve(library_, "nvmlErrorString", n.error_string) &&
                        resolve(library_, "nvmlDeviceGetCount_v2", n.device_count) &&
                        resolve(library_, "nvmlDeviceGetHandleByIndex_v2", n.device_by_index) &&
                        resolve(library_, "nvmlDeviceGetName", n.device_name) &&
                        resolve(library_, "nvmlDeviceGetUtilizationRates", n.utilization) &&
                        resolve(library_, "nvmlDeviceGetMemoryInfo", n.memory) &&
                        resolve(library_, "nvmlDeviceGetTemperature", n.temperature) &&
                        resolve(library_, "nvmlDeviceGetPowerUsage", n.power_mw) &&
                        resolve(library_, "nvmlDeviceGetClockInfo", n.clock_mhz);
  if (!resolved) {
    status_ = fmt::format("GPU monitoring off: {} lacks an NVML entry point we need ({})", library, dlerror());
    return;
  }
  if (const int rc = n.init(); rc != 0) {
    status_ = fmt::format("GPU monitoring off: nvmlInit failed: {}", n.error_string(rc));
    n.init = nullptr;  // nothing to shut down
    return;
  }
  if (const int rc = n.device_count(&gpus_); rc != 0 || gpus_ == 0) {
    status_ = rc != 0 ? fmt::format("GPU monitoring off: nvmlDeviceGetCount failed: {}", n.error_string(rc))
                      : std::string("GPU monitoring off: NVML sees no GPU");
    return;
  }
  out_.open(out_path_, std::ios::app);
  if (!out_) {
    status_ = fmt::format("GPU monitoring off: cannot open {} for writing", out_path_.string());
    return;
  }
  on_ = true;
  status_ = fmt::format("GPU monitoring: {} GPU{} every {} s into {}", gpus_, gpus_ == 1 ? "" : "s", every_s_,
                        out_path_.string());
  thread_ = std::thread([this] { run(); });
}

GpuMonitor::~GpuMonitor() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (nvml_ && nvml_->init && nvml_->shutdown) (void)nvml_->shutdown();
  delete nvml_;
  if (library_) dlclose(library_);
}

int GpuMonitor::samples() const {
  std::lock_guard lock(mutex_);
  return samples_;
}

void GpuMonitor::run() {
  std::unique_lock lock(mutex_);
  while (!stop_) {
    lock.unlock();
    sample_once();
    lock.lock();
    ++samples_;
    wake_.wait_for(lock, std::chrono::duration<double>(every_s_), [this] { return stop_; });
  }
}

void GpuMonitor::sample_once() {
  const Nvml& n = *nvml_;
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  const double now = unix_time_s();
  for (unsigned i = 0; i < gpus_; ++i) {
    nlohmann::ordered_json line{{"time", now}, {"host", host}, {"gpu", i}};
    Nvml::Device device = nullptr;
    if (n.device_by_index(i, &device) != 0) {
      line["error"] = "nvmlDeviceGetHandleByIndex failed";
    } else {
      // A quantity the GPU does not report (NVML_ERROR_NOT_SUPPORTED) is written as null.
      const auto value = [](int rc, double v) { return rc == 0 ? nlohmann::ordered_json(v) : nlohmann::ordered_json(); };
      char name[96] = {};
      if (n.device_name(device, name, sizeof name) == 0) line["name"] = name;
      Nvml::Utilization u{};
      const int u_rc = n.utilization(device, &u);
      line["util_gpu_pct"] = value(u_rc, u.gpu);
      line["util_mem_pct"] = value(u_rc, u.memory);
      Nvml::Memory m{};
      const int m_rc = n.memory(device, &m);
      line["mem_used_mb"] = value(m_rc, static_cast<double>(m.used) / (1 << 20));
      line["mem_total_mb"] = value(m_rc, static_cast<double>(m.total) / (1 << 20));
      unsigned t = 0, p = 0, sm = 0, mem = 0;
      line["temp_c"] = value(n.temperature(device, 0, &t), t);
      const int p_rc = n.power_mw(device, &p);
      line["power_w"] = value(p_rc, p / 1000.0);
      line["sm_clock_mhz"] = value(n.clock_mhz(device, 1, &sm), sm);
      line["mem_clock_mhz"] = value(n.clock_mhz(device, 2, &mem), mem);
    }
    out_ << util::json_text(line) << "\n";
  }
  out_.flush();
}

}  // namespace ringtrain::obs
