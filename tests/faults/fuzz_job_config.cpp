// Owns the bounded fuzzing of the job-file parser (config::parse_job): valid job files from jobs/, mutated
// byte by byte and token by token (key typos, values of the wrong type, huge and non-finite numbers, broken
// brackets, stray quotes), with random --set overrides. Every input must either parse or throw JobFileError
// with a message; any other exception fails the run, a crash or hang ends it (CTest sees either).
// Usage: fuzz_job_config JOBS_DIR [--seed N] [--iterations N] [--seconds S]
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
  long done = 0, parsed = 0, refused = 0, failures = 0;
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
