// The mixture-of-experts layer (moe.h): every token reaches exactly its top-k experts however
// unevenly the router sends them (dropless), with the router's renormalised weights; the
// load-balancing loss is Switch Transformer's; its gradient joins through WithAuxiliaryLoss; and
// expert parallelism over 4 ranks (threads meeting through Gloo on loopback) computes what each
// rank computes alone.
#include "worker/engine/model/moe.h"

#include <map>
#include <string>
#include <thread>
#include <vector>

#include "worker/engine/train/shard_groups.h"

// LibTorch brings glog, whose CHECK aborts instead of recording a failure: use Catch's.
#undef CHECK
#include <catch2/catch.hpp>

#include "tests/support/free_port.h"

namespace tessera::engine {
namespace moe_test {

constexpr int64_t kDModel = 16, kHidden = 24, kExperts = 4;

MoeFeedForward Layer(int64_t top_k) {
  torch::manual_seed(31);
  MoeFeedForward layer(kDModel, kHidden, kExperts, top_k);
  torch::NoGradGuard no_grad;
  for (auto& p : layer->parameters()) p.normal_(0.0, 0.3);
  return layer;
}

// Token by token, no batching: y_t = sum over t's top-k experts e of w_e * expert_e(x_t).
torch::Tensor Reference(MoeFeedForward& layer, const torch::Tensor& x, int64_t top_k) {
  const auto params = layer->named_parameters();
  const auto tokens = x.reshape({-1, kDModel});
  std::vector<torch::Tensor> rows;
  for (int64_t t = 0; t < tokens.size(0); ++t) {
    const auto token = tokens[t];
    const auto probabilities = torch::softmax(torch::mv(params["router.weight"], token), 0);
    const auto [p, e] = probabilities.topk(top_k);
    auto y = torch::zeros({kDModel});
    for (int64_t j = 0; j < top_k; ++j) {
      const int64_t expert = e[j].item<int64_t>();
      const auto h =
          torch::gelu(torch::mv(params["fc_weight"][expert], token) + params["fc_bias"][expert]);
      const auto out =
          torch::mv(params["fc_proj_weight"][expert], h) + params["fc_proj_bias"][expert];
      y = y + out * (p[j] / p.sum());
    }
    rows.push_back(y);
  }
  return torch::stack(rows).view(x.sizes());
}

TEST_CASE("every token reaches its top-k experts, weighted as the router says, none dropped") {
  torch::manual_seed(32);
  const auto x = torch::randn({3, 7, kDModel});
  for (int64_t top_k : {1, 2, 4}) {
    INFO("top " << top_k);
    MoeFeedForward layer = Layer(top_k);
    const MoeOutput out = layer->forward(x);
    CHECK(out.y.sizes() == x.sizes());
    CHECK(torch::allclose(out.y, Reference(layer, x, top_k), 1e-5, 1e-6));
    CHECK(out.tokens_per_expert.sum().item<int64_t>() == 21 * top_k);
  }
}

TEST_CASE("an expert that the router sends every token computes them all: no capacity") {
  MoeFeedForward layer = Layer(1);
  {
    torch::NoGradGuard no_grad;
    layer->named_parameters()["router.weight"].zero_();
    layer->named_parameters()["router.weight"][2].fill_(5.0);
  }
  const auto x = torch::rand({2, 9, kDModel}) + 0.1;  // positive: expert 2 scores highest
  const MoeOutput out = layer->forward(x);
  const std::vector<int64_t> counts(out.tokens_per_expert.data_ptr<int64_t>(),
                                    out.tokens_per_expert.data_ptr<int64_t>() + kExperts);
  CHECK(counts == std::vector<int64_t>{0, 0, 18, 0});
  CHECK(torch::allclose(out.y, Reference(layer, x, 1), 1e-5, 1e-6));
  CHECK(out.y.abs().min().item<double>() > 0);  // every token has its output
  // All to one expert is the worst balance: the loss approaches the number of experts.
  CHECK(out.load_balancing_loss.item<double>() > kExperts * 0.99);
}

TEST_CASE("the load-balancing loss is 1 for an even router, and its gradient reaches the router") {
  MoeFeedForward layer = Layer(2);
  torch::manual_seed(33);
  const auto x = torch::randn({2, 8, kDModel});
  {
    torch::NoGradGuard no_grad;
    layer->named_parameters()["router.weight"].zero_();
  }
  CHECK(layer->forward(x).load_balancing_loss.item<double>() == Approx(1.0).epsilon(1e-6));

  // WithAuxiliaryLoss: y's value unchanged, and backward as if scale * loss had been added.
  MoeFeedForward a = Layer(2), b = Layer(2);
  const MoeOutput out_a = a->forward(x);
  const auto y = WithAuxiliaryLoss(out_a.y, out_a.load_balancing_loss, 0.25);
  CHECK(torch::equal(y, out_a.y));
  (y * y).sum().backward();
  const MoeOutput out_b = b->forward(x);
  ((out_b.y * out_b.y).sum() + 0.25 * out_b.load_balancing_loss).backward();
  const auto router_a = a->named_parameters()["router.weight"].grad();
  const auto router_b = b->named_parameters()["router.weight"].grad();
  CHECK(torch::allclose(router_a, router_b, 1e-6, 1e-7));
  // Without the loss the router's gradient differs: the check above sees it.
  MoeFeedForward c = Layer(2);
  const MoeOutput out_c = c->forward(x);
  (out_c.y * out_c.y).sum().backward();
  CHECK_FALSE(torch::allclose(c->named_parameters()["router.weight"].grad(), router_b, 1e-6, 1e-7));
}

struct RankPass {
  torch::Tensor y, tokens_per_expert;
  std::map<std::string, torch::Tensor> grads;
};

// Each of 4 ranks (threads) runs forward and backward of its own copy of one layer (8 experts,
// top 2) on its own tokens, its experts split over groups of `expert_ranks`.
std::vector<RankPass> PassOnFourRanks(int64_t expert_ranks) {
  constexpr int kWorld = 4;
  std::vector<MoeFeedForward> layers;
  std::vector<torch::Tensor> inputs;
  for (int r = 0; r < kWorld; ++r) {
    torch::manual_seed(41);
    layers.emplace_back(kDModel, kHidden, 8, 2);
    torch::NoGradGuard no_grad;
    for (auto& p : layers.back()->parameters()) p.normal_(0.0, 0.3);
    // Uneven shares: rank r has 3 + 4r tokens.
    torch::manual_seed(42 + r);
    inputs.push_back(torch::randn({1, 3 + 4 * r, kDModel}));
  }
  TrainConfig config;
  config.model.moe_num_experts = 8;
  config.model.moe_top_k = 2;
  config.model.moe_world_size = expert_ranks;
  const int port = testing::FreePort();
  std::vector<RankPass> out(kWorld);
  std::vector<std::string> errors(kWorld);
  std::vector<std::thread> ranks;
  for (int r = 0; r < kWorld; ++r) {
    ranks.emplace_back([&, r] {
      RankContext ctx;
      ctx.rank = r;
      ctx.world_size = kWorld;
      ctx.local_world_size = kWorld;
      ctx.master_port = port;
      auto groups = ShardGroups::Join(config, ctx, /*cuda=*/false);
      if (!groups.ok()) {
        errors[static_cast<size_t>(r)] = groups.status().ToString();
        return;
      }
      MoeFeedForward& layer = layers[static_cast<size_t>(r)];
      layer->SetExpertGroup(&(*groups)->expert_group());
      const MoeOutput o = layer->forward(inputs[static_cast<size_t>(r)]);
      (o.y * o.y).sum().backward();
      RankPass& mine = out[static_cast<size_t>(r)];
      mine.y = o.y.detach();
      mine.tokens_per_expert = o.tokens_per_expert;
      for (const auto& p : layer->named_parameters())
        mine.grads[p.key()] = p.value().grad().clone();
      (*groups)->world().Barrier();  // rank 0 serves the store: it leaves last
    });
  }
  for (auto& thread : ranks) thread.join();
  for (const auto& e : errors) REQUIRE(e.empty());
  return out;
}

TEST_CASE(
    "expert parallelism over 4 ranks gives each rank what it computes alone, and the ranks' "
    "gradients sum to the same") {
  const std::vector<RankPass> alone = PassOnFourRanks(1);
  for (const int64_t expert_ranks : {2, 4}) {
    INFO("expert groups of " << expert_ranks << " ranks");
    const std::vector<RankPass> split = PassOnFourRanks(expert_ranks);
    for (size_t r = 0; r < 4; ++r) {
      INFO("rank " << r);
      CHECK(torch::equal(split[r].tokens_per_expert, alone[r].tokens_per_expert));
      CHECK(torch::allclose(split[r].y, alone[r].y, 1e-5, 1e-6));
    }
    REQUIRE(alone[0].grads.size() == 5);
    for (const auto& [name, grad] : alone[0].grads) {
      INFO("parameter " << name);
      torch::Tensor want = torch::zeros_like(grad), got = torch::zeros_like(grad);
      for (size_t r = 0; r < 4; ++r) {
        want += alone[r].grads.at(name);
        got += split[r].grads.at(name);
      }
      CHECK(got.abs().sum().item<double>() > 0);
      // Other batch shapes, other float rounding: within 1e-6 of the gradient's largest entry.
      const double largest = want.abs().max().item<double>();
      CHECK((got - want).abs().max().item<double>() <= 1e-6 * largest);
    }
    // Split, an expert's gradient is its rank's alone: rank 0 computes experts [0, 8 / size).
    const torch::Tensor& fc_weight = split[0].grads.at("fc_weight");
    REQUIRE(fc_weight.size(0) == 8);
    CHECK(fc_weight.narrow(0, 8 / expert_ranks, 8 - 8 / expert_ranks).abs().sum().item<double>() ==
          0);
  }
}

}  // namespace moe_test
}  // namespace tessera::engine
