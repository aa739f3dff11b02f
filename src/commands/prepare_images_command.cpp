// Owns `ringtrain prepare images` as a command of every rank: MPI start-up, the team io/ writes the shards with
// (each rank its own shards; sums and agreement through MPI), and the summary rank 0 prints.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "commands/commands.h"
#include "commands/on_every_rank.h"
#include "commands/results_on_stdout.h"
#include "common/error.h"
#include "dist/collective_watch.h"
#include "dist/watchdog.h"
#include "dist/world.h"
#include "train/fault_injection.h"

namespace ringtrain::commands {

namespace {

io::ImageSize parse_size(const std::string& size_text) {
  std::vector<std::string> sides;
  for (std::size_t begin = 0, end; begin <= size_text.size(); begin = end + 1) {
    end = std::min(size_text.find(',', begin), size_text.size());
    sides.push_back(size_text.substr(begin, end - begin));
  }
  try {
    std::size_t used = 0;
    if (sides.size() > 2) throw std::invalid_argument("count");
    const int height = std::stoi(sides[0], &used);
    if (used != sides[0].size()) throw std::invalid_argument("trailing");
    const int width = std::stoi(sides.back(), &used);
    if (used != sides.back().size()) throw std::invalid_argument("trailing");
    return {height, width};
  } catch (const std::logic_error&) {
    throw UsageError(fmt::format("--size '{}' is not H or H,W (e.g. 224 or 28,28)", size_text));
  }
}

io::ImageStore parse_store(const std::string& text) {
  if (text == "auto") return io::ImageStore::automatic;
  if (text == "raw") return io::ImageStore::raw;
  if (text == "jpeg") return io::ImageStore::jpeg;
  throw UsageError(fmt::format("--store '{}' is not auto, raw or jpeg", text));
}

// A split with fewer images than --shards gets one shard an image: said, so that the count asked for and the count
// written never differ silently.
void print_shard_counts(int asked, const io::ImagesSummary& summary) {
  fmt::print("shards: {} train, {} test", summary.train_shards, summary.test_shards);
  if (summary.train_shards < asked || summary.test_shards < asked)
    fmt::print(" (fewer than --shards {}: a split has at most one shard an image)", asked);
  fmt::print("\n");
}

void print_summary(const io::ImagesOptions& options, const io::ImagesSummary& summary, int ranks) {
  int64_t stored = 0;
  for (const int64_t n : summary.train_per_class) stored += n;
  for (const int64_t n : summary.test_per_class) stored += n;
  fmt::print("wrote {}/train and {}/test: {} images of {} classes, {} at {}x{}x{} ({:.1f} GB, {:.0f} KB an image), "
             "in {:.1f} s on {} rank{} x {} threads ({:.0f} images/s, {:.0f} per thread)\n",
             options.arrays.out.string(), options.arrays.out.string(), stored, summary.class_names.size(),
             summary.storage == io::SampleStorage::jpeg ? "stored as JPEG, decoded" : "stored decoded",
             options.channels, options.size.height, options.size.width, summary.stored_bytes / 1e9,
             summary.stored_bytes / 1e3 / static_cast<double>(std::max<int64_t>(stored, 1)), summary.seconds, ranks,
             ranks == 1 ? "" : "s", summary.threads, static_cast<double>(stored) / std::max(summary.seconds, 1e-9),
             static_cast<double>(stored) / std::max(summary.seconds, 1e-9) / (ranks * summary.threads));
  for (std::size_t c = 0; c < summary.class_names.size(); ++c)
    fmt::print("  {:>4} {:<24} {:>8} images{}\n", c, summary.class_names[c], summary.train_per_class[c],
               fmt::format(" + {} test", summary.test_per_class[c]));
  print_shard_counts(options.arrays.shards, summary);
  if (!summary.constant_channels.empty())
    fmt::print("note: channel{} {} held one value in every training pixel: stored with std 1 (normalisation maps it to "
               "0){}\n",
               summary.constant_channels.size() == 1 ? "" : "s", fmt::join(summary.constant_channels, ", "),
               options.channels == 4 && summary.constant_channels.back() == 3
                   ? "; the images have no alpha (it was set opaque): --channels 3 leaves it out"
                   : "");
  if (summary.ignored_files > 0)
    fmt::print("ignored {} file{} not named .jpg, .jpeg or .png, or lying beside the class folders (e.g. '{}'); "
               "convert or move them to include them\n",
               summary.ignored_files, summary.ignored_files == 1 ? "" : "s", summary.ignored_example.string());
  if (summary.skipped_everywhere > 0)
    fmt::print("skipped {} unreadable images (--strict refuses them){}:\n", summary.skipped_everywhere,
               ranks > 1 ? "; each rank lists its own" : "");
}

}  // namespace

int prepare_images(int* argc, char*** argv, io::ImagesOptions options, const ImagesCommandText& text) {
  options.size = parse_size(text.size);
  options.store = parse_store(text.store);
  dist::World world(argc, argv);
  return on_every_rank(world, [&] {
    return with_results_on_stdout([&] {
      // A rank stalled (SIGSTOP, hung I/O) or dead under a launcher that does not end the job would otherwise hold
      // the others in a round's wait until the allocation ends.
      dist::Watchdog watchdog(world.comm(), text.collective_timeout_s, static_cast<int>(ExitCode::fault),
                              {"--collective-timeout",
                               "what this prepare wrote is left as *.tmp files, which no reader takes for a split and "
                               "the next prepare into --out removes; an earlier dataset there is as it was unless the "
                               "final renames had begun",
                               "shard rounds", /*has_steps=*/false});
      if (options.threads <= 0)
        options.threads = world.cores();
      io::PrepareTeam team;
      team.rank = world.rank();
      team.ranks = world.size();
      team.ranks_on_node = world.local_size();
      team.host = world.host();
      team.sum = [&](std::span<int64_t> values) { world.sum_across(values.data(), static_cast<int>(values.size())); };
      team.all_succeed = [&](const std::function<void()>& step) { world.all_succeed(step); };
      io::ImagesSummary summary;
      {
        const dist::WatchedCollectives watched(watchdog);
        train::stall_if_asked("prepare", world.rank());
        summary = io::prepare_images(options, team);
      }
      watchdog.finish();
      if (world.is_root()) print_summary(options, summary, world.size());
      for (const std::string& why : summary.skipped) fmt::print("  {}\n", why);
      return 0;
    });
  });
}

}  // namespace ringtrain::commands
