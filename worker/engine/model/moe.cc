#include "worker/engine/model/moe.h"

#include <vector>

namespace tessera::engine {
namespace {

class AuxiliaryLoss : public torch::autograd::Function<AuxiliaryLoss> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& y,
                               const torch::Tensor& loss, double scale) {
    ctx->saved_data["scale"] = scale;
    ctx->save_for_backward({loss});
    // An input returned as it is becomes a view of it with this function as its origin.
    return y;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const torch::Tensor loss = ctx->get_saved_variables()[0];
    return {grad_outputs[0], torch::full_like(loss, ctx->saved_data["scale"].toDouble()),
            torch::Tensor()};
  }
};

}  // namespace

torch::Tensor WithAuxiliaryLoss(const torch::Tensor& y, const torch::Tensor& loss, double scale) {
  return AuxiliaryLoss::apply(y, loss, scale);
}

MoeFeedForwardImpl::MoeFeedForwardImpl(int64_t d_model, int64_t hidden, int64_t num_experts,
                                       int64_t top_k)
    : num_experts_(num_experts), top_k_(top_k) {
  router_ = register_module(
      "router", torch::nn::Linear(torch::nn::LinearOptions(d_model, num_experts).bias(false)));
  fc_weight_ = register_parameter("fc_weight", torch::empty({num_experts, hidden, d_model}));
  fc_bias_ = register_parameter("fc_bias", torch::zeros({num_experts, hidden}));
  fc_proj_weight_ =
      register_parameter("fc_proj_weight", torch::empty({num_experts, d_model, hidden}));
  fc_proj_bias_ = register_parameter("fc_proj_bias", torch::zeros({num_experts, d_model}));
}

MoeOutput MoeFeedForwardImpl::forward(const torch::Tensor& x) {
  const int64_t d = x.size(-1);
  const auto tokens = x.reshape({-1, d});
  const int64_t n = tokens.size(0);
  // The router's softmax in fp32 whatever autocast computes the logits in: its probabilities
  // weigh the experts' outputs and drive the load-balancing loss.
  const auto probabilities = torch::softmax(
      torch::linear(tokens, router_->weight).to(torch::kFloat32), /*dim=*/-1);  // [N, E]
  auto [top_probability, top_expert] = probabilities.topk(top_k_, /*dim=*/-1);  // [N, k]
  const auto weights = top_probability / top_probability.sum(-1, /*keepdim=*/true);

  // Dropless dispatch: the k * N (token, expert) assignments sorted by expert, stably (so the
  // order, and every sum below, is the same each time), make each expert's tokens one
  // contiguous run of whatever length the routing gave it.
  const auto assigned_expert = top_expert.reshape({-1});
  const auto order =
      std::get<1>(torch::sort(assigned_expert, c10::optional<bool>(true), /*dim=*/0));
  const auto token_of = torch::div(order, top_k_, "floor");
  const auto tokens_per_expert = torch::bincount(assigned_expert, {}, num_experts_);
  const auto counts = tokens_per_expert.to(torch::kCPU);
  const auto count = counts.accessor<int64_t, 1>();
  const auto routed = tokens.index_select(0, token_of);
  std::vector<torch::Tensor> outputs;
  int64_t start = 0;
  for (int64_t e = 0; e < num_experts_; ++e) {
    if (count[e] == 0) continue;
    const auto in = routed.narrow(0, start, count[e]);
    const auto hidden = torch::gelu(torch::addmm(fc_bias_[e], in, fc_weight_[e].t()));
    outputs.push_back(torch::addmm(fc_proj_bias_[e], hidden, fc_proj_weight_[e].t()));
    start += count[e];
  }
  const auto expert_out = torch::cat(outputs);  // [k * N, d], in `order`
  const auto weight_of = weights.reshape({-1}).index_select(0, order).to(expert_out.scalar_type());
  const auto y = torch::zeros({n, d}, expert_out.options())
                     .index_add(0, token_of, expert_out * weight_of.unsqueeze(1));

  const auto fraction =
      tokens_per_expert.to(torch::kFloat32) / static_cast<double>(n * top_k_);  // no gradient
  const auto load_balancing =
      static_cast<double>(num_experts_) * (fraction * probabilities.mean(0)).sum();
  return MoeOutput{y.view(x.sizes()), load_balancing, tokens_per_expert};
}

}  // namespace tessera::engine
