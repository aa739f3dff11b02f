// Tests the fusion pass (model/fusion_pass.h) against fusion tables of our choosing: it fuses what a table's rows
// allow, the longest tail first, where their predicates say so, and nothing else; the layers taken on leave the step
// list and the layer order. That fusing changes no number is test_network.cpp's.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "model/graph.h"
#include "tests/core/layer_specs.h"

using namespace ringtrain;
using config::LayerSpec;
using test_specs::layer;

namespace {

// The CPU twin with the fusion table a test gives it.
class TableCpu final : public backend::CpuBackend {
 public:
  explicit TableCpu(std::vector<model::FusionRule> rules) : CpuBackend(1), rules_(std::move(rules)) {}
  std::vector<model::FusionRule> fusion_rules() const override { return rules_; }

 private:
  std::vector<model::FusionRule> rules_;
};

// conv -> bn -> relu -> 2x2 pool (8x8 -> 4x4), a residual block whose body ends in a batch norm, then
// conv -> bn -> relu on 4x4 planes.
std::vector<LayerSpec> model_layers() {
  return {layer("conv2d", 4, 3, 1, 1),
          layer("batchnorm"),
          layer("relu"),
          layer("maxpool", 2),
          test_specs::residual({layer("conv2d", 4, 3, 1, 1), layer("batchnorm")}),
          layer("conv2d", 4, 3, 1, 1),
          layer("batchnorm"),
          layer("relu"),
          layer("flatten"),
          layer("dense", 3)};
}
constexpr model::Shape kInput{2, 2, 8, 8};

// What a graph ran with: each step's layer with what it fused, or "join".
std::vector<std::string> step_names(const model::Graph& g) {
  std::vector<std::string> names;
  for (const model::Step& s : g.steps()) {
    const std::string layer = !s.layer              ? ""
                              : s.layer->fused().empty() ? s.layer->describe()
                                                         : fmt::format("{} {}", s.layer->describe(), s.layer->fused());
    const bool join = s.kind == model::Step::Kind::join;
    names.push_back(!join ? layer : layer.empty() ? "join" : fmt::format("join with {}", layer));
  }
  return names;
}

model::FusionRule rule(std::vector<std::string> absorbs) { return {"batchnorm", std::move(absorbs)}; }

const std::string kJoin(model::kJoin);

TEST(FusionPass, AnEmptyTableFusesNothing) {
  TableCpu none({});
  backend::CpuBackend cpu(1);
  const model::Graph empty_table(model_layers(), none, kInput), apart(model_layers(), cpu, kInput, false);
  EXPECT_EQ(step_names(empty_table), step_names(apart));
  EXPECT_EQ(empty_table.values().size(), apart.values().size());
  EXPECT_EQ(empty_table.layers().size(), apart.layers().size());
}

TEST(FusionPass, EachRowFusesItsTailAndNoOther) {
  TableCpu relu({rule({"relu"})});
  const model::Graph g(model_layers(), relu, kInput);
  EXPECT_EQ(step_names(g), (std::vector<std::string>{"conv2d 3x3x4 s1 p1", "batchnorm + relu, fused", "maxpool 2 s2",
                                                     "conv2d 3x3x4 s1 p1", "batchnorm", "join",
                                                     "conv2d 3x3x4 s1 p1", "batchnorm + relu, fused", "flatten",
                                                     "dense 3"}));
  TableCpu join({rule({kJoin})});
  const model::Graph j(model_layers(), join, kInput);
  EXPECT_EQ(step_names(j), (std::vector<std::string>{"conv2d 3x3x4 s1 p1", "batchnorm", "relu", "maxpool 2 s2",
                                                     "conv2d 3x3x4 s1 p1",
                                                     "join with batchnorm + add shortcut + relu, fused",
                                                     "conv2d 3x3x4 s1 p1", "batchnorm", "relu", "flatten",
                                                     "dense 3"}));
}

// With both the ReLU's row and the ReLU-and-pool one, the first batch norm takes the pool too (its output is the
// pool's 4x4), and the ReLU and pool leave the graph: two steps, two values and two layers fewer than apart.
TEST(FusionPass, TheLongestTailARowAllowsWins) {
  TableCpu both({rule({"relu"}), rule({"relu", "maxpool"}), rule({kJoin})});
  backend::CpuBackend cpu(1);
  const model::Graph g(model_layers(), both, kInput), apart(model_layers(), cpu, kInput, false);
  EXPECT_EQ(step_names(g), (std::vector<std::string>{"conv2d 3x3x4 s1 p1", "batchnorm + relu + maxpool 2 s2, fused",
                                                     "conv2d 3x3x4 s1 p1",
                                                     "join with batchnorm + add shortcut + relu, fused",
                                                     "conv2d 3x3x4 s1 p1", "batchnorm + relu, fused", "flatten",
                                                     "dense 3"}));
  EXPECT_EQ(g.values()[static_cast<size_t>(g.steps()[1].output)].shape, (model::Shape{2, 4, 4, 4}));
  EXPECT_EQ(g.values().size() + 4, apart.values().size());  // relu, pool, second relu, and the join's body output
  EXPECT_EQ(g.layers().size() + 3, apart.layers().size());  // relu, pool, second relu
  for (const model::Layer* l : g.layers()) EXPECT_NE(l->describe(), "relu");
  // Each value's producer and readers agree with the steps after the rewrite.
  for (size_t k = 0; k < g.steps().size(); ++k) {
    const model::Step& s = g.steps()[k];
    EXPECT_EQ(g.values()[static_cast<size_t>(s.output)].producer, static_cast<int>(k));
    for (const int in : s.inputs) {
      const std::vector<int>& readers = g.values()[static_cast<size_t>(in)].consumers;
      EXPECT_NE(std::find(readers.begin(), readers.end(), static_cast<int>(k)), readers.end()) << "step " << k;
    }
  }
  EXPECT_EQ(g.output(), static_cast<int>(g.values().size()) - 1);
}

// A row's predicate sees the producer's input and the element type: here only 8x8 planes fuse.
TEST(FusionPass, ARowFusesOnlyWhereItsPredicateSays) {
  std::vector<model::FusionSite> asked;
  TableCpu wide({{"batchnorm", {"relu"}, [&](const model::FusionSite& site) {
                    asked.push_back(site);
                    return site.input.h == 8;
                  }}});
  const model::Graph g(model_layers(), wide, kInput);
  const std::vector<std::string> names = step_names(g);
  EXPECT_EQ(std::count(names.begin(), names.end(), "batchnorm + relu, fused"), 1);
  EXPECT_EQ(names[1], "batchnorm + relu, fused");
  EXPECT_EQ(names[7], "batchnorm");
  EXPECT_EQ(names[8], "relu");
  ASSERT_EQ(asked.size(), 2u);  // the two batch norms with a ReLU after them
  EXPECT_EQ(asked[0].input, (model::Shape{2, 4, 8, 8}));
  EXPECT_EQ(asked[1].input, (model::Shape{2, 4, 4, 4}));
  EXPECT_EQ(asked[0].data, kernels::ElementType::f32);
}

}  // namespace
