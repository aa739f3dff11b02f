// Owns reading MemAvailable; see host_memory.h.
#include "common/host_memory.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

namespace ringtrain {

uint64_t host_memory_available() noexcept {
  if (std::FILE* meminfo = std::fopen("/proc/meminfo", "r")) {
    char line[256];
    unsigned long long kib = 0;
    while (std::fgets(line, sizeof line, meminfo))
      if (std::sscanf(line, "MemAvailable: %llu kB", &kib) == 1) break;
    std::fclose(meminfo);
    if (kib > 0) return static_cast<uint64_t>(kib) * 1024;
  }
  const long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
}

std::string byte_size_text(double bytes) {
  const double gib = 1024.0 * 1024 * 1024, mib = 1024.0 * 1024;
  if (bytes >= 1024 * gib) return fmt::format("{:.1f} TiB", bytes / (1024 * gib));
  if (bytes >= gib) return fmt::format("{:.1f} GiB", bytes / gib);
  if (bytes >= mib || bytes <= 0) return fmt::format("{:.1f} MiB", bytes / mib);
  return fmt::format("{:.0f} KiB", bytes / 1024);  // "0.1 MiB of 0.1 MiB" would hide the shortfall
}

}  // namespace ringtrain
