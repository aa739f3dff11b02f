// Owns asking how much memory a new allocation of this process can still get: the host's MemAvailable (free memory
// plus what the kernel can reclaim), or less where the batch system's memory cgroup (Slurm's --mem, v1 or v2) or an
// address-space limit (ulimit -v) bounds the process. Sizes are checked against it before allocating, so a job over
// its limit gets a message instead of the kernel's OOM killer.
#pragma once
#include <cstdint>
#include <string>

namespace ringtrain {

struct AvailableMemory {
  uint64_t bytes = 0;  // 0 when the system does not say; a limit already reached gives 1
  std::string limit;   // what bounds `bytes` when not the host: the cgroup or ulimit, with its size and use
  std::string remedy;  // how to raise that limit ("ask the batch system for more memory ..."); empty for the host
  // "12.3 GiB available", or "3.0 GiB available under the memory limit of cgroup /slurm/job_7 (memory.max 4.0 GiB,
  // 1.0 GiB in use)".
  std::string text() const;
  // "" for the host, else "; or " + remedy: the end of a refusal whose own remedies come first.
  std::string or_remedy() const;
};

// Where the limits are read, so tests can give a made-up system.
struct MemorySources {
  std::string proc_self = "/proc/self";  // its `cgroup` and `status`
  std::string meminfo = "/proc/meminfo";
  std::string cgroup_mount = "/sys/fs/cgroup";
  bool address_space_limit = true;  // consult getrlimit(RLIMIT_AS)
};

// The tightest of the host's, the memory cgroup's and (where `sources` asks) this process's address-space limit.
AvailableMemory available_memory(const MemorySources& sources = {}) noexcept;

// What the node's processes share (the host's memory, the job's cgroup) and what this one alone may still map
// (ulimit -v, a limit each process has whole): a node's ranks split the first, not the second.
struct MemoryOfProcess {
  AvailableMemory shared;      // bytes 0: the system does not say
  AvailableMemory own;         // bytes 0: no address-space limit
};
MemoryOfProcess memory_of_process() noexcept;

// What one of a node's `ranks_on_node` processes may count on: its share of what they share, or its own
// address-space limit where that is smaller.
struct RankMemoryShare {
  double bytes = 0;        // 0: the system says neither
  AvailableMemory limit;   // the limit that gives it (its remedy)
  std::string text;        // "this rank's share (4 ranks on node07) of the 12.3 GiB available", or "this rank's ..."
};
RankMemoryShare rank_memory_share(const MemoryOfProcess& memory, int ranks_on_node, const std::string& host);

// available_memory().bytes.
uint64_t host_memory_available() noexcept;

// "12.3 GiB", "512.0 MiB", "560 KiB": a byte count for messages.
std::string byte_size_text(double bytes);

}  // namespace ringtrain
