// Owns the membership record's fields; see membership_record.h.
#include "train/membership_record.h"

namespace ringtrain::train {

std::optional<nlohmann::ordered_json> membership_record(const WorldChange& c, const MembershipChange& launcher) {
  if (c.old_ranks == 0) return std::nullopt;  // a fresh start: no checkpoint's world to compare with
  if (c.old_ranks == c.new_ranks && launcher.failed_node.empty()) return std::nullopt;
  const nlohmann::ordered_json failed =
      launcher.failed_node.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(launcher.failed_node);
  const nlohmann::ordered_json lost =
      launcher.seconds_lost < 0 ? nlohmann::ordered_json() : nlohmann::ordered_json(launcher.seconds_lost);
  return nlohmann::ordered_json{
      {"kind", "membership"},
      {"old_ranks", c.old_ranks},
      {"new_ranks", c.new_ranks},
      {"failed_node", failed},
      {"resumed_from_step", c.resumed_from_step},
      {"seconds_lost", lost},
      {"on_shrink", c.on_shrink == config::OnShrink::keep_global_batch ? "keep_global_batch" : "keep_per_rank_batch"},
      {"old_global_batch", c.old_global_batch},
      {"new_global_batch", c.new_global_batch},
      {"accumulate_steps", c.accumulate_steps},
      {"old_peak_lr", c.old_peak_lr},
      {"new_peak_lr", c.new_peak_lr}};
}

}  // namespace ringtrain::train
