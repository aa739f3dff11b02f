// Owns the pass of `prepare images`: the plan (io/image_split_plan), the storage chosen, each of this rank's
// shards streamed through the worker threads into a ShardAppender, the statistics summed across ranks and set, and
// the shards renamed into place together; on any failure every rank removes what it wrote.
#include "io/prepare_images.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <new>
#include <stdexcept>
#include <thread>

#include "common/crc32c.h"
#include "common/error.h"
#include "common/host_memory.h"
#include "io/hdf5_lock.h"
#include "io/image_decode.h"
#include "io/image_split_plan.h"
#include "io/jpeg_window.h"
#include "io/ordered_workers.h"
#include "io/shard_appender.h"
#include "io/shard_header.h"
#include "io/shard_writer.h"
#include "io/stored_image.h"

namespace ringtrain::io {
namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

struct Item {
  StoredImage image;
  ChannelSums sums;
  std::string error;
};

// This rank's part of the pass.
struct RankOutput {
  std::vector<std::pair<fs::path, fs::path>> shards;  // temporary name, final name
  std::vector<fs::path> renamed;                      // the final names this rank has put in place
  ChannelSums sums;
  std::vector<int64_t> train_per_class, test_per_class;
  std::vector<std::string> skipped;
  int64_t stored_bytes = 0;
};

// Rank 0's images against its share, at most twice a second, with the rate and the time left.
class Progress {
 public:
  Progress(bool shown, int64_t total) : shown_(shown), total_(total) {}
  ~Progress() {  // a pass cut short by an error ends its progress line, so the error starts on its own
    if (printed_ != Clock::time_point{} && done_ < total_) std::fprintf(stderr, "\n");
  }
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  void tick(const std::string& where) {
    ++done_;
    const auto now = Clock::now();
    if (!shown_ || (now - printed_ < std::chrono::milliseconds(500) && done_ < total_)) return;
    printed_ = now;
    const double seconds = std::chrono::duration<double>(now - start_).count();
    const double rate = static_cast<double>(done_) / std::max(seconds, 1e-3);
    std::fprintf(stderr, "\rprepare images: %s, %lld/%lld images of rank 0's (%.0f/s), ETA %.0f s   ", where.c_str(),
                 static_cast<long long>(done_), static_cast<long long>(total_), rate,
                 static_cast<double>(total_ - done_) / std::max(rate, 1e-9));
    if (done_ == total_) std::fprintf(stderr, "\n");
  }

