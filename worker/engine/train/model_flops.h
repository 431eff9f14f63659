#pragma once
// Model FLOPs utilization: the FLOPs a step needs by the model's shape (as PaLM and Megatron
// count them: 6 per parameter per token for the matrix products, forward and backward, plus the
// attention scores), over what the hardware could do at its peak.

#include <cstdint>
#include <optional>
#include <string>

#include "worker/engine/train/train_config.h"

namespace tessera::engine {

// Training FLOPs per token: 6 * (non-embedding matrix parameters + the output projection)
// + 12 * layers * d_model * sequence length (attention scores and their use).
double TrainingFlopsPerToken(const ModelConfig& model, int64_t seq_len);

// Peak dense bf16 (or tf32/fp16 where bf16 is absent) FLOP/s of a GPU, by the name CUDA reports
// ("NVIDIA H100 80GB HBM3"); nullopt for an unknown GPU.
std::optional<double> GpuPeakFlops(const std::string& device_name);

// MFU for `tokens_per_second` over the whole job, given each rank's peak.
double Mfu(double flops_per_token, double tokens_per_second, double peak_flops_per_rank,
           int world_size);

}  // namespace tessera::engine
