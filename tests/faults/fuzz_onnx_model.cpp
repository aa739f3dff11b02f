// Owns the bounded fuzzing of the ONNX reader (io::read_onnx), which `ringtrain import` will read a user's model
// files through, and (in the plain build, RT_FUZZ_IMPORT) of import's walk of what it reads. Seeds are models the
// ONNX writer makes here (a convolution stack with every attribute kind, a residual join, a dense head, initializers
// of several sizes; one with ringtrain's export's ends: the input normalised in the graph, the logits flattened, a
// probabilities output); each input is one of them with bytes flipped, cut, deleted or repeated, or random bytes.
// Every input must be read or be refused with a DataError naming the file: no crash, no other exception, and what is
// read must be self-consistent (each initializer holds its dimensions' count of values). What is read must then map
// onto layers or be refused with a JobFileError naming a node or the graph (exit 3): no crash, no other exception.
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
#ifdef RT_FUZZ_IMPORT
#include "model/onnx_graph_ends.h"
#include "model/onnx_import.h"
#endif
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

// A model as ringtrain's export ends one: pixels normalised in the graph (Sub, Div), a Gemm's logits flattened, and
// their Softmax as a second output.
std::string seed_export(const fs::path& dir) {
  OnnxGraph g;
  g.input("pixels", {3, 8, 8});
  const std::vector<float> values(3 * 8 * 8 * 10, 0.25f), stats = {120.0f, 110.0f, 100.0f};
  const std::string centred = g.node("Sub", {"pixels", g.initializer("input_mean", {1, 3, 1, 1}, stats.data())});
  const std::string x = g.node("Div", {centred, g.initializer("input_std", {1, 3, 1, 1}, stats.data())});
  const std::string flat = g.node("Flatten", {x}, {OnnxAttribute::integer("axis", 1)});
  const std::string scores = g.node("Gemm", {flat, g.initializer("head", {10, 3 * 8 * 8}, values.data())},
                                    {OnnxAttribute::integer("transB", 1)});
  g.node("Flatten", {scores}, {OnnxAttribute::integer("axis", 1)}, "logits");
  g.node("Softmax", {"logits"}, {OnnxAttribute::integer("axis", 1)}, "probabilities");
  g.output("logits", {10});
  g.output("probabilities", {10});
  const fs::path file = dir / "seed-export.onnx";
  g.write(file, {{"class_names", "[]"}}, "fuzz");
  return file_bytes(file);
}

// What import's walk makes of a model read: "" where it maps onto layers or is refused with a JobFileError (exit 3);
// the problem otherwise.
std::string check_import(const ringtrain::io::OnnxModel& read, bool& mapped) {
#ifdef RT_FUZZ_IMPORT
  try {
    ringtrain::io::OnnxModel m = read;
    ringtrain::model::drop_probability_outputs(m);
    ringtrain::model::take_input_normalisation(m);
    ringtrain::model::import_onnx(m);
    mapped = true;
  } catch (const ringtrain::JobFileError&) {
    mapped = false;
  } catch (const std::exception& e) {
    return fmt::format("import: {}: {}", typeid(e).name(), e.what());
  }
#else
  (void)read, (void)mapped;
#endif
  return "";
}

// "" where the file was read consistently or refused with a DataError naming it; the problem otherwise.
std::string check(const fs::path& file, bool& refused, bool& mapped) {
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
    return check_import(m, mapped);
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
  const std::vector<std::string> seeds = {seed_model(dir, 2, 0), seed_model(dir, 4, 2), seed_model(dir, 8, 5),
                                          seed_export(dir)};
  const ringtrain::fuzz::Budget budget(options);
  long done = 0, read = 0, refused_count = 0, failures = 0, mapped_count = 0;
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
    bool refused = false, mapped = false;
    const std::string problem = check(file, refused, mapped);
    if (!problem.empty()) {
      std::cerr << "FAIL " << notes << "\n  " << problem << "\n";
      ++failures;
    } else {
      ++(refused ? refused_count : read);
      mapped_count += mapped ? 1 : 0;
    }
  }
  fs::remove_all(dir);
  std::cout << "fuzz_onnx_model: seed " << options.seed << ", " << done << " inputs from " << seeds.size()
            << " seeds in " << budget.elapsed_s() << " s: " << read << " read, " << refused_count
            << " refused with DataError naming the file, " << failures << " failures";
#ifdef RT_FUZZ_IMPORT
  std::cout << "; import mapped " << mapped_count << " of the " << read << " read, the others refused with exit 3";
  const bool import_reached = mapped_count > 0 && mapped_count < read;
#else
  const bool import_reached = true;  // the sanitized build fuzzes the reader alone
#endif
  std::cout << "\n";
  return failures == 0 && read > 0 && refused_count > 0 && import_reached ? 0 : 1;
}
