// Owns the bounded fuzzing of the ONNX reader (io::read_onnx), which `ringtrain import` will read a user's model
// files through. Seeds are models the ONNX writer makes here (a convolution stack with every attribute kind,
// a residual join, a dense head, initializers of several sizes); each input is one of them with bytes flipped, cut,
// deleted or repeated, or random bytes. Every input must be read or be refused with a DataError naming the file:
// no crash, no other exception, and what is read must be self-consistent (each initializer holds its dimensions'
// count of values).
// Usage: fuzz_onnx_model SCRATCH_DIR [--seed N] [--iterations N] [--seconds S]
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <typeinfo>

#include "common/error.h"
#include "io/onnx_graph.h"
#include "io/onnx_model.h"
#include "tests/faults/fuzz_support.h"

namespace {

namespace fs = std::filesystem;
using ringtrain::io::OnnxAttribute;
using ringtrain::io::OnnxGraph;

std::string file_bytes(const fs::path& file) {
  std::string bytes(static_cast<size_t>(fs::file_size(file)), '\0');
  std::ifstream(file, std::ios::binary).read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return bytes;
}

// A model of `channels` and `blocks` residual blocks, written and read back as bytes.
std::string seed_model(const fs::path& dir, int channels, int blocks) {
  OnnxGraph g;
  g.input("pixels", {3, 16, 16});
  // Enough values for the largest tensor: the blocks' (channels x channels x 3 x 3), the stem's or the head's.
  const int largest = std::max({channels * channels * 9, channels * 27, 10 * channels});
  std::vector<float> values(static_cast<size_t>(largest), 0.5f);
  std::string x = g.node("Conv", {"pixels", g.initializer("stem", {channels, 3, 3, 3}, values.data())},
                         {OnnxAttribute::list("kernel_shape", {3, 3}), OnnxAttribute::list("pads", {1, 1, 1, 1})});
  for (int b = 0; b < blocks; ++b) {
    const std::string w = g.initializer(fmt::format("w{}", b), {channels, channels, 3, 3}, values.data());
    const std::string y = g.node("Conv", {x, w}, {OnnxAttribute::list("strides", {1, 1})});
    const std::string n = g.node("BatchNormalization", {y}, {OnnxAttribute::floating("epsilon", 1e-5f)});
    x = g.node("Relu", {g.node("Add", {n, x})});
  }
  const std::string flat = g.node("Flatten", {g.node("GlobalAveragePool", {x})}, {OnnxAttribute::integer("axis", 1)});
  g.node("Gemm", {flat, g.initializer("head", {10, channels}, values.data())}, {OnnxAttribute::integer("transB", 1)},
         "logits");
  g.output("logits", {10});
  const fs::path file = dir / fmt::format("seed-{}-{}.onnx", channels, blocks);
  g.write(file, {{"model", "fuzz seed"}}, "fuzz");
  return file_bytes(file);
}

// "" where the file was read consistently or refused with a DataError naming it; the problem otherwise.
std::string check(const fs::path& file, bool& refused) {
  try {
    const ringtrain::io::OnnxModel m = ringtrain::io::read_onnx(file);
    for (const auto& t : m.initializers) {
      int64_t count = 1;
      for (int64_t d : t.dims) count *= d;
      const auto held = static_cast<int64_t>(t.data_type == 1 ? t.floats.size() : t.integers.size());
      if ((t.data_type == 1 || t.data_type == 7) && held != count)
        return fmt::format("initializer '{}' read with {} values for {} dimensions' {}", t.name, held, t.dims.size(), count);
    }
    refused = false;
    return "";
  } catch (const ringtrain::DataError& e) {
    refused = true;
    return std::string(e.what()).find(file.string()) == std::string::npos ? "a DataError not naming the file: " +
                                                                                 std::string(e.what())
                                                                           : "";
  } catch (const std::exception& e) {
    return fmt::format("{}: {}", typeid(e).name(), e.what());
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args;
  const ringtrain::fuzz::Options options = ringtrain::fuzz::parse_options(argc, argv, args);
  if (args.size() != 1) {
    std::cerr << "usage: fuzz_onnx_model SCRATCH_DIR [--seed N] [--iterations N] [--seconds S]\n";
    return 2;
  }
  const fs::path dir = fs::path(args[0]) / fmt::format("fuzz_onnx_model-{}", ::getpid());
  fs::create_directories(dir);
  ringtrain::fuzz::install_crash_report();
  std::mt19937_64 rng(options.seed);
  const std::vector<std::string> seeds = {seed_model(dir, 2, 0), seed_model(dir, 4, 2), seed_model(dir, 8, 5)};
  const ringtrain::fuzz::Budget budget(options);
  long done = 0, read = 0, refused_count = 0, failures = 0;
  for (; budget.more(done); ++done) {
    const size_t which = static_cast<size_t>(rng() % (seeds.size() + 1));
    std::string bytes;
    if (which == seeds.size()) {
      bytes.resize(static_cast<size_t>(rng() % 512));
      for (char& c : bytes) c = static_cast<char>(rng() & 0xff);
    } else {
      bytes = seeds[which];
      ringtrain::fuzz::mutate_bytes(bytes, rng);
    }
    const fs::path file = dir / "input.onnx";
    std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
    const std::string notes = fmt::format("iteration {}: {}", done, which == seeds.size() ? "random bytes"
                                                                                         : fmt::format("seed {} mutated", which));
    ringtrain::fuzz::set_current_input(notes);
    bool refused = false;
    const std::string problem = check(file, refused);
    if (!problem.empty()) {
      std::cerr << "FAIL " << notes << "\n  " << problem << "\n";
      ++failures;
    } else {
      ++(refused ? refused_count : read);
    }
  }
  fs::remove_all(dir);
  std::cout << "fuzz_onnx_model: seed " << options.seed << ", " << done << " inputs from " << seeds.size()
            << " seeds in " << budget.elapsed_s() << " s: " << read << " read, " << refused_count
            << " refused with DataError naming the file, " << failures << " failures\n";
  return failures == 0 && read > 0 && refused_count > 0 ? 0 : 1;
}
