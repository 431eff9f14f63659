#include "worker/engine/model/block_checkpoint.h"

#include "worker/engine/model/cuda_autocast.h"

namespace tessera::engine {
namespace {

// What backward needs besides the saved input: the block, and the state its forward ran in.
// Held by the graph node (a capsule in its saved data) for as long as the node lives.
struct Recipe : torch::CustomClassHolder {
  BlockFunction block;
  torch::Device device{torch::kCPU};
  torch::Tensor rng_state;  // the device's generator before the forward: dropout's masks again
  // CUDA autocast and its type: backward may run on another thread, whose thread-local
  // autocast state is not the forward's (in LibTorch 1.13, not even its dtype).
  bool autocast = false;
  at::ScalarType autocast_dtype = at::kHalf;
};

class BlockRecompute : public torch::autograd::Function<BlockRecompute> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               c10::intrusive_ptr<Recipe> recipe) {
    recipe->device = x.device();
    recipe->autocast = CudaAutocastEnabled();
    recipe->autocast_dtype = CudaAutocastType();
    {
      at::Generator generator = at::globalContext().defaultGenerator(x.device());
      std::lock_guard lock(generator.mutex());
      recipe->rng_state = generator.get_state();
    }
    ctx->save_for_backward({x});
    torch::Tensor y = recipe->block(x);  // grad mode is off in a custom function's forward
    ctx->saved_data["recipe"] = c10::IValue::make_capsule(std::move(recipe));
    return y;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const auto recipe =
        c10::static_intrusive_pointer_cast<Recipe>(ctx->saved_data.at("recipe").toCapsule());
    const torch::Tensor x = ctx->get_saved_variables()[0].detach().requires_grad_(true);
    // The generator's lock is held only around its state: the block's dropout takes it too.
    at::Generator generator = at::globalContext().defaultGenerator(recipe->device);
    torch::Tensor after;  // the rest of the step's draws, put back after the recomputation
    {
      std::lock_guard lock(generator.mutex());
      after = generator.get_state();
      generator.set_state(recipe->rng_state);
    }
    const bool autocast = CudaAutocastEnabled();
    const at::ScalarType autocast_dtype = CudaAutocastType();
    SetCudaAutocast(recipe->autocast, recipe->autocast_dtype);
    torch::Tensor y;
    {
      torch::AutoGradMode grad(true);
      y = recipe->block(x);
    }
    SetCudaAutocast(autocast, autocast_dtype);
    {
      std::lock_guard lock(generator.mutex());
      generator.set_state(after);
    }
    torch::autograd::backward({y}, {grad_outputs[0]});
    return {x.grad(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor CheckpointedForward(const BlockFunction& block, const torch::Tensor& x) {
  auto recipe = c10::make_intrusive<Recipe>();
  recipe->block = block;
  return BlockRecompute::apply(x, std::move(recipe));
}

}  // namespace tessera::engine
