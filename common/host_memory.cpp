// Owns reading the host's, the memory cgroup's and the address space's limits; see host_memory.h.
#include "common/host_memory.h"

#include "common/cgroup.h"

#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string_view>
#include <vector>

namespace ringtrain {
namespace {

namespace fs = std::filesystem;

// A limit at or above this is "none": cgroup v1 writes 2^63 rounded down to a page for an unlimited group.
constexpr uint64_t kUnlimited = uint64_t{1} << 62;

std::optional<uint64_t> read_number(const fs::path& file) {
  std::ifstream in(file);
  std::string word;
  if (!(in >> word) || word == "max") return std::nullopt;
  try {
    return std::stoull(word);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// The value of `key` in a "key value" file (memory.stat), 0 when absent.
uint64_t stat_value(const fs::path& file, std::string_view key) {
  std::ifstream in(file);
  std::string name;
  uint64_t value = 0;
  while (in >> name >> value)
    if (name == key) return value;
  return 0;
}

uint64_t meminfo_available(const std::string& meminfo) {
  if (std::FILE* file = std::fopen(meminfo.c_str(), "r")) {
    char line[256];
    unsigned long long kib = 0;
    while (std::fgets(line, sizeof line, file))
      if (std::sscanf(line, "MemAvailable: %llu kB", &kib) == 1) break;
    std::fclose(file);
    if (kib > 0) return static_cast<uint64_t>(kib) * 1024;
  }
  const long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
}

// The files one cgroup version keeps a group's limit, use and page cache in.
struct CgroupFiles {
  const char* limit;
  const char* usage;
  const char* active_file;
  const char* inactive_file;
};
constexpr CgroupFiles kCgroupV2{"memory.max", "memory.current", "active_file", "inactive_file"};
constexpr CgroupFiles kCgroupV1{"memory.limit_in_bytes", "memory.usage_in_bytes", "total_active_file",
                                "total_inactive_file"};

// The tightest limit over the process's group and its ancestors in one hierarchy mounted at `mount`: limit less
// use, with the page cache counted as reclaimable, as MemAvailable counts it. In a container the group's path may
// name the host's hierarchy while the mount shows the container's own group: then the mount's root is the group.
std::optional<AvailableMemory> cgroup_available(const fs::path& mount, const std::string& group,
                                                const CgroupFiles& files) {
  std::error_code ec;
  fs::path relative = fs::path(group).relative_path();
  if (!fs::is_directory(mount / relative, ec)) relative.clear();
  std::optional<AvailableMemory> tightest;
  for (;;) {
    const fs::path dir = mount / relative;
    const std::optional<uint64_t> limit = read_number(dir / files.limit);
    if (limit && *limit < kUnlimited) {
      const uint64_t usage = read_number(dir / files.usage).value_or(0);
      const uint64_t cache = stat_value(dir / "memory.stat", files.active_file) +
                             stat_value(dir / "memory.stat", files.inactive_file);
      const uint64_t used = usage > cache ? usage - cache : 0;
      // A limit already reached leaves 1 byte, not 0: 0 means the system does not say, and turns the checks off.
      const uint64_t available = *limit > used ? *limit - used : 1;
      if (!tightest || available < tightest->bytes)
        tightest = AvailableMemory{
            available,
            fmt::format("the memory limit of cgroup /{} ({} {}, {} in use)", relative.generic_string(),
                        files.limit, byte_size_text(static_cast<double>(*limit)), byte_size_text(static_cast<double>(used))),
            "ask the batch system for more memory (e.g. sbatch --mem or --mem-per-gpu)"};
    }
    if (relative.empty()) break;
    relative = relative.parent_path();
  }
  return tightest;
}

// The memory cgroup bounding this process, v2 first (a hybrid system mounts it at unified/), then v1.
std::optional<AvailableMemory> cgroup_limit(const MemorySources& sources) {
  const fs::path mount(sources.cgroup_mount);
  std::error_code ec;
  if (const auto group = cgroup_of_process("memory", true, sources.proc_self)) {
    for (const fs::path& root : {mount, mount / "unified"})
      if (fs::exists(root / "cgroup.controllers", ec))
        if (auto limit = cgroup_available(root, *group, kCgroupV2)) return limit;
  }
  if (const auto group = cgroup_of_process("memory", false, sources.proc_self))
    if (fs::is_directory(mount / "memory", ec)) return cgroup_available(mount / "memory", *group, kCgroupV1);
  return std::nullopt;
}

// ulimit -v less what the process has mapped already (VmSize).
std::optional<AvailableMemory> address_space_limit(const MemorySources& sources) {
  rlimit limit{};
  if (!sources.address_space_limit || getrlimit(RLIMIT_AS, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY)
    return std::nullopt;
  std::ifstream status(sources.proc_self + "/status");
  uint64_t mapped = 0;
  for (std::string line; std::getline(status, line);)
    if (unsigned long long kib = 0; std::sscanf(line.c_str(), "VmSize: %llu kB", &kib) == 1) mapped = kib * 1024;
  const uint64_t cap = limit.rlim_cur;
  return AvailableMemory{cap > mapped ? cap - mapped : 1,
                         fmt::format("the address-space limit (ulimit -v) of {}, {} mapped",
                                     byte_size_text(static_cast<double>(cap)), byte_size_text(static_cast<double>(mapped))),
                         "raise the address-space limit (ulimit -v)"};
}

}  // namespace

std::string AvailableMemory::text() const {
  const std::string size = byte_size_text(static_cast<double>(bytes));
  return limit.empty() ? size + " available" : fmt::format("{} available under {}", size, limit);
}

std::string AvailableMemory::or_remedy() const { return remedy.empty() ? "" : fmt::format("; or {}", remedy); }

AvailableMemory available_memory(const MemorySources& sources) noexcept {
  try {
    AvailableMemory tightest{meminfo_available(sources.meminfo), {}, {}};
    for (auto& bound : {cgroup_limit(sources), address_space_limit(sources)})
      if (bound && (tightest.bytes == 0 || bound->bytes < tightest.bytes)) tightest = *bound;
    return tightest;
  } catch (const std::exception&) {  // strings and paths only: a failed read says no more than MemAvailable
    return AvailableMemory{meminfo_available(sources.meminfo), {}, {}};
  }
}

MemoryOfProcess memory_of_process() noexcept {
  MemorySources shared_only;
  shared_only.address_space_limit = false;
  MemoryOfProcess memory{available_memory(shared_only), {}};
  try {
    if (auto own = address_space_limit(MemorySources{})) memory.own = *own;
  } catch (const std::exception&) {
  }
  return memory;
}

RankMemoryShare rank_memory_share(const MemoryOfProcess& memory, int ranks_on_node, const std::string& host) {
  const int ranks = std::max(ranks_on_node, 1);
  const double node_share = static_cast<double>(memory.shared.bytes) / ranks;
  const bool own_binds =
      memory.own.bytes > 0 && (memory.shared.bytes == 0 || static_cast<double>(memory.own.bytes) < node_share);
  if (own_binds)
    return {static_cast<double>(memory.own.bytes), memory.own, fmt::format("this rank's {}", memory.own.text())};
  return {node_share, memory.shared,
          fmt::format("this rank's share ({} rank{} on {}) of the {}", ranks, ranks == 1 ? "" : "s", host,
                      memory.shared.text())};
}

uint64_t host_memory_available() noexcept { return available_memory().bytes; }

std::string byte_size_text(double bytes) {
  const double gib = 1024.0 * 1024 * 1024, mib = 1024.0 * 1024;
  if (bytes >= 1024 * gib) return fmt::format("{:.1f} TiB", bytes / (1024 * gib));
  if (bytes >= gib) return fmt::format("{:.1f} GiB", bytes / gib);
  if (bytes >= mib || bytes <= 0) return fmt::format("{:.1f} MiB", bytes / mib);
  return fmt::format("{:.0f} KiB", bytes / 1024);  // "0.1 MiB of 0.1 MiB" would hide the shortfall
}

}  // namespace ringtrain
