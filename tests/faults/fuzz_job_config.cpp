// Owns the bounded fuzzing of the job-file parser (config::parse_job): valid job files from jobs/, mutated
// byte by byte and token by token (key typos, values of the wrong type, huge and non-finite numbers, broken
// brackets, stray quotes), with random --set overrides. Every input must either parse or throw JobFileError
// with a message; any other exception fails the run, a crash or hang ends it (CTest sees either). First, the
// kinds of file a job-file path can name (config::load_job): a FIFO, devices that never end or say nothing, a
// folder, a file over the size cap, a symlink loop, names and paths over the system's limits, random bytes.
// Usage: fuzz_job_config JOBS_DIR [--seed N] [--iterations N] [--seconds S]
#include <limits.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <typeinfo>

#include "common/error.h"
#include "config/job_config.h"
#include "tests/faults/fuzz_support.h"

namespace {

namespace fs = std::filesystem;
using ringtrain::fuzz::Budget;

// Values of every TOML type and the edges of each: what a type swap puts where another value was.
const std::vector<std::string> kValues = {
    "0", "-1", "1", "-4", "2147483648", "9223372036854775807", "-9223372036854775808", "99999999999999999999",
    "0x7fffffffffffffff", "1e400", "-1e400", "1e-400", "nan", "-nan", "inf", "-inf", "0.0", "-0.0", "3.5",
    "true", "false", "\"\"", "\"2\"", "'x'", "\"\"\"multi\nline\"\"\"", "[]", "[1, \"a\"]", "{}", "{a = 1}",
    "1979-05-27T07:32:00Z", "07:32:00", "[[1]]", "\"\\u0000\"", "\"\\uD800\""};
// Pieces of TOML syntax and of our schema that a splice inserts anywhere.
const std::vector<std::string> kTokens = {
    "=", "[", "]", "[[", "]]", "\"", "'", "{", "}", ",", "\n", "#", ".", "\\", "\xff", "\xc3", "\t", " = ",
    "[model]\n", "[[model.layers]]\n", "type = \"residual\"\n", "body = [", "shortcut = [{type=\"relu\"}]\n",
    "type = \"dense\"\n", "units = ", "[train]\n", "[data]\n", "[run]\n", "epochs = ", "layers = 3\n",
    "[model.layers]\n", "[[train]]\n", "a.b.c = 1\n", "model = 1\n", "[gpu]\nworkspace_mb = -1\n"};
// --set keys, real and not.
const std::vector<std::string> kOverrideKeys = {
    "train.epochs", "train.batch_per_rank", "optimizer.base_lr", "run.dir", "model.layers", "data.train", "train",
    "train.epochs.x", "nosuch.key", "run.device", "train.precision", "model.layers.x", ".", "a..b", "gpu.workspace_mb"};

std::string pick(const std::vector<std::string>& from, std::mt19937_64& rng) { return from[rng() % from.size()]; }

// Token-level mutations: typo in a key, a value of another type, a spliced token, two lines swapped.
void mutate_tokens(std::string& text, std::mt19937_64& rng) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  if (lines.empty()) lines.emplace_back();
  const int rounds = 1 + static_cast<int>(rng() % 3);
  for (int r = 0; r < rounds; ++r) {
    std::string& line = lines[rng() % lines.size()];
    const auto eq = line.find('=');
    switch (rng() % 4) {
      case 0:  // key typo: change, drop or double one character of the key
        if (eq != std::string::npos && eq > 0) {
          const std::size_t at = rng() % eq;
          if (rng() % 2) line[at] = static_cast<char>('a' + rng() % 26);
          else line.erase(at, 1);
        }
        break;
      case 1:  // type swap
        if (eq != std::string::npos) line = line.substr(0, eq + 1) + " " + pick(kValues, rng);
        break;
      case 2: line.insert(rng() % (line.size() + 1), pick(kTokens, rng)); break;
      default: std::swap(line, lines[rng() % lines.size()]);
    }
  }
  text.clear();
  for (const auto& line : lines) text += line + "\n";
}

