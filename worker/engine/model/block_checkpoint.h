#pragma once
// Activation checkpointing of a transformer block: its forward keeps only its input, and its
// backward runs the block's forward again (with the random state and autocast it first ran
// under) and backpropagates through that. A checkpointed block's activations live for one
// block's backward instead of from its forward to its backward, at the price of a second forward.
// The recomputation is the same operations on the same inputs, so gradients and losses are
// unchanged bit for bit.

#include <torch/torch.h>

#include <functional>

namespace tessera::engine {

// What a block computes from its input: called once in forward (without autograd) and again in
// backward. It must be a pure function of `x`, the parameters it captures and the random state.
using BlockFunction = std::function<torch::Tensor(const torch::Tensor& x)>;

// block(x), with block's activations recomputed in backward rather than kept. Gradients reach
// `x` and every parameter `block` uses that requires them.
torch::Tensor CheckpointedForward(const BlockFunction& block, const torch::Tensor& x);

}  // namespace tessera::engine