 private:
  bool shown_;
  int64_t total_, done_ = 0;
  Clock::time_point start_ = Clock::now(), printed_{};
};

void check_options(const ImagesOptions& options, const PrepareTeam& team) {
  if (options.size.height < 1 || options.size.width < 1)
    throw UsageError(fmt::format("--size {}x{} needs positive sides", options.size.height, options.size.width));
  if (!convertible_channels(options.channels))
    throw UsageError(fmt::format("--channels {} is not 1 (gray), 3 (RGB) or 4 (RGBA)", options.channels));
  if (options.channels == 4 && options.store == ImageStore::jpeg)
    throw UsageError("--store jpeg holds 1 or 3 channels; --channels 4 (RGBA) needs --store raw");
  // Photos stored smaller than the samples would make every training and evaluation crop an enlargement.
  if (options.max_side > 0 && options.max_side < std::max(options.size.height, options.size.width))
    throw UsageError(fmt::format("--max-side {} is below --size {}x{}: every stored photo would be smaller than the "
                                 "samples cut from it; give --max-side at least {} (FFCV and the ImageNet recipes keep "
                                 "256-512 for 224)",
                                 options.max_side, options.size.height, options.size.width,
                                 std::max(options.size.height, options.size.width)));
  if (options.max_side < 0)
    throw UsageError(fmt::format("--max-side {} is negative; give 0 (keep every JPEG as it is) or the longest shorter "
                                 "side to keep (e.g. 512)",
                                 options.max_side));
  if (options.quality < 1 || options.quality > 100)
    throw UsageError(fmt::format("--quality {} is not within 1..100 (90 is the default)", options.quality));
  const double values = static_cast<double>(options.channels) * options.size.height * options.size.width;
  if (values > static_cast<double>(detail::kMaxSampleValues))
    throw UsageError(fmt::format("--size {}x{} makes samples of {:.3g} values; ringtrain reads samples of at most {} "
                                 "values (e.g. --size 224)",
                                 options.size.height, options.size.width, values, detail::kMaxSampleValues));
  // The worker window (4 samples a thread) and a shard's chunk of raw samples are what a sample size costs.
  const double needed = values * (4.0 * std::max(options.threads, 1) + 64);
  if (const RankMemoryShare share = rank_memory_share(memory_of_process(), team.ranks_on_node, team.host);
      share.bytes > 0 && needed > 0.5 * share.bytes)
    throw UsageError(fmt::format("--size {}x{} with {} threads needs {} of memory for the samples in flight, more than "
                                 "half of the {} that is {} (the rest is the decoders' and the system's); use a "
                                 "smaller --size, fewer --threads{}{}",
                                 options.size.height, options.size.width, options.threads, byte_size_text(needed),
                                 byte_size_text(share.bytes), share.text,
                                 team.ranks_on_node > 1 ? " or fewer ranks a node" : "", share.limit.or_remedy()));
}

// Automatic: JPEG bytes when the photos are larger than the training size (the random crop is then taken from the
// photo), decoded samples otherwise. Judged from the headers of the JPEGs among 16 training images spread evenly over
// the folder's order, so that neither --shards nor the shuffle moves the choice; the ranks then agree on it.
SampleStorage resolve_storage(const ImagesOptions& options, const ImagesPlan& plan) {
  if (options.store == ImageStore::raw) return SampleStorage::raw;
  if (options.channels == 4) return SampleStorage::raw;  // --store jpeg was refused with it (check_options)
  if (options.store == ImageStore::jpeg) return SampleStorage::jpeg;
  std::vector<uint32_t> files;
  for (const PlannedShard& shard : plan.train.shards) files.insert(files.end(), shard.files.begin(), shard.files.end());
  std::sort(files.begin(), files.end());
  // 16 positions spread evenly over the whole list (a PNG among them is left out of the median).
  const std::size_t stride = std::max<std::size_t>(1, files.size() / 16);
  std::vector<int> shorter;
  for (std::size_t i = 0; i < files.size() && shorter.size() < 16; i += stride) {
    const uint32_t file = files[i];
    try {
      const std::vector<uint8_t> data = read_image_file(plan.train.folder->path(file));
      if (!is_jpeg(data)) continue;
      const JpegHeader header = read_jpeg_header(data);
      shorter.push_back(std::min(header.height, header.width));
    } catch (const DataError&) {
    }
  }
  if (shorter.empty()) return SampleStorage::raw;
  std::nth_element(shorter.begin(), shorter.begin() + static_cast<std::ptrdiff_t>(shorter.size() / 2), shorter.end());
  return shorter[shorter.size() / 2] > std::max(options.size.height, options.size.width) ? SampleStorage::jpeg
                                                                                          : SampleStorage::raw;
}

// The room a shard reserves up front (a too-small guess only moves a full disk's error from the start to the write,
// which also leaves nothing behind). JPEG samples: the sources' bytes, or where --max-side re-encodes them, at most
// a 4:3 photo of that shorter side at 0.75 bytes a pixel each (libjpeg's quality 90 takes 0.3-0.5 on photos), so
// that a folder shrunk tenfold does not ask for its original size.
double expected_shard_bytes(const SplitPlan& split, const PlannedShard& shard, const DatasetMeta& meta,
                            const StoreOptions& store) {
  const auto files = static_cast<double>(shard.files.size());
  double data = files * static_cast<double>(meta.shape.elements());
  if (meta.storage == SampleStorage::jpeg) {
    const double side = store.max_side, source = split.source_bytes(shard);
    data = store.max_side > 0 ? std::min(source, files * side * side * 4.0 / 3.0 * 0.75) : source;
  }
  return data + files * 24 + 64.0 * 1024;
}

struct PassContext {
  const ImagesOptions& options;
  const StoreOptions& store;
  const DatasetMeta& meta;
  int threads = 1;
  RankOutput& output;
  Progress& progress;
  uint32_t plan_fingerprint;
  // --overwrite onto an earlier dataset, which stays until this one is whole: a disk that held one may not hold both.
  bool keeps_earlier = false;
};

// The shard's images decoded on the worker threads, appended in order under `temporary`, then committed.
void fill_shard(const SplitPlan& split, const PlannedShard& shard, const fs::path& temporary,
                std::vector<int64_t>& per_class, PassContext& pass) {
  DatasetMeta meta = pass.meta;
  meta.provenance = fmt::format("{} of {}", split.name, meta.provenance);
  // Every rank's shards of the split carry one id: the plan's fingerprint, which the ranks agreed on.
  meta.split_id = fmt::format("{}-{:08x}", split.name, pass.plan_fingerprint);
  const Hdf5Lock lock;
  ShardAppender shard_file({temporary, shard.index, static_cast<int>(split.shards.size()),
                            expected_shard_bytes(split, shard, meta, pass.store)},
                           meta);
  const std::string where = fmt::format("{} shard {} of {}", split.name, shard.index + 1, split.shards.size());
  const int channels = meta.shape.channels;
  ordered_map<Item>(
      static_cast<int64_t>(shard.files.size()), pass.threads, 4 * pass.threads,
      [&](int64_t i, Item& item) {
        item.error.clear();
        item.sums = ChannelSums(channels);
        const fs::path path = split.folder->path(shard.files[static_cast<std::size_t>(i)]);
        try {
          store_image(path, pass.store, item.image, item.sums);
        } catch (const DataError& e) {
          item.error = e.what();
        } catch (const std::bad_alloc&) {  // not the image's fault alone: the others' decodes share the memory
          throw DataError(fmt::format("'{}': no memory was left to decode it with {} thread(s) decoding at once; "
                                      "prepare with fewer --threads (or fewer ranks a node)",
                                      path.string(), pass.threads));
        }
      },
      [&](int64_t i, Item& item) {
        const int32_t label = split.folder->label(shard.files[static_cast<std::size_t>(i)]);
        if (!item.error.empty() && pass.options.strict)
          throw DataError(fmt::format("{} (--strict: stopped, nothing written; drop --strict to skip and list "
                                      "unreadable images)",
                                      item.error));
        if (item.error.empty()) {
          shard_file.append({item.image.bytes, label, item.image.height, item.image.width});
          if (split.name == "train") pass.output.sums.add(item.sums);
          ++per_class[static_cast<std::size_t>(label)];
          pass.output.stored_bytes += static_cast<int64_t>(item.image.bytes.size());
        } else {
          pass.output.skipped.push_back(item.error);
        }
        pass.progress.tick(where);
      });
  if (shard_file.samples() == 0 && !shard.files.empty())
    throw DataError(fmt::format("{} would hold no sample: none of its {} image(s) decodes ({}); remove the "
                                "broken images, or prepare again with fewer --shards so that they share a shard with "
                                "images that decode",
                                where, shard.files.size(), pass.output.skipped.back()));
  shard_file.commit();
}

// A full disk or HDF5's failure becomes the split's DataError with its remedy (exit 4, as every other refusal of
// a prepare), not a library error or an internal one.
void write_shard(const SplitPlan& split, const PlannedShard& shard, std::vector<int64_t>& per_class, PassContext& pass) {
  const fs::path final_path = split.dir / shard_file_name(shard.index, static_cast<int>(split.shards.size()));
  const fs::path temporary = fs::path(final_path).concat(".tmp");
  pass.output.shards.emplace_back(temporary, final_path);
  try {
    fill_shard(split, shard, temporary, per_class, pass);
  } catch (const DataError&) {
    throw;
  } catch (const std::logic_error&) {
    throw;  // a bug of ringtrain's, not the shard's: exit 1
  } catch (const WorkerStartError& e) {
    throw DataError(fmt::format("{}: the user's or the node's limit on threads is reached; prepare with fewer "
                                "--threads (or fewer ranks a node)",
                                e.what()));
  } catch (const std::exception& e) {
    throw DataError(fmt::format("cannot write split '{}': {}{}", split.dir.string(), why_shard_failed(temporary, split.dir, e),
                                pass.keeps_earlier ? "; with --overwrite the earlier dataset in --out is kept until this "
                                                     "one is whole, so both need room: remove its train/ and test/ "
                                                     "first to prepare in their place"
                                                   : ""));
  }
}

void remove_written(const RankOutput& output) {
  std::error_code ignored;  // best effort: the failure that brought us here is what the user needs
  for (const auto& [temporary, final_path] : output.shards) fs::remove(temporary, ignored);
  for (const fs::path& final_path : output.renamed) fs::remove(final_path, ignored);  // an earlier shard of that name went
}

// The folders of `out` this prepare would create, deepest first, so a failed one can take back what it made.
std::vector<fs::path> folders_to_create(const ImagesPlan& plan, const fs::path& out) {
  std::vector<fs::path> created;
  std::error_code ignored;
  for (const fs::path& dir : {plan.train.dir, plan.test.dir, out})
    if (!fs::exists(dir, ignored)) created.push_back(dir);
  return created;
}

void remove_created(const std::vector<fs::path>& folders) {
  std::error_code ignored;
  for (const fs::path& dir : folders) fs::remove(dir, ignored);  // only empty ones go: anything else is not ours
}

// Every class the folders list must have kept a training image; the refusal names the class folder and, where this
// rank skipped some, the first reason.
void check_classes(const ImagesPlan& plan, const std::vector<int64_t>& train, const std::vector<std::string>& skipped) {
  for (std::size_t c = 0; c < plan.class_names.size(); ++c) {
    if (train[c] != 0) continue;
    const fs::path folder = plan.train.folder->root / plan.class_names[c];
    // A skip names its file in quotes: the first of this class's, if this rank met one.
    const std::string inside = fmt::format("'{}/", folder.string());
    const auto first = std::find_if(skipped.begin(), skipped.end(),
                                    [&](const std::string& why) { return why.find(inside) != std::string::npos; });
    throw DataError(fmt::format("no training image of class folder '{}' decodes{}; replace its broken images or "
                                "remove the folder",
                                folder.string(), first == skipped.end() ? "" : fmt::format(" (the first skipped: {})", *first)));
  }
}

void set_statistics(const ChannelSums& sums, DatasetMeta& meta) {
  meta.mean.clear();
  meta.stddev.clear();
  const auto count = static_cast<double>(sums.pixels);
  for (std::size_t c = 0; c < sums.sum.size(); ++c) {
    const double mean = static_cast<double>(sums.sum[c]) / count;
    meta.mean.push_back(static_cast<float>(mean));
    meta.stddev.push_back(
        static_cast<float>(std::sqrt(std::max(0.0, static_cast<double>(sums.sum_squares[c]) / count - mean * mean))));
  }
}

// The sums, counts and bytes of every rank, summed across ranks, back into `output`.
int64_t sum_across_ranks(RankOutput& output, const PrepareTeam& team) {
  std::vector<int64_t> totals = output.sums.sum;
  totals.insert(totals.end(), output.sums.sum_squares.begin(), output.sums.sum_squares.end());
  totals.push_back(output.sums.pixels);
  totals.insert(totals.end(), output.train_per_class.begin(), output.train_per_class.end());
  totals.insert(totals.end(), output.test_per_class.begin(), output.test_per_class.end());
  totals.push_back(static_cast<int64_t>(output.skipped.size()));
  totals.push_back(output.stored_bytes);
  team.sum(totals);
  auto at = totals.begin();
  const auto take = [&](std::vector<int64_t>& into) {
    std::copy_n(at, into.size(), into.begin());
    at += static_cast<std::ptrdiff_t>(into.size());
  };
  take(output.sums.sum);
  take(output.sums.sum_squares);
  output.sums.pixels = *at++;
  take(output.train_per_class);
  take(output.test_per_class);
  const int64_t skipped = *at++;
  output.stored_bytes = *at;
  return skipped;
}

// The split's shards in rounds of one shard a rank (round-robin, shards_of_rank), the ranks agreeing after each:
// a rank that fails (--strict, a full disk) stops the others within a shard, not after their whole share.
void write_split(const SplitPlan& split, std::vector<int64_t>& per_class, PassContext& pass, const PrepareTeam& team) {
  const std::vector<const PlannedShard*> mine = shards_of_rank(split, team.rank, team.ranks);
  const std::size_t rounds = (split.shards.size() + static_cast<std::size_t>(team.ranks) - 1) /
                             static_cast<std::size_t>(team.ranks);
  for (std::size_t round = 0; round < rounds; ++round)
    team.all_succeed([&] {
      if (round < mine.size()) write_shard(split, *mine[round], per_class, pass);
    });
}

void write_splits(const ImagesPlan& plan, PassContext& pass, const PrepareTeam& team) {
  const auto classes = plan.class_names.size();
  pass.output.train_per_class.assign(classes, 0);
  pass.output.test_per_class.assign(classes, 0);
  write_split(plan.train, pass.output.train_per_class, pass, team);
  write_split(plan.test, pass.output.test_per_class, pass, team);
}

void rename_shards_in(const fs::path& dir, RankOutput& output) {
  for (const auto& [temporary, final_path] : output.shards) {
    if (final_path.parent_path() != dir) continue;
    std::error_code error;
    fs::rename(temporary, final_path, error);
    if (error)
      throw DataError(fmt::format("cannot rename '{}' to '{}': {}", temporary.string(), final_path.string(),
                                  error.message()));
    output.renamed.push_back(final_path);
  }
}

// The last step, once every shard is written and the classes checked: the statistics go into every shard, the
// earlier prepare's shards go (only now: a failure or a kill before leaves them as they were), then every rank puts
// its test shards in place and, only once all have, its train shards. A kill among the renames leaves the train
// split short of shards, so nothing reads as a whole pair that is not one.
void put_pair_in_place(const ImagesPlan& plan, const DatasetMeta& meta, RankOutput& output, const PrepareTeam& team) {
  team.all_succeed([&] {
    for (const auto& shard : output.shards) settle_shard_statistics(shard.first, meta.mean, meta.stddev);
  });
  team.all_succeed([&] {
    if (team.rank != 0) return;
    remove_earlier_shards(plan.train.dir);
    remove_earlier_shards(plan.test.dir);
  });
  team.all_succeed([&] { rename_shards_in(plan.test.dir, output); });
  team.all_succeed([&] { rename_shards_in(plan.train.dir, output); });
}

DatasetMeta dataset_meta(const ImagesOptions& options, const ImagesPlan& plan, SampleStorage storage) {
  DatasetMeta meta;
  meta.shape = {options.channels, options.size.height, options.size.width};
  meta.num_classes = static_cast<int>(plan.class_names.size());
  meta.mean.assign(static_cast<std::size_t>(options.channels), 0.0f);
  meta.stddev.assign(static_cast<std::size_t>(options.channels), 0.0f);
  meta.class_names = plan.class_names;
  meta.storage = storage;
  meta.provenance = fmt::format("image folder '{}' ({}x{}, {} channels, {}); test: {}", options.source.string(),
                                options.size.height, options.size.width, options.channels,
                                storage == SampleStorage::jpeg ? "stored as JPEG" : "stored decoded", plan.test_origin);
  return meta;
}

// Every rank lists the folders itself. A listing that differs between ranks (a file copied in during the launch, a
// network file system's stale cache) would write shards of different plans into one dataset, with samples twice,
// missing or under another label: the ranks compare a CRC of their plans (class names, and each shard's files and
// labels in order) and refuse to start on any difference.
uint32_t plan_fingerprint(const ImagesPlan& plan) {
  uint32_t crc = 0;
  const auto add = [&](const std::string& text) { crc = crc32c_extend(crc, text.c_str(), text.size() + 1); };
  for (const std::string& name : plan.class_names) add(name);
  for (const SplitPlan* split : {&plan.train, &plan.test}) {
    add(split->name);
    if (!split->folder) continue;
    for (const PlannedShard& shard : split->shards) {
      add(std::to_string(shard.index));
      for (const uint32_t file : shard.files)
        add(fmt::format("{} {}", split->folder->path(file).string(), split->folder->label(file)));
    }
  }
  return crc;
}

// Collective: every rank holds `mine` alike (a sum of the ranks' values is ranks x each one's).
bool same_on_every_rank(int64_t mine, const PrepareTeam& team) {
  int64_t sum = mine;
  team.sum(std::span(&sum, 1));
  return sum == mine * team.ranks;
}

// Collective, after rank 0 made the split folders: every rank writes its own shards into them, and a --out on
// node-local storage (a folder of that name on every node) would end in a split of only some ranks' shards on each
// node, each looking whole. Rank 0 leaves a marker of a name no earlier run used that every rank must see. A rank on
// another node may see a new folder only once its file-system client's cache of the parent times out (NFS: up to a
// minute with the default actimeo), so the ranks look again every second, agreeing each time, for up to 90 s: no
// single wait comes near --collective-timeout.
void refuse_unshared_out(const ImagesPlan& plan, const fs::path& out, const PrepareTeam& team) {
  if (team.ranks == 1) return;
  int64_t nonce = 0;
  if (team.rank == 0)
    nonce = (static_cast<int64_t>(::getpid()) << 40) ^ std::chrono::system_clock::now().time_since_epoch().count();
  team.sum(std::span(&nonce, 1));  // only rank 0's is non-zero
  const fs::path marker = plan.train.dir / fmt::format(".prepare-marker-{:016x}", static_cast<uint64_t>(nonce));
  std::error_code ignored;
  try {
    team.all_succeed([&] {
      if (team.rank == 0 && !std::ofstream(marker))
        throw DataError(fmt::format("cannot write in '{}' ({}); check --out's permissions", plan.train.dir.string(),
                                    std::strerror(errno)));
    });
    for (int look = 0;; ++look) {
      int64_t blind = fs::exists(marker, ignored) ? 0 : 1;
      team.sum(std::span(&blind, 1));
      if (blind == 0) break;
      if (look >= 90)
        team.all_succeed([&] {
          if (!fs::exists(marker, ignored))
            throw DataError(fmt::format("--out '{}' is not one folder every rank sees: rank {} on {} does not see the "
                                        "file rank 0 wrote in it 90 s ago ({}); give --out a folder on a file system "
                                        "every node shares (a parallel or network file system, not node-local storage)",
                                        out.string(), team.rank, team.host, marker.filename().string()));
        });
      std::this_thread::sleep_for(std::chrono::seconds(1));
    }
  } catch (...) {
    if (team.rank == 0) fs::remove(marker, ignored);
    throw;
  }
  if (team.rank == 0) fs::remove(marker, ignored);
}

void refuse_different_plans(const ImagesPlan& plan, SampleStorage storage, const ImagesOptions& options,
                            const PrepareTeam& team) {
  const bool same_images = same_on_every_rank(plan_fingerprint(plan), team);
  const bool same_storage = same_on_every_rank(static_cast<int64_t>(storage), team);
  team.all_succeed([&] {
    if (same_images && !same_storage)
      throw DataError(fmt::format("the ranks judged the storage of '{}' differently (some could not read the photos "
                                  "the choice looks at); pass --store jpeg or --store raw",
                                  options.source.string()));
    if (!same_images)
      throw DataError(fmt::format("the ranks found different images in '{}'{}: files were added or removed while "
                                  "prepare started, or a node sees a stale listing of the folder; run prepare again "
                                  "once the folder is settled and the same on every node",
                                  options.source.string(),
                                  options.test_source.empty() ? "" : fmt::format(" or '{}'", options.test_source.string())));
  });
}

}  // namespace

