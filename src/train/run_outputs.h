// Owns what a run writes into run.dir on rank 0 besides checkpoints and traces: the claim on run.dir, made only
// once data, model and checkpoint are accepted (a job refused for bad input leaves run.dir exactly as it was);
// job.resolved.toml and versions.json; metrics.jsonl, which every record reaches or the run ends with an error
// (every rank alike) that prints the records; and the TensorBoard curves.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "obs/tensorboard_writer.h"
#include "train/metrics_log.h"
#include "train/run_context.h"
#include "train/run_directory.h"
#include "util/versions.h"

namespace ringtrain::train {

using Scalars = std::vector<std::pair<std::string, double>>;

class RunOutputs {
 public:
  explicit RunOutputs(const RunContext& run);  // collective: claims run.dir on rank 0
  RunOutputs(const RunOutputs&) = delete;
  RunOutputs& operator=(const RunOutputs&) = delete;

  // Collective: writes the job and versions files and opens metrics.jsonl, trimmed to the records of the
  // `epochs_done` epochs a resumed checkpoint holds; a resumed run's TensorBoard curves replace the earlier files'
  // after its `steps_done`.
  void open(const util::VersionList& versions, int64_t epochs_done, int64_t steps_done);
  std::string run_id() const;                       // rank 0's; "" on the others
  std::vector<std::string> claim_lines() const;     // what the header says of run.dir
  std::vector<std::string> open_lines() const;      // what the header says of metrics.jsonl
  void record(const nlohmann::ordered_json& record);  // rank 0; the others hold no records
  void curves(int64_t step, const Scalars& values);   // rank 0, when run.tensorboard is on
  void finish();                                      // collective: every held record written, or an agreed error

 private:
  const RunContext& run_;
  std::optional<RunDirectory> dir_;
  std::optional<MetricsLog> metrics_;
  std::optional<obs::TensorBoardWriter> tensorboard_;
};

}  // namespace ringtrain::train
