// Owns writing an encoded (JPEG) split for tests: photos appended in order by io/shard_appender, `per_shard` to a
// shard, each shard's statistics settled and the file renamed as `prepare images` does.
#pragma once
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <vector>

#include "io/hdf5_lock.h"
#include "io/shard_appender.h"
#include "io/shard_writer.h"

namespace ringtrain::io::testing {

struct EncodedPhoto {
  std::vector<uint8_t> jpeg;
  int height, width;
  int32_t label;
};

inline void write_encoded_split(const std::filesystem::path& dir, const DatasetMeta& meta,
                                const std::vector<EncodedPhoto>& photos, std::size_t per_shard) {
  make_split_folder(dir);
  const int count = static_cast<int>((photos.size() + per_shard - 1) / per_shard);
  const Hdf5Lock lock;
  for (int k = 0; k < count; ++k) {
    const std::filesystem::path final_path = dir / shard_file_name(k, count);
    const std::filesystem::path temporary = std::filesystem::path(final_path).concat(".tmp");
    {
      ShardAppender shard({temporary, k, count, 1e6}, meta);
      for (std::size_t i = k * per_shard; i < std::min(photos.size(), (k + 1) * per_shard); ++i)
        shard.append({photos[i].jpeg, photos[i].label, photos[i].height, photos[i].width});
      shard.commit();
    }
    settle_shard_statistics(temporary, meta.mean, meta.stddev);
    std::filesystem::rename(temporary, final_path);
  }
}

}  // namespace ringtrain::io::testing