// load_job on every kind of path: each must end in JobFileError whose message names the path and says `want`.
int check_file_kinds(std::mt19937_64& rng) {
  // The pid too: the plain and the ASan build draw the same name from the same seed, and ctest -j2 runs them at once.
  const fs::path dir = fs::temp_directory_path() / ("fuzz_job_config." + std::to_string(::getpid()) + "." +
                                                     std::to_string(rng() % 1000000000));
  fs::create_directories(dir);
  const fs::path fifo = dir / "fifo.toml", big = dir / "big.toml", loop = dir / "loop.toml";
  mkfifo(fifo.c_str(), 0600);
  std::ofstream(big).close();
  fs::resize_file(big, ringtrain::config::kMaxJobFileBytes + 1);
  fs::create_symlink(loop, loop);
  const std::string long_name = std::string(300, 'j') + ".toml";
  std::string long_path = dir.string();
  while (long_path.size() <= PATH_MAX) long_path += "/" + std::string(200, 'p');
  const std::vector<std::pair<fs::path, std::string>> cases = {
      {fifo, "is not a regular file or folder"}, {"/dev/zero", "is not a regular file or folder"},
      {"/dev/null", "is not a regular file or folder"}, {dir, "is a folder"}, {big, "a job file is at most"},
      {loop, "cannot be reached: Too many levels of symbolic links"}, {dir / long_name, "cannot be reached: File name too long"},
      {long_path + "/x.toml", "cannot be reached: File name too long"}, {dir / "absent.toml", "does not exist"}};
  int failures = 0;
  for (const auto& [path, want] : cases) {
    try {
      (void)ringtrain::config::load_job(path, {});
      std::cerr << "FAIL load_job accepted " << path.string().substr(0, 80) << "\n";
      ++failures;
    } catch (const ringtrain::JobFileError& e) {
      const std::string message = e.what();
      if (message.find(want) == std::string::npos || message.find(path.string().substr(0, 40)) == std::string::npos) {
        std::cerr << "FAIL load_job on " << path.string().substr(0, 80) << ": want '" << want << "', got: " << message
                  << "\n";
        ++failures;
      }
    } catch (const std::exception& e) {
      std::cerr << "FAIL load_job on " << path.string().substr(0, 80) << ": " << typeid(e).name() << ": " << e.what()
                << "\n";
      ++failures;
    }
  }
  // Random bytes of random sizes under the cap, from a regular file: parsed or refused, nothing else.
  for (int i = 0; i < 50; ++i) {
    std::string bytes(rng() % 4096, '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    std::ofstream(dir / "random.toml", std::ios::binary) << bytes;
    try {
      (void)ringtrain::config::load_job(dir / "random.toml", {});
    } catch (const ringtrain::JobFileError&) {
    } catch (const std::exception& e) {
      std::cerr << "FAIL load_job on random bytes: " << typeid(e).name() << ": " << e.what() << "\n";
      ++failures;
    }
  }
  std::error_code ignored;
  fs::remove_all(dir, ignored);
  std::cout << "fuzz_job_config: " << cases.size() << " kinds of path and 50 random files through load_job, "
            << failures << " wrong outcomes\n";
  return failures;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args;
  const ringtrain::fuzz::Options options = ringtrain::fuzz::parse_options(argc, argv, args);
  if (args.size() != 1) {
    std::cerr << "usage: fuzz_job_config JOBS_DIR [--seed N] [--iterations N] [--seconds S]\n";
    return 2;
  }
  std::vector<std::string> corpus;
  for (const auto& entry : fs::directory_iterator(args[0]))
    if (entry.path().extension() == ".toml") {
      std::ifstream in(entry.path());
      std::ostringstream text;
      text << in.rdbuf();
      corpus.push_back(text.str());
    }
  if (corpus.empty()) {
    std::cerr << "fuzz_job_config: no *.toml in " << args[0] << "\n";
    return 2;
  }
  ringtrain::fuzz::install_crash_report();
  std::mt19937_64 rng(options.seed);
  const Budget budget(options);
  long done = 0, parsed = 0, refused = 0, failures = check_file_kinds(rng);
  for (; budget.more(done); ++done) {
    std::string text = corpus[rng() % corpus.size()];
    if (rng() % 2) mutate_tokens(text, rng);
    if (rng() % 2) ringtrain::fuzz::mutate_bytes(text, rng);
    std::vector<std::string> overrides;
    for (int k = static_cast<int>(rng() % 3); k > 0; --k)
      overrides.push_back(pick(kOverrideKeys, rng) + (rng() % 8 ? "=" : "") + pick(kValues, rng));
    std::string record = text;
    for (const auto& o : overrides) record += "\n--set " + o;
    ringtrain::fuzz::set_current_input(record);
    try {
      (void)ringtrain::config::parse_job(text, "fuzz.toml", overrides);
      ++parsed;
    } catch (const ringtrain::JobFileError& e) {
      if (std::string_view(e.what()).empty()) {
        std::cerr << "FAIL iteration " << done << ": JobFileError with an empty message for:\n" << record << "\n";
        ++failures;
      }
      ++refused;
    } catch (const std::exception& e) {
      std::cerr << "FAIL iteration " << done << ": " << typeid(e).name() << " (not JobFileError): " << e.what()
                << "\ninput:\n" << record << "\n";
      ++failures;
    }
  }
  std::cout << "fuzz_job_config: seed " << options.seed << ", " << done << " inputs in " << budget.elapsed_s()
            << " s: " << parsed << " parsed, " << refused << " refused with JobFileError, " << failures
            << " other outcomes\n";
  return failures == 0 && done > 0 ? 0 : 1;
}
