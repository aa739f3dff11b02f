// Owns what a run says about itself before its first step: the job, the libraries, the model, the data, the
// batch and learning-rate arithmetic, the epoch's length (the header rank 0 prints), and the same facts as the
// job record at the head of metrics.jsonl.
#pragma once
#include <nlohmann/json.hpp>

#include "data/data_plan.h"
#include "model/network.h"
#include "model/weight_average.h"
#include "model/optimizer.h"
#include "train/lr_schedule.h"
#include "train/run_context.h"
#include "train/start_point.h"
#include "util/versions.h"

namespace ringtrain::train {

// What the header describes, set up and accepted.
struct RunSetup {
  model::Network& net;
  model::Optimizer& optimizer;
  DataPlan& data;
  const LearningRateSchedule& lr;
  const StartPoint& start;
  model::WeightAverage* ema = nullptr;  // train.ema_decay's average; null when off
};

void print_header(const RunContext& run, const RunSetup& setup, const util::VersionList& versions);
nlohmann::ordered_json job_record(const RunContext& run, const RunSetup& setup, const std::string& run_id);

}  // namespace ringtrain::train
