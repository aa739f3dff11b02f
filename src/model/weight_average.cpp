// Owns the parameters' moving average; see weight_average.h.
#include "model/weight_average.h"

#include <fmt/format.h>

#include "common/error.h"

namespace ringtrain::model {

WeightAverage::WeightAverage(Network& net, double decay)
    : net_(net), decay_(decay), step_(kernels::ema_step(decay)), ema_(net.backend().allocate(sizeof(float) * static_cast<size_t>(net.param_count()))) {
  restart();
}

void WeightAverage::update() { net_.backend().ema_update(net_.param_count(), step_, net_.params(), ema_.as<float>()); }

void WeightAverage::restart() { net_.backend().copy(Elements(net_.param_count()), net_.params(), ema_.as<void>()); }

void WeightAverage::exchange_with_parameters() {
  Backend& b = net_.backend();
  const Elements n(net_.param_count());
  if (!spare_.as<void>()) spare_ = b.allocate(n.bytes());
  b.copy(n, net_.params(), spare_.as<void>());
  b.copy(n, ema_.as<void>(), net_.params());
  b.copy(n, spare_.as<void>(), ema_.as<void>());
}

std::vector<float> WeightAverage::read() {
  std::vector<float> values(static_cast<size_t>(net_.param_count()));
  net_.backend().to_host(values.data(), ema_.as<void>(), values.size() * sizeof(float));
  return values;
}

void WeightAverage::load(const std::vector<float>& values) {
  if (static_cast<int64_t>(values.size()) != net_.param_count())
    throw Error(ExitCode::internal, fmt::format("the weights' average holds {} values, the model {} parameters",
                                                values.size(), net_.param_count()));
  net_.backend().to_device(ema_.as<void>(), values.data(), values.size() * sizeof(float));
}

}  // namespace ringtrain::model