ImagesSummary prepare_images(const ImagesOptions& options, const PrepareTeam& team) {
  const auto start = Clock::now();
  ImagesPlan plan;
  SampleStorage storage = SampleStorage::raw;
  team.all_succeed([&] {
    check_options(options, team);
    if (options.test_source.empty()) check_test_fraction(options.arrays);
    refuse_existing_splits({options.arrays.out / "train", options.arrays.out / "test"}, options.arrays.overwrite);
    plan = plan_images({options.source, options.test_source, options.arrays.out, options.arrays.test_fraction,
                        options.arrays.seed, options.arrays.shards});
    storage = resolve_storage(options, plan);
  });
  if (team.ranks > 1) refuse_different_plans(plan, storage, options, team);
  const std::vector<fs::path> created = folders_to_create(plan, options.arrays.out);
  DatasetMeta meta = dataset_meta(options, plan, storage);
  const StoreOptions store{storage, meta.shape, options.max_side, options.quality, !options.keep_jpeg_bytes};
  const int threads = options.threads > 0 ? options.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  RankOutput output{{}, {}, ChannelSums(options.channels), {}, {}, {}, 0};
  int64_t mine = 0;
  for (const SplitPlan* split : {&plan.train, &plan.test})
    for (const PlannedShard* shard : shards_of_rank(*split, team.rank, team.ranks))
      mine += static_cast<int64_t>(shard->files.size());
  Progress progress(team.rank == 0, mine);
  PassContext pass{options, store, meta, threads, output, progress, plan_fingerprint(plan),
                   options.arrays.overwrite &&
                       (detail::holds_shard_files(plan.train.dir) || detail::holds_shard_files(plan.test.dir))};
  ImagesSummary summary;
  try {
    team.all_succeed([&] {
      if (team.rank != 0) return;
      make_split_folder(plan.train.dir);
      make_split_folder(plan.test.dir);
    });
    refuse_unshared_out(plan, options.arrays.out, team);
    team.all_succeed([&] { write_splits(plan, pass, team); });
    summary.skipped_everywhere = sum_across_ranks(output, team);
    team.all_succeed([&] {
      check_classes(plan, output.train_per_class, output.skipped);
      set_statistics(output.sums, meta);
      summary.constant_channels = give_constant_channels_unit_std(meta);
    });
    put_pair_in_place(plan, meta, output, team);
  } catch (...) {
    // Every rank removes its own shards; once all have (the agreement is a barrier), rank 0 removes the folders
    // this prepare made, so a failed prepare leaves the folders that were there before it, with --overwrite their
    // earlier shards as they were unless it failed while putting its own in place.
    remove_written(output);
    try {
      team.all_succeed([] {});
    } catch (...) {
    }
    if (team.rank == 0) remove_created(created);
    throw;
  }
  summary.class_names = plan.class_names;
  summary.train_per_class = output.train_per_class;
  summary.test_per_class = output.test_per_class;
  summary.skipped = output.skipped;
  for (const SplitPlan* split : {&plan.train, &plan.test})
    if (split->folder && (split == &plan.train || split->folder->root != plan.train.folder->root)) {
      if (summary.ignored_files == 0) summary.ignored_example = split->folder->ignored_example;
      summary.ignored_files += split->folder->ignored_files;
    }
  summary.storage = storage;
  summary.stored_bytes = static_cast<double>(output.stored_bytes);
  summary.train_shards = static_cast<int>(plan.train.shards.size());
  summary.test_shards = static_cast<int>(plan.test.shards.size());
  summary.threads = threads;
  summary.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return summary;
}

}  // namespace ringtrain::io
