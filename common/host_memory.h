// Owns asking the host how much memory a new allocation can still get (Linux's MemAvailable: free memory plus
// what the kernel can reclaim), so sizes are checked against it before allocating rather than failing inside.
#pragma once
#include <cstdint>
#include <string>

namespace ringtrain {

// Bytes available for new allocations on this host; 0 when the system does not say.
uint64_t host_memory_available() noexcept;

// "12.3 GiB", "512.0 MiB", "560 KiB": a byte count for messages.
std::string byte_size_text(double bytes);

}  // namespace ringtrain
