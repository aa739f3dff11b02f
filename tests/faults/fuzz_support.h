// Owns what the bounded fuzzers share: the command line (--seed, --iterations, --seconds), a seeded
// generator, byte-level mutations, and reporting the input that was running when the process dies, so a
// crash in CI names something to replay (same seed, same iteration).
#pragma once
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace ringtrain::fuzz {

struct Options {
  uint64_t seed = 1;
  long iterations = 10000;  // stop after this many inputs ...
  double seconds = 15;      // ... or this long, whichever comes first (a loaded CI machine stays bounded)
};

inline Options parse_options(int argc, char** argv, std::vector<std::string>& positional) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--seed" && has_value) o.seed = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--iterations" && has_value) o.iterations = std::strtol(argv[++i], nullptr, 10);
    else if (a == "--seconds" && has_value) o.seconds = std::strtod(argv[++i], nullptr);
    else positional.emplace_back(a);
  }
  return o;
}

// Bounded by count and by wall time.
class Budget {
 public:
  explicit Budget(const Options& o) : options_(o), start_(std::chrono::steady_clock::now()) {}
  bool more(long done) const {
    return done < options_.iterations &&
           std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count() < options_.seconds;
  }
  double elapsed_s() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(); }

 private:
  Options options_;
  std::chrono::steady_clock::time_point start_;
};

// What the fuzzer is doing now; printed by the fatal-signal handler (write(2) only: async-signal-safe).
struct CurrentInput {
  char text[8192] = {};
  std::size_t length = 0;
};
inline CurrentInput& current_input() {
  static CurrentInput input;
  return input;
}
inline void set_current_input(std::string_view what) {
  CurrentInput& c = current_input();
  c.length = std::min(what.size(), sizeof c.text);
  std::memcpy(c.text, what.data(), c.length);
}

inline void on_fatal_signal(int signal_number) {
  static const char head[] = "\nfuzz: fatal signal while processing this input:\n";
  (void)!write(2, head, sizeof head - 1);
  (void)!write(2, current_input().text, current_input().length);
  (void)!write(2, "\n", 1);
  std::signal(signal_number, SIG_DFL);
  raise(signal_number);
}

inline void install_crash_report() {
  for (const int s : {SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL}) std::signal(s, on_fatal_signal);
}

// Byte-level mutations of `data`, 1 to 4 of them: flips, random bytes, truncation, deletion, duplication.
inline void mutate_bytes(std::string& data, std::mt19937_64& rng) {
  auto pick = [&](std::size_t n) { return n == 0 ? std::size_t{0} : static_cast<std::size_t>(rng() % n); };
  const int rounds = 1 + static_cast<int>(rng() % 4);
  for (int r = 0; r < rounds && !data.empty(); ++r) {
    switch (rng() % 5) {
      case 0: data[pick(data.size())] ^= static_cast<char>(1u << (rng() % 8)); break;
      case 1: data[pick(data.size())] = static_cast<char>(rng() & 0xff); break;
      case 2: data.resize(pick(data.size())); break;
      case 3: {
        const std::size_t at = pick(data.size());
        data.erase(at, 1 + pick(64));
        break;
      }
      default: {
        const std::size_t at = pick(data.size());
        data.insert(pick(data.size()), data.substr(at, 1 + pick(64)));
      }
    }
  }
}

}  // namespace ringtrain::fuzz
