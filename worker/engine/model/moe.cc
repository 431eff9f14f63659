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

// What an all-to-all's backward needs: the group and the splits, to send gradients back.
struct Exchange : torch::CustomClassHolder {
  Communicator* group = nullptr;
  std::vector<int64_t> send, receive;  // rows to / from each rank
};

int64_t Sum(const std::vector<int64_t>& v) {
  int64_t total = 0;
  for (int64_t x : v) total += x;
  return total;
}

torch::Tensor Exchanged(Communicator& group, const torch::Tensor& rows,
                        const std::vector<int64_t>& send, const std::vector<int64_t>& receive) {
  torch::Tensor in = rows.contiguous();
  std::vector<int64_t> shape = in.sizes().vec();
  shape[0] = Sum(receive);
  torch::Tensor out = torch::empty(shape, in.options());
  group.AllToAll(out, in, receive, send);
  return out;
}

// Rows sent all-to-all, differentiably: backward sends each row's gradient back to its sender.
class AllToAllRows : public torch::autograd::Function<AllToAllRows> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& rows,
                               c10::intrusive_ptr<Exchange> exchange) {
    torch::Tensor out = Exchanged(*exchange->group, rows, exchange->send, exchange->receive);
    ctx->saved_data["exchange"] = c10::IValue::make_capsule(std::move(exchange));
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const auto exchange =
        c10::static_intrusive_pointer_cast<Exchange>(ctx->saved_data.at("exchange").toCapsule());
    return {Exchanged(*exchange->group, grad_outputs[0], exchange->receive, exchange->send),
            torch::Tensor()};
  }
};

torch::Tensor SendRows(Communicator& group, const torch::Tensor& rows, std::vector<int64_t> send,
                       std::vector<int64_t> receive) {
  auto exchange = c10::make_intrusive<Exchange>();
  exchange->group = &group;
  exchange->send = std::move(send);
  exchange->receive = std::move(receive);
  return AllToAllRows::apply(rows, std::move(exchange));
}

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

void MoeFeedForwardImpl::SetExpertGroup(Communicator* group) {
  TORCH_CHECK(group == nullptr || num_experts_ % group->size() == 0, "the expert group's size ",
              group == nullptr ? 0 : group->size(), " does not divide ", num_experts_, " experts");
  group_ = group != nullptr && group->size() > 1 ? group : nullptr;
}

torch::Tensor MoeFeedForwardImpl::ComputeHere(const torch::Tensor& routed,
                                              const std::vector<int64_t>& count,
                                              int64_t first_expert) {
  std::vector<torch::Tensor> outputs;
  int64_t start = 0;
  for (size_t j = 0; j < count.size(); ++j) {
    if (count[j] == 0) continue;
    const int64_t e = first_expert + static_cast<int64_t>(j);
    const auto in = routed.narrow(0, start, count[j]);
    const auto hidden = torch::gelu(torch::addmm(fc_bias_[e], in, fc_weight_[e].t()));
    outputs.push_back(torch::addmm(fc_proj_bias_[e], hidden, fc_proj_weight_[e].t()));
    start += count[j];
  }
  // No rows for these experts (an expert-parallel rank may get none): nothing to compute.
  return outputs.empty() ? routed.narrow(0, 0, 0) : torch::cat(outputs);
}

torch::Tensor MoeFeedForwardImpl::ComputeAcrossGroup(const torch::Tensor& routed,
                                                     const torch::Tensor& tokens_per_expert) {
  const int64_t ranks = group_->size(), mine = num_experts_ / ranks;
  // Each rank learns how many rows every other rank sends for each of its experts.
  torch::Tensor counts = tokens_per_expert.contiguous();
  torch::Tensor received_counts = torch::empty_like(counts);
  const std::vector<int64_t> per_rank(static_cast<size_t>(ranks), mine);
  group_->AllToAll(received_counts, counts, per_rank, per_rank);
  const torch::Tensor sent_cpu = counts.to(torch::kCPU).view({ranks, mine});
  const torch::Tensor received_cpu = received_counts.to(torch::kCPU);
  const auto from = received_cpu.view({ranks, mine});
  std::vector<int64_t> send, receive, per_expert(static_cast<size_t>(mine), 0);
  for (int64_t r = 0; r < ranks; ++r) {
    send.push_back(sent_cpu[r].sum().item<int64_t>());
    receive.push_back(from[r].sum().item<int64_t>());
    for (int64_t j = 0; j < mine; ++j)
      per_expert[static_cast<size_t>(j)] += from[r][j].item<int64_t>();
  }
  // The rows arrive by sender, each sender's by expert: regroup them by expert (stably, so
  // that an expert's rows keep the senders' order) for the experts, and put them back after.
  const torch::Tensor rows = SendRows(*group_, routed, send, receive);
  const auto expert_of_row = torch::arange(ranks * mine, received_counts.options())
                                 .remainder(mine)
                                 .repeat_interleave(received_counts);
  const auto by_expert = std::get<1>(torch::sort(expert_of_row, c10::optional<bool>(true), 0));
  const torch::Tensor computed =
      ComputeHere(rows.index_select(0, by_expert), per_expert, group_->rank() * mine);
  const auto back = torch::empty_like(by_expert).scatter_(
      0, by_expert, torch::arange(by_expert.numel(), by_expert.options()));
  return SendRows(*group_, computed.index_select(0, back), receive, send);
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
  const auto routed = tokens.index_select(0, token_of);
  torch::Tensor expert_out;  // [k * N, d], in `order`
  if (group_ != nullptr) {
    expert_out = ComputeAcrossGroup(routed, tokens_per_expert);
  } else {
    const auto counts = tokens_per_expert.to(torch::kCPU);
    expert_out = ComputeHere(
        routed,
        std::vector<int64_t>(counts.data_ptr<int64_t>(), counts.data_ptr<int64_t>() + num_experts_),
        0);
  }
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
